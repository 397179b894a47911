// The writer and compile_source end to end: prelude, sections, metadata,
// and acceptance by the loader-side verifier.
#include <fstream>

#include "hexir/format/verifier.h"
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

constexpr const char* kProgram = R"(
module @demo
const @w : f32[2,3] = file "f32_2x3.npy"
const @b : f32[3] = splat 0.25
const @s : f32[3] = dense [1, 2, 3]
func @main(%x: f32[1,2]) -> (f32[1,3]) {
  %h = call @matmul(%x, @w) : f32[1,3]
  %h1 = call @add(%h, @b) : f32[1,3]
  %h2 = call @mul(%h1, @s) : f32[1,3]
  %p = call @softmax(%h2) {axis = -1} : f32[1,3]
  return %p
}
func @step(%cache: f32[1,3] donate, %row: f32[1,3]) -> (f32[1,3], f32[3]) {
  %c = call @add(%cache, %row) : f32[1,3]
  %r = call @reshape(%c) : f32[3]
  %t = call @relu(%r) : f32[3]
  return %c, %t
}
)";

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// kProgram as written: these tests are about the writer, so the matmul keeps
// its add (fusion_test.cc covers what fusion makes of it).
CompileOptions unfused() {
  CompileOptions options;
  options.fuse_epilogues = false;
  return options;
}

void check_verifies(const std::vector<uint8_t>& bytes) {
  // The verifier needs 8-byte alignment; std::vector's allocation gives 16.
  Result<format::VerifiedModule> verified = format::verify_executable(bytes, {.verify_data_checksum = true});
  INFO(verified.status().to_string());
  CHECK(verified.ok());
}

TEST_CASE("writer: prelude layout") {
  std::vector<uint8_t> bytes = compile_ok(kProgram, unfused());
  format::Prelude p = prelude_of(bytes);
  CHECK(std::memcmp(p.magic, format::kMagic, 8) == 0);
  CHECK(p.format_version == format::kFormatVersion);
  CHECK(p.flags == 0);
  CHECK(p.metadata_offset == 64);
  CHECK(p.data_offset == round_up(64 + p.metadata_size, 4096));
  CHECK(p.data_offset + p.data_size == bytes.size());
  CHECK(p.metadata_checksum ==
        format::checksum64(std::span<const uint8_t>(bytes.data() + 64, p.metadata_size)));
  CHECK(p.data_checksum == 0);
}

TEST_CASE("writer: data checksum when asked") {
  CompileOptions options;
  options.data_checksum = true;
  std::vector<uint8_t> bytes = compile_ok(kProgram, options);
  format::Prelude p = prelude_of(bytes);
  CHECK((p.flags & format::kFlagDataChecksum) != 0);
  CHECK(p.data_checksum ==
        format::checksum64(std::span<const uint8_t>(bytes.data() + p.data_offset, p.data_size)));
  check_verifies(bytes);
}

TEST_CASE("writer: one page-aligned RODATA section holding the packed constants") {
  std::vector<uint8_t> bytes = compile_ok(kProgram, unfused());
  const fb::Module* m = module_of(bytes);
  format::Prelude p = prelude_of(bytes);
  REQUIRE(m->sections()->size() == 1);
  const fb::Section* s = m->sections()->Get(0);
  CHECK(s->offset() == p.data_offset);
  CHECK(s->offset() % 4096 == 0);
  CHECK(s->alignment() == 4096);
  CHECK(s->size() == s->raw_size());
  CHECK(s->kind() == fb::SectionKind::Rodata);
  CHECK(s->compression() == fb::Compression::None);

  REQUIRE(m->constants()->size() == 3);
  int fills = 0;
  for (const fb::Constant* c : *m->constants()) {
    if (c->storage() == fb::ConstantStorage::Fill) {
      ++fills;
      CHECK(c->name()->str() == "b");
      CHECK(c->fill_count() == 3);
      CHECK(c->byte_size() == 12);
      CHECK(c->fill_pattern()->size() == 4);
      continue;
    }
    CHECK(c->offset() % 64 == 0);
    CHECK(c->offset() + c->byte_size() <= s->size());
    if (c->name()->str() == "s") {
      std::vector<uint8_t> stored(bytes.data() + s->offset() + c->offset(),
                                  bytes.data() + s->offset() + c->offset() + c->byte_size());
      CHECK(stored == f32_bytes({1, 2, 3}));
    }
  }
  CHECK(fills == 1);
}

TEST_CASE("writer: no packed constants means no section and no data") {
  std::vector<uint8_t> bytes = compile_ok(R"(
const @b : f32[3] = splat 0.25
func @f(%x: f32[3]) -> (f32[3]) { %y = call @add(%x, @b) : f32[3]  return %y }
)");
  const fb::Module* m = module_of(bytes);
  format::Prelude p = prelude_of(bytes);
  CHECK(m->sections()->size() == 0);
  CHECK(p.data_size == 0);
  CHECK(p.data_offset % 4096 == 0);
  CHECK(bytes.size() == p.data_offset);
  check_verifies(bytes);
}

TEST_CASE("writer: module, producer, kernels, functions and bindings") {
  std::vector<uint8_t> bytes = compile_ok(kProgram, unfused());
  const fb::Module* m = module_of(bytes);
  CHECK(m->name()->str() == "demo");
  CHECK(m->producer()->str() == "hexir-compile 0.1");
  // matmul, add, mul, softmax, relu: one entry each (reshape is never dispatched).
  std::vector<std::string> kernel_table;
  for (const fb::Kernel* k : *m->kernels()) {
    kernel_table.push_back(k->name()->str());
    REQUIRE(k->code()->size() == 1);
    CHECK(k->code()->Get(0)->target()->str() == "builtin");
    CHECK(k->code()->Get(0)->section() == -1);
  }
  CHECK(kernel_table == std::vector<std::string>{"matmul", "add", "mul", "softmax", "relu"});

  const fb::Function* main = function_named(m, "main");
  CHECK(kernel_names(m, main) == std::vector<std::string>{"matmul", "add", "mul", "softmax"});
  REQUIRE(main->inputs()->size() == 1);
  CHECK(main->inputs()->Get(0)->name()->str() == "x");
  CHECK(main->inputs()->Get(0)->donated_to() == -1);
  REQUIRE(main->outputs()->size() == 1);
  // Outputs keep the returned value's name (ONNX output names come through the same way).
  CHECK(main->outputs()->Get(0)->name()->str() == "p");
  const fb::Slot* out = m->slots()->Get(main->outputs()->Get(0)->slot());
  CHECK(out->storage() == fb::StorageKind::Output);
  CHECK(out->usage() == fb::SlotUsage::ExternalOutput);
  CHECK(out->index() == 0);

  const fb::Function* step = function_named(m, "step");
  CHECK(kernel_names(m, step) == std::vector<std::string>{"add", "relu"});
  CHECK(step->inputs()->Get(0)->donated_to() == 0);
  CHECK(step->inputs()->Get(1)->donated_to() == -1);
  const fb::Slot* cache = m->slots()->Get(step->inputs()->Get(0)->slot());
  CHECK(cache->storage() == fb::StorageKind::Input);
  CHECK(cache->usage() == fb::SlotUsage::Donated);
  const fb::Slot* row = m->slots()->Get(step->inputs()->Get(1)->slot());
  CHECK(row->usage() == fb::SlotUsage::ExternalInput);
  CHECK(row->index() == 1);
  check_verifies(bytes);
}

TEST_CASE("writer: instructions, operands and parameters") {
  std::vector<uint8_t> bytes = compile_ok(kProgram, unfused());
  const fb::Module* m = module_of(bytes);
  const fb::Function* main = function_named(m, "main");
  for (uint32_t i = 0; i < main->instruction_count(); ++i) {
    const fb::Instruction* inst = m->instructions()->Get(main->instruction_begin() + i);
    CHECK(inst->opcode() == fb::Opcode::Dispatch);
    // add and mul run in place over the value before them; matmul cannot, and
    // softmax writes straight into the output.
    CHECK(inst->alias_mask() == (i == 1 || i == 2 ? 1u : 0u));
    CHECK(inst->operand_count() == inst->input_count() + 1);
    CHECK(inst->operand_begin() + inst->operand_count() <= m->operand_pool()->size());
    CHECK(inst->param_begin() + inst->param_count() <= m->param_pool()->size());
  }
  const fb::Instruction* softmax = m->instructions()->Get(main->instruction_begin() + 3);
  REQUIRE(softmax->param_count() == 1);
  CHECK(m->param_pool()->Get(softmax->param_begin()) == 1);
  // matmul reads x and the constant w, writes an arena value.
  const fb::Instruction* matmul = m->instructions()->Get(main->instruction_begin());
  const fb::Slot* w = m->slots()->Get(m->operand_pool()->Get(matmul->operand_begin() + 1));
  CHECK(w->storage() == fb::StorageKind::Constant);
  CHECK(w->usage() == fb::SlotUsage::Constant);
  CHECK(m->constants()->Get(w->index())->name()->str() == "w");
  const fb::Slot* h = m->slots()->Get(m->operand_pool()->Get(matmul->operand_begin() + 2));
  CHECK(h->storage() == fb::StorageKind::Arena);
  CHECK(h->usage() == fb::SlotUsage::Transient);
  CHECK(h->arena_offset() % 64 == 0);
}

TEST_CASE("writer: a view shares its root's storage in the slot table") {
  std::vector<uint8_t> bytes = compile_ok(R"(
func @f(%x: f32[2,2]) -> (f32[4]) {
  %a = call @relu(%x) : f32[2,2]
  %v = call @reshape(%a) : f32[4]
  %b = call @exp(%v) : f32[4]
  return %b
})");
  const fb::Module* m = module_of(bytes);
  const fb::Slot* a = nullptr;
  const fb::Slot* v = nullptr;
  for (const fb::Slot* s : *m->slots()) {
    if (s->name()->str() == "a") a = s;
    if (s->name()->str() == "v") v = s;
  }
  REQUIRE(a);
  REQUIRE(v);
  CHECK(a->storage() == fb::StorageKind::Arena);
  CHECK(v->storage() == a->storage());
  CHECK(v->arena_offset() == a->arena_offset());
  CHECK(v->index() == a->index());
  CHECK(kernel_names(m, m->functions()->Get(0)) == std::vector<std::string>{"relu", "exp"});
  check_verifies(bytes);
}

TEST_CASE("writer: a constant used by two functions has one slot") {
  std::vector<uint8_t> bytes = compile_ok(R"(
const @c : f32[2] = dense [1, 2]
func @f(%x: f32[2]) -> f32[2] { %y = call @add(%x, @c) : f32[2]  return %y }
func @g(%x: f32[2]) -> f32[2] { %y = call @mul(%x, @c) : f32[2]  return %y }
)");
  const fb::Module* m = module_of(bytes);
  int constant_slots = 0;
  for (const fb::Slot* s : *m->slots()) constant_slots += s->storage() == fb::StorageKind::Constant;
  CHECK(constant_slots == 1);
  check_verifies(bytes);
}

TEST_CASE("writer: copies for returned inputs, constants and duplicates") {
  std::vector<uint8_t> bytes = compile_ok(R"(
const @c : f32[3] = dense [1, 2, 3]
func @f(%x: f32[3]) -> (f32[3], f32[3], f32[3], f32[3]) {
  %a = call @relu(%x) : f32[3]
  return %x, @c, %a, %a
})");
  const fb::Module* m = module_of(bytes);
  const fb::Function* f = m->functions()->Get(0);
  CHECK(kernel_names(m, f) == std::vector<std::string>{"relu", "copy", "copy", "copy"});
  for (uint32_t i = 0; i < 4; ++i) {
    const fb::Slot* out = m->slots()->Get(f->outputs()->Get(i)->slot());
    CHECK(out->storage() == fb::StorageKind::Output);
    CHECK(out->index() == i);
  }
  check_verifies(bytes);
}

TEST_CASE("writer: arena plan fields for both strategies") {
  CompileOptions naive_options;
  naive_options.plan = PlanStrategy::kNaive;
  naive_options.alignment = 128;
  const fb::Module* naive = nullptr;
  std::vector<uint8_t> naive_bytes = compile_ok(kProgram, naive_options);
  naive = module_of(naive_bytes);
  CHECK(naive->arena()->strategy() == fb::PlanStrategy::Naive);
  CHECK(naive->arena()->heuristic()->str() == "naive");

  CompileOptions arena_options;
  arena_options.alignment = 128;
  std::vector<uint8_t> arena_bytes = compile_ok(kProgram, arena_options);
  const fb::Module* arena = module_of(arena_bytes);
  CHECK(arena->arena()->strategy() == fb::PlanStrategy::Arena);
  // The arena planner records which of its heuristics (or its search) won.
  CHECK(!arena->arena()->heuristic()->str().empty());
  CHECK(arena->arena()->heuristic()->str() != "naive");
  CHECK(arena->arena()->alignment() == 128);
  CHECK(arena->arena()->workspace_size() == 0);
  uint64_t max_size = 0, max_bound = 0;
  for (const fb::Function* f : *arena->functions()) {
    CHECK(f->arena_size() <= arena->arena()->size());
    CHECK(f->arena_size() >= f->lower_bound());
    max_size = std::max(max_size, f->arena_size());
    max_bound = std::max(max_bound, f->lower_bound());
  }
  CHECK(arena->arena()->size() == max_size);
  CHECK(arena->arena()->lower_bound() == max_bound);
  for (const fb::Slot* s : *arena->slots())
    if (s->storage() == fb::StorageKind::Arena) CHECK(s->arena_offset() % 128 == 0);
  CHECK(arena->arena()->size() <= naive->arena()->size());
  check_verifies(naive_bytes);
  check_verifies(arena_bytes);
}

TEST_CASE("compile: bad alignment is an error") {
  CompileOptions options;
  options.alignment = 48;
  Result<std::vector<uint8_t>> bytes = compile_source(kProgram, "t.hxir", data_dir(), options);
  CHECK(bytes.status().code() == StatusCode::kInvalidArgument);
  CHECK(bytes.status().message().find("power of two") != std::string::npos);
}

TEST_CASE("compile: parse errors come back unchanged") {
  Result<std::vector<uint8_t>> bytes = compile_source("func @f(", "bad.hxir", data_dir());
  CHECK(bytes.status().message().rfind("bad.hxir:1:9: ", 0) == 0);
}

TEST_CASE("compile_file resolves constants next to the file; write_binary_file writes it") {
  TempDir dir;
  REQUIRE(write_npy((dir.path() / "w.npy").string(), {DType::kF32, {2}}, f32_bytes({3, 4})).ok());
  {
    std::ofstream out(dir.path() / "m.hxir");
    out << "const @w : f32[2] = file \"w.npy\"\nfunc @f(%x: f32[2]) -> f32[2] {\n"
           "  %y = call @add(%x, @w) : f32[2]\n  return %y\n}\n";
  }
  Result<std::vector<uint8_t>> bytes = compile_file(dir.path() / "m.hxir");
  INFO(bytes.status().to_string());
  REQUIRE(bytes.ok());
  CHECK(module_of(*bytes)->name()->str() == "m");
  std::filesystem::path out = dir.path() / "m.hxe";
  REQUIRE(write_binary_file(out, *bytes).ok());
  CHECK(std::filesystem::file_size(out) == bytes->size());
  CHECK(!std::filesystem::exists(dir.path() / "m.hxe.tmp"));
}

TEST_CASE("compile_file: errors name the file") {
  Result<std::vector<uint8_t>> missing = compile_file("/nonexistent/model.hxir");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("/nonexistent/model.hxir") != std::string::npos);
  TempDir dir;
  {
    std::ofstream out(dir.path() / "bad.hxir");
    out << "module @m\nconst @w : f32[2] = file \"nope.npy\"\n";
  }
  Result<std::vector<uint8_t>> bad = compile_file(dir.path() / "bad.hxir");
  CHECK(bad.status().message().rfind((dir.path() / "bad.hxir").string() + ":2:26: ", 0) == 0);
}

TEST_CASE("compile: a big splat costs no data bytes") {
  std::vector<uint8_t> bytes = compile_ok(R"(
const @z : f32[1024,1024] = splat 0.0
func @f(%x: f32[1024,1024]) -> f32[1024,1024] { %y = call @add(%x, @z) : f32[1024,1024]  return %y }
)");
  CHECK(bytes.size() < 8192);
  check_verifies(bytes);
}

}  // namespace
}  // namespace hexir::compiler::testing
