// The .hxir printer on every operator: a graph of one node, printed and
// parsed again, has the same parameter words (the attributes come from the
// operator's OpDef::raise and are checked against its lowering).
#include <set>

#include "op_samples.h"
#include "hexir/compiler/hxir.h"
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

using ops::OpId;

// One function @f whose arguments are the sample's operands and whose results are the node's.
Result<Module> one_node_module(const ops::testing::OpSample& sample) {
  GraphBuilder b("m");
  HEXIR_RETURN_IF_ERROR(b.begin_function("f"));
  NodeSpec spec;
  spec.op = sample.op;
  spec.attrs = sample.attrs;
  spec.declared = sample.declared;
  for (size_t i = 0; i < sample.inputs.size(); ++i) {
    HEXIR_ASSIGN_OR_RETURN(int input, b.add_input("a" + std::to_string(i), sample.inputs[i]));
    spec.inputs.push_back(input);
  }
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> results, b.add_node(std::move(spec)));
  HEXIR_RETURN_IF_ERROR(b.set_outputs(results));
  HEXIR_RETURN_IF_ERROR(b.end_function());
  return b.finish();
}

TEST_CASE("printer: every operator prints as attributes that parse back to its parameter words") {
  std::set<OpId> covered;
  for (const ops::testing::OpSample& sample : ops::testing::op_samples()) {
    const std::string name = ops::op_def(sample.op).name;
    INFO(name);
    // compact and unbound read a bounded value, which no function input is
    // (inputs have exact shapes), and bound an extent computed at run time:
    // tests/e2e/bounded_test.cc prints them.
    if (sample.op == OpId::kCompact || sample.op == OpId::kUnbound || sample.op == OpId::kBound) {
      covered.insert(sample.op);
      continue;
    }
    Result<Module> built = one_node_module(sample);
    REQUIRE_MESSAGE(built.ok(), built.status().to_string());
    const Function& fn = built->functions[0];
    REQUIRE(fn.nodes.size() == 1);
    Result<std::string> text = print_hxir(*built);
    REQUIRE_MESSAGE(text.ok(), text.status().to_string());
    INFO(*text);
    Module again = parse_ok(*text);
    const Function& g = again.functions[0];
    REQUIRE(g.nodes.size() == 1);
    CHECK(g.nodes[0].op == sample.op);
    CHECK(g.nodes[0].params == fn.nodes[0].params);
    CHECK(g.nodes[0].results.size() == fn.nodes[0].results.size());
    // The text of what was parsed is the same text.
    Result<std::string> twice = print_hxir(again);
    REQUIRE(twice.ok());
    CHECK(*twice == *text);
    covered.insert(sample.op);
  }
  for (int k = 0; k < ops::kOpCount; ++k)
    CHECK_MESSAGE(covered.count(static_cast<OpId>(k)) == 1,
                  ("no sample for @" + std::string(ops::op_def(static_cast<OpId>(k)).name) +
                   " in tests/ops/op_samples.h"));
}

TEST_CASE("printer: parameter words without an attribute form fail, naming the node") {
  const ops::testing::OpSample gelu{OpId::kGelu, {TensorType{DType::kF32, {4}}}, {}, {}};
  Result<Module> built = one_node_module(gelu);
  REQUIRE(built.ok());
  built->functions[0].nodes[0].params = {2};  // approximate is 0 or 1
  Result<std::string> text = print_hxir(*built);
  REQUIRE_FALSE(text.ok());
  CHECK_MESSAGE(
      text.status().message().find("cannot print node 0 (@gelu) of @f as text") != std::string::npos,
      text.status().message());
}

}  // namespace
}  // namespace hexir::compiler::testing
