#include "hexir/inspect/function_plan.h"

#include "hexir/ops/cost.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace hexir::inspect {
namespace {

using format::VerifiedModule;

// One pass over a function's instructions: who writes and reads each slot.
struct Scan {
  const fb::Module* m = nullptr;
  const fb::Function* fn = nullptr;
  std::vector<int64_t> written;              // per slot: first writer (function-relative), -1
  std::vector<int64_t> first_read;           // per slot: first reader, -1
  std::vector<int64_t> last_read;            // per slot: last reader (through loops: their end), -1
  std::vector<int64_t> last_written;         // per slot: last writer, -1
  std::vector<bool> referenced;              // operand or binding of the function
  std::vector<bool> in_place;                // written by an instruction with an alias bit
  std::vector<bool> input_binding;           // the slot of one of the function's input bindings
  std::vector<int64_t> first_constant_slot;  // per constant: lowest slot index naming it (module-wide)
  uint64_t in_place_instructions = 0;
};

Scan scan_function(const VerifiedModule& v, size_t function) {
  Scan sc;
  sc.m = v.module;
  const fb::Module& m = *v.module;
  sc.fn = m.functions()->Get(static_cast<flatbuffers::uoffset_t>(function));
  const size_t slots = m.slots() ? m.slots()->size() : 0;
  sc.written.assign(slots, -1);
  sc.first_read.assign(slots, -1);
  sc.last_read.assign(slots, -1);
  sc.last_written.assign(slots, -1);
  sc.referenced.assign(slots, false);
  sc.in_place.assign(slots, false);
  sc.input_binding.assign(slots, false);
  sc.first_constant_slot.assign(m.constants() ? m.constants()->size() : 0, -1);
  for (size_t s = 0; s < slots; ++s) {
    const fb::Slot& slot = *m.slots()->Get(static_cast<flatbuffers::uoffset_t>(s));
    if (slot.storage() == fb::StorageKind::Constant && sc.first_constant_slot[slot.index()] < 0)
      sc.first_constant_slot[slot.index()] = static_cast<int64_t>(s);
  }
  if (sc.fn->inputs())
    for (const fb::Binding* b : *sc.fn->inputs())
      sc.input_binding[b->slot()] = sc.referenced[b->slot()] = true;
  if (sc.fn->outputs())
    for (const fb::Binding* b : *sc.fn->outputs()) sc.referenced[b->slot()] = true;
  for (uint32_t k = 0; k < sc.fn->instruction_count(); ++k) {
    const fb::Instruction& in = *m.instructions()->Get(sc.fn->instruction_begin() + k);
    const int64_t t = k;
    for (uint32_t i = 0; i < in.input_count(); ++i) {
      const uint32_t s = m.operand_pool()->Get(in.operand_begin() + i);
      sc.referenced[s] = true;
      if (sc.first_read[s] < 0) sc.first_read[s] = t;
      sc.last_read[s] = t;
    }
    if (in.operand_count() <= in.input_count()) continue;  // a control instruction: no output
    const uint32_t out = m.operand_pool()->Get(in.operand_begin() + in.input_count());
    sc.referenced[out] = true;
    if (sc.written[out] < 0) sc.written[out] = t;
    sc.last_written[out] = t;
    if (in.alias_mask() != 0) {
      sc.in_place[out] = true;
      ++sc.in_place_instructions;
    }
  }
  // A slot written before a loop and used inside it lives to the loop's end
  // (the verifier's rule; inner loops first).
  if (function < v.loops.size())
    for (const auto& [begin, next] : v.loops[function])
      for (size_t s = 0; s < slots; ++s)
        if (sc.written[s] >= 0 && sc.written[s] < begin &&
            std::max(sc.last_read[s], sc.last_written[s]) >= static_cast<int64_t>(begin))
          sc.last_read[s] = std::max<int64_t>(sc.last_read[s], next);
  return sc;
}

// A slot that shares another slot's storage without being written: a view
// (Slot.view_of names it; files that leave it -1 are recognised by storage).
bool is_view(const Scan& sc, uint32_t s) {
  if (!sc.referenced[s] || sc.written[s] >= 0) return false;
  const fb::Slot& slot = *sc.m->slots()->Get(s);
  if (slot.view_of() >= 0) return true;
  switch (slot.storage()) {
    case fb::StorageKind::Arena:
    case fb::StorageKind::Output:
    case fb::StorageKind::Extent:
      return true;  // arena, output and extent storage only ever hold what an instruction wrote
    case fb::StorageKind::Input:
      return !sc.input_binding[s];
    case fb::StorageKind::Constant:
      return sc.first_constant_slot[slot.index()] != static_cast<int64_t>(s);
  }
  return false;
}

std::string bytes(uint64_t v) { return std::to_string(v) + " B"; }

}  // namespace

std::string slot_name(const fb::Module& m, uint32_t slot) {
  const fb::Slot& s = *m.slots()->Get(slot);
  std::string name = s.name() ? s.name()->str() : std::string();
  const char sigil = s.storage() == fb::StorageKind::Constant ? '@' : '%';
  if (name.empty()) return std::string(1, sigil) + "s" + std::to_string(slot);
  if (name[0] == '%' || name[0] == '@') return name;
  return sigil + name;
}

double percent_over(uint64_t size, uint64_t lower_bound) {
  if (lower_bound == 0) return 0.0;
  return 100.0 * (static_cast<double>(size) - static_cast<double>(lower_bound)) /
         static_cast<double>(lower_bound);
}

FunctionStats function_stats(const VerifiedModule& v, size_t function) {
  const Scan sc = scan_function(v, function);
  FunctionStats stats;
  stats.arena_size = sc.fn->arena_size();
  stats.lower_bound = sc.fn->lower_bound();
  stats.percent_over = percent_over(stats.arena_size, stats.lower_bound);
  stats.in_place_aliases = sc.in_place_instructions;
  std::set<uint32_t> constants;
  for (uint32_t s = 0; s < sc.referenced.size(); ++s) {
    if (!sc.referenced[s]) continue;
    if (is_view(sc, s)) ++stats.view_aliases;
    const fb::Slot& slot = *v.module->slots()->Get(s);
    if (slot.view_of() >= 0 && (slot.view_offset() != 0 || (slot.strides() && slot.strides()->size() > 0)))
      ++stats.strided_views;
    if (slot.storage() == fb::StorageKind::Constant) constants.insert(slot.index());
  }
  const fb::Module& m = *v.module;
  stats.host_arena_size = sc.fn->host_arena_size();
  stats.host_lower_bound = sc.fn->host_lower_bound();
  for (uint32_t k = 0; k < sc.fn->instruction_count(); ++k) {
    const fb::Instruction& in = *m.instructions()->Get(sc.fn->instruction_begin() + k);
    if (in.opcode() == fb::Opcode::Evict || in.opcode() == fb::Opcode::Prefetch) {  // verified: 1 in, 1 out
      const fb::Slot& from = *m.slots()->Get(m.operand_pool()->Get(in.operand_begin()));
      const uint64_t size = from.byte_size();
      const bool evict = in.opcode() == fb::Opcode::Evict;
      ++(evict ? stats.evictions : stats.prefetches);
      uint64_t& total = evict ? stats.bytes_evicted : stats.bytes_prefetched;
      total = size > UINT64_MAX - total ? UINT64_MAX : total + size;
      if (from.storage() == fb::StorageKind::Constant) {  // a streamed weight
        ++stats.weight_prefetches;
        stats.bytes_weights_prefetched =
            size > UINT64_MAX - stats.bytes_weights_prefetched ? UINT64_MAX : stats.bytes_weights_prefetched + size;
      }
      continue;
    }
    if (in.opcode() != fb::Opcode::Dispatch || in.operand_count() <= in.input_count()) continue;
    const ops::OpId op = v.kernel_ids[in.kernel()];
    std::vector<int64_t> params;
    for (uint32_t p = 0; p < in.param_count(); ++p) params.push_back(m.param_pool()->Get(in.param_begin() + p));
    if (op == ops::OpId::kConv2d && ops::conv2d_channels_last(params)) ++stats.channels_last_convolutions;
    if (op == ops::OpId::kConv2d && ops::conv2d_winograd(params)) ++stats.winograd_convolutions;
    if (op == ops::OpId::kConv2d && ops::conv2d_winograd_tile(params) == 4) ++stats.winograd4_convolutions;
    if (op == ops::OpId::kTranspose || op == ops::OpId::kSlice || op == ops::OpId::kExpand || op == ops::OpId::kCopy)
      for (uint32_t o = in.input_count(); o < in.operand_count(); ++o)
        stats.copied_bytes += m.slots()->Get(m.operand_pool()->Get(in.operand_begin() + o))->byte_size();
    if (m.slots()->Get(m.operand_pool()->Get(in.operand_begin() + in.input_count()))->recomputes() < 0) continue;
    std::vector<TensorType> inputs, outputs;
    for (uint32_t o = 0; o < in.operand_count(); ++o)
      (o < in.input_count() ? inputs : outputs).push_back(v.slot_types[m.operand_pool()->Get(in.operand_begin() + o)]);
    ++stats.recomputed_instructions;
    const uint64_t flops = ops::flop_estimate(op, inputs, outputs, params);
    stats.recomputed_flops = flops > UINT64_MAX - stats.recomputed_flops ? UINT64_MAX : stats.recomputed_flops + flops;
  }
  for (uint32_t c : constants) {
    const fb::Constant& constant = *v.module->constants()->Get(c);
    if (constant.storage() == fb::ConstantStorage::Fill) {
      stats.constant_bytes_filled += constant.byte_size();
    } else {
      stats.constant_bytes_stored += constant.byte_size();
      if (v.module->sections()->Get(constant.section())->memory_space() == fb::MemorySpace::Host)
        stats.constant_bytes_streamed += constant.byte_size();
    }
  }
  return stats;
}

std::vector<StorageValue> function_storage_values(const VerifiedModule& v, size_t function) {
  const Scan sc = scan_function(v, function);
  const fb::Module& m = *v.module;
  std::vector<StorageValue> values;
  // Written slots by storage location: arena offset, or donated input index
  // (kept apart by the flag); (writer, value index) in order of the writer.
  // Places: 0 the arena, 1 a donated input, 2 the host arena.
  std::map<std::pair<int, uint64_t>, std::vector<std::pair<int64_t, size_t>>> by_place;
  std::vector<uint32_t> order;
  for (uint32_t s = 0; s < sc.written.size(); ++s)
    if (sc.written[s] >= 0) order.push_back(s);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return sc.written[a] < sc.written[b]; });
  for (int place_kind : {0, 1, 2}) {
    const bool donated = place_kind == 1;
    for (uint32_t s : order) {
      const fb::Slot& slot = *m.slots()->Get(s);
      const bool host = slot.memory_space() == fb::MemorySpace::Host;
      const bool arena = slot.storage() == fb::StorageKind::Arena;
      const bool in_input = slot.storage() == fb::StorageKind::Input;
      if (place_kind == 0 ? !arena || host : place_kind == 1 ? !in_input : !host) continue;
      StorageValue value;
      value.slot = s;
      value.name = slot_name(m, s);
      value.first = sc.written[s];
      value.last = std::max(sc.written[s], sc.last_read[s]);
      value.offset = arena ? slot.arena_offset() : 0;
      value.size = slot.byte_size();
      value.in_place = sc.in_place[s];
      value.donated = donated;
      value.host = host;
      value.prefetched = !host && slot.copy_of() >= 0;
      value.input = in_input ? slot.index() : 0;
      by_place[{place_kind, arena ? slot.arena_offset() : slot.index()}].emplace_back(value.first,
                                                                                      values.size());
      values.push_back(std::move(value));
    }
  }
  // Fold each view into the value it views: the slot view_of names when it is
  // a value here, else the latest write of the same place before the view is
  // first read.
  std::vector<int64_t> value_of_slot(sc.written.size(), -1);
  for (size_t i = 0; i < values.size(); ++i) value_of_slot[values[i].slot] = static_cast<int64_t>(i);
  for (uint32_t s = 0; s < sc.referenced.size(); ++s) {
    if (!is_view(sc, s) || sc.first_read[s] < 0) continue;
    const fb::Slot& slot = *m.slots()->Get(s);
    if (slot.view_of() >= 0 && value_of_slot[static_cast<uint32_t>(slot.view_of())] >= 0) {
      StorageValue& r = values[static_cast<size_t>(value_of_slot[static_cast<uint32_t>(slot.view_of())])];
      r.last = std::max(r.last, sc.last_read[s]);
      ++r.views;
      continue;
    }
    std::pair<int, uint64_t> place;
    if (slot.storage() == fb::StorageKind::Arena)
      place = {slot.memory_space() == fb::MemorySpace::Host ? 2 : 0, slot.arena_offset()};
    else if (slot.storage() == fb::StorageKind::Input)
      place = {1, slot.index()};
    else
      continue;
    auto it = by_place.find(place);
    if (it == by_place.end()) continue;
    const StorageValue* root = nullptr;
    for (const auto& [writer, index] : it->second)
      if (writer < sc.first_read[s]) root = &values[index];
    if (!root) continue;
    StorageValue& r = values[static_cast<size_t>(root - values.data())];
    r.last = std::max(r.last, sc.last_read[s]);
    ++r.views;
  }
  return values;
}

PlanSvgInput function_plan_picture(const VerifiedModule& v, size_t function) {
  const fb::Module& m = *v.module;
  const fb::Function& fn = *m.functions()->Get(static_cast<flatbuffers::uoffset_t>(function));
  const std::vector<StorageValue> values = function_storage_values(v, function);
  PlanSvgInput picture;
  picture.lower_bound = fn.lower_bound();
  picture.arena_size = fn.arena_size();
  picture.x_label = "instruction (index in @" + std::string(fn.name()->c_str()) + ")";
  picture.y_label = "arena offset (bytes)";
  char over[32];
  std::snprintf(over, sizeof over, "%.1f%%", percent_over(fn.arena_size(), fn.lower_bound()));
  picture.title = "@" + std::string(fn.name()->c_str()) + " of module '" +
                  (m.name() ? m.name()->str() : std::string()) + "': arena " + bytes(fn.arena_size()) +
                  ", lower bound " + bytes(fn.lower_bound()) + " (" + over + " over)";
  if (m.arena() && m.arena()->strategy() == fb::PlanStrategy::FreeAtLastUse)
    picture.title += "; free-at-last-use: no static offsets";
  if (function < v.loops.size())
    for (const auto& [begin, next] : v.loops[function])
      picture.spans.push_back({"loop [" + std::to_string(begin) + ", " + std::to_string(next) + "]",
                               static_cast<int64_t>(begin), static_cast<int64_t>(next) + 1});

  // Donated-buffer values are caller memory: drawn in rows above the arena.
  uint64_t top = fn.arena_size();
  for (const StorageValue& value : values)
    if (!value.donated && !value.host) top = std::max(top, value.offset + value.size);
  std::map<uint32_t, uint64_t> row_size;  // donated input -> its largest value
  for (const StorageValue& value : values)
    if (value.donated) row_size[value.input] = std::max(row_size[value.input], value.size);
  std::map<uint32_t, uint64_t> row_offset;
  uint64_t next = top + std::max<uint64_t>(64, top / 16);
  for (const auto& [input, size] : row_size) {
    row_offset[input] = next;
    next += size + std::max<uint64_t>(64, top / 32);
  }
  // The host arena (offloaded values) above everything, from its own base.
  const uint64_t host_base = next + (row_size.empty() ? 0 : std::max<uint64_t>(64, top / 16));
  if (fn.host_arena_size() > 0) {
    picture.title += "; host arena " + bytes(fn.host_arena_size()) + " (drawn from " + bytes(host_base) + " up)";
    picture.host_base = host_base;
    picture.host_size = fn.host_arena_size();
  }

  for (const StorageValue& value : values) {
    PlanSvgRect rect;
    rect.label = value.name;
    rect.lower = value.first;
    rect.upper = value.last + 1;
    rect.size = value.size;
    rect.offset = value.donated ? row_offset[value.input] : value.host ? host_base + value.offset : value.offset;
    if (value.in_place) rect.flags |= kPlanSvgAliased;
    if (value.donated) rect.flags |= kPlanSvgDonated;
    if (value.views > 0) rect.flags |= kPlanSvgView;
    if (value.host) rect.flags |= kPlanSvgHost;
    if (value.prefetched) rect.flags |= kPlanSvgCopy;
    if (value.host) rect.note = "host arena @" + std::to_string(value.offset);
    if (value.donated)
      rect.note = "donated input " + std::to_string(value.input) + "'s buffer (caller memory, not arena)";
    if (value.views > 0)
      rect.note += (rect.note.empty() ? "" : "; ") + std::to_string(value.views) + " view(s)";
    picture.rects.push_back(std::move(rect));
  }
  return picture;
}

std::vector<CompressedWeight> compressed_weights(const VerifiedModule& v) {
  const fb::Module& m = *v.module;
  std::map<uint32_t, CompressedWeight> found;  // by weight constant
  auto constant_of = [&](uint32_t slot) -> int64_t {
    const fb::Slot& s = *m.slots()->Get(slot);
    return s.storage() == fb::StorageKind::Constant ? static_cast<int64_t>(s.index()) : -1;
  };
  auto add = [&](int64_t weight, int64_t scale, bool matmul) {
    if (weight < 0 || scale < 0) return;
    const TensorType& w = v.constant_types[static_cast<size_t>(weight)];
    const TensorType& sc = v.constant_types[static_cast<size_t>(scale)];
    if (w.rank() != 2) return;
    CompressedWeight& c = found[static_cast<uint32_t>(weight)];
    c.weight = static_cast<uint32_t>(weight);
    c.scale = static_cast<uint32_t>(scale);
    const bool int4 = w.dtype == DType::kU8 && sc.dtype == DType::kF16 && sc.rank() == 2 && sc.dims[1] > 0;
    c.rows = w.dims[0];
    c.columns = int4 ? w.dims[1] * 2 : w.dims[1];
    c.format = int4 ? "int4 group " + std::to_string(c.columns / sc.dims[1]) : "int8 per row";
    c.stored_bytes = m.constants()->Get(c.weight)->byte_size() + m.constants()->Get(c.scale)->byte_size();
    (matmul ? c.matmul : c.gather) = true;
  };
  // Gathers by index slot: the table (i8/u8) and its scales (f32/f16) are picked by the same indices.
  std::map<uint32_t, std::pair<int64_t, int64_t>> gathered;
  for (uint32_t i = 0; i < (m.instructions() ? m.instructions()->size() : 0); ++i) {
    const fb::Instruction& in = *m.instructions()->Get(i);
    if (in.opcode() != fb::Opcode::Dispatch || in.input_count() < 2) continue;
    const ops::OpId op = v.kernel_ids[in.kernel()];
    auto operand = [&](uint32_t o) { return m.operand_pool()->Get(in.operand_begin() + o); };
    if ((op == ops::OpId::kQuantizedMatmul || op == ops::OpId::kInt4Matmul) && in.input_count() >= 3)
      add(constant_of(operand(1)), constant_of(operand(2)), true);
    if (op == ops::OpId::kGather) {
      const int64_t table = constant_of(operand(0));
      if (table < 0) continue;
      const DType dtype = v.constant_types[static_cast<size_t>(table)].dtype;
      auto& [weight, scale] = gathered.try_emplace(operand(1), -1, -1).first->second;
      if (dtype == DType::kI8 || dtype == DType::kU8) weight = table;
      if (dtype == DType::kF32 || dtype == DType::kF16) scale = table;
    }
  }
  for (const auto& [indices, pair] : gathered) add(pair.first, pair.second, false);
  std::vector<CompressedWeight> out;
  for (auto& [constant, c] : found) out.push_back(std::move(c));
  return out;
}

}  // namespace hexir::inspect
