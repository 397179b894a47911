// The plan picture: the SVG writer alone (well-formed XML, escaping, axes,
// scale), the picture of a verified function, and hexir-dump --plan-svg on
// both samples.
#include "hexir/inspect/plan_svg.h"

#include <doctest/doctest.h>

#include <set>

#include "hexir/format/verifier.h"
#include "hexir/inspect/function_plan.h"
#include "sample_util.h"
#include "xml_check.h"

namespace hexir::inspect {
namespace {

using format::VerifiedModule;
using format::verify_executable;

PlanSvgInput small_input() {
  PlanSvgInput in;
  in.title = "plan <test> & \"quotes\"";
  in.lower_bound = 96;
  in.arena_size = 128;
  in.rects = {{"%a", 0, 2, 0, 64, kPlanSvgPlain, ""},
              {"%b<&>", 1, 3, 64, 64, kPlanSvgAliased, "note & more"},
              {"%c", 2, 4, 0, 32, kPlanSvgDonated | kPlanSvgView, ""}};
  return in;
}

TEST_CASE("plan svg: well-formed, one rect per value, lower bound line, axes and legend") {
  const std::string svg = render_plan_svg(small_input());
  const testing::XmlCheck xml = testing::check_xml(svg);
  REQUIRE_MESSAGE(xml.ok, xml.error);
  CHECK(xml.elements[0].name == "svg");
  CHECK(xml.count_class("rect", "value") == 3);
  CHECK(xml.count_class("rect", "aliased") == 1);
  CHECK(xml.count_class("rect", "donated") == 1);
  CHECK(xml.count_class("rect", "view") == 1);
  CHECK(xml.count_class("line", "lower-bound") == 1);
  CHECK(xml.count_class("line", "arena-size") == 1);
  // Labels are escaped, never raw.
  CHECK(testing::contains(svg, "%b&lt;&amp;&gt;"));
  CHECK(testing::contains(svg, "plan &lt;test&gt; &amp; &quot;quotes&quot;"));
  // Axis tick labels: time 0..4 and bytes up to the arena size.
  CHECK(testing::contains(svg, ">4</text>"));
  CHECK(testing::contains(svg, ">0 B</text>"));
  CHECK(testing::contains(svg, ">128 B</text>"));
  // A legend entry for every kind present.
  CHECK(testing::contains(svg, "written in place"));
  CHECK(testing::contains(svg, "donated input"));
  CHECK(testing::contains(svg, "has views"));
  CHECK(testing::contains(svg, ">lower bound</text>"));
}

TEST_CASE("plan svg: hostile labels stay valid XML") {
  PlanSvgInput in;
  in.title = "bad \x01\x02 utf8 \xff\xfe \xc3\x28 \xe2\x82 ok \xc3\xa9";
  in.rects = {{std::string("\x00<]]>&#x;\"'\x7f\xed\xa0\x80", 15), 0, 1, 0, 8, kPlanSvgExternal, "\x1b[31m"}};
  const std::string svg = render_plan_svg(in);
  const testing::XmlCheck xml = testing::check_xml(svg);
  CHECK_MESSAGE(xml.ok, xml.error);
  CHECK(svg.find('\x01') == std::string::npos);
  CHECK(svg.find('\x1b') == std::string::npos);
  CHECK(svg.find(std::string(1, '\0')) == std::string::npos);
  CHECK(testing::contains(svg, "\xc3\xa9"));       // valid UTF-8 passes through
  CHECK(xml_escape("a\xed\xa0\x80z") == "a???z");  // a surrogate is not a character
  CHECK(xml_escape("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");
}

TEST_CASE("plan svg: a few thousand rectangles scale to the canvas and stay small") {
  PlanSvgInput in;
  in.lower_bound = 3'000'000;
  for (int i = 0; i < 4000; ++i)
    in.rects.push_back({"%v" + std::to_string(i), i, i + 1 + (i % 17), uint64_t(i % 50) * 65536,
                        uint64_t(1 + i % 7) * 4096, i % 5 == 0 ? kPlanSvgAliased : kPlanSvgPlain, ""});
  const std::string svg = render_plan_svg(in);
  const testing::XmlCheck xml = testing::check_xml(svg);
  REQUIRE_MESSAGE(xml.ok, xml.error);
  CHECK(xml.count_class("rect", "value") == 4000);
  CHECK(svg.size() < 1'500'000);
  // Every rectangle inside the canvas.
  for (const testing::XmlElement& e : xml.elements) {
    if (e.name != "rect" || !e.attributes.count("x") || !e.attributes.count("class")) continue;
    const double x = std::stod(e.attributes.at("x")), y = std::stod(e.attributes.at("y"));
    const double w = std::stod(e.attributes.at("width")), h = std::stod(e.attributes.at("height"));
    CHECK(x >= 0);
    CHECK(y >= 0);
    CHECK(x + w <= in.width + 0.01);
    CHECK(y + h <= in.height + 0.01);
  }
  // No more than a dozen or so ticks per axis, however many instructions.
  size_t ticks = 0;
  for (const testing::XmlElement& e : xml.elements)
    if (e.name == "text" && e.attributes.count("text-anchor") && e.attributes.at("text-anchor") == "middle")
      ++ticks;
  CHECK(ticks < 16);
}

TEST_CASE("plan svg: empty and degenerate pictures are still valid") {
  PlanSvgInput in;
  CHECK(testing::check_xml(render_plan_svg(in)).ok);
  in.rects = {{"%z", 5, 5, 0, 0, kPlanSvgPlain, ""}};
  in.lower_bound = ~uint64_t{0};
  CHECK(testing::check_xml(render_plan_svg(in)).ok);
}

// Arena values of a function as the picture should show them: arena slots
// written by its instructions plus values written into donated inputs.
size_t expected_values(const VerifiedModule& v, size_t f) {
  const fb::Module& m = *v.module;
  const fb::Function& fn = *m.functions()->Get(static_cast<uint32_t>(f));
  std::set<uint32_t> written;
  for (uint32_t k = 0; k < fn.instruction_count(); ++k) {
    const fb::Instruction& in = *m.instructions()->Get(fn.instruction_begin() + k);
    const uint32_t out = m.operand_pool()->Get(in.operand_begin() + in.input_count());
    const fb::StorageKind kind = m.slots()->Get(out)->storage();
    if (kind == fb::StorageKind::Arena || kind == fb::StorageKind::Input) written.insert(out);
  }
  return written.size();
}

TEST_CASE("plan svg: hexir-dump --plan-svg draws both samples") {
  testing::ScratchDir dir;
  for (const char* name : {"mlp", "transformer"}) {
    INFO(std::string(name));
    std::vector<uint8_t> bytes = testing::compile_sample(std::string(name) + ".hxir");
    testing::write_file(dir / "s.hxe", bytes.data(), bytes.size());
    auto dump = testing::run_command(testing::kDumpTool + " " + dir / "s.hxe --plan-svg " + dir / "s.svg");
    REQUIRE_MESSAGE(dump.exit_code == 0, dump.output);
    const std::string svg = testing::read_text(dir / "s.svg");
    const testing::XmlCheck xml = testing::check_xml(svg);
    REQUIRE_MESSAGE(xml.ok, xml.error);

    testing::AlignedBytes file = testing::aligned(bytes);
    auto verified = verify_executable(file.span());
    REQUIRE(verified.ok());
    const size_t values = expected_values(*verified, 0);
    CHECK(values >= 3);  // mlp: its three fused matmuls
    CHECK(xml.count_class("rect", "value") == values);
    CHECK(testing::contains(dump.output, std::to_string(values) + " values"));
    CHECK(xml.count_class("line", "lower-bound") == 1);
    // Every arena value appears with its name.
    const fb::Module& m = *verified->module;
    const fb::Function& fn = *m.functions()->Get(0);
    const fb::Instruction& first = *m.instructions()->Get(fn.instruction_begin());
    const fb::Slot& s = *m.slots()->Get(m.operand_pool()->Get(first.operand_begin() + first.input_count()));
    if (s.storage() == fb::StorageKind::Arena) CHECK(testing::contains(svg, "%" + s.name()->str()));
    // The picture and function_plan_picture agree.
    CHECK(function_plan_picture(*verified, 0).rects.size() == values);

    auto named = testing::run_command(testing::kDumpTool + " " + dir / "s.hxe --plan-svg " +
                                      dir / "n.svg --function main");
    CHECK_MESSAGE(named.exit_code == 0, named.output);
    CHECK(testing::read_text(dir / "n.svg") == svg);
  }
}

TEST_CASE("plan svg: hexir-dump option errors") {
  testing::ScratchDir dir;
  std::vector<uint8_t> bytes = testing::compile_sample("mlp.hxir");
  testing::write_file(dir / "s.hxe", bytes.data(), bytes.size());
  auto missing = testing::run_command(testing::kDumpTool + " " + dir / "s.hxe --plan-svg " +
                                      dir / "x.svg --function nope");
  CHECK(missing.exit_code == 1);
  CHECK(testing::contains(missing.output, "no function 'nope' (the module has 'main')"));
  auto no_value = testing::run_command(testing::kDumpTool + " " + dir / "s.hxe --plan-svg");
  CHECK(no_value.exit_code == 2);
  auto lonely = testing::run_command(testing::kDumpTool + " " + dir / "s.hxe --function main");
  CHECK(lonely.exit_code == 2);
  auto unwritable =
      testing::run_command(testing::kDumpTool + " " + dir / "s.hxe --plan-svg /nonexistent/dir/x.svg");
  CHECK(unwritable.exit_code == 1);
  CHECK(testing::contains(unwritable.output, "cannot write"));
}

}  // namespace
}  // namespace hexir::inspect
