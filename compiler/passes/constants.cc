#include "passes/constants.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "hexir/format/prelude.h"
#include "ir/constant_data.h"

namespace hexir::compiler {

namespace {

// Whether every element of `c` equals its first one (bytewise), reading the
// bytes a chunk at a time and stopping at the first difference. Sets
// `pattern` to that element.
Result<bool> all_elements_equal(const Constant& c, std::vector<uint8_t>* pattern) {
  const size_t element = dtype_size(c.type.dtype);
  if (c.byte_size == 0 || c.byte_size % element != 0) return false;
  ConstantReader reader(c);
  uint64_t position = 0;
  // A small first piece: most weights differ within their first elements.
  size_t piece_size = 4096;
  while (reader.remaining() > 0) {
    HEXIR_ASSIGN_OR_RETURN(std::span<const uint8_t> piece, reader.next(piece_size));
    piece_size = kConstantChunkSize;
    if (position == 0) pattern->assign(piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(element));
    for (size_t i = 0; i < piece.size(); ++i)
      if (piece[i] != (*pattern)[(position + i) % element]) return false;
    position += piece.size();
  }
  return true;
}

}  // namespace

Status detect_splats(const Module& module, ConstantPlan& plan) {
  plan.fills.assign(module.constants.size(), std::nullopt);
  for (size_t i = 0; i < module.constants.size(); ++i) {
    const Constant& c = module.constants[i];
    const uint64_t element = dtype_size(c.type.dtype);
    if (const auto* fill = std::get_if<FillPattern>(&c.source)) {
      plan.fills[i] = Fill{fill->element, c.byte_size / element};
      continue;
    }
    std::vector<uint8_t> pattern;
    HEXIR_ASSIGN_OR_RETURN(bool splat, all_elements_equal(c, &pattern));
    if (splat) plan.fills[i] = Fill{std::move(pattern), c.byte_size / element};
  }
  return ok_status();
}

Status dedupe_constants(const Module& module, ConstantPlan& plan) {
  std::vector<bool> used(module.constants.size(), false);
  for (const Function& fn : module.functions)
    for (const Value& v : fn.values)
      if (v.kind == ValueKind::kConstant) used[static_cast<size_t>(v.constant)] = true;
  if (plan.fills.size() != module.constants.size()) plan.fills.assign(module.constants.size(), std::nullopt);

  // Key on everything that makes two constants interchangeable except the
  // bytes themselves, which are hashed (weights can be large) and compared
  // in full on a hash match. The name is not part of it: the first name wins.
  using Key = std::tuple<DType, std::vector<int64_t>, bool, std::vector<uint8_t>, uint64_t, uint64_t>;
  std::map<Key, std::vector<int>> candidates;  // key -> indices into plan.stored
  plan.stored.clear();
  plan.stored_index.assign(module.constants.size(), -1);
  for (size_t i = 0; i < module.constants.size(); ++i) {
    if (!used[i]) continue;
    const Constant& c = module.constants[i];
    const std::optional<Fill>& fill = plan.fills[i];
    uint64_t hash = 0;
    if (!fill) {
      StreamingChecksum64 checksum;
      HEXIR_RETURN_IF_ERROR(for_each_chunk(c, [&](std::span<const uint8_t> piece) {
        checksum.update(piece);
        return ok_status();
      }));
      hash = checksum.finish();
    }
    Key key{c.type.dtype,           c.type.dims,
            fill.has_value(),       fill ? fill->pattern : std::vector<uint8_t>(),
            fill ? fill->count : 0, hash};
    std::vector<int>& same_key = candidates[key];
    int match = -1;
    for (int k : same_key) {
      // Fills with one key are equal; data is compared byte for byte.
      bool equal = fill.has_value();
      if (!equal) {
        const Constant& kept =
            module.constants[static_cast<size_t>(plan.stored[static_cast<size_t>(k)].constant)];
        HEXIR_ASSIGN_OR_RETURN(equal, same_bytes(kept, c));
      }
      if (equal) {
        match = k;
        break;
      }
    }
    if (match < 0) {
      match = static_cast<int>(plan.stored.size());
      same_key.push_back(match);
      StoredConstant stored;
      stored.constant = static_cast<int>(i);
      stored.fill = fill;
      plan.stored.push_back(std::move(stored));
    }
    plan.stored_index[i] = match;
  }
  return ok_status();
}

bool module_has_rodata(const ConstantPlan& plan) {
  return std::any_of(plan.stored.begin(), plan.stored.end(), [](const StoredConstant& c) { return !c.fill; });
}

uint64_t pack_constants(const Module& module, ConstantPlan& plan) {
  // Device constants in one section, streamed ones in another.
  uint64_t end[2] = {0, 0};
  for (StoredConstant& c : plan.stored) {
    if (c.fill) continue;
    uint64_t& section_end = end[c.streamed ? 1 : 0];
    const uint64_t offset = (section_end + format::kConstantAlignment - 1) / format::kConstantAlignment *
                            format::kConstantAlignment;
    c.rodata_offset = offset;
    section_end = offset + module.constants[static_cast<size_t>(c.constant)].byte_size;
  }
  plan.rodata_size = end[0];
  plan.streamed_rodata_size = end[1];
  return end[0];
}

uint64_t device_constant_bytes(const Module& module, const ConstantPlan& plan) {
  uint64_t bytes = 0;
  for (const StoredConstant& c : plan.stored)
    if (!c.streamed) bytes += module.constants[static_cast<size_t>(c.constant)].byte_size;
  return bytes;
}

}  // namespace hexir::compiler
