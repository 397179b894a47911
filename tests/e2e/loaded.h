// A compiled executable loaded from aligned memory and prepared on the cpu,
// with the bytes it borrows (the e2e tests that inspect the file and run it).
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "hexir/format/prelude.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"
#include "hexir_generated.h"

namespace hexir::testing {

struct Loaded {
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
  size_t size = 0;
  std::unique_ptr<hal::Device> device;
  std::unique_ptr<vm::Module> module;
  std::unique_ptr<vm::Program> program;

  const fb::Module& fb() const { return *fb::GetModule(bytes.get() + sizeof(format::Prelude)); }
};

// On a cpu device with `threads` per context (0: the cores available),
// weights packed at prepare or not.
inline std::unique_ptr<Loaded> load_compiled(const std::vector<uint8_t>& compiled, int threads = 0,
                                             bool pack_weights = true) {
  auto l = std::make_unique<Loaded>();
  l->size = compiled.size();
  l->bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (compiled.size() + 63) / 64 * 64)));
  std::memcpy(l->bytes.get(), compiled.data(), compiled.size());
  auto device = hal::create_device("cpu", {.threads = threads, .pack_weights = pack_weights});
  REQUIRE(device.ok());
  l->device = std::move(device).value();
  auto module = vm::Module::load_buffer({l->bytes.get(), l->size});
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  l->module = std::make_unique<vm::Module>(std::move(module).value());
  auto program = vm::Program::prepare(*l->module, *l->device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  l->program = std::make_unique<vm::Program>(std::move(program).value());
  return l;
}

}  // namespace hexir::testing
