// Verifying a hand-built ModuleSpec in tests: ok, or refused with a message
// containing a needle (the verifier reports every refusal as kDataLoss).
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "hexir/format/verifier.h"
#include "hxe_test_builder.h"

namespace hexir::testing {

inline Status verify_spec(const ModuleSpec& spec) {
  AlignedBytes file = write_hxe(spec);
  return format::verify_executable(file.span()).status();
}

inline void expect_ok(const ModuleSpec& spec) {
  Status status = verify_spec(spec);
  CHECK_MESSAGE(status.ok(), status.to_string());
}

inline void expect_rejected(const ModuleSpec& spec, const std::string& needle) {
  Status status = verify_spec(spec);
  REQUIRE_FALSE(status.ok());
  INFO("message: " << status.message());
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK(status.message().find(needle) != std::string::npos);
}

}  // namespace hexir::testing
