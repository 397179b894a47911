// Helpers shared by the serializer tests.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hexir/base/half.h"
#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/compiler/graph.h"
#include "hexir/compiler/hxir.h"
#include "hexir/format/prelude.h"
#include "hexir/format/verifier.h"
#include "hexir_generated.h"
#include "ir/constant_data.h"
#include "ir/plan.h"
#include "passes/arena.h"
#include "passes/constants.h"
#include "passes/in_place.h"
#include "passes/liveness.h"
#include "passes/schedule.h"
#include "passes/storage.h"
#include "passes/views.h"
#include "pipeline.h"

namespace hexir::compiler::testing {

inline std::filesystem::path data_dir() { return HEXIR_TEST_NPY_DIR; }

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("hexir_serializer_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> f32_bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

// Parses `source` (display name "t.hxir", files relative to `base`); fails the test on error.
inline Module parse_ok(std::string_view source, const std::filesystem::path& base = data_dir()) {
  Result<Module> m = parse_hxir(source, "t.hxir", base);
  INFO(m.status().to_string());
  REQUIRE(m.ok());
  return std::move(m).value();
}

// The error message of parsing `source`, "" when it parses.
inline std::string parse_error(std::string_view source, const std::filesystem::path& base = data_dir()) {
  Result<Module> m = parse_hxir(source, "t.hxir", base);
  return m.ok() ? std::string() : m.status().message();
}

// All the bytes of a constant, however they are stored (a file constant is read now).
inline std::vector<uint8_t> bytes_of(const Constant& c) {
  std::vector<uint8_t> out;
  Status read = for_each_chunk(c, [&](std::span<const uint8_t> piece) {
    out.insert(out.end(), piece.begin(), piece.end());
    return ok_status();
  });
  INFO(read.to_string());
  REQUIRE(read.ok());
  return out;
}

// A parsed module and its plan.
struct Lowered {
  Module module;
  ModulePlan plan;
};

// The constant passes, like compile_source runs them.
inline ConstantPlan plan_constants(const Module& m) {
  ConstantPlan plan;
  Status s = detect_splats(m, plan);
  INFO(s.to_string());
  REQUIRE(s.ok());
  s = dedupe_constants(m, plan);
  INFO(s.to_string());
  REQUIRE(s.ok());
  pack_constants(m, plan);
  return plan;
}

// Parses and runs the constant passes, then storage and the arena plan per
// function (no in-place, no donation placement), without writing.
inline Lowered lower(std::string_view source, PlanStrategy strategy = PlanStrategy::kArena,
                     uint32_t alignment = 64, const std::filesystem::path& base = data_dir()) {
  Lowered out;
  out.module = parse_ok(source, base);
  out.plan.constants = plan_constants(out.module);
  out.plan.functions.resize(out.module.functions.size());
  for (size_t f = 0; f < out.module.functions.size(); ++f) {
    assign_storage(out.module.functions[f], out.plan.functions[f]);
    std::string heuristic;
    Status s =
        plan_function_arena(out.module.functions[f], out.plan.functions[f], strategy, alignment, &heuristic);
    INFO(s.to_string());
    REQUIRE(s.ok());
  }
  return out;
}

// The first function of a parsed module with its plan, looked up by value name.
struct Planned {
  Module module;
  FunctionPlan plan;

  const Function& fn() const { return module.functions.front(); }
  const Value& value(int id) const { return value_at(fn(), plan, id); }
  // The id of the value named `name` (graph values first, then those the plan added).
  int id(std::string_view name) const {
    for (int v = 0; v < value_count(fn(), plan); ++v)
      if (value(v).name == name) return v;
    FAIL("no value " << name);
    return -1;
  }
  const ValuePlan& at(std::string_view name) const { return plan.values[static_cast<size_t>(id(name))]; }
  // The operators of the program, in order.
  std::vector<ops::OpId> ops() const {
    std::vector<ops::OpId> out;
    for (const Instruction& inst : plan.program) out.push_back(inst.op);
    return out;
  }
};

inline std::vector<uint8_t> compile_ok(std::string_view source, const CompileOptions& options = {}) {
  Result<std::vector<uint8_t>> bytes = compile_source(source, "t.hxir", data_dir(), options);
  INFO(bytes.status().to_string());
  REQUIRE(bytes.ok());
  return std::move(bytes).value();
}

inline format::Prelude prelude_of(const std::vector<uint8_t>& bytes) {
  format::Prelude p;
  REQUIRE(bytes.size() >= sizeof(p));
  std::memcpy(&p, bytes.data(), sizeof(p));
  return p;
}

// The metadata root after checking the prelude and flatbuffer structure.
inline const fb::Module* module_of(const std::vector<uint8_t>& bytes) {
  format::Prelude p = prelude_of(bytes);
  REQUIRE(std::memcmp(p.magic, format::kMagic, 8) == 0);
  REQUIRE(p.metadata_offset == 64);
  REQUIRE(p.metadata_offset + p.metadata_size <= bytes.size());
  REQUIRE(fb::ModuleBufferHasIdentifier(bytes.data() + 64));
  flatbuffers::Verifier verifier(bytes.data() + 64, p.metadata_size);
  REQUIRE(fb::VerifyModuleBuffer(verifier));
  return flatbuffers::GetRoot<fb::Module>(bytes.data() + 64);
}

inline const fb::Function* function_named(const fb::Module* m, std::string_view name) {
  for (const fb::Function* f : *m->functions())
    if (f->name()->string_view() == name) return f;
  FAIL("no function " << name);
  return nullptr;
}

// The kernel name of each instruction of `fn`, in order.
inline std::vector<std::string> kernel_names(const fb::Module* m, const fb::Function* fn) {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < fn->instruction_count(); ++i) {
    const fb::Instruction* inst = m->instructions()->Get(fn->instruction_begin() + i);
    out.push_back(m->kernels()->Get(inst->kernel())->name()->str());
  }
  return out;
}

}  // namespace hexir::compiler::testing
