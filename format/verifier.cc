#include "hexir/format/verifier.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "hexir/format/sections.h"
#include "hexir/ops/widen.h"

namespace hexir::format {
namespace {

constexpr size_t kMaxLoopDepth = 64;  // bounds the VM's and the verifier's loop stacks

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename... Args>
Status corrupt(const Args&... args) {
  return data_loss(cat(args...));
}

// offset + size <= limit, without wrapping.
bool range_inside(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

template <typename T>
uint64_t vec_size(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

const char* str_or_empty(const flatbuffers::String* s) { return s ? s->c_str() : ""; }

TensorType make_type(fb::DType dtype, const flatbuffers::Vector<int64_t>* shape) {
  TensorType type;
  type.dtype = static_cast<DType>(dtype);
  if (shape) type.dims.assign(shape->begin(), shape->end());
  return type;
}

// Checks dtype and that the shape's byte size equals the stored one.
Status check_type(const std::string& what, fb::DType dtype, const flatbuffers::Vector<int64_t>* shape,
                  uint64_t stored_byte_size, TensorType* out) {
  if (!dtype_is_valid(static_cast<uint8_t>(dtype)))
    return corrupt(what, ": invalid dtype ", static_cast<int>(dtype));
  *out = make_type(dtype, shape);
  Result<uint64_t> size = byte_size(*out);
  if (!size.ok()) return corrupt(what, ": bad shape: ", size.status().message());
  if (*size != stored_byte_size)
    return corrupt(what, ": byte_size is ", stored_byte_size, " but ", out->to_string(), " needs ", *size);
  return ok_status();
}

std::string slot_label(const fb::Module& m, uint64_t index) {
  const fb::Slot* slot = m.slots()->Get(static_cast<flatbuffers::uoffset_t>(index));
  std::string name = str_or_empty(slot->name());
  if (name.empty()) return cat("slot ", index);
  return cat("slot ", index, " ('", name, "')");
}

bool slot_is_writable(fb::SlotUsage usage) {
  return usage == fb::SlotUsage::Transient || usage == fb::SlotUsage::ExternalOutput ||
         usage == fb::SlotUsage::Donated;
}

bool usage_fits_storage(fb::StorageKind storage, fb::SlotUsage usage) {
  switch (storage) {
    case fb::StorageKind::Arena:
      return usage == fb::SlotUsage::Transient || usage == fb::SlotUsage::Staging;
    case fb::StorageKind::Constant:
      return usage == fb::SlotUsage::Constant;
    case fb::StorageKind::Input:
      return usage == fb::SlotUsage::ExternalInput || usage == fb::SlotUsage::Donated;
    case fb::StorageKind::Output:
      return usage == fb::SlotUsage::ExternalOutput;
    case fb::StorageKind::Extent:
      return usage == fb::SlotUsage::Transient;
  }
  return false;
}

bool is_host(const fb::Slot& s) { return s.memory_space() == fb::MemorySpace::Host; }

// Same storage location: what an alias bit claims.
bool same_storage(const fb::Slot& a, const fb::Slot& b) {
  if (a.storage() != b.storage() || a.memory_space() != b.memory_space()) return false;
  if (a.storage() == fb::StorageKind::Arena) return a.arena_offset() == b.arena_offset();
  return a.index() == b.index();
}

// A view with an offset into its base or strides of its own (docs/views.md).
bool is_layout_view(const fb::Slot& s) { return s.view_offset() != 0 || (s.strides() && s.strides()->size() > 0); }

std::string list_str(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
  return s + "]";
}

// Any byte in common (both verified to lie inside their storage).
bool storage_overlaps(const fb::Slot& a, const fb::Slot& b) {
  if (a.storage() != b.storage() || a.memory_space() != b.memory_space() || a.byte_size() == 0 ||
      b.byte_size() == 0)
    return false;
  if (a.storage() == fb::StorageKind::Arena)
    return a.arena_offset() < b.arena_offset() + b.byte_size() &&
           b.arena_offset() < a.arena_offset() + a.byte_size();
  return a.index() == b.index();
}

// The first duplicate of a list of names, in O(n log n): among the names
// that occur more than once, the pair (first occurrence, second occurrence)
// whose second occurrence comes earliest -- the pair a scan that compares each
// name with every earlier one would report first. false when all differ.
bool first_duplicate(std::vector<std::pair<std::string_view, uint64_t>>& names, uint64_t* first,
                     uint64_t* second) {
  std::sort(names.begin(), names.end());
  bool found = false;
  for (size_t i = 1; i < names.size(); ++i) {
    if (names[i].first != names[i - 1].first) continue;
    if (i >= 2 && names[i - 2].first == names[i].first) continue;  // only a group's first two
    if (!found || names[i].second < *second) {
      *first = names[i - 1].second;
      *second = names[i].second;
      found = true;
    }
  }
  return found;
}

class ModuleVerifier {
 public:
  ModuleVerifier(VerifiedModule& out, const fb::Module& m, const VerifyOptions& options)
      : out_(out), m_(m), options_(options) {}

  Status run() {
    HEXIR_RETURN_IF_ERROR(check_vector_alignment());
    if (!m_.arena()) return corrupt("module has no arena plan");
    const fb::ArenaPlan& plan = *m_.arena();
    if (!is_power_of_two(plan.alignment()))
      return corrupt("arena plan alignment ", plan.alignment(), " is not a power of two");
    if (static_cast<uint8_t>(plan.strategy()) > static_cast<uint8_t>(fb::PlanStrategy::MAX))
      return corrupt("arena plan has unknown strategy ", static_cast<int>(plan.strategy()));
    dynamic_ = plan.strategy() == fb::PlanStrategy::FreeAtLastUse;
    if (dynamic_ && plan.size() != 0)
      return corrupt("arena plan is free-at-last-use but has a static arena of ", plan.size(), " bytes");
    if (vec_size(m_.workspaces()) != 0) {
      if (vec_size(m_.workspaces()) != vec_size(m_.instructions()))
        return corrupt("module has ", vec_size(m_.workspaces()), " workspace ranges for ",
                       vec_size(m_.instructions()), " instructions");
      if (dynamic_) return corrupt("workspace ranges in the arena of a free-at-last-use plan");
    }
    if (dynamic_ && plan.host_size() != 0)
      return corrupt("arena plan is free-at-last-use but has a host arena of ", plan.host_size(), " bytes");
    HEXIR_RETURN_IF_ERROR(check_sections());
    HEXIR_RETURN_IF_ERROR(check_constants());
    HEXIR_RETURN_IF_ERROR(check_kernels());
    HEXIR_RETURN_IF_ERROR(check_slots());
    HEXIR_RETURN_IF_ERROR(check_functions());
    HEXIR_RETURN_IF_ERROR(check_instructions());
    HEXIR_RETURN_IF_ERROR(check_loops());
    HEXIR_RETURN_IF_ERROR(check_function_bodies());
    HEXIR_RETURN_IF_ERROR(check_aliasing());
    HEXIR_RETURN_IF_ERROR(check_recomputations());
    return ok_status();
  }

 private:
  // flatbuffers::Verifier only checks that a vector's length word is 4-byte
  // aligned; vectors of 8-byte scalars and structs must be 8-byte aligned to be
  // read in place without undefined behaviour (empty ones are never read).
  template <typename T>
  static bool aligned8(const flatbuffers::Vector<T>* v) {
    return !v || v->size() == 0 || reinterpret_cast<uintptr_t>(v->Data()) % 8 == 0;
  }

  Status check_vector_alignment() {
    if (!aligned8(m_.sections())) return corrupt("sections vector is misaligned");
    if (!aligned8(m_.param_pool())) return corrupt("parameter pool is misaligned");
    for (uint64_t i = 0; i < vec_size(m_.constants()); ++i)
      if (!aligned8(m_.constants()->Get(static_cast<flatbuffers::uoffset_t>(i))->shape()))
        return corrupt("constant ", i, ": shape vector is misaligned");
    for (uint64_t i = 0; i < vec_size(m_.slots()); ++i) {
      const fb::Slot& slot = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (!aligned8(slot.shape())) return corrupt("slot ", i, ": shape vector is misaligned");
      if (!aligned8(slot.strides())) return corrupt("slot ", i, ": strides vector is misaligned");
    }
    return ok_status();
  }

  Status check_sections() {
    const uint64_t data_begin = out_.prelude.data_offset;
    const uint64_t data_end = data_begin + out_.prelude.data_size;  // checked not to wrap
    const uint64_t count = vec_size(m_.sections());
    out_.sections.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      const fb::Section& s = *m_.sections()->Get(static_cast<flatbuffers::uoffset_t>(i));
      const std::string what = cat("section ", i);
      if (static_cast<uint16_t>(s.kind()) > static_cast<uint16_t>(fb::SectionKind::MAX))
        return corrupt(what, ": unknown kind ", static_cast<int>(s.kind()));
      if (s.compression() == fb::Compression::Zstd) {
        // The frame itself is checked when it is decompressed (sections.h); here only
        // that raw_size is one it could honestly have. Constants are checked against it.
        uint64_t most = 0;
        if (s.size() == 0) return corrupt(what, ": zstd-compressed but stores no bytes");
        if (s.raw_size() > kMaxRawSectionSize)
          return corrupt(what, ": raw_size ", s.raw_size(), " exceeds the limit of ", kMaxRawSectionSize);
        if (!__builtin_mul_overflow(s.size(), kMaxZstdExpansion, &most) && s.raw_size() > most)
          return corrupt(what, ": raw_size ", s.raw_size(), " is more than zstd can expand ", s.size(),
                         " stored bytes into");
      } else if (s.compression() != fb::Compression::None) {
        return corrupt(what, ": unknown compression ", static_cast<int>(s.compression()));
      } else if (s.raw_size() != s.size()) {
        return corrupt(what, ": uncompressed but raw_size ", s.raw_size(), " != size ", s.size());
      }
      if (static_cast<uint8_t>(s.memory_space()) > static_cast<uint8_t>(fb::MemorySpace::MAX))
        return corrupt(what, ": unknown memory space ", static_cast<int>(s.memory_space()));
      if (s.memory_space() == fb::MemorySpace::Host && s.kind() != fb::SectionKind::Rodata)
        return corrupt(what, ": only a RODATA section lives in the host memory space");
      if (!is_power_of_two(s.alignment()))
        return corrupt(what, ": alignment ", s.alignment(), " is not a power of two");
      if (s.offset() % s.alignment() != 0 || s.offset() % kPageSize != 0)
        return corrupt(what, ": offset ", s.offset(), " is not aligned to ", s.alignment(), " and to a page");
      if (s.offset() < data_begin || !range_inside(s.offset(), s.size(), data_end))
        return corrupt(what, ": bytes [", s.offset(), ", +", s.size(), ") are outside the data region [",
                       data_begin, ", ", data_end, ")");
      out_.sections.push_back(out_.file.subspan(s.offset(), s.size()));
    }
    return ok_status();
  }

  std::string constant_label(uint64_t i) const {
    const fb::Constant* c = m_.constants()->Get(static_cast<flatbuffers::uoffset_t>(i));
    std::string name = str_or_empty(c->name());
    return name.empty() ? cat("constant ", i) : cat("constant ", i, " ('", name, "')");
  }

  Status check_constants() {
    const uint64_t count = vec_size(m_.constants());
    out_.constant_types.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      const fb::Constant& c = *m_.constants()->Get(static_cast<flatbuffers::uoffset_t>(i));
      const std::string what = constant_label(i);
      HEXIR_RETURN_IF_ERROR(check_type(what, c.dtype(), c.shape(), c.byte_size(), &out_.constant_types[i]));
      if (c.storage() == fb::ConstantStorage::Rodata) {
        if (c.section() >= vec_size(m_.sections()))
          return corrupt(what, ": section ", c.section(), " out of range (the module has ",
                         vec_size(m_.sections()), " sections)");
        const fb::Section& s = *m_.sections()->Get(c.section());
        if (s.kind() != fb::SectionKind::Rodata)
          return corrupt(what, ": section ", c.section(), " is not a RODATA section");
        if (c.offset() % kConstantAlignment != 0)
          return corrupt(what, ": offset ", c.offset(), " is not ", kConstantAlignment, "-byte aligned");
        if (!range_inside(c.offset(), c.byte_size(), s.raw_size()))
          return corrupt(what, ": bytes [", c.offset(), ", +", c.byte_size(), ") are outside section ",
                         c.section(), " (", s.raw_size(), " bytes)");
      } else if (c.storage() == fb::ConstantStorage::Fill) {
        const uint64_t pattern = vec_size(c.fill_pattern());
        if (pattern < 1 || pattern > 16)
          return corrupt(what, ": fill pattern has ", pattern, " bytes (1..16 allowed)");
        uint64_t total = 0;
        if (__builtin_mul_overflow(pattern, c.fill_count(), &total) || total != c.byte_size())
          return corrupt(what, ": fill of ", pattern, " bytes x ", c.fill_count(), " does not make ",
                         c.byte_size(), " bytes");
        if (c.byte_size() % dtype_size(out_.constant_types[i].dtype) != 0)
          return corrupt(what, ": fill size ", c.byte_size(), " is not a multiple of the element size");
      } else {
        return corrupt(what, ": unknown storage ", static_cast<int>(c.storage()));
      }
    }
    return ok_status();
  }

  Status check_kernels() {
    const uint64_t count = vec_size(m_.kernels());
    out_.kernel_ids.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      const fb::Kernel& k = *m_.kernels()->Get(static_cast<flatbuffers::uoffset_t>(i));
      const std::string name = str_or_empty(k.name());
      std::optional<ops::OpId> id = ops::find_op(name);
      if (!id) return corrupt("kernel ", i, ": '", name, "' is not in the kernel catalog");
      for (uint64_t c = 0; c < vec_size(k.code()); ++c) {
        const fb::KernelCode& code = *k.code()->Get(static_cast<flatbuffers::uoffset_t>(c));
        if (code.section() < 0) continue;  // builtin
        const uint64_t section = static_cast<uint64_t>(code.section());
        if (section >= vec_size(m_.sections()))
          return corrupt("kernel ", i, " ('", name, "') code ", c, ": section ", section, " out of range");
        const fb::Section& s = *m_.sections()->Get(static_cast<flatbuffers::uoffset_t>(section));
        if (s.kind() != fb::SectionKind::DeviceCode)
          return corrupt("kernel ", i, " ('", name, "') code ", c, ": section ", section,
                         " is not a device code section");
        if (!range_inside(code.offset(), code.size(), s.raw_size()))
          return corrupt("kernel ", i, " ('", name, "') code ", c, ": range outside section ", section);
      }
      out_.kernel_ids.push_back(*id);
    }
    return ok_status();
  }

  Status check_slots() {
    const uint64_t count = vec_size(m_.slots());
    out_.slot_types.resize(count);
    // Each table entry is some slot's, so a small file cannot ask for a large table.
    if (m_.extent_count() > count)
      return corrupt("extent_count ", m_.extent_count(), " exceeds the ", count, " slots");
    for (uint64_t i = 0; i < count; ++i) HEXIR_RETURN_IF_ERROR(check_slot(i));
    HEXIR_RETURN_IF_ERROR(check_views());
    return check_copies();
  }

  // Slot i on its own: its type, storage kind, usage and memory space, and
  // where its bytes lie.
  Status check_slot(uint64_t i) {
    const fb::Slot& s = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const std::string what = slot_label(m_, i);
    HEXIR_RETURN_IF_ERROR(check_type(what, s.dtype(), s.shape(), s.byte_size(), &out_.slot_types[i]));
    if (static_cast<uint8_t>(s.storage()) > static_cast<uint8_t>(fb::StorageKind::MAX))
      return corrupt(what, ": unknown storage kind ", static_cast<int>(s.storage()));
    HEXIR_RETURN_IF_ERROR(check_bound(s, what, out_.slot_types[i]));
    if (static_cast<uint8_t>(s.usage()) > static_cast<uint8_t>(fb::SlotUsage::MAX))
      return corrupt(what, ": unknown usage ", static_cast<int>(s.usage()));
    if (!usage_fits_storage(s.storage(), s.usage()))
      return corrupt(what, ": usage ", slot_usage_name(s.usage()), " is not allowed for ",
                     storage_kind_name(s.storage()), " storage");
    if (static_cast<uint8_t>(s.memory_space()) > static_cast<uint8_t>(fb::MemorySpace::MAX))
      return corrupt(what, ": unknown memory space ", static_cast<int>(s.memory_space()));
    if (s.storage() == fb::StorageKind::Constant && s.index() < vec_size(m_.constants())) {
      // A constant slot is in its section's memory space (fills: Device).
      const fb::Constant& c = *m_.constants()->Get(s.index());
      const bool host_constant = c.storage() == fb::ConstantStorage::Rodata &&
                                 c.section() < vec_size(m_.sections()) &&
                                 m_.sections()->Get(c.section())->memory_space() == fb::MemorySpace::Host;
      if (is_host(s) != host_constant)
        return corrupt(what, ": in the ", is_host(s) ? "host" : "device", " memory space, but ",
                       constant_label(s.index()), " is in a ", host_constant ? "host" : "device",
                       " section (a streamed weight's slot is Host, every other constant's Device)");
    } else if (is_host(s) && (s.storage() != fb::StorageKind::Arena || dynamic_)) {
      return corrupt(
          what, ": only arena slots of a static plan and streamed constants live in the host memory space");
    }
    return check_slot_bytes(s, what);
  }

  // A bounded dim (docs/design-notes.md): a dim of the shape, its extent an
  // i64[] slot in the extent table that is not bounded itself; the type
  // gets the mark. Neither, or both.
  Status check_bound(const fb::Slot& s, const std::string& what, TensorType& type) const {
    const int32_t dim = s.bounded_dim();
    if (dim == -1 && s.extent() == -1) return ok_status();
    if (dim < 0 || static_cast<size_t>(dim) >= type.rank())
      return corrupt(what, ": bounded dim ", dim, " is not a dim of ", type.to_string());
    if (s.extent() < 0 || static_cast<uint64_t>(s.extent()) >= vec_size(m_.slots()))
      return corrupt(what, ": extent ", s.extent(), " is not a slot");
    const fb::Slot& e = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(s.extent()));
    if (e.storage() != fb::StorageKind::Extent || e.dtype() != fb::DType::I64 || (e.shape() && e.shape()->size()) ||
        e.bounded_dim() != -1)
      return corrupt(what, ": extent ", slot_label(m_, static_cast<uint64_t>(s.extent())),
                     " is not an i64[] slot of the extent table");
    if (s.storage() == fb::StorageKind::Input || s.storage() == fb::StorageKind::Constant)
      return corrupt(what, ": ", storage_kind_name(s.storage()), " slots have exact shapes, not a bounded dim");
    type.bounded = dim;
    return ok_status();
  }

  // Where a slot's bytes lie: inside the (host) arena at an aligned offset,
  // or inside its constant.
  Status check_slot_bytes(const fb::Slot& s, const std::string& what) const {
    const fb::ArenaPlan& plan = *m_.arena();
    if (is_host(s) && s.storage() == fb::StorageKind::Arena) {
      if (s.arena_offset() % plan.alignment() != 0)
        return corrupt(what, ": host arena offset ", s.arena_offset(),
                       " is not a multiple of the arena alignment ", plan.alignment());
      if (!range_inside(s.arena_offset(), s.byte_size(), plan.host_size()))
        return corrupt(what, ": host arena bytes [", s.arena_offset(), ", +", s.byte_size(),
                       ") exceed the host arena size ", plan.host_size());
      return ok_status();
    }
    switch (s.storage()) {
      case fb::StorageKind::Arena:
        if (dynamic_) {  // no static plan: the VM gives each value its own buffer
          if (s.arena_offset() != 0)
            return corrupt(what, ": arena offset ", s.arena_offset(),
                           " in a free-at-last-use plan (must be 0)");
          break;
        }
        if (s.arena_offset() % plan.alignment() != 0)
          return corrupt(what, ": arena offset ", s.arena_offset(),
                         " is not a multiple of the arena alignment ", plan.alignment());
        // A view's bytes are its base's (check_views).
        if (s.view_of() == -1 && !range_inside(s.arena_offset(), s.byte_size(), plan.size()))
          return corrupt(what, ": arena bytes [", s.arena_offset(), ", +", s.byte_size(),
                         ") exceed the arena size ", plan.size());
        break;
      case fb::StorageKind::Constant: {
        if (s.index() >= vec_size(m_.constants()))
          return corrupt(what, ": constant index ", s.index(), " out of range (the module has ",
                         vec_size(m_.constants()), " constants)");
        const fb::Constant& c = *m_.constants()->Get(s.index());
        if (s.view_of() == -1 && s.byte_size() > c.byte_size())
          return corrupt(what, ": ", s.byte_size(), " bytes exceed ", constant_label(s.index()), " (",
                         c.byte_size(), " bytes)");
        break;
      }
      case fb::StorageKind::Input:
      case fb::StorageKind::Output:
        break;  // binding index checked per function
      case fb::StorageKind::Extent:
        if (s.index() >= m_.extent_count() || s.byte_size() != sizeof(int64_t))
          return corrupt(what, ": extent table entry ", s.index(), " of ", s.byte_size(),
                         " bytes is not one of the module's ", m_.extent_count(), " int64 entries");
        break;
    }
    return ok_status();
  }

  // Views: the viewed slot is a value (not a view) with the same storage and bytes.
  Status check_views() {
    const uint64_t count = vec_size(m_.slots());
    for (uint64_t i = 0; i < count; ++i) {
      const fb::Slot& s = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (s.last_use() < -1) return corrupt(slot_label(m_, i), ": invalid last_use ", s.last_use());
      if (s.view_of() == -1) {
        if (is_layout_view(s))
          return corrupt(slot_label(m_, i), ": has a view offset or strides but views nothing");
        continue;
      }
      const std::string what = slot_label(m_, i);
      if (s.view_of() < 0 || static_cast<uint64_t>(s.view_of()) >= count ||
          static_cast<uint64_t>(s.view_of()) == i)
        return corrupt(what, ": view_of ", s.view_of(), " is not another slot");
      const fb::Slot& root = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(s.view_of()));
      if (s.extent() != -1 && s.extent() != root.extent())
        return corrupt(what, ": a bounded view of ", slot_label(m_, static_cast<uint64_t>(s.view_of())),
                       " with another extent");
      if (root.view_of() != -1)
        return corrupt(what, ": views ", slot_label(m_, static_cast<uint64_t>(s.view_of())),
                       ", itself a view");
      // A view with an offset, strides, or fewer bytes than its base (a slice's first rows).
      const bool layout_view = is_layout_view(s) || s.byte_size() != root.byte_size();
      if (!same_storage(s, root) || (!layout_view && s.byte_size() != root.byte_size()) ||
          s.usage() != root.usage())
        return corrupt(what, ": is a view of ", slot_label(m_, static_cast<uint64_t>(s.view_of())),
                       " but does not have its storage, size and usage");
      if (s.last_use() != -1) return corrupt(what, ": a view has no last_use of its own");
      if (layout_view) HEXIR_RETURN_IF_ERROR(check_view_layout(what, i, static_cast<uint32_t>(s.view_of())));
    }
    return ok_status();
  }

  // Copies (host offload): a copy is an arena slot naming the value it
  // holds: a device arena value of its type, not a view and not itself a
  // copy (a recomputation may be copied: it holds its own value).
  Status check_copies() {
    const uint64_t count = vec_size(m_.slots());
    for (uint64_t i = 0; i < count; ++i) {
      const fb::Slot& s = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(i));
      const int32_t c = s.copy_of();
      if (c == -1) continue;
      const std::string what = slot_label(m_, i);
      if (c < 0 || static_cast<uint64_t>(c) >= count || static_cast<uint64_t>(c) == i)
        return corrupt(what, ": copy_of ", c, ", which is not another slot");
      const fb::Slot& t = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(c));
      const std::string original = slot_label(m_, static_cast<uint64_t>(c));
      if (s.view_of() != -1) return corrupt(what, ": a view cannot be a copy");
      if (s.recomputes() != -1) return corrupt(what, ": a copy cannot be a recomputation too");
      const bool streamed_weight = t.storage() == fb::StorageKind::Constant && is_host(t);
      if (t.view_of() != -1 || t.copy_of() != -1 ||
          !(streamed_weight || (!is_host(t) && t.storage() == fb::StorageKind::Arena)))
        return corrupt(what, ": copy_of ", original,
                       ", which is not a device arena value or a streamed constant (a copy names the original)");
      if (streamed_weight && is_host(s))
        return corrupt(what, ": a host copy of ", original, ", a streamed constant already in host memory");
      if (s.storage() != fb::StorageKind::Arena)
        return corrupt(what, ": copy_of ", original, " but a copy must be an arena slot");
      if (!(out_.slot_types[i] == out_.slot_types[static_cast<size_t>(c)]) || s.byte_size() != t.byte_size())
        return corrupt(what, ": copy_of ", original, " but has another type or size");
    }
    return ok_status();
  }

  // A view with an offset or strides (docs/views.md): of its base's dtype,
  // one stride per dim, and inside its base over its whole index space: the
  // last element it reaches, offset + sum (d_i - 1) * s_i, computed without
  // overflow, is below the base's element count. An empty view reaches nothing.
  Status check_view_layout(const std::string& what, uint64_t slot, uint32_t base) {
    const fb::Slot& s = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(slot));
    const TensorType& type = out_.slot_types[slot];
    const TensorType& base_type = out_.slot_types[base];
    if (type.dtype != base_type.dtype)
      return corrupt(what, ": a strided view of ", slot_label(m_, base), " must have its dtype (",
                     dtype_name(base_type.dtype), "), not ", dtype_name(type.dtype));
    std::vector<int64_t> strides;
    if (s.strides()) strides.assign(s.strides()->begin(), s.strides()->end());
    if (!strides.empty() && strides.size() != type.rank())
      return corrupt(what, ": ", strides.size(), " strides for a view of rank ", type.rank());
    const std::optional<int64_t> last = ops::view_last_element(type.dims, s.view_offset(), strides);
    if (!last)
      return corrupt(what, ": view offset ", s.view_offset(), " and strides ", list_str(strides),
                     " are negative or overflow");
    const Result<uint64_t> base_count = element_count(base_type.dims.data(), base_type.rank());
    if (!base_count.ok()) return base_count.status();
    if (*last >= 0 && static_cast<uint64_t>(*last) >= *base_count)
      return corrupt(what, ": view reaches element ", *last, " of ", slot_label(m_, base), ", which has ",
                     *base_count, " elements");
    return ok_status();
  }

  uint32_t root_of(uint32_t slot) const {
    const int32_t view_of = m_.slots()->Get(slot)->view_of();
    return view_of >= 0 ? static_cast<uint32_t>(view_of) : slot;
  }

  Status check_binding_slot(const std::string& what, const fb::Binding* binding, uint32_t* slot_out) {
    if (!binding) return corrupt(what, ": missing");
    if (str_or_empty(binding->name())[0] == '\0') return corrupt(what, ": empty name");
    if (binding->slot() >= vec_size(m_.slots()))
      return corrupt(what, ": slot ", binding->slot(), " out of range (the module has ", vec_size(m_.slots()),
                     " slots)");
    *slot_out = binding->slot();
    return ok_status();
  }

  Status check_functions() {
    const uint64_t count = vec_size(m_.functions());
    const uint64_t instruction_count = vec_size(m_.instructions());
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // (begin, function)
    // Names are compared sorted (n log n), not pairwise: a file may hold
    // hundreds of thousands of functions or inputs.
    std::vector<std::pair<std::string_view, uint64_t>> names, input_names;
    names.reserve(count);
    for (uint64_t f = 0; f < count; ++f) {
      const flatbuffers::String* name = m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(f))->name();
      if (!name || name->size() == 0) return corrupt("function ", f, ": empty name");
      names.emplace_back(name->string_view(), f);
    }
    uint64_t first = 0, second = 0;
    if (first_duplicate(names, &first, &second))
      return corrupt("functions ", first, " and ", second, " are both named '",
                     str_or_empty(m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(second))->name()),
                     "'");
    for (uint64_t f = 0; f < count; ++f) {
      const fb::Function& fn = *m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(f));
      const std::string name = str_or_empty(fn.name());
      const std::string what = cat("function '", name, "'");
      if (!range_inside(fn.instruction_begin(), fn.instruction_count(), instruction_count))
        return corrupt(what, ": instructions [", fn.instruction_begin(), ", +", fn.instruction_count(),
                       ") exceed the module's ", instruction_count, " instructions");
      if (fn.instruction_count() > 0) ranges.emplace_back(fn.instruction_begin(), f);
      if (fn.arena_size() > m_.arena()->size())
        return corrupt(what, ": arena_size ", fn.arena_size(), " exceeds the arena plan size ",
                       m_.arena()->size());
      if (fn.host_arena_size() > m_.arena()->host_size())
        return corrupt(what, ": host_arena_size ", fn.host_arena_size(), " exceeds the host arena size ",
                       m_.arena()->host_size());

      const uint64_t inputs = vec_size(fn.inputs());
      const uint64_t outputs = vec_size(fn.outputs());
      input_names.clear();
      for (uint64_t i = 0; i < inputs; ++i) {
        const fb::Binding* b = fn.inputs()->Get(static_cast<flatbuffers::uoffset_t>(i));
        if (b && b->name() && b->name()->size() > 0) input_names.emplace_back(b->name()->string_view(), i);
      }
      if (first_duplicate(input_names, &first, &second))
        return corrupt(what, ": inputs ", first, " and ", second, " are both named '",
                       str_or_empty(fn.inputs()->Get(static_cast<flatbuffers::uoffset_t>(second))->name()),
                       "'");
      for (uint64_t i = 0; i < inputs; ++i) {
        const fb::Binding* b = fn.inputs()->Get(static_cast<flatbuffers::uoffset_t>(i));
        const std::string bwhat = cat(what, " input ", i);
        uint32_t slot_index = 0;
        HEXIR_RETURN_IF_ERROR(check_binding_slot(bwhat, b, &slot_index));
        const fb::Slot& s = *m_.slots()->Get(slot_index);
        if (s.storage() != fb::StorageKind::Input || s.index() != i)
          return corrupt(bwhat, " ('", b->name()->c_str(), "'): ", slot_label(m_, slot_index),
                         " is not bound to input ", i);
        if (b->donated_to() >= 0) {
          if (static_cast<uint64_t>(b->donated_to()) >= outputs)
            return corrupt(bwhat, " ('", b->name()->c_str(), "'): donated_to ", b->donated_to(),
                           " out of range (", outputs, " outputs)");
          const fb::Binding* o = fn.outputs()->Get(static_cast<flatbuffers::uoffset_t>(b->donated_to()));
          if (!o || o->slot() >= vec_size(m_.slots()) ||
              !(out_.slot_types[o->slot()] == out_.slot_types[slot_index]))
            return corrupt(bwhat, " ('", b->name()->c_str(), "'): donated to output ", b->donated_to(),
                           " of a different type");
        } else if (b->donated_to() != -1) {
          return corrupt(bwhat, ": invalid donated_to ", b->donated_to());
        } else if (s.usage() == fb::SlotUsage::Donated) {
          return corrupt(bwhat, " ('", b->name()->c_str(),
                         "'): slot is Donated but the input is not donated");
        }
      }
      for (uint64_t j = 0; j < outputs; ++j) {
        const fb::Binding* b = fn.outputs()->Get(static_cast<flatbuffers::uoffset_t>(j));
        const std::string bwhat = cat(what, " output ", j);
        uint32_t slot_index = 0;
        HEXIR_RETURN_IF_ERROR(check_binding_slot(bwhat, b, &slot_index));
        if (b->donated_to() != -1) return corrupt(bwhat, ": outputs cannot be donated");
        const fb::Slot& s = *m_.slots()->Get(slot_index);
        const bool bound_output = s.storage() == fb::StorageKind::Output && s.index() == j;
        // A result computed in place in a donated input lives in that input's buffer.
        const bool in_donated_input = s.storage() == fb::StorageKind::Input && s.index() < inputs &&
                                      fn.inputs()->Get(s.index())->donated_to() == static_cast<int64_t>(j);
        if (!bound_output && !in_donated_input)
          return corrupt(bwhat, ": ", slot_label(m_, slot_index), " is neither bound to output ", j,
                         " nor a donated input");
      }
    }
    // Function bodies must not overlap, so each instruction belongs to at most one.
    std::sort(ranges.begin(), ranges.end());
    owner_.assign(instruction_count, -1);
    for (size_t r = 0; r < ranges.size(); ++r) {
      const fb::Function& fn = *m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(ranges[r].second));
      if (r + 1 < ranges.size() && ranges[r + 1].first < fn.instruction_begin() + fn.instruction_count())
        return corrupt(
            "functions '", str_or_empty(fn.name()), "' and '",
            str_or_empty(
                m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(ranges[r + 1].second))->name()),
            "' have overlapping instruction ranges");
      for (uint64_t k = 0; k < fn.instruction_count(); ++k)
        owner_[fn.instruction_begin() + k] = static_cast<int64_t>(ranges[r].second);
    }
    return ok_status();
  }

  std::string instruction_label(uint64_t k) const {
    if (owner_[k] < 0) return cat("instruction ", k, " (in no function)");
    return cat("instruction ", k, " (function '",
               str_or_empty(m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(owner_[k]))->name()),
               "')");
  }

  Status check_instructions() {
    const uint64_t count = vec_size(m_.instructions());
    std::vector<TensorType> input_types;
    if (dynamic_) workspace_need_.assign(count, 0);
    for (uint64_t k = 0; k < count; ++k) {
      const fb::Instruction& in = *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(k));
      auto fail = [&](auto&&... args) { return corrupt(instruction_label(k), ": ", args...); };
      if (in.opcode() != fb::Opcode::Dispatch) {
        HEXIR_RETURN_IF_ERROR(check_control(k, in, fail));
        continue;
      }
      HEXIR_RETURN_IF_ERROR(check_dispatch(k, in, input_types, fail));
    }
    return ok_status();
  }

  // A Dispatch: a kernel of the catalog that is not a view, its operands and
  // parameters, its outputs of the types the operator gives, its alias bits
  // and its scratch. `input_types`: scratch space for the inputs' types.
  template <typename Fail>
  Status check_dispatch(uint64_t k, const fb::Instruction& in, std::vector<TensorType>& input_types,
                        const Fail& fail) {
    if (in.kernel() >= out_.kernel_ids.size())
      return fail("kernel index ", in.kernel(), " out of range (the module has ", out_.kernel_ids.size(),
                  " kernels)");
    const ops::OpDef& info = ops::op_def(out_.kernel_ids[in.kernel()]);
    if (info.is_view) return fail("'", info.name, "' is a view and cannot be dispatched");
    HEXIR_RETURN_IF_ERROR(check_operands(in, info, fail));
    input_types.clear();
    for (uint32_t i = 0; i < in.input_count(); ++i)
      input_types.push_back(out_.slot_types[m_.operand_pool()->Get(in.operand_begin() + i)]);
    std::span<const int64_t> param_span;
    if (in.param_count() > 0) param_span = {m_.param_pool()->data() + in.param_begin(), in.param_count()};
    Result<std::vector<TensorType>> results =
        ops::infer_result_types(out_.kernel_ids[in.kernel()], input_types, param_span);
    if (!results.ok()) return fail("'", info.name, "': ", results.status().message());
    const uint32_t output_count = in.operand_count() - in.input_count();
    if (results->size() != output_count)
      return fail("'", info.name, "' gives ", results->size(), " results but the instruction has ",
                  output_count, " outputs");
    HEXIR_RETURN_IF_ERROR(check_outputs(in, info, *results, fail));
    HEXIR_RETURN_IF_ERROR(check_extents(in, info, input_types, param_span, *results, fail));
    HEXIR_RETURN_IF_ERROR(check_alias_bits(in, info, fail));
    return check_workspace(k, in, input_types, param_span, fail);
  }

  // Bounded dims: each bounded output's extent is the one the operator gives
  // it (its own count result, or its operands' extent, ops::extent_sources),
  // and an extent operand (compact's) is its operand's extent.
  template <typename Fail>
  Status check_extents(const fb::Instruction& in, const ops::OpDef& info, std::span<const TensorType> input_types,
                       std::span<const int64_t> params, const std::vector<TensorType>& results, const Fail& fail) {
    auto slot = [&](uint32_t operand) { return m_.slots()->Get(m_.operand_pool()->Get(in.operand_begin() + operand)); };
    const std::vector<ops::ExtentSource> sources =
        ops::extent_sources(info.id, input_types, params, results);
    for (size_t j = 0; j < sources.size(); ++j) {
      if (!sources[j].bounded()) continue;
      const int32_t extent = slot(in.input_count() + static_cast<uint32_t>(j))->extent();
      const uint32_t given = sources[j].result >= 0 ? in.input_count() + static_cast<uint32_t>(sources[j].result)
                             : sources[j].operand >= 0 ? static_cast<uint32_t>(sources[j].operand)
                                                       : ~0u;
      const int32_t want = given != ~0u ? static_cast<int32_t>(m_.operand_pool()->Get(in.operand_begin() + given))
                                        : slot(static_cast<uint32_t>(sources[j].inputs[0]))->extent();
      for (int i : sources[j].inputs)
        if (slot(static_cast<uint32_t>(i))->extent() != want)
          return fail("'", info.name, "': the bounded dims of inputs ", sources[j].inputs[0], " and ", i,
                      " have different extents");
      if (extent != want)
        return fail("'", info.name, "': output ", j, "'s extent is slot ", extent, ", expected slot ", want);
    }
    if (info.extent_input >= 0 && static_cast<uint32_t>(info.extent_input) < in.input_count() &&
        m_.operand_pool()->Get(in.operand_begin() + static_cast<uint32_t>(info.extent_input)) !=
            static_cast<uint32_t>(slot(static_cast<uint32_t>(info.extent_of))->extent()))
      return fail("'", info.name, "': input ", info.extent_input, " is not the extent of input ", info.extent_of);
    return ok_status();
  }

  // A Dispatch's operand and parameter ranges, its input count (the
  // operator's, and an output after them), operands in range and on the
  // device, and no alias bit past its inputs.
  template <typename Fail>
  Status check_operands(const fb::Instruction& in, const ops::OpDef& info, const Fail& fail) {
    const uint64_t pool = vec_size(m_.operand_pool());
    const uint64_t params = vec_size(m_.param_pool());
    const uint64_t slots = vec_size(m_.slots());
    if (!range_inside(in.operand_begin(), in.operand_count(), pool))
      return fail("operands [", in.operand_begin(), ", +", in.operand_count(), ") exceed the operand pool (",
                  pool, " entries)");
    if (in.input_count() > in.operand_count() || in.operand_count() == in.input_count())
      return fail(in.operand_count(), " operands with ", in.input_count(), " inputs: need an output");
    if (static_cast<int64_t>(in.input_count()) < info.min_inputs ||
        (info.max_inputs >= 0 && static_cast<int64_t>(in.input_count()) > info.max_inputs))
      return fail("'", info.name, "' takes ", info.min_inputs, "..", info.max_inputs, " inputs, got ",
                  in.input_count());
    for (uint32_t o = 0; o < in.operand_count(); ++o) {
      const uint32_t slot = m_.operand_pool()->Get(in.operand_begin() + o);
      if (slot >= slots)
        return fail("operand ", o, " refers to slot ", slot, ", but the module has ", slots, " slots");
      // Kernels run on the device: host memory is for the copies alone.
      if (is_host(*m_.slots()->Get(slot)))
        return fail("'", info.name, "' ", o < in.input_count() ? "reads" : "writes", " ",
                    slot_label(m_, slot), ", a host-space slot; only Evict and Prefetch touch host memory");
    }
    if (!range_inside(in.param_begin(), in.param_count(), params))
      return fail("parameters [", in.param_begin(), ", +", in.param_count(), ") exceed the parameter pool (",
                  params, " entries)");
    if (in.input_count() < 32 && (in.alias_mask() >> in.input_count()) != 0)
      return fail("alias mask 0x", std::hex, in.alias_mask(), std::dec, " has bits at or above input count ",
                  in.input_count());
    return ok_status();
  }

  // A Dispatch's outputs: writable values (not views, not copies) of the
  // types the operator gives (`results`), in storage of their own: no two
  // share it, and none but output 0 (through alias bits) overlaps an input.
  template <typename Fail>
  Status check_outputs(const fb::Instruction& in, const ops::OpDef& info,
                       const std::vector<TensorType>& results, const Fail& fail) {
    const uint32_t output_count = in.operand_count() - in.input_count();
    for (uint32_t j = 0; j < output_count; ++j) {
      const uint32_t slot = m_.operand_pool()->Get(in.operand_begin() + in.input_count() + j);
      const fb::Slot& s = *m_.slots()->Get(slot);
      if (!slot_is_writable(s.usage()))
        return fail("output ", slot_label(m_, slot), " is read-only (", slot_usage_name(s.usage()), ")");
      if (!(results[j] == out_.slot_types[slot]))
        return fail("'", info.name, "' gives ", results[j].to_string(), " but the output ",
                    slot_label(m_, slot), " is ", out_.slot_types[slot].to_string());
      if (s.view_of() != -1)
        return fail("output ", slot_label(m_, slot), " is a view; views are never written");
      if (s.copy_of() != -1)
        return fail("output ", slot_label(m_, slot), " is a copy; only Evict and Prefetch write copies");
      // Outputs of one instruction are distinct values in distinct storage.
      for (uint32_t j2 = 0; j2 < j; ++j2) {
        const uint32_t other = m_.operand_pool()->Get(in.operand_begin() + in.input_count() + j2);
        // Under free-at-last-use every arena value has a buffer of its own (offsets are all 0).
        const fb::Slot& o = *m_.slots()->Get(other);
        const bool own_buffers = dynamic_ && s.storage() == fb::StorageKind::Arena;
        if (other == slot || (!own_buffers && storage_overlaps(s, o)))
          return fail("outputs ", j2, " and ", j, " share storage");
      }
      // No later output may overlap an input (only output 0 has alias bits).
      if (j == 0) continue;
      for (uint32_t i = 0; i < in.input_count(); ++i) {
        const uint32_t in_index = m_.operand_pool()->Get(in.operand_begin() + i);
        if (dynamic_ ? root_of(in_index) == slot : storage_overlaps(s, *m_.slots()->Get(root_of(in_index))))
          return fail("output ", j, " ", slot_label(m_, slot), " overlaps input ", i, " ",
                      slot_label(m_, in_index));
      }
    }
    return ok_status();
  }

  // A Dispatch's alias bits: each names an input output 0 takes over in
  // place (same storage, size and dtype; not a strided view; an operator
  // that may run in place on it), all the same value; no other input
  // overlaps output 0. A strided input is one the kernel reads with strides.
  template <typename Fail>
  Status check_alias_bits(const fb::Instruction& in, const ops::OpDef& info, const Fail& fail) {
    const uint32_t out_index = m_.operand_pool()->Get(in.operand_begin() + in.input_count());
    const fb::Slot& out = *m_.slots()->Get(out_index);
    // Under free-at-last-use every arena value has its own buffer, except
    // that an in-place result takes over its aliased input's: overlap there
    // means sharing an aliased input's value.
    uint32_t aliased_roots[2] = {UINT32_MAX, UINT32_MAX};
    for (uint32_t i = 0; i < in.input_count() && i < 32; ++i)
      if ((in.alias_mask() >> i) & 1u) {
        const uint32_t root = root_of(m_.operand_pool()->Get(in.operand_begin() + i));
        if (aliased_roots[0] == UINT32_MAX || aliased_roots[0] == root)
          aliased_roots[0] = root;
        else
          aliased_roots[1] = root;
      }
    for (uint32_t i = 0; i < in.input_count(); ++i) {
      const uint32_t in_index = m_.operand_pool()->Get(in.operand_begin() + i);
      const fb::Slot& input = *m_.slots()->Get(in_index);
      const bool aliased = i < 32 && (in.alias_mask() >> i) & 1u;
      if (is_layout_view(input)) {
        if (aliased)
          return fail("alias bit ", i, " set on ", slot_label(m_, in_index),
                      ", a view with an offset or strides (never written in place)");
        if (input.strides() && input.strides()->size() > 0 &&
            (!ops::accepts_strided_layout(
                 out_.kernel_ids[in.kernel()], i, out_.slot_types[in_index].dims,
                 std::vector<int64_t>(input.strides()->begin(), input.strides()->end())) ||
             (ops::is_half(out_.slot_types[in_index].dtype) && ops::widens_halves(out_.kernel_ids[in.kernel()]))))
          return fail("input ", i, " ", slot_label(m_, in_index), " is a strided view but '", info.name,
                      "' reads it only row-major");
      }
      if (aliased) {
        if (!info.may_run_in_place)
          return fail("alias bit ", i, " set but '", info.name, "' cannot run in place");
        if ((info.read_while_writing >> i) & 1u)
          return fail("alias bit ", i, " set but '", info.name, "' reads input ", i, " while it writes");
        if (!same_storage(out, input) || out.byte_size() != input.byte_size())
          return fail("alias bit ", i, " set but the output ", slot_label(m_, out_index),
                      " does not share the storage of input ", slot_label(m_, in_index));
        if (input.dtype() != out.dtype())
          return fail("alias bit ", i, " set but input ", slot_label(m_, in_index), " and the output ",
                      slot_label(m_, out_index), " differ in dtype");
      } else if (dynamic_ && out.storage() == fb::StorageKind::Arena
                     ? input.storage() == fb::StorageKind::Arena &&
                           (root_of(in_index) == aliased_roots[0] || root_of(in_index) == out_index)
                     : storage_overlaps(out, *m_.slots()->Get(root_of(in_index)))) {
        return fail("the output ", slot_label(m_, out_index), " overlaps input ", i, " ",
                    slot_label(m_, in_index), " without an alias bit");
      }
    }
    if (aliased_roots[1] != UINT32_MAX)
      return fail("alias bits name two different values; a result takes over one buffer");
    if (in.alias_mask() != 0 && (in.alias_mask() & info.in_place_inputs) == 0)
      return fail("alias mask 0x", std::hex, in.alias_mask(), " names no input '", info.name,
                  "' may run in place on (0x", info.in_place_inputs, std::dec, ")");
    return ok_status();
  }

  // A control instruction (LoopBegin, LoopNext) on its own: its operands
  // are i64[] scalars [start or trip, trip or counter] -> [counter], the
  // counter an arena slot the VM writes; targets are checked per function
  // (check_loops).
  template <typename Fail>
  Status check_control(uint64_t k, const fb::Instruction& in, const Fail& fail) {
    if (in.opcode() == fb::Opcode::Evict || in.opcode() == fb::Opcode::Prefetch) return check_transfer(k, in, fail);
    Status checked = check_branching(k, in, fail);
    if (!checked.ok()) return checked;
    for (uint32_t o = 0; o < in.operand_count(); ++o) {  // operands verified by now
      const uint32_t slot = m_.operand_pool()->Get(in.operand_begin() + o);
      if (is_host(*m_.slots()->Get(slot)))
        return fail("operand ", o, " ", slot_label(m_, slot), " is a host-space slot; the VM reads and writes "
                    "control scalars on the device");
    }
    return ok_status();
  }

  // Evict (device -> host) and Prefetch (host -> device): one input, one
  // output of the same type in the other memory space, an arena value (not
  // a view) whose copy_of names the value the input holds (the input itself
  // or a copy of it). No parameters, alias bits or scratch.
  template <typename Fail>
  Status check_transfer(uint64_t k, const fb::Instruction& in, const Fail& fail) {
    const bool evict = in.opcode() == fb::Opcode::Evict;
    const char* name = evict ? "Evict" : "Prefetch";
    if (in.operand_count() != 2 || in.input_count() != 1)
      return fail(name, " has ", in.operand_count(), " operands with ", in.input_count(),
                  " inputs; it takes 1 input and 1 output");
    if (!range_inside(in.operand_begin(), in.operand_count(), vec_size(m_.operand_pool())))
      return fail("operands [", in.operand_begin(), ", +", in.operand_count(), ") exceed the operand pool");
    if (in.param_count() != 0) return fail(name, " takes no parameters, got ", in.param_count());
    if (in.alias_mask() != 0) return fail(name, " has alias bits");
    if (vec_size(m_.workspaces()) != 0 && m_.workspaces()->Get(static_cast<flatbuffers::uoffset_t>(k))->size() != 0)
      return fail(name, " has a workspace range");
    const uint64_t slots = vec_size(m_.slots());
    const uint32_t from = m_.operand_pool()->Get(in.operand_begin());
    const uint32_t to = m_.operand_pool()->Get(in.operand_begin() + 1);
    if (from >= slots || to >= slots)
      return fail(name, " refers to slot ", std::max(from, to), ", but the module has ", slots, " slots");
    const fb::Slot& src = *m_.slots()->Get(from);
    const fb::Slot& dst = *m_.slots()->Get(to);
    const char* src_space = evict ? "device" : "host";
    const char* dst_space = evict ? "host" : "device";
    // A Prefetch also reads a streamed constant (a Host constant slot).
    const bool streamed = !evict && src.storage() == fb::StorageKind::Constant && is_host(src);
    if ((src.storage() != fb::StorageKind::Arena && !streamed) || src.view_of() != -1 || is_host(src) != !evict)
      return fail(name, " reads ", slot_label(m_, from), ", which is not a ", src_space, " arena value",
                  evict ? "" : " or a streamed constant");
    if (dst.storage() != fb::StorageKind::Arena || dst.view_of() != -1 || is_host(dst) != evict ||
        dst.usage() != fb::SlotUsage::Transient)
      return fail(name, " writes ", slot_label(m_, to), ", which is not a ", dst_space, " arena value");
    if (!(out_.slot_types[from] == out_.slot_types[to]) || src.byte_size() != dst.byte_size())
      return fail(name, " copies ", slot_label(m_, from), " (", out_.slot_types[from].to_string(), ") into ",
                  slot_label(m_, to), " (", out_.slot_types[to].to_string(), "): the types differ");
    const int64_t held = src.copy_of() >= 0 ? src.copy_of() : static_cast<int64_t>(from);
    if (dst.copy_of() != held)
      return fail(name, " writes ", slot_label(m_, to), " whose copy_of is ", dst.copy_of(), ", but ",
                  slot_label(m_, from), " holds the value of slot ", held);
    return ok_status();
  }

  template <typename Fail>
  Status check_branching(uint64_t k, const fb::Instruction& in, const Fail& fail) {
    if (in.opcode() == fb::Opcode::BranchIfZero || in.opcode() == fb::Opcode::Jump) return check_branch(k, in, fail);
    if (in.opcode() == fb::Opcode::Fail) return check_fail(k, in, fail);
    const bool begin = in.opcode() == fb::Opcode::LoopBegin;
    if (!begin && in.opcode() != fb::Opcode::LoopNext)
      return fail("unknown opcode ", static_cast<int>(in.opcode()));
    const char* name = begin ? "LoopBegin" : "LoopNext";
    const uint64_t slots = vec_size(m_.slots());
    if (in.operand_count() != 3 || in.input_count() != 2)
      return fail(name, " has ", in.operand_count(), " operands with ", in.input_count(),
                  " inputs; it takes 2 inputs and 1 output");
    if (!range_inside(in.operand_begin(), in.operand_count(), vec_size(m_.operand_pool())))
      return fail("operands [", in.operand_begin(), ", +", in.operand_count(), ") exceed the operand pool");
    const uint32_t want_params = begin ? 1 : 2;
    if (in.param_count() != want_params || !range_inside(in.param_begin(), in.param_count(), vec_size(m_.param_pool())))
      return fail(name, " takes ", want_params, " parameters, got ", in.param_count(), " at ", in.param_begin());
    if (in.alias_mask() != 0) return fail(name, " has alias bits");
    if (!begin && m_.param_pool()->Get(in.param_begin() + 1) <= 0)
      return fail("LoopNext step ", m_.param_pool()->Get(in.param_begin() + 1), " is not positive");
    const TensorType counter{DType::kI64, {}};
    for (uint32_t o = 0; o < 3; ++o) {
      const uint32_t slot = m_.operand_pool()->Get(in.operand_begin() + o);
      if (slot >= slots) return fail("operand ", o, " refers to slot ", slot, ", but the module has ", slots, " slots");
      if (!(out_.slot_types[slot] == counter))
        return fail(name, " operand ", o, " ", slot_label(m_, slot), " is ", out_.slot_types[slot].to_string(),
                    "; loop bounds and counters are i64[]");
    }
    const uint32_t out = m_.operand_pool()->Get(in.operand_begin() + 2);
    const fb::Slot& s = *m_.slots()->Get(out);
    if (s.storage() != fb::StorageKind::Arena || s.view_of() != -1)
      return fail(name, " counter ", slot_label(m_, out), " must be an arena value (the VM writes it)");
    if (!begin && m_.operand_pool()->Get(in.operand_begin() + 1) != out)
      return fail("LoopNext reads counter ", slot_label(m_, m_.operand_pool()->Get(in.operand_begin() + 1)),
                  " but writes ", slot_label(m_, out));
    if (vec_size(m_.workspaces()) != 0 && m_.workspaces()->Get(static_cast<flatbuffers::uoffset_t>(k))->size() != 0)
      return fail(name, " has a workspace range");
    return ok_status();
  }

  // BranchIfZero: one bool[] input, no output, one parameter (its else
  // target); Jump: no operands, one parameter. No alias bits, no scratch.
  template <typename Fail>
  Status check_branch(uint64_t k, const fb::Instruction& in, const Fail& fail) {
    const bool branch = in.opcode() == fb::Opcode::BranchIfZero;
    const char* name = branch ? "BranchIfZero" : "Jump";
    const uint32_t operands = branch ? 1 : 0;
    if (in.operand_count() != operands || in.input_count() != operands)
      return fail(name, " has ", in.operand_count(), " operands with ", in.input_count(), " inputs; it takes ",
                  operands, " input(s) and no output");
    if (!range_inside(in.operand_begin(), in.operand_count(), vec_size(m_.operand_pool())))
      return fail("operands [", in.operand_begin(), ", +", in.operand_count(), ") exceed the operand pool");
    if (in.param_count() != 1 || !range_inside(in.param_begin(), 1, vec_size(m_.param_pool())))
      return fail(name, " takes 1 parameter (its target), got ", in.param_count());
    if (in.alias_mask() != 0) return fail(name, " has alias bits");
    if (branch) {
      const uint32_t slot = m_.operand_pool()->Get(in.operand_begin());
      if (slot >= vec_size(m_.slots()))
        return fail("operand 0 refers to slot ", slot, ", but the module has ", vec_size(m_.slots()), " slots");
      if (!(out_.slot_types[slot] == TensorType{DType::kBool, {}}))
        return fail("BranchIfZero condition ", slot_label(m_, slot), " is ", out_.slot_types[slot].to_string(),
                    "; a condition is bool[]");
    }
    if (vec_size(m_.workspaces()) != 0 && m_.workspaces()->Get(static_cast<flatbuffers::uoffset_t>(k))->size() != 0)
      return fail(name, " has a workspace range");
    return ok_status();
  }

  // Fail: no operands, one parameter (its message: an index into
  // Module.messages, each at most kMaxFailMessageBytes). No alias bits, no scratch.
  template <typename Fail>
  Status check_fail(uint64_t k, const fb::Instruction& in, const Fail& fail) {
    if (in.operand_count() != 0 || in.input_count() != 0)
      return fail("Fail has ", in.operand_count(), " operands; it takes none");
    if (in.param_count() != 1 || !range_inside(in.param_begin(), 1, vec_size(m_.param_pool())))
      return fail("Fail takes 1 parameter (its message), got ", in.param_count());
    const int64_t message = m_.param_pool()->Get(in.param_begin());
    if (message < 0 || static_cast<uint64_t>(message) >= vec_size(m_.messages()))
      return fail("Fail message ", message, " out of range (the module has ", vec_size(m_.messages()), " messages)");
    if (m_.messages()->Get(static_cast<flatbuffers::uoffset_t>(message))->size() > kMaxFailMessageBytes)
      return fail("Fail message ", message, " holds ", m_.messages()->Get(static_cast<flatbuffers::uoffset_t>(message))->size(),
                  " bytes, more than ", kMaxFailMessageBytes);
    if (in.alias_mask() != 0) return fail("Fail has alias bits");
    if (vec_size(m_.workspaces()) != 0 && m_.workspaces()->Get(static_cast<flatbuffers::uoffset_t>(k))->size() != 0)
      return fail("Fail has a workspace range");
    return ok_status();
  }

  // Per function, the loops: every LoopBegin is closed by a LoopNext of the
  // same counter and trip slots, loops nest properly, LoopBegin's exit is
  // one past its LoopNext and LoopNext's body one past its LoopBegin. So the
  // VM's program counter never leaves the function or enters a loop except
  // at its top.
  Status check_loops() {
    const uint64_t functions = vec_size(m_.functions());
    out_.loops.assign(functions, {});
    std::vector<uint32_t> open;  // open loops (their LoopBegin)
    out_.branches.assign(functions, {});
    for (uint64_t f = 0; f < functions; ++f) {
      const fb::Function& fn = *m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(f));
      open.clear();
      auto operand = [&](const fb::Instruction& in, uint32_t o) { return m_.operand_pool()->Get(in.operand_begin() + o); };
      auto param = [&](const fb::Instruction& in, uint32_t i) { return m_.param_pool()->Get(in.param_begin() + i); };
      auto at = [&](uint64_t k) -> const fb::Instruction& {
        return *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(uint64_t{fn.instruction_begin()} + k));
      };
      // Open regions, innermost last: where each must close (a loop's
      // LoopNext; an if's Jump while in its then-branch, its end after).
      struct Frame {
        bool is_if;
        uint64_t close;     // loop: its LoopNext; if: its Jump (then), its end (else)
        uint64_t else_at;   // if: first instruction of the else-branch
        uint64_t end;       // if: one past the else-branch
      };
      std::vector<Frame> frames;
      const uint64_t count = fn.instruction_count();
      for (uint64_t k = 0; k <= count; ++k) {
        // Branch boundaries reached: then -> else, else -> closed.
        while (!frames.empty() && frames.back().is_if) {
          Frame& top = frames.back();
          if (k == top.else_at && top.close != top.end) {
            top.close = top.end;
          } else if (k == top.end && top.close == top.end) {
            frames.pop_back();
          } else {
            break;
          }
        }
        if (!frames.empty() && !frames.back().is_if && k > frames.back().close)
          return corrupt(instruction_label(uint64_t{fn.instruction_begin()} + open.back()),
                         ": LoopBegin without a LoopNext at its exit");
        if (k == count) break;
        const uint64_t index = uint64_t{fn.instruction_begin()} + k;
        const fb::Instruction& in = at(k);
        // The innermost region's limit: nothing opened here may reach past it.
        const uint64_t limit = frames.empty() ? count : frames.back().close;
        if (in.opcode() == fb::Opcode::BranchIfZero) {
          const int64_t else_at = param(in, 0);
          if (else_at < static_cast<int64_t>(k) + 2 || static_cast<uint64_t>(else_at) > limit ||
              at(static_cast<uint64_t>(else_at) - 1).opcode() != fb::Opcode::Jump)
            return corrupt(instruction_label(index), ": BranchIfZero to ", else_at,
                           " is not an else-branch after its then-branch's Jump inside the enclosing region (limit ", limit, ")");
          const int64_t end = param(at(static_cast<uint64_t>(else_at) - 1), 0);
          if (end < else_at || static_cast<uint64_t>(end) > (frames.empty() ? count : frames.back().close))
            return corrupt(instruction_label(uint64_t{fn.instruction_begin()} + static_cast<uint64_t>(else_at) - 1),
                           ": Jump to ", end, " does not end its if inside the enclosing region (from ", else_at,
                           " to ", limit, ")");
          if (frames.size() >= kMaxLoopDepth)
            return corrupt(instruction_label(index), ": regions nested more than ", kMaxLoopDepth, " deep");
          frames.push_back({true, static_cast<uint64_t>(else_at) - 1, static_cast<uint64_t>(else_at),
                            static_cast<uint64_t>(end)});
          out_.branches[f].push_back({static_cast<uint32_t>(k), static_cast<uint32_t>(else_at),
                                      static_cast<uint32_t>(end)});
          continue;
        }
        if (in.opcode() == fb::Opcode::Jump) {
          if (frames.empty() || !frames.back().is_if || frames.back().close != k || frames.back().else_at != k + 1)
            return corrupt(instruction_label(index), ": a Jump that does not end a then-branch");
          continue;
        }
        if (in.opcode() == fb::Opcode::LoopBegin) {
          if (frames.size() >= kMaxLoopDepth) return corrupt(instruction_label(index), ": loops nested more than ", kMaxLoopDepth, " deep");
          const int64_t exit = param(in, 0);
          if (exit < static_cast<int64_t>(k) + 2 || static_cast<uint64_t>(exit) - 1 > limit)
            return corrupt(instruction_label(index), ": LoopBegin exits to ", exit, ", outside its enclosing region");
          open.push_back(static_cast<uint32_t>(k));
          frames.push_back({false, static_cast<uint64_t>(exit) - 1, 0, 0});
          continue;
        }
        if (in.opcode() != fb::Opcode::LoopNext) continue;
        if (open.empty()) return corrupt(instruction_label(index), ": LoopNext without a LoopBegin");
        if (frames.back().is_if)
          return corrupt(instruction_label(index), ": LoopNext inside a branch that is still open");
        frames.pop_back();
        const uint32_t b = open.back();
        open.pop_back();
        const fb::Instruction& head =
            *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(uint64_t{fn.instruction_begin()} + b));
        if (param(in, 0) != int64_t{b} + 1)
          return corrupt(instruction_label(index), ": LoopNext continues at ", param(in, 0), ", not at ", b + 1,
                         " (one past its LoopBegin, instruction ", fn.instruction_begin() + b, ")");
        if (param(head, 0) != static_cast<int64_t>(k) + 1)
          return corrupt(instruction_label(uint64_t{fn.instruction_begin()} + b), ": LoopBegin exits to ", param(head, 0),
                         ", not to ", k + 1, " (one past its LoopNext, instruction ", index, ")");
        if (operand(head, 2) != operand(in, 2) || operand(head, 1) != operand(in, 0))
          return corrupt(instruction_label(index), ": LoopNext's counter and trip slots differ from its LoopBegin's");
        out_.loops[f].emplace_back(b, static_cast<uint32_t>(k));
      }
      if (!open.empty())
        return corrupt(instruction_label(uint64_t{fn.instruction_begin()} + open.back()),
                       ": LoopBegin without a LoopNext in its function");
    }
    return ok_status();
  }

  // Scratch: the kernel's need (kernel_workspace_bytes) is covered by the
  // shared workspace, or by the instruction's own arena range, which lies in
  // the arena, aligned, and overlaps none of its operands. Under
  // free-at-last-use the VM allocates it per instruction.
  template <typename Fail>
  Status check_workspace(uint64_t k, const fb::Instruction& in, std::span<const TensorType> input_types,
                         std::span<const int64_t> params, const Fail& fail) {
    const fb::ArenaPlan& plan = *m_.arena();
    const uint64_t need = ops::workspace_bytes(out_.kernel_ids[in.kernel()], input_types, params);
    if (dynamic_) workspace_need_[k] = need;
    if (vec_size(m_.workspaces()) == 0) {
      if (!dynamic_ && need > plan.workspace_size())
        return fail("'", ops::op_def(out_.kernel_ids[in.kernel()]).name, "' needs ", need,
                    " bytes of workspace but the plan's shared workspace has ", plan.workspace_size());
      return ok_status();
    }
    const fb::WorkspaceRange& w = *m_.workspaces()->Get(static_cast<flatbuffers::uoffset_t>(k));
    if (w.size() < need)
      return fail("workspace range of ", w.size(), " bytes, but '",
                  ops::op_def(out_.kernel_ids[in.kernel()]).name, "' needs ", need);
    if (w.size() == 0) return ok_status();
    if (w.offset() % plan.alignment() != 0 || !range_inside(w.offset(), w.size(), plan.size()))
      return fail("workspace [", w.offset(), ", +", w.size(), ") is misaligned or outside the ", plan.size(),
                  "-byte arena");
    for (uint32_t o = 0; o < in.operand_count(); ++o) {
      const fb::Slot& s = *m_.slots()->Get(m_.operand_pool()->Get(in.operand_begin() + o));
      if (s.storage() == fb::StorageKind::Arena && s.byte_size() > 0 &&
          s.arena_offset() < w.offset() + w.size() && w.offset() < s.arena_offset() + s.byte_size())
        return fail("workspace [", w.offset(), ", +", w.size(), ") overlaps operand ", o);
    }
    return ok_status();
  }

  // Checks that depend on the function an instruction belongs to: binding
  // indices of Input/Output slots, donation, and that every output is written.
  Status check_function_bodies() {
    const uint64_t count = vec_size(m_.functions());
    std::vector<bool> written;
    for (uint64_t f = 0; f < count; ++f) {
      const fb::Function& fn = *m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(f));
      const uint64_t inputs = vec_size(fn.inputs());
      const uint64_t outputs = vec_size(fn.outputs());
      written.assign(inputs + outputs, false);  // donated inputs, then outputs
      for (uint64_t k = fn.instruction_begin(); k < fn.instruction_begin() + uint64_t{fn.instruction_count()};
           ++k) {
        const fb::Instruction& in = *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(k));
        for (uint32_t o = 0; o < in.operand_count(); ++o) {
          const uint32_t slot_index = m_.operand_pool()->Get(in.operand_begin() + o);
          const fb::Slot& s = *m_.slots()->Get(slot_index);
          const bool is_output = o >= in.input_count();
          if (s.storage() == fb::StorageKind::Input) {
            if (s.index() >= inputs)
              return corrupt(instruction_label(k), ": operand ", o, " ", slot_label(m_, slot_index),
                             " is bound to input ", s.index(), " but the function has ", inputs, " inputs");
            const fb::Binding& b = *fn.inputs()->Get(s.index());
            // A view reads inside its base (verified): the base must fit.
            if (m_.slots()->Get(root_of(slot_index))->byte_size() > m_.slots()->Get(b.slot())->byte_size())
              return corrupt(instruction_label(k), ": operand ", o, " ", slot_label(m_, slot_index),
                             " is larger than input ", s.index());
            if (s.usage() == fb::SlotUsage::Donated && b.donated_to() < 0)
              return corrupt(instruction_label(k), ": operand ", o, " ", slot_label(m_, slot_index),
                             " writes input ", s.index(), ", which is not donated");
            if (is_output) written[s.index()] = true;
          } else if (s.storage() == fb::StorageKind::Output) {
            if (s.index() >= outputs)
              return corrupt(instruction_label(k), ": operand ", o, " ", slot_label(m_, slot_index),
                             " is bound to output ", s.index(), " but the function has ", outputs,
                             " outputs");
            const fb::Binding& b = *fn.outputs()->Get(s.index());
            if (m_.slots()->Get(root_of(slot_index))->byte_size() > m_.slots()->Get(b.slot())->byte_size())
              return corrupt(instruction_label(k), ": operand ", o, " ", slot_label(m_, slot_index),
                             " is larger than output ", s.index());
            if (is_output) written[inputs + s.index()] = true;
          }
        }
      }
      for (uint64_t j = 0; j < outputs; ++j) {
        const fb::Slot& s =
            *m_.slots()->Get(fn.outputs()->Get(static_cast<flatbuffers::uoffset_t>(j))->slot());
        const bool done = s.storage() == fb::StorageKind::Output ? written[inputs + j] : written[s.index()];
        if (!done)
          return corrupt("function '", str_or_empty(fn.name()), "': output ", j, " is never written");
      }
    }
    return ok_status();
  }

  // Recomputations (Slot.recomputes, rematerialization): a recomputed slot
  // and the slot it computes again are arena values, not views, of one type;
  // the original is no recomputation itself. In its function the recomputed
  // slot is written by a Dispatch with one output that runs the kernel and
  // parameters of the original's (earlier) writer on the same values: each
  // input is the same slot, a view of it of the same type, or a
  // recomputation of it. So the VM computes the same bits again, and a file
  // cannot pass off a different value as a recomputation.
  Status check_recomputations() {
    const uint64_t count = vec_size(m_.slots());
    bool any = false;
    for (uint64_t i = 0; i < count; ++i) {
      const fb::Slot& s = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(i));
      const int32_t r = s.recomputes();
      if (r == -1) continue;
      any = true;
      const std::string what = slot_label(m_, i);
      if (r < 0 || static_cast<uint64_t>(r) >= count || static_cast<uint64_t>(r) == i)
        return corrupt(what, ": recomputes ", r, ", which is not another slot");
      const fb::Slot& t = *m_.slots()->Get(static_cast<flatbuffers::uoffset_t>(r));
      const std::string original = slot_label(m_, static_cast<uint64_t>(r));
      if (s.view_of() != -1) return corrupt(what, ": a view cannot be a recomputation");
      if (t.view_of() != -1) return corrupt(what, ": recomputes ", original, ", a view");
      if (t.recomputes() != -1) return corrupt(what, ": recomputes ", original, ", itself a recomputation");
      if (s.storage() != fb::StorageKind::Arena || t.storage() != fb::StorageKind::Arena)
        return corrupt(what, ": recomputes ", original, " but both must be arena values");
      if (!(out_.slot_types[i] == out_.slot_types[static_cast<size_t>(r)]) || s.byte_size() != t.byte_size())
        return corrupt(what, ": recomputes ", original, " but has another type or size");
    }
    if (!any) return ok_status();
    // The value a slot holds: a view's viewed slot, a recomputation's original.
    auto value_of = [&](uint32_t slot) {
      uint32_t root = root_of(slot);
      const int32_t c = m_.slots()->Get(root)->copy_of();
      if (c >= 0) root = static_cast<uint32_t>(c);  // verified: not a copy or a view
      const int32_t r = m_.slots()->Get(root)->recomputes();
      return r >= 0 ? static_cast<uint32_t>(r) : root;
    };
    std::vector<int64_t> writer(count, -1);  // per slot: the first instruction of the function at hand writing it
    std::vector<uint32_t> written;
    for (uint64_t f = 0; f < vec_size(m_.functions()); ++f) {
      const fb::Function& fn = *m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(f));
      const uint64_t begin = fn.instruction_begin(), end = begin + uint64_t{fn.instruction_count()};
      for (uint32_t slot : written) writer[slot] = -1;
      written.clear();
      for (uint64_t k = begin; k < end; ++k) {
        const fb::Instruction& in = *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(k));
        auto operand = [&](const fb::Instruction& i, uint32_t o) { return m_.operand_pool()->Get(i.operand_begin() + o); };
        for (uint32_t o = in.input_count(); o < in.operand_count(); ++o) {
          const uint32_t slot = operand(in, o);
          if (writer[slot] < 0) {
            writer[slot] = static_cast<int64_t>(k);
            written.push_back(slot);
          }
          const int32_t r = m_.slots()->Get(slot)->recomputes();
          if (r < 0) continue;
          auto fail = [&](auto&&... args) {
            return corrupt(instruction_label(k), ": writes ", slot_label(m_, slot), ", a recomputation of ",
                           slot_label(m_, static_cast<uint64_t>(r)), ", but ", args...);
          };
          if (in.opcode() != fb::Opcode::Dispatch || in.operand_count() - in.input_count() != 1)
            return fail("it is not a dispatch with one output");
          const int64_t w = writer[static_cast<size_t>(r)];
          if (w < 0 || w >= static_cast<int64_t>(k)) return fail("no earlier instruction of its function writes that");
          const fb::Instruction& first = *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(w));
          if (first.opcode() != fb::Opcode::Dispatch || first.kernel() != in.kernel() ||
              first.input_count() != in.input_count() || first.operand_count() != in.operand_count())
            return fail("instruction ", w, " wrote it with another kernel or operand count");
          if (first.param_count() != in.param_count())
            return fail("instruction ", w, " wrote it with other parameters");
          for (uint32_t p = 0; p < in.param_count(); ++p)
            if (m_.param_pool()->Get(first.param_begin() + p) != m_.param_pool()->Get(in.param_begin() + p))
              return fail("instruction ", w, " wrote it with other parameters");
          for (uint32_t i = 0; i < in.input_count(); ++i) {
            const uint32_t a = operand(in, i), b = operand(first, i);
            if (value_of(a) != value_of(b) || !(out_.slot_types[a] == out_.slot_types[b]))
              return fail("its input ", i, " ", slot_label(m_, a), " does not hold the value instruction ", w,
                          " read there (", slot_label(m_, b), ")");
          }
        }
      }
    }
    return ok_status();
  }

  // Aliasing and liveness against the instruction order, per function, with
  // one pass for a last-read table and one for the checks (linear):
  //  - a value (a slot that is not a view; a view's reads count for the value
  //    it views) in arena or output storage is written before it is read;
  //  - an alias bit names a value that no later instruction reads, that is not
  //    a constant, a non-donated input or a function output (that output would
  //    be overwritten);
  //  - a write into a caller's buffer (donated input, output) comes after the
  //    last read of the value it replaces there, unless it is that value's
  //    in-place result; an output computed in a donated input has no buffer of
  //    its own (the VM binds the input's there), so both are one buffer;
  //  - last_use, where recorded (always under free-at-last-use), is the last
  //    read (or the write of a value nothing reads); under free-at-last-use a
  //    value is written once;
  //  - then the overlap proof over the arena (prove_no_overlap).
  Status check_aliasing() {
    const uint64_t slot_count = vec_size(m_.slots());
    defined_depth_.assign(slot_count, SIZE_MAX);
    then_written_.assign(slot_count, 0);
    access_.last_read.assign(slot_count, -1);
    access_.def.assign(slot_count, -1);
    access_.last_write.assign(slot_count, -1);
    access_.output_of.assign(slot_count, -1);
    access_.touched.clear();
    for (uint64_t f = 0; f < vec_size(m_.functions()); ++f) {
      const fb::Function& fn = *m_.functions()->Get(static_cast<flatbuffers::uoffset_t>(f));
      HEXIR_RETURN_IF_ERROR(record_accesses(f, fn));
      bind_buffers(fn);
      HEXIR_RETURN_IF_ERROR(check_accesses_in_order(fn));
      HEXIR_RETURN_IF_ERROR(check_last_uses(fn));
      HEXIR_RETURN_IF_ERROR(
          check_arena_lifetimes(fn, access_.touched, access_.def, access_.last_read, access_.last_write));
      Accesses& a = access_;
      for (uint32_t r : a.touched) a.last_read[r] = a.def[r] = a.last_write[r] = a.output_of[r] = -1;
      for (uint64_t j = 0; j < vec_size(fn.outputs()); ++j)
        a.output_of[root_of(fn.outputs()->Get(static_cast<flatbuffers::uoffset_t>(j))->slot())] = -1;
      a.touched.clear();
    }
    return ok_status();
  }

  uint32_t operand_slot(const fb::Instruction& in, uint32_t o) const {
    return m_.operand_pool()->Get(in.operand_begin() + o);
  }

  // The first pass over function f: each value's first write, last read and
  // last write (a read of a view is a read of its root). A value written
  // before a loop and read or written inside it lives around the back edge,
  // to the loop's LoopNext (the compiler's rule, liveness.cc compute_uses;
  // inner loops first).
  Status record_accesses(uint64_t f, const fb::Function& fn) {
    Accesses& a = access_;
    const uint64_t begin = fn.instruction_begin(), count = fn.instruction_count();
    for (uint64_t k = 0; k < count; ++k) {
      const fb::Instruction& in = *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(begin + k));
      for (uint32_t i = 0; i < in.input_count(); ++i) {
        const uint32_t r = root_of(operand_slot(in, i));
        if (a.last_read[r] < 0 && a.def[r] < 0) a.touched.push_back(r);
        a.last_read[r] = static_cast<int64_t>(k);
      }
      for (uint32_t o = in.input_count(); o < in.operand_count(); ++o) {
        const uint32_t r = operand_slot(in, o);
        if (a.last_read[r] < 0 && a.def[r] < 0) a.touched.push_back(r);
        if (a.def[r] < 0) {
          a.def[r] = static_cast<int64_t>(k);
        } else if (dynamic_ && out_.loops[f].empty()) {
          return corrupt(instruction_label(begin + k), ": ", slot_label(m_, r),
                         " is written a second time (instruction ", begin + a.def[r],
                         " wrote it) in a free-at-last-use plan");
        }
        a.last_write[r] = static_cast<int64_t>(k);
      }
    }
    for (const auto& [loop_begin, loop_next] : out_.loops[f])
      for (uint32_t r : a.touched) {
        if (a.def[r] < 0 || a.def[r] >= loop_begin || std::max(a.last_read[r], a.last_write[r]) < loop_begin)
          continue;
        a.last_read[r] = std::max<int64_t>(a.last_read[r], loop_next);
      }
    return ok_status();
  }

  // The caller's buffers of a function: which value each input binding and
  // each output holds at the start (an output computed in a donated input
  // shares that input's buffer), and the output each returned value is.
  void bind_buffers(const fb::Function& fn) {
    Accesses& a = access_;
    const uint64_t inputs = vec_size(fn.inputs()), outputs = vec_size(fn.outputs());
    for (uint64_t j = 0; j < outputs; ++j)
      a.output_of[root_of(fn.outputs()->Get(static_cast<flatbuffers::uoffset_t>(j))->slot())] =
          static_cast<int64_t>(j);
    a.occupant.assign(inputs + outputs, -1);
    for (uint64_t b = 0; b < inputs; ++b)
      a.occupant[b] = root_of(fn.inputs()->Get(static_cast<flatbuffers::uoffset_t>(b))->slot());
    a.buffer_of_output.resize(outputs);
    for (uint64_t j = 0; j < outputs; ++j) {
      const fb::Slot& s = *m_.slots()->Get(fn.outputs()->Get(static_cast<flatbuffers::uoffset_t>(j))->slot());
      a.buffer_of_output[j] = s.storage() == fb::StorageKind::Input ? s.index() : inputs + j;
    }
  }

  // The second pass over a function, in instruction order: reads of values
  // written on every path to them, alias bits, writes into the caller's
  // buffers. Which values are written on every path to the instruction at
  // hand: one written inside a loop is defined only until the loop ends (the
  // loop may run zero times), unless it was written before the loop.
  Status check_accesses_in_order(const fb::Function& fn) {
    const uint64_t begin = fn.instruction_begin(), count = fn.instruction_count();
    size_t depth = 0;
    for (std::vector<uint32_t>& list : defined_at_depth_) list.clear();
    if (defined_at_depth_.size() < kMaxLoopDepth + 1) defined_at_depth_.resize(kMaxLoopDepth + 1);
    if_frames_.clear();
    path_ended_.assign(kMaxLoopDepth + 2, false);
    for (uint64_t k = 0; k < count; ++k) {
      const fb::Instruction& in = *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(begin + k));
      auto fail = [&](auto&&... args) { return corrupt(instruction_label(begin + k), ": ", args...); };
      close_branches(k, depth);
      int64_t aliased_root = -1;
      HEXIR_RETURN_IF_ERROR(check_reads(fn, in, k, depth, &aliased_root, fail));
      HEXIR_RETURN_IF_ERROR(check_buffer_writes(fn, in, k, aliased_root, fail));
      for (uint32_t o = in.input_count(); o < in.operand_count(); ++o) {
        const uint32_t r = operand_slot(in, o);
        if (defined_depth_[r] <= depth) continue;
        defined_depth_[r] = depth;
        defined_at_depth_[depth].push_back(r);
      }
      enter_or_leave_region(in, begin, depth);
    }
    for (std::vector<uint32_t>& list : defined_at_depth_) {
      for (uint32_t r : list) defined_depth_[r] = SIZE_MAX;
      list.clear();
    }
    return ok_status();
  }

  // Branch boundaries at instruction k (innermost first): a value written in
  // a branch is defined after the if only when the other branch writes it
  // too. A branch that ended in a Fail reaches neither the end of the if nor
  // anything after it: only the other branch's writes count.
  void close_branches(uint64_t k, size_t& depth) {
    while (!if_frames_.empty()) {
      IfFrame& top = if_frames_.back();
      if (!top.in_else && k == top.else_begin) {
        top.then_ended = path_ended_[depth];
        path_ended_[depth] = false;
        for (uint32_t r : defined_at_depth_[depth]) {
          defined_depth_[r] = SIZE_MAX;
          if (top.then_ended) continue;
          then_written_[r] = top.id;
          top.then_defs.push_back(r);
        }
        defined_at_depth_[depth].clear();
        top.in_else = true;
      } else if (top.in_else && k == top.end) {
        const bool else_ended = path_ended_[depth];
        path_ended_[depth] = false;
        auto promote = [&](uint32_t r) {
          if (defined_depth_[r] <= depth - 1) return;
          defined_depth_[r] = depth - 1;
          defined_at_depth_[depth - 1].push_back(r);
        };
        for (uint32_t r : defined_at_depth_[depth]) {
          defined_depth_[r] = SIZE_MAX;
          if (!else_ended && (top.then_ended || then_written_[r] == top.id)) promote(r);
        }
        defined_at_depth_[depth].clear();
        if (else_ended && !top.then_ended)
          for (uint32_t r : top.then_defs) promote(r);
        if (else_ended && top.then_ended) path_ended_[depth - 1] = true;
        --depth;
        if_frames_.pop_back();
      } else {
        break;
      }
    }
  }

  // The inputs of instruction k: each read value is written on every path to
  // it (or a constant, or a bound input); an alias bit overwrites a value no
  // later instruction reads, not a non-donated input nor an output's value.
  // `aliased_root` receives the value the alias bits name (-1: none).
  template <typename Fail>
  Status check_reads(const fb::Function& fn, const fb::Instruction& in, uint64_t k, size_t depth,
                     int64_t* aliased_root, const Fail& fail) {
    const Accesses& a = access_;
    const uint64_t begin = fn.instruction_begin(), inputs = vec_size(fn.inputs());
    for (uint32_t i = 0; i < in.input_count(); ++i) {
      const uint32_t slot = operand_slot(in, i), r = root_of(slot);
      const fb::Slot& s = *m_.slots()->Get(r);
      const bool bound_input = s.storage() == fb::StorageKind::Input && s.index() < inputs &&
                               root_of(fn.inputs()->Get(s.index())->slot()) == r;
      if (s.storage() != fb::StorageKind::Constant && !bound_input && defined_depth_[r] > depth)
        return fail(
            "input ", i, " ", slot_label(m_, slot),
            a.def[r] >= 0 && a.def[r] < static_cast<int64_t>(k)
                ? " is read where it may not have been written (it is written only inside a loop that "
                  "ends before this instruction)"
                : " is read before any instruction writes it");
      if (i >= 32 || !((in.alias_mask() >> i) & 1u)) continue;
      *aliased_root = r;
      // Output 0 is this very value, updated in place (a loop-carried
      // value): later reads read the update.
      if (r == operand_slot(in, in.input_count())) continue;
      if (s.storage() == fb::StorageKind::Input && fn.inputs()->Get(s.index())->donated_to() < 0)
        return fail("alias bit ", i, " writes input ", s.index(), " ('",
                    str_or_empty(fn.inputs()->Get(s.index())->name()), "'), which is not donated");
      if (a.last_read[r] > static_cast<int64_t>(k))
        return fail("alias bit ", i, " overwrites ", slot_label(m_, slot), ", which instruction ",
                    begin + a.last_read[r], " still reads");
      if (a.output_of[r] >= 0)
        return fail("alias bit ", i, " overwrites ", slot_label(m_, slot), ", the value of output ",
                    a.output_of[r]);
    }
    return ok_status();
  }

  // The outputs of instruction k written into a caller's buffer (an input
  // binding or an output): the value there before is read no more, unless
  // this is its in-place result (output 0 over `aliased_root`).
  template <typename Fail>
  Status check_buffer_writes(const fb::Function& fn, const fb::Instruction& in, uint64_t k,
                             int64_t aliased_root, const Fail& fail) {
    Accesses& a = access_;
    const uint64_t begin = fn.instruction_begin();
    const uint64_t inputs = vec_size(fn.inputs()), outputs = vec_size(fn.outputs());
    for (uint32_t o = in.input_count(); o < in.operand_count(); ++o) {
      const uint32_t out_slot = operand_slot(in, o);
      const fb::Slot& out = *m_.slots()->Get(out_slot);
      int64_t* holder = nullptr;
      if (out.storage() == fb::StorageKind::Input && out.index() < inputs) holder = &a.occupant[out.index()];
      if (out.storage() == fb::StorageKind::Output && out.index() < outputs)
        holder = &a.occupant[a.buffer_of_output[out.index()]];
      if (!holder) continue;
      const int64_t previous = *holder;
      const int64_t aliased = o == in.input_count() ? aliased_root : -1;  // alias bits: output 0
      if (previous >= 0 && previous != out_slot && previous != aliased &&
          a.last_read[static_cast<size_t>(previous)] >= static_cast<int64_t>(k))
        return fail("writes the ", storage_kind_name(out.storage()), " buffer ", out.index(), " while ",
                    slot_label(m_, static_cast<uint64_t>(previous)), " in it is still read by instruction ",
                    begin + a.last_read[static_cast<size_t>(previous)]);
      *holder = out_slot;
    }
    return ok_status();
  }

  // Regions after instruction `in`: an if or a loop opens one (an if's frame
  // names where its else branch begins and where it ends), a LoopNext closes
  // its loop's, a Fail ends the path through the region at hand.
  void enter_or_leave_region(const fb::Instruction& in, uint64_t begin, size_t& depth) {
    if (in.opcode() == fb::Opcode::BranchIfZero) {
      // Verified by check_loops: the Jump before the else-branch names the end.
      const uint64_t else_begin = static_cast<uint64_t>(m_.param_pool()->Get(in.param_begin()));
      const fb::Instruction& jump =
          *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(begin + else_begin - 1));
      if_frames_.push_back({else_begin,
                            static_cast<uint64_t>(m_.param_pool()->Get(jump.param_begin())),
                            ++if_count_,
                            false,
                            false,
                            {}});
      path_ended_[++depth] = false;
    } else if (in.opcode() == fb::Opcode::LoopBegin) {
      path_ended_[++depth] = false;
    } else if (in.opcode() == fb::Opcode::LoopNext) {
      // The loop may run no iteration: a body ending in a Fail does not end the path.
      for (uint32_t r : defined_at_depth_[depth]) defined_depth_[r] = SIZE_MAX;
      defined_at_depth_[depth].clear();
      path_ended_[depth] = false;
      --depth;
    } else if (in.opcode() == fb::Opcode::Fail) {
      path_ended_[depth] = true;
    }
  }

  // last_use, where recorded (always under free-at-last-use): the last read,
  // or the write of a value nothing reads.
  Status check_last_uses(const fb::Function& fn) {
    const Accesses& a = access_;
    for (uint32_t r : a.touched) {
      const fb::Slot& s = *m_.slots()->Get(r);
      if (s.storage() == fb::StorageKind::Arena && a.def[r] >= 0 && (dynamic_ || s.last_use() != -1)) {
        const int64_t expected = a.last_read[r] >= 0 ? a.last_read[r] : a.def[r];
        if (s.last_use() != expected)
          return corrupt("function '", str_or_empty(fn.name()), "': ", slot_label(m_, r), " has last_use ",
                         s.last_use(), " but its last use is instruction ", expected);
      }
    }
    return ok_status();
  }

  // The overlap proof of one function's static arena plan: every arena value
  // (views folded into it) is live from its first write to its last read or
  // write; a sweep over the instructions keeps the live values' byte ranges in
  // an ordered map, disjoint by construction, and checks each value entering
  // it (and each instruction's workspace range) against its neighbours only:
  // O(n log n) in the function's values and instructions. At an instruction,
  // its inputs are still live while its outputs are written, so an output may
  // share bytes with an input only through an alias bit (output 0 then takes
  // over the input value's range, which must end there). Under
  // free-at-last-use the VM gives each value a buffer of its own; the same
  // sweep then only sums live bytes for dynamic_peak_bytes.
  Status check_arena_lifetimes(const fb::Function& fn, const std::vector<uint32_t>& touched,
                               const std::vector<int64_t>& def, const std::vector<int64_t>& last_read,
                               const std::vector<int64_t>& last_write) {
    if (!dynamic_ && !options_.prove_no_overlap) return ok_status();
    const uint64_t begin = fn.instruction_begin(), count = fn.instruction_count();
    auto end_of = [&](uint32_t r) { return std::max(last_read[r], last_write[r]); };
    auto is_value = [&](uint32_t r) {
      const fb::Slot& s = *m_.slots()->Get(r);
      return s.storage() == fb::StorageKind::Arena && s.byte_size() > 0 && def[r] >= 0;
    };
    // Values by the instruction after which they die (counting sort).
    ends_begin_.assign(count + 1, 0);
    for (uint32_t r : touched)
      if (is_value(r)) ++ends_begin_[static_cast<size_t>(end_of(r)) + 1];
    for (uint64_t k = 0; k < count; ++k) ends_begin_[k + 1] += ends_begin_[k];
    ends_.resize(ends_begin_[count]);
    {
      std::vector<uint32_t>& fill = ends_fill_;
      fill.assign(ends_begin_.begin(), ends_begin_.end() - 1);
      for (uint32_t r : touched)
        if (is_value(r)) ends_[fill[static_cast<size_t>(end_of(r))]++] = r;
    }
    struct Live {
      uint64_t end;
      uint32_t value;
    };
    // Per memory space (device, host): arena offset -> [offset, end) of a live value.
    std::map<uint64_t, Live> live_in[2];
    auto live_of = [&](uint32_t r) -> std::map<uint64_t, Live>& { return live_in[is_host(*m_.slots()->Get(r)) ? 1 : 0]; };
    unsigned __int128 live_bytes = 0;  // free-at-last-use: sizes are verified, their sum may not fit
    auto label = [&](uint32_t r) {
      const fb::Slot& s = *m_.slots()->Get(r);
      return cat(slot_label(m_, r), " at [", s.arena_offset(), ", +", s.byte_size(),
                 "), which is live from instruction ", begin + def[r], " to ", begin + end_of(r));
    };
    // The live value whose bytes meet [offset, offset + size), or null.
    auto collision = [&](std::map<uint64_t, Live>& live, uint64_t offset, uint64_t size) -> const Live* {
      auto next = live.lower_bound(offset);
      if (next != live.end() && next->first < offset + size) return &next->second;
      if (next != live.begin() && std::prev(next)->second.end > offset) return &std::prev(next)->second;
      return nullptr;
    };
    const bool shared_workspace = vec_size(m_.workspaces()) == 0;
    for (uint64_t k = 0; k < count; ++k) {
      const fb::Instruction& in = *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(begin + k));
      auto fail = [&](auto&&... args) { return corrupt(instruction_label(begin + k), ": ", args...); };
      auto operand = [&](uint32_t o) { return m_.operand_pool()->Get(in.operand_begin() + o); };
      // Control instructions have no output (and no alias bits): nothing to hand over.
      const bool has_output = in.operand_count() > in.input_count();
      const uint32_t out0 = has_output ? operand(in.input_count()) : 0;
      for (uint32_t i = 0; has_output && i < in.input_count() && i < 32; ++i) {
        if (!((in.alias_mask() >> i) & 1u)) continue;
        const uint32_t r = root_of(operand(i));
        // Output 0 takes over r's bytes (the same range: checked per
        // instruction), so r must not be written again after.
        if (!is_value(r) || !is_value(out0) || def[out0] != static_cast<int64_t>(k) || r == out0) break;
        if (last_write[r] > static_cast<int64_t>(k))
          return fail("alias bit ", i, " hands the bytes of ", slot_label(m_, r), " to ",
                      slot_label(m_, out0), ", but instruction ", begin + last_write[r], " writes ",
                      slot_label(m_, r), " again");
        if (dynamic_) {
          live_bytes -= m_.slots()->Get(r)->byte_size();
        } else {
          std::map<uint64_t, Live>& live = live_of(r);
          auto it = live.find(m_.slots()->Get(r)->arena_offset());
          if (it != live.end() && it->second.value == r) live.erase(it);
        }
        break;
      }
      for (uint32_t o = in.input_count(); o < in.operand_count(); ++o) {
        const uint32_t r = operand(o);  // outputs are never views
        if (!is_value(r) || def[r] != static_cast<int64_t>(k)) continue;
        const fb::Slot& s = *m_.slots()->Get(r);
        if (dynamic_) {
          live_bytes += s.byte_size();
          continue;
        }
        std::map<uint64_t, Live>& live = live_of(r);
        if (const Live* other = collision(live, s.arena_offset(), s.byte_size()))
          return fail(slot_label(m_, r), " at ", is_host(s) ? "host arena [" : "arena [", s.arena_offset(), ", +",
                      s.byte_size(), ") overlaps ", label(other->value));
        live.emplace(s.arena_offset(), Live{s.arena_offset() + s.byte_size(), r});
      }
      if (dynamic_) {
        const unsigned __int128 held = live_bytes + workspace_need_[begin + k];
        out_.dynamic_peak_bytes =
            std::max(out_.dynamic_peak_bytes, held > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(held));
      } else if (!shared_workspace) {
        const fb::WorkspaceRange& w = *m_.workspaces()->Get(static_cast<flatbuffers::uoffset_t>(begin + k));
        if (w.size() > 0)
          if (const Live* other = collision(live_in[0], w.offset(), w.size()))
            return fail("workspace [", w.offset(), ", +", w.size(), ") overlaps ", label(other->value));
      }
      for (uint32_t e = ends_begin_[k]; e < ends_begin_[k + 1]; ++e) {
        const uint32_t r = ends_[e];
        const fb::Slot& s = *m_.slots()->Get(r);
        if (dynamic_) {
          // Handed over to an in-place result (already subtracted) or released.
          if (!handed_over(begin + k, r)) live_bytes -= s.byte_size();
          continue;
        }
        std::map<uint64_t, Live>& live = live_of(r);
        auto it = live.find(s.arena_offset());
        if (it != live.end() && it->second.value == r) live.erase(it);
      }
    }
    return ok_status();
  }

  // Whether instruction `k`'s output 0 takes over value r's buffer in place.
  bool handed_over(uint64_t k, uint32_t r) const {
    const fb::Instruction& in = *m_.instructions()->Get(static_cast<flatbuffers::uoffset_t>(k));
    if (in.operand_count() <= in.input_count()) return false;  // a control instruction: no output
    const uint32_t out0 = m_.operand_pool()->Get(in.operand_begin() + in.input_count());
    if (m_.slots()->Get(out0)->storage() != fb::StorageKind::Arena || out0 == r) return false;
    for (uint32_t i = 0; i < in.input_count() && i < 32; ++i)
      if (((in.alias_mask() >> i) & 1u) && root_of(m_.operand_pool()->Get(in.operand_begin() + i)) == r)
        return true;
    return false;
  }

  VerifiedModule& out_;
  const fb::Module& m_;
  const VerifyOptions& options_;
  std::vector<int64_t> owner_;            // per instruction: owning function or -1
  std::vector<uint64_t> workspace_need_;  // free-at-last-use: per instruction, its kernel's scratch
  std::vector<uint32_t> ends_begin_, ends_, ends_fill_;  // check_arena_lifetimes: values by end (CSR)
  // check_aliasing: per slot, the loop depth its first write on every path
  // happened at (SIZE_MAX: not written yet); per depth, the slots defined there.
  std::vector<size_t> defined_depth_;
  std::vector<std::vector<uint32_t>> defined_at_depth_;
  // check_aliasing, per function: per slot (reset through `touched`, the
  // slots with an entry) its first write, last read and last write
  // (instruction indices in the function) and the output whose value it is;
  // per input binding, then per output, the value in that buffer (occupant),
  // and per output the index of its buffer there.
  struct Accesses {
    std::vector<int64_t> last_read, def, last_write, output_of;
    std::vector<uint32_t> touched;
    std::vector<int64_t> occupant;
    std::vector<uint64_t> buffer_of_output;
  };
  Accesses access_;
  // The ifs open at the instruction at hand; per slot, the last if whose
  // then-branch wrote it (ids count up over the whole module: never reset).
  struct IfFrame {
    uint64_t else_begin, end, id;
    bool in_else;
    bool then_ended;                  // the then-branch ended in a Fail
    std::vector<uint32_t> then_defs;  // what the then-branch wrote (when it did not)
  };
  std::vector<bool> path_ended_;      // per depth: the path through the region at hand ended in a Fail
  std::vector<IfFrame> if_frames_;
  std::vector<uint64_t> then_written_;
  uint64_t if_count_ = 0;
  bool dynamic_ = false;                                 // free-at-last-use: no static arena offsets
};

}  // namespace

const char* instruction_name(const VerifiedModule& module, const fb::Instruction& instruction) {
  switch (instruction.opcode()) {
    case fb::Opcode::Dispatch:
      return ops::op_def(module.kernel_ids[instruction.kernel()]).name;
    case fb::Opcode::LoopBegin:
      return "loop_begin";
    case fb::Opcode::LoopNext:
      return "loop_next";
    case fb::Opcode::BranchIfZero:
      return "branch_if_zero";
    case fb::Opcode::Jump:
      return "jump";
    case fb::Opcode::Fail:
      return "fail";
    case fb::Opcode::Evict:
      return "evict";
    case fb::Opcode::Prefetch:
      return "prefetch";
  }
  return "unknown";
}

const char* section_kind_name(fb::SectionKind kind) {
  switch (kind) {
    case fb::SectionKind::Rodata:
      return "rodata";
    case fb::SectionKind::DeviceCode:
      return "device_code";
  }
  return "unknown";
}

const char* storage_kind_name(fb::StorageKind kind) {
  switch (kind) {
    case fb::StorageKind::Arena:
      return "arena";
    case fb::StorageKind::Constant:
      return "constant";
    case fb::StorageKind::Input:
      return "input";
    case fb::StorageKind::Output:
      return "output";
    case fb::StorageKind::Extent:
      return "extent";
  }
  return "unknown";
}

const char* slot_usage_name(fb::SlotUsage usage) {
  switch (usage) {
    case fb::SlotUsage::Transient:
      return "transient";
    case fb::SlotUsage::Constant:
      return "constant";
    case fb::SlotUsage::ExternalInput:
      return "external_input";
    case fb::SlotUsage::ExternalOutput:
      return "external_output";
    case fb::SlotUsage::Donated:
      return "donated";
    case fb::SlotUsage::Staging:
      return "staging";
  }
  return "unknown";
}

const char* plan_strategy_name(fb::PlanStrategy strategy) {
  switch (strategy) {
    case fb::PlanStrategy::Naive:
      return "naive";
    case fb::PlanStrategy::Arena:
      return "arena";
    case fb::PlanStrategy::FreeAtLastUse:
      return "free-at-last-use";
  }
  return "unknown";
}

Result<VerifiedModule> verify_executable(std::span<const uint8_t> file, const VerifyOptions& options) {
  VerifiedModule out;
  out.file = file;
  if (file.size() < sizeof(Prelude))
    return corrupt("file is ", file.size(), " bytes, smaller than the ", sizeof(Prelude), "-byte prelude");
  if (reinterpret_cast<uintptr_t>(file.data()) % 8 != 0)
    return invalid_argument("executable bytes must start at an 8-byte aligned address");
  std::memcpy(&out.prelude, file.data(), sizeof(Prelude));
  const Prelude& p = out.prelude;
  if (std::memcmp(p.magic, kMagic, sizeof(kMagic)) != 0) return corrupt("not a Hexir executable (bad magic)");
  if (p.format_version < kMinReadableFormatVersion || p.format_version > kFormatVersion)
    return unimplemented(cat("compiled for format version ", p.format_version, "; this runtime reads ",
                             kMinReadableFormatVersion, "..", kFormatVersion, "; recompile"));
  if ((p.flags & ~uint32_t{kFlagDataChecksum}) != 0)
    return corrupt("unknown prelude flags 0x", std::hex, p.flags);
  if (p.metadata_offset < sizeof(Prelude) || p.metadata_offset % 8 != 0)
    return corrupt("metadata offset ", p.metadata_offset, " is not 8-aligned after the prelude");
  if (p.metadata_size == 0 || p.metadata_size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return corrupt("metadata size ", p.metadata_size, " is out of range");
  if (!range_inside(p.metadata_offset, p.metadata_size, file.size()))
    return corrupt("metadata [", p.metadata_offset, ", +", p.metadata_size, ") extends past the end of the ",
                   file.size(), "-byte file (truncated?)");
  // Copied before anything looks at it: the file (a mapping of something
  // another process may rewrite, or caller memory) can change after this
  // point, the verified copy cannot. The metadata is small (no weights).
  {
    const uint64_t words = (p.metadata_size + 7) / 8;
    std::shared_ptr<uint64_t[]> copy(new (std::nothrow) uint64_t[words]);
    if (!copy) return resource_exhausted(cat("cannot allocate ", p.metadata_size, " bytes for the metadata"));
    copy[words - 1] = 0;
    std::memcpy(copy.get(), file.data() + p.metadata_offset, p.metadata_size);
    out.metadata = {reinterpret_cast<const uint8_t*>(copy.get()), static_cast<size_t>(p.metadata_size)};
    out.owned_metadata = std::move(copy);
  }
  if (checksum64(out.metadata) != p.metadata_checksum) return corrupt("metadata checksum mismatch");
  if (p.data_offset % kPageSize != 0) return corrupt("data offset ", p.data_offset, " is not page aligned");
  if (p.data_offset < p.metadata_offset + p.metadata_size)
    return corrupt("data region at ", p.data_offset, " overlaps the metadata");
  // An executable without data sections need not be padded up to data_offset.
  if (p.data_size != 0 && !range_inside(p.data_offset, p.data_size, file.size()))
    return corrupt("data region [", p.data_offset, ", +", p.data_size, ") extends past the end of the ",
                   file.size(), "-byte file (truncated?)");
  if (p.flags & kFlagDataChecksum) {
    if (options.verify_data_checksum && p.data_size != 0 &&
        checksum64(file.subspan(p.data_offset, p.data_size)) != p.data_checksum)
      return corrupt("data checksum mismatch");
  } else if (p.data_checksum != 0) {
    return corrupt("data checksum set without the data checksum flag");
  }

  flatbuffers::Verifier::Options fb_options;
  fb_options.max_tables = 1u << 24;
  flatbuffers::Verifier verifier(out.metadata.data(), out.metadata.size(), fb_options);
  if (!fb::VerifyModuleBuffer(verifier)) return corrupt("metadata is not a valid HXE1 flatbuffer");
  out.module = fb::GetModule(out.metadata.data());

  ModuleVerifier semantic(out, *out.module, options);
  HEXIR_RETURN_IF_ERROR(semantic.run());
  return out;
}

}  // namespace hexir::format
