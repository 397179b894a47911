// Donation by name (CompileOptions::donations, hexir-compile --donate) and
// the cache-update rewrite: where(iota == pos, new, cache) on a donated
// cache becomes an in-place update_slice that writes only the new rows, with
// the where's results for every pos (inside the cache, before it, past it).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <cstring>
#include <string>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/vm.h"
#include "hexir_generated.h"
#include "loaded.h"

using hexir::compiler::CompileOptions;
using hexir::compiler::DonationRule;
using hexir::compiler::parse_donation_option;
using hexir::vm::Context;
using hexir::vm::TensorRef;

namespace {

// Two caches [1,2,C,3] written at `pos` the way torch.where exports it; the
// key cache's update is read (a dot with the query) before the function returns.
constexpr const char* kWhereCache = R"(module @m
const @iota : i64[6,1] = dense [[0], [1], [2], [3], [4], [5]]
func @step(%pos: i64[1], %k_new: f32[1,2,1,3], %v_new: f32[1,1,1,3], %past.k: f32[1,2,6,3], %past.v: f32[1,2,6,3]) -> (f32[1,2,6,1], f32[1,2,6,3], f32[1,2,6,3]) {
  %mask = call @equal(@iota, %pos) : bool[6,1]
  %present.k = call @where(%mask, %k_new, %past.k) : f32[1,2,6,3]
  %keep = call @not(%mask) : bool[6,1]
  %present.v = call @where(%keep, %past.v, %v_new) : f32[1,2,6,3]
  %kt = call @transpose(%k_new) {perm = [0, 1, 3, 2]} : f32[1,2,3,1]
  %score = call @matmul(%present.k, %kt) : f32[1,2,6,1]
  return %score, %present.k, %present.v
}
)";

std::vector<uint8_t> compile(const char* source, const CompileOptions& options) {
  auto bytes = hexir::compiler::compile_source(source, "m.hxir", ".", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return *bytes;
}

std::vector<std::string> kernels_run(const hexir::testing::Loaded& l) {
  std::vector<std::string> names;
  for (const auto& info : l.module->instructions(0)) names.emplace_back(info.op);
  return names;
}

struct StepResult {
  std::vector<float> score, k, v;
};

// Runs @step at `pos` on caches filled with known values; the caches are
// passed as their own outputs when donated.
StepResult run_step(const hexir::testing::Loaded& l, int64_t pos, bool donated) {
  auto context = Context::create(*l.program);
  REQUIRE(context.ok());
  std::vector<float> k_new(6), v_new(3), k(36), v(36), score(12);
  for (size_t i = 0; i < k_new.size(); ++i) k_new[i] = -1.0f - static_cast<float>(i);
  for (size_t i = 0; i < v_new.size(); ++i) v_new[i] = 100.0f + static_cast<float>(i);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(i) * 0.5f;
    v[i] = static_cast<float>(i) * -0.25f;
  }
  TensorRef inputs[] = {{&pos, 8, {hexir::DType::kI64, {1}}},
                        {k_new.data(), 24, {hexir::DType::kF32, {1, 2, 1, 3}}},
                        {v_new.data(), 12, {hexir::DType::kF32, {1, 1, 1, 3}}},
                        {k.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}},
                        {v.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}}};
  StepResult r{score, k, v};
  TensorRef outputs[] = {{r.score.data(), 48, {hexir::DType::kF32, {1, 2, 6, 1}}},
                         donated ? inputs[3] : TensorRef{r.k.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}},
                         donated ? inputs[4] : TensorRef{r.v.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}}};
  const hexir::Status status = context->invoke(0, inputs, outputs);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  if (donated) {
    r.k = k;
    r.v = v;
  }
  return r;
}

}  // namespace

TEST_CASE("donation: --donate IN=OUT parses names and one-'*' patterns, and refuses the rest") {
  CompileOptions options;
  CHECK(parse_donation_option("past.*=present.*", options).ok());
  CHECK(parse_donation_option("cache=new_cache", options).ok());
  REQUIRE(options.donations.size() == 2);
  CHECK(options.donations[0].input == "past.*");
  CHECK(options.donations[0].output == "present.*");
  for (const char* bad : {"past", "=present", "past=", "past.*=present", "a*b*=c*d*"}) {
    const hexir::Status s = parse_donation_option(bad, options);
    CHECK_MESSAGE(!s.ok(), bad);
    CHECK(s.message().find(std::string("--donate '") + bad + "'") == 0);
  }
}

TEST_CASE("donation: by pattern, every matched input is written as its named output; mismatches are errors") {
  CompileOptions options;
  options.donations = {DonationRule{"past.*", "present.*"}};
  auto l = hexir::testing::load_compiled(compile(kWhereCache, options), 1);
  const auto& fn = l->module->function(0);
  CHECK(fn.inputs[3].donated_to == 1);
  CHECK(fn.inputs[4].donated_to == 2);
  CHECK(fn.inputs[0].donated_to == -1);

  auto refused = [&](DonationRule rule) {
    CompileOptions o;
    o.donations = {std::move(rule)};
    auto bytes = hexir::compiler::compile_source(kWhereCache, "m.hxir", ".", o);
    REQUIRE_FALSE(bytes.ok());
    return bytes.status().message();
  };
  CHECK(refused({"cache.*", "present.*"}) ==
        "--donate 'cache.*=present.*': no input matches 'cache.*' (inputs: @step: 'pos' 'k_new' 'v_new' 'past.k' "
        "'past.v')");
  CHECK(refused({"past.*", "next.*"}) == "--donate 'past.*=next.*': function @step has input 'past.k' but no output "
                                         "'next.k'");
  const std::string type = refused({"k_new", "present.k"});
  CHECK_MESSAGE(type.find("input %k_new (f32[1,2,1,3]) donated to output 1 'present.k' (f32[1,2,6,3])") !=
                    std::string::npos,
                type);
  // The score reads the key cache after its update: donating the key cache
  // to the score's output is refused by type, and a read-after donation by why.
  constexpr const char* kReadAfter = R"(module @m
func @f(%cache: f32[4], %x: f32[4]) -> (f32[4], f32[4]) {
  %a = call @mul(%x, %x) : f32[4]
  %b = call @add(%cache, %a) : f32[4]
  %c = call @sub(%cache, %b) : f32[4]
  return %b, %c
}
)";
  CompileOptions o;
  o.donations = {DonationRule{"cache", "b"}};
  auto read_after = hexir::compiler::compile_source(kReadAfter, "m.hxir", ".", o);
  REQUIRE_FALSE(read_after.ok());
  CHECK_MESSAGE(read_after.status().message().find("input %cache cannot be donated to output 0 'b': the input is "
                                                   "still read by `sub`") != std::string::npos,
                read_after.status().message());
}

TEST_CASE("donation: where(iota == pos, new, cache) becomes update_slice on the donated cache, same results") {
  CompileOptions donated;
  donated.donations = {DonationRule{"past.*", "present.*"}};
  auto rewritten = hexir::testing::load_compiled(compile(kWhereCache, donated), 1);
  auto plain = hexir::testing::load_compiled(compile(kWhereCache, CompileOptions{}), 1);
  const std::vector<std::string> ops = kernels_run(*rewritten);
  CHECK(std::count(ops.begin(), ops.end(), "update_slice") == 2);
  CHECK(std::count(ops.begin(), ops.end(), "where") == 0);
  const std::vector<std::string> plain_ops = kernels_run(*plain);
  CHECK(std::count(plain_ops.begin(), plain_ops.end(), "where") == 2);
  // Nothing of the caches' size left in the arena: they are updated where they lie.
  CHECK(rewritten->fb().arena()->size() < 144);
  for (int64_t pos : {0, 3, 5, -1, 6, -7, 1000}) {
    INFO("pos " << pos);
    const StepResult want = run_step(*plain, pos, false);
    const StepResult got = run_step(*rewritten, pos, true);
    CHECK(std::memcmp(got.score.data(), want.score.data(), 48) == 0);
    CHECK(got.k == want.k);
    CHECK(got.v == want.v);
  }
}

TEST_CASE("donation: scatter_elements at one position (index_copy_) becomes update_slice; same results, same errors") {
  constexpr const char* kScatter = R"(module @m
func @step(%pos: i64[1], %rows: f32[1,2,1,3], %past.k: f32[1,2,6,3]) -> (f32[1,2,6,3]) {
  %p = call @reshape(%pos) : i64[1,1,1,1]
  %index = call @expand(%p) {shape = [1, 2, 1, 3]} : i64[1,2,1,3]
  %present.k = call @scatter_elements(%past.k, %index, %rows) {axis = 2} : f32[1,2,6,3]
  return %present.k
}
)";
  CompileOptions donated;
  donated.donations = {DonationRule{"past.*", "present.*"}};
  auto rewritten = hexir::testing::load_compiled(compile(kScatter, donated), 1);
  auto plain = hexir::testing::load_compiled(compile(kScatter, CompileOptions{}), 1);
  const std::vector<std::string> ops = kernels_run(*rewritten);
  CHECK(std::count(ops.begin(), ops.end(), "update_slice") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "scatter_elements") == 0);
  CHECK(std::count(ops.begin(), ops.end(), "copy") == 0);  // the broadcast indices are never made
  auto run = [](const hexir::testing::Loaded& l, int64_t pos, bool donate, std::vector<float>* cache) {
    auto context = Context::create(*l.program);
    REQUIRE(context.ok());
    std::vector<float> rows = {-1, -2, -3, -4, -5, -6};
    cache->resize(36);
    for (size_t i = 0; i < cache->size(); ++i) (*cache)[i] = static_cast<float>(i);
    std::vector<float> out(36, 0.0f);
    TensorRef inputs[] = {{&pos, 8, {hexir::DType::kI64, {1}}},
                          {rows.data(), 24, {hexir::DType::kF32, {1, 2, 1, 3}}},
                          {cache->data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}}};
    TensorRef outputs[] = {donate ? inputs[2] : TensorRef{out.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}}};
    const hexir::Status status = context->invoke(0, inputs, outputs);
    if (!donate) *cache = out;
    return status;
  };
  for (int64_t pos : {0, 4, 5, -1, -6}) {
    INFO("pos " << pos);
    std::vector<float> want, got;
    REQUIRE(run(*plain, pos, false, &want).ok());
    REQUIRE(run(*rewritten, pos, true, &got).ok());
    CHECK(got == want);
  }
  for (int64_t pos : {6, -7, 1000}) {
    INFO("pos " << pos);
    std::vector<float> ignored;
    CHECK_FALSE(run(*plain, pos, false, &ignored).ok());
    const hexir::Status status = run(*rewritten, pos, true, &ignored);
    REQUIRE_FALSE(status.ok());
    CHECK_MESSAGE(status.message().find("update_slice: index " + std::to_string(pos) +
                                        " is out of range for dim 2 of size 6") != std::string::npos,
                  status.message());
  }
}

TEST_CASE("donation: scatter_elements of a prefill's constant rows s0.. becomes update_slice at s0, same results") {
  // Rows 2 and 3 of a [1,2,6,3] cache; a constant that is not s0 + the row stays a scatter.
  constexpr const char* kPrefill = R"(module @m
const @rows23 : i64[1,2,2,3] = dense [[[[2,2,2],[3,3,3]],[[2,2,2],[3,3,3]]]]
const @mixed : i64[1,2,2,3] = dense [[[[2,2,2],[3,3,3]],[[3,3,3],[2,2,2]]]]
func @prefill(%rows: f32[1,2,2,3], %past.k: f32[1,2,6,3], %past.v: f32[1,2,6,3]) -> (f32[1,2,6,3], f32[1,2,6,3]) {
  %present.k = call @scatter_elements(%past.k, @rows23, %rows) {axis = 2} : f32[1,2,6,3]
  %present.v = call @scatter_elements(%past.v, @mixed, %rows) {axis = 2} : f32[1,2,6,3]
  return %present.k, %present.v
}
)";
  CompileOptions donated;
  donated.donations = {DonationRule{"past.*", "present.*"}};
  auto rewritten = hexir::testing::load_compiled(compile(kPrefill, donated), 1);
  auto plain = hexir::testing::load_compiled(compile(kPrefill, CompileOptions{}), 1);
  const std::vector<std::string> ops = kernels_run(*rewritten);
  CHECK(std::count(ops.begin(), ops.end(), "update_slice") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "scatter_elements") == 1);
  auto run = [](const hexir::testing::Loaded& l, bool donate) {
    auto context = Context::create(*l.program);
    REQUIRE(context.ok());
    std::vector<float> rows(12), k(36), v(36), k_out(36), v_out(36);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = -1.0f - static_cast<float>(i);
    for (size_t i = 0; i < k.size(); ++i) k[i] = v[i] = static_cast<float>(i);
    TensorRef inputs[] = {{rows.data(), 48, {hexir::DType::kF32, {1, 2, 2, 3}}},
                          {k.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}},
                          {v.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}}};
    TensorRef outputs[] = {donate ? inputs[1] : TensorRef{k_out.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}},
                           donate ? inputs[2] : TensorRef{v_out.data(), 144, {hexir::DType::kF32, {1, 2, 6, 3}}}};
    REQUIRE(context->invoke(0, inputs, outputs).ok());
    return donate ? std::make_pair(k, v) : std::make_pair(k_out, v_out);
  };
  CHECK(run(*rewritten, true) == run(*plain, false));
}

namespace {

// A decode step over a static cache of 6 rows, the query attending to rows
// <= pos, in three spellings exporters use: where(not(iota <= pos), -inf,
// s * c) with k transposed; where(pos >= iota, s / c, -inf); q k^T with
// transpose_b and no scale, masked by iota > pos.
std::string masked_attention(int form) {
  const char* scores[] = {
      R"(  %kt = call @transpose(%k) {perm = [0, 1, 3, 2]} : f32[1,2,4,6]
  %qk = call @matmul(%q, %kt) : f32[1,2,1,6]
  %s = call @mul(%qk, @scale) : f32[1,2,1,6]
  %kept = call @less_or_equal(@iota, %pos) : bool[6]
  %masked = call @not(%kept) : bool[6]
  %w = call @where(%masked, @fill, %s) : f32[1,2,1,6]
)",
      R"(  %kt = call @transpose(%k) {perm = [0, 1, 3, 2]} : f32[1,2,4,6]
  %qk = call @matmul(%q, %kt) : f32[1,2,1,6]
  %s = call @div(%qk, @scale) : f32[1,2,1,6]
  %kept = call @greater_or_equal(%pos, @iota) : bool[6]
  %w = call @where(%kept, %s, @fill) : f32[1,2,1,6]
)",
      R"(  %s = call @matmul(%q, %k) {transpose_b = 1} : f32[1,2,1,6]
  %masked = call @greater(@iota, %pos) : bool[6]
  %w = call @where(%masked, @fill, %s) : f32[1,2,1,6]
)"};
  return std::string(R"(module @m
const @iota : i64[6] = dense [0, 1, 2, 3, 4, 5]
const @scale : f32[] = splat 0.5
const @fill : f32[] = splat -inf
func @step(%pos: i64[1], %q: f32[1,2,1,4], %k: f32[1,2,6,4], %v: f32[1,2,6,4]) -> (f32[1,2,1,4]) {
)") + scores[form] + R"(  %p = call @softmax(%w) {axis = 3} : f32[1,2,1,6]
  %y = call @matmul(%p, %v) : f32[1,2,1,4]
  return %y
}
)";
}

std::vector<float> run_attention(const hexir::testing::Loaded& l, int64_t pos) {
  auto context = Context::create(*l.program);
  REQUIRE(context.ok());
  std::vector<float> q(8), k(48), v(48), y(8);
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.3f * static_cast<float>(i % 5) - 0.6f;
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = 0.1f * static_cast<float>((i * 7) % 11) - 0.5f;
    v[i] = 0.25f * static_cast<float>((i * 5) % 13) - 1.5f;
  }
  // The rows past pos are not written yet: NaN keys must weigh nothing either way.
  for (size_t i = 0; i < k.size(); ++i)
    if (static_cast<int64_t>((i / 4) % 6) > pos) k[i] = std::numeric_limits<float>::quiet_NaN();
  TensorRef inputs[] = {{&pos, 8, {hexir::DType::kI64, {1}}},
                        {q.data(), 32, {hexir::DType::kF32, {1, 2, 1, 4}}},
                        {k.data(), 192, {hexir::DType::kF32, {1, 2, 6, 4}}},
                        {v.data(), 192, {hexir::DType::kF32, {1, 2, 6, 4}}}};
  TensorRef outputs[] = {{y.data(), 32, {hexir::DType::kF32, {1, 2, 1, 4}}}};
  const hexir::Status status = context->invoke(0, inputs, outputs);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  return y;
}

}  // namespace

TEST_CASE("donation: attention masked to the cache's rows <= pos becomes one attention reading only those rows") {
  CompileOptions unfused;
  unfused.fuse_epilogues = false;
  for (int form = 0; form < 3; ++form) {
    INFO("form " << form);
    const std::string source = masked_attention(form);
    auto fused = hexir::testing::load_compiled(compile(source.c_str(), CompileOptions{}), 1);
    auto plain = hexir::testing::load_compiled(compile(source.c_str(), unfused), 1);
    const std::vector<std::string> ops = kernels_run(*fused);
    CHECK(ops == std::vector<std::string>{"attention"});  // the mask's comparisons and nots are gone too
    const std::vector<std::string> plain_ops = kernels_run(*plain);
    CHECK(std::count(plain_ops.begin(), plain_ops.end(), std::string("softmax")) == 1);
    for (int64_t pos : {0, 2, 5, 6, 1000, -1}) {
      INFO("pos " << pos);
      const std::vector<float> want = run_attention(*plain, pos), got = run_attention(*fused, pos);
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i])) {  // pos -1: no row, softmax of -inf everywhere
          CHECK(std::isnan(got[i]));
          continue;
        }
        CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
      }
    }
  }
}
