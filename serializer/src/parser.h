// The .hxir text parser (see DESIGN.md "Text IR"). It also checks the
// program: names resolve, every call's declared result type matches the
// kernel's shape rule, file constants match their declared type, returns
// match the signature. Every error reads "FILE:LINE:COL: what was expected".
#pragma once

#include <filesystem>
#include <string_view>

#include "hexir/base/status.h"
#include "ir.h"

namespace hexir::serializer {

Result<Module> parse_module(std::string_view source, std::string_view display_name,
                            const std::filesystem::path& base_dir);

// Element conversions used for splat/dense values of f16 and bf16 constants
// (round to nearest even, NaN kept NaN).
uint16_t float_to_half_bits(float value);
uint16_t float_to_bfloat16_bits(float value);

}  // namespace hexir::serializer
