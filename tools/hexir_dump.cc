// hexir-dump FILE.hxe [--json] [--max-decompressed-bytes N] [--max-fill-bytes N] [--max-arena-bytes N]:
// verifies an executable (and refuses it past the VM's load limits), then prints what it
// holds: prelude, sections, constants, kernels, functions (with memory
// statistics), slots, a disassembly and the arena plan (text, or one JSON
// object with --json).
// hexir-dump FILE.hxe --plan-svg OUT.svg [--function NAME]: draws one
// function's arena (time across, offset up) instead.
#include <cinttypes>
#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "hexir/base/mapped_file.h"
#include "hexir/format/limits.h"
#include "hexir/format/sections.h"
#include "hexir/format/verifier.h"
#include "hexir/inspect/function_plan.h"

namespace hexir {
namespace {

using format::VerifiedModule;

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
  return buf;
}

std::string hex_bytes(const flatbuffers::Vector<uint8_t>* bytes) {
  std::string out;
  char buf[4];
  for (uint8_t b : *bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    out += buf;
  }
  return out;
}

const char* str(const flatbuffers::String* s) { return s ? s->c_str() : ""; }

template <typename T>
uint32_t count(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

std::string binary(uint32_t v, uint32_t width) {
  std::string out = "0b";
  if (width == 0) width = 1;
  for (uint32_t i = std::min<uint32_t>(width, 32); i-- > 0;) out += ((v >> i) & 1u) ? '1' : '0';
  return out;
}

std::string params_text(const fb::Module& m, const fb::Instruction& in) {
  if (in.param_count() == 0) return "";
  std::string out = " {";
  for (uint32_t p = 0; p < in.param_count(); ++p) {
    if (p) out += ", ";
    out += std::to_string(m.param_pool()->Get(in.param_begin() + p));
  }
  return out + "}";
}

std::string instruction_text(const VerifiedModule& v, const fb::Instruction& in) {
  const fb::Module& m = *v.module;
  if (in.opcode() == fb::Opcode::Fail)  // its parameter: the message (verified)
    return std::string("fail \"") +
           m.messages()->Get(static_cast<flatbuffers::uoffset_t>(m.param_pool()->Get(in.param_begin())))->str() + "\"";
  std::string results, types;
  for (uint32_t o = in.input_count(); o < in.operand_count(); ++o) {
    const uint32_t slot = m.operand_pool()->Get(in.operand_begin() + o);
    const char* sep = o > in.input_count() ? ", " : "";
    results += sep + inspect::slot_name(m, slot);
    types += sep + v.slot_types[slot].to_string();
  }
  std::string text = results + " = " + format::instruction_name(v, in);
  for (uint32_t i = 0; i < in.input_count(); ++i)
    text += (i ? ", " : " ") + inspect::slot_name(m, m.operand_pool()->Get(in.operand_begin() + i));
  text += params_text(m, in);
  text += " : " + types;
  text += "  ; alias=" + binary(in.alias_mask(), in.input_count());
  // A matmul whose b is read as stored [n, k]: the transpose it stands for was never copied.
  if (in.opcode() == fb::Opcode::Dispatch && v.kernel_ids[in.kernel()] == ops::OpId::kMatmul &&
      in.param_count() > 0 && m.param_pool()->Get(in.param_begin()) == 1)
    text += " b transposed (read in place)";
  if (in.opcode() == fb::Opcode::Evict || in.opcode() == fb::Opcode::Prefetch)
    text += in.opcode() == fb::Opcode::Evict ? " device -> host" : " host -> device";
  if (in.opcode() == fb::Opcode::Dispatch && in.operand_count() > in.input_count()) {
    const int32_t original = m.slots()->Get(m.operand_pool()->Get(in.operand_begin() + in.input_count()))->recomputes();
    if (original >= 0) text += " recomputed " + inspect::slot_name(m, static_cast<uint32_t>(original));
  }
  return text;
}

std::string storage_text(const fb::Slot& s) {
  // A strided view: where it lies in the slot it views (docs/views.md).
  if (s.view_of() >= 0 && (s.view_offset() != 0 || (s.strides() && s.strides()->size() > 0))) {
    std::string text = "view of #" + std::to_string(s.view_of()) + " +" + std::to_string(s.view_offset());
    if (s.strides() && s.strides()->size() > 0) {
      text += " strides [";
      for (uint32_t d = 0; d < s.strides()->size(); ++d) text += (d ? "," : "") + std::to_string(s.strides()->Get(d));
      text += "]";
    }
    return text;
  }
  switch (s.storage()) {
    case fb::StorageKind::Arena:
      if (s.memory_space() == fb::MemorySpace::Host) return "host arena @" + std::to_string(s.arena_offset());
      return "arena @" + std::to_string(s.arena_offset());
    case fb::StorageKind::Constant:
      if (s.memory_space() == fb::MemorySpace::Host) return "streamed constant " + std::to_string(s.index());
      return "constant " + std::to_string(s.index());
    case fb::StorageKind::Input:
      return "input " + std::to_string(s.index());
    case fb::StorageKind::Output:
      return "output " + std::to_string(s.index());
    case fb::StorageKind::Extent:
      return "extent " + std::to_string(s.index());
  }
  return "?";
}

void print_text(const std::string& path, const VerifiedModule& v) {
  const fb::Module& m = *v.module;
  const format::Prelude& p = v.prelude;
  std::printf("%s: module '%s' (producer '%s')\n", path.c_str(), str(m.name()), str(m.producer()));
  std::printf("\nprelude:\n  format version %u, flags 0x%x%s\n", p.format_version, p.flags,
              (p.flags & format::kFlagDataChecksum) ? " (data checksum)" : "");
  std::printf("  metadata [%" PRIu64 ", +%" PRIu64 ") checksum %s\n", p.metadata_offset, p.metadata_size,
              hex(p.metadata_checksum).c_str());
  std::printf("  data     [%" PRIu64 ", +%" PRIu64 ") checksum %s\n", p.data_offset, p.data_size,
              (p.flags & format::kFlagDataChecksum) ? hex(p.data_checksum).c_str() : "none");

  std::printf("\nsections (%u):\n", count(m.sections()));
  for (uint32_t i = 0; i < count(m.sections()); ++i) {
    const fb::Section& s = *m.sections()->Get(i);
    std::printf("  #%u %-11s offset %" PRIu64 " size %" PRIu64 " raw %" PRIu64 " align %u %s", i,
                format::section_kind_name(s.kind()), s.offset(), s.size(), s.raw_size(), s.alignment(),
                s.compression() == fb::Compression::None ? "uncompressed" : "zstd");
    if (s.compression() == fb::Compression::Zstd && s.raw_size() > 0)
      std::printf(" (stored %.1f%% of raw)",
                  100.0 * static_cast<double>(s.size()) / static_cast<double>(s.raw_size()));
    if (s.memory_space() == fb::MemorySpace::Host) std::printf(" host (streamed weights, never uploaded)");
    std::printf("\n");
  }

  std::printf("\nconstants (%u):\n", count(m.constants()));
  for (uint32_t i = 0; i < count(m.constants()); ++i) {
    const fb::Constant& c = *m.constants()->Get(i);
    std::printf("  #%u @%s : %s, %" PRIu64 " bytes, ", i, str(c.name()),
                v.constant_types[i].to_string().c_str(), c.byte_size());
    if (c.storage() == fb::ConstantStorage::Fill)
      std::printf("fill pattern %s x %" PRIu64 "\n", hex_bytes(c.fill_pattern()).c_str(), c.fill_count());
    else
      std::printf("rodata section %u [%" PRIu64 ", +%" PRIu64 ")\n", c.section(), c.offset(), c.byte_size());
  }

  const std::vector<inspect::CompressedWeight> compressed = inspect::compressed_weights(v);
  if (!compressed.empty()) {
    uint64_t stored = 0, as_f32 = 0;
    std::printf("\ncompressed weights (%zu):\n", compressed.size());
    for (const inspect::CompressedWeight& c : compressed) {
      const uint64_t f32_bytes = static_cast<uint64_t>(c.rows) * static_cast<uint64_t>(c.columns) * 4;
      std::printf("  @%s [%lld, %lld] %s: %" PRIu64 " bytes with @%s (f32: %" PRIu64 "), read by %s\n",
                  str(m.constants()->Get(c.weight)->name()), static_cast<long long>(c.rows),
                  static_cast<long long>(c.columns), c.format.c_str(), c.stored_bytes,
                  str(m.constants()->Get(c.scale)->name()), f32_bytes,
                  c.matmul && c.gather ? "matmul and gather" : c.matmul ? "matmul" : "gather");
      stored += c.stored_bytes;
      as_f32 += f32_bytes;
    }
    std::printf("  together %" PRIu64 " bytes (f32: %" PRIu64 ", %.3fx)\n", stored, as_f32,
                as_f32 ? static_cast<double>(stored) / static_cast<double>(as_f32) : 0.0);
  }

  std::printf("\nkernels (%u):\n", count(m.kernels()));
  for (uint32_t i = 0; i < count(m.kernels()); ++i) {
    const fb::Kernel& k = *m.kernels()->Get(i);
    std::printf("  #%u %s", i, str(k.name()));
    if (count(k.code()) == 0) std::printf(" (builtin)");
    for (uint32_t c = 0; c < count(k.code()); ++c) {
      const fb::KernelCode& code = *k.code()->Get(c);
      if (code.section() < 0)
        std::printf(" [%s: builtin]", str(code.target()));
      else
        std::printf(" [%s: section %d +%" PRIu64 " size %" PRIu64 " entry '%s']", str(code.target()),
                    code.section(), code.offset(), code.size(), str(code.entry()));
    }
    std::printf("\n");
  }

  std::printf("\nfunctions (%u):\n", count(m.functions()));
  for (uint32_t f = 0; f < count(m.functions()); ++f) {
    const fb::Function& fn = *m.functions()->Get(f);
    std::printf("  %s(", str(fn.name()));
    for (uint32_t i = 0; i < count(fn.inputs()); ++i) {
      const fb::Binding& b = *fn.inputs()->Get(i);
      std::printf("%s%%%s: %s%s", i ? ", " : "", str(b.name()), v.slot_types[b.slot()].to_string().c_str(),
                  b.donated_to() >= 0 ? (" donate -> output " + std::to_string(b.donated_to())).c_str() : "");
    }
    std::printf(") -> (");
    for (uint32_t j = 0; j < count(fn.outputs()); ++j) {
      const fb::Binding& b = *fn.outputs()->Get(j);
      std::printf("%s%s", j ? ", " : "", v.slot_types[b.slot()].to_string().c_str());
    }
    std::printf(")\n    instructions [%u, +%u), arena %" PRIu64 " bytes, lower bound %" PRIu64 "\n",
                fn.instruction_begin(), fn.instruction_count(), fn.arena_size(), fn.lower_bound());
    const inspect::FunctionStats st = inspect::function_stats(v, f);
    std::printf("    stats: arena %" PRIu64 " B, lower bound %" PRIu64 " B (%.1f%% over); aliases: %" PRIu64
                " in place, %" PRIu64 " views; constants: %" PRIu64 " B stored, %" PRIu64 " B filled\n",
                st.arena_size, st.lower_bound, st.percent_over, st.in_place_aliases, st.view_aliases,
                st.constant_bytes_stored, st.constant_bytes_filled);
    if (st.recomputed_instructions > 0)
      std::printf("    recomputed: %" PRIu64 " instructions, %" PRIu64 " FLOPs per invoke\n", st.recomputed_instructions,
                  st.recomputed_flops);
    if (st.host_arena_size > 0 || st.evictions + st.prefetches > 0)
      std::printf("    host arena %" PRIu64 " bytes, lower bound %" PRIu64 "; per invoke %" PRIu64 " evictions (%" PRIu64
                  " B), %" PRIu64 " prefetches (%" PRIu64 " B)\n",
                  st.host_arena_size, st.host_lower_bound, st.evictions, st.bytes_evicted, st.prefetches,
                  st.bytes_prefetched);
    if (st.weight_prefetches > 0)
      std::printf("    weights streamed: %" PRIu64 " B of constants in host memory; per invoke %" PRIu64
                  " of the prefetches (%" PRIu64 " B) copy them in\n",
                  st.constant_bytes_streamed, st.weight_prefetches, st.bytes_weights_prefetched);
    std::printf("    copies: %" PRIu64 " B per invoke (transpose, slice, expand, copy); %" PRIu64
                " strided views read in place\n",
                st.copied_bytes, st.strided_views);
    if (st.channels_last_convolutions > 0)
      std::printf("    channels-last: %" PRIu64 " conv2d instructions, %" PRIu64 " of them by Winograd (%" PRIu64
                  " F(4x4, 3x3), %" PRIu64 " F(2x2, 3x3)) (NHWC; the conversions are among the copies)\n",
                  st.channels_last_convolutions, st.winograd_convolutions, st.winograd4_convolutions,
                  st.winograd_convolutions - st.winograd4_convolutions);
    for (uint32_t i = 0; i < count(fn.inputs()); ++i)
      std::printf("    input %u '%s' -> slot %u\n", i, str(fn.inputs()->Get(i)->name()),
                  fn.inputs()->Get(i)->slot());
    for (uint32_t j = 0; j < count(fn.outputs()); ++j)
      std::printf("    output %u '%s' <- slot %u\n", j, str(fn.outputs()->Get(j)->name()),
                  fn.outputs()->Get(j)->slot());
  }

  std::printf("\nslots (%u):\n", count(m.slots()));
  for (uint32_t i = 0; i < count(m.slots()); ++i) {
    const fb::Slot& s = *m.slots()->Get(i);
    std::string copy;
    if (s.copy_of() >= 0) copy = " copy of " + inspect::slot_name(m, static_cast<uint32_t>(s.copy_of()));
    if (s.extent() >= 0) copy += " extent in " + inspect::slot_name(m, static_cast<uint32_t>(s.extent()));
    std::printf("  #%-4u %-16s %-20s %10" PRIu64 " B  %-18s (%s)%s\n", i, inspect::slot_name(m, i).c_str(),
                v.slot_types[i].to_string().c_str(), s.byte_size(), storage_text(s).c_str(),
                format::slot_usage_name(s.usage()), copy.c_str());
  }

  std::printf("\ndisassembly:\n");
  for (uint32_t f = 0; f < count(m.functions()); ++f) {
    const fb::Function& fn = *m.functions()->Get(f);
    std::printf("  func @%s:\n", str(fn.name()));
    // Loop bodies indented: a body runs once per iteration, at the same offsets.
    std::string indent;
    for (uint32_t k = 0; k < fn.instruction_count(); ++k) {
      const fb::Instruction& in = *m.instructions()->Get(fn.instruction_begin() + k);
      if (in.opcode() == fb::Opcode::LoopNext && indent.size() >= 2) indent.resize(indent.size() - 2);
      std::printf("    %4u: %s%s\n", fn.instruction_begin() + k, indent.c_str(), instruction_text(v, in).c_str());
      if (in.opcode() == fb::Opcode::LoopBegin) indent += "  ";
    }
  }

  const fb::ArenaPlan& a = *m.arena();
  std::printf("\narena plan:\n  size %" PRIu64 " bytes, alignment %u, strategy %s, heuristic '%s'\n",
              a.size(), a.alignment(), format::plan_strategy_name(a.strategy()), str(a.heuristic()));
  std::printf("  lower bound %" PRIu64 " bytes (%.1f%% over), workspace %" PRIu64 " bytes\n", a.lower_bound(),
              inspect::percent_over(a.size(), a.lower_bound()), a.workspace_size());
  if (a.host_size() > 0)
    std::printf("  host arena %" PRIu64 " bytes, lower bound %" PRIu64 " bytes (%.1f%% over)\n", a.host_size(),
                a.host_lower_bound(), inspect::percent_over(a.host_size(), a.host_lower_bound()));
}

// The tools' one JSON writer (tools/json.h): every string escaped, no fixed-size buffer.
using Json = cli::JsonWriter;

void json_type(Json& j, const TensorType& type) {
  j.field("dtype", dtype_name(type.dtype));
  j.begin_array("shape");
  for (int64_t d : type.dims) j.value(d);
  j.end_array();
  if (type.has_bound()) j.field("bounded_dim", static_cast<int64_t>(type.bounded));  // shape holds its bound
}

void print_json(const VerifiedModule& v) {
  const fb::Module& m = *v.module;
  const format::Prelude& p = v.prelude;
  Json j;
  j.begin_object();
  j.field("name", str(m.name()));
  j.field("producer", str(m.producer()));
  j.begin_object("prelude");
  j.field("magic", "HEXIRXE");
  j.field("format_version", p.format_version);
  j.field("flags", p.flags);
  j.field("metadata_offset", p.metadata_offset);
  j.field("metadata_size", p.metadata_size);
  j.field("metadata_checksum", hex(p.metadata_checksum));
  j.field("data_offset", p.data_offset);
  j.field("data_size", p.data_size);
  j.field("data_checksum", hex(p.data_checksum));
  j.end_object();

  j.begin_array("sections");
  for (uint32_t i = 0; i < count(m.sections()); ++i) {
    const fb::Section& s = *m.sections()->Get(i);
    j.begin_object();
    j.field("index", i);
    j.field("kind", format::section_kind_name(s.kind()));
    j.field("offset", s.offset());
    j.field("size", s.size());
    j.field("raw_size", s.raw_size());
    j.field("alignment", s.alignment());
    j.field("compression", s.compression() == fb::Compression::None ? "none" : "zstd");
    j.field("memory_space", s.memory_space() == fb::MemorySpace::Host ? "host" : "device");
    j.end_object();
  }
  j.end_array();

  j.begin_array("constants");
  for (uint32_t i = 0; i < count(m.constants()); ++i) {
    const fb::Constant& c = *m.constants()->Get(i);
    j.begin_object();
    j.field("index", i);
    j.field("name", str(c.name()));
    json_type(j, v.constant_types[i]);
    j.field("byte_size", c.byte_size());
    if (c.storage() == fb::ConstantStorage::Fill) {
      j.field("storage", "fill");
      j.field("fill_pattern", hex_bytes(c.fill_pattern()));
      j.field("fill_count", c.fill_count());
    } else {
      j.field("storage", "rodata");
      j.field("section", c.section());
      j.field("offset", c.offset());
    }
    j.end_object();
  }
  j.end_array();

  j.begin_array("compressed_weights");
  for (const inspect::CompressedWeight& c : inspect::compressed_weights(v)) {
    j.begin_object();
    j.field("weight", c.weight);
    j.field("scale", c.scale);
    j.field("format", c.format);
    j.field("rows", c.rows);
    j.field("columns", c.columns);
    j.field("stored_bytes", c.stored_bytes);
    j.field("f32_bytes", static_cast<uint64_t>(c.rows) * static_cast<uint64_t>(c.columns) * 4);
    j.field("read_by_matmul", c.matmul);
    j.field("gathered", c.gather);
    j.end_object();
  }
  j.end_array();

  j.begin_array("kernels");
  for (uint32_t i = 0; i < count(m.kernels()); ++i) {
    const fb::Kernel& k = *m.kernels()->Get(i);
    j.begin_object();
    j.field("index", i);
    j.field("name", str(k.name()));
    j.begin_array("code");
    for (uint32_t c = 0; c < count(k.code()); ++c) {
      const fb::KernelCode& code = *k.code()->Get(c);
      j.begin_object();
      j.field("target", str(code.target()));
      j.field("section", code.section());
      j.field("offset", code.offset());
      j.field("size", code.size());
      j.field("entry", str(code.entry()));
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();

  const fb::ArenaPlan& a = *m.arena();
  j.begin_object("arena");
  j.field("size", a.size());
  j.field("lower_bound", a.lower_bound());
  j.field("alignment", a.alignment());
  j.field("strategy", format::plan_strategy_name(a.strategy()));
  j.field("heuristic", str(a.heuristic()));
  j.field("workspace_size", a.workspace_size());
  j.field("percent_over_lower_bound", inspect::percent_over(a.size(), a.lower_bound()));
  j.field("host_size", a.host_size());
  j.field("host_lower_bound", a.host_lower_bound());
  j.end_object();

  auto bindings = [&](const char* key, const flatbuffers::Vector<flatbuffers::Offset<fb::Binding>>* list) {
    j.begin_array(key);
    for (uint32_t i = 0; i < count(list); ++i) {
      const fb::Binding& b = *list->Get(i);
      j.begin_object();
      j.field("name", str(b.name()));
      j.field("slot", b.slot());
      json_type(j, v.slot_types[b.slot()]);
      j.field("donated_to", b.donated_to());
      j.end_object();
    }
    j.end_array();
  };
  j.begin_array("functions");
  for (uint32_t f = 0; f < count(m.functions()); ++f) {
    const fb::Function& fn = *m.functions()->Get(f);
    j.begin_object();
    j.field("name", str(fn.name()));
    bindings("inputs", fn.inputs());
    bindings("outputs", fn.outputs());
    j.field("instruction_begin", fn.instruction_begin());
    j.field("instruction_count", fn.instruction_count());
    j.field("arena_size", fn.arena_size());
    j.field("lower_bound", fn.lower_bound());
    const inspect::FunctionStats st = inspect::function_stats(v, f);
    j.begin_object("stats");
    j.field("arena_size", st.arena_size);
    j.field("lower_bound", st.lower_bound);
    j.field("percent_over", st.percent_over);
    j.field("in_place_aliases", st.in_place_aliases);
    j.field("view_aliases", st.view_aliases);
    j.field("constant_bytes_stored", st.constant_bytes_stored);
    j.field("constant_bytes_filled", st.constant_bytes_filled);
    j.field("recomputed_instructions", st.recomputed_instructions);
    j.field("recomputed_flops", st.recomputed_flops);
    j.field("copied_bytes", st.copied_bytes);
    j.field("strided_views", st.strided_views);
    j.field("channels_last_convolutions", st.channels_last_convolutions);
    j.field("winograd_convolutions", st.winograd_convolutions);
    j.field("winograd4_convolutions", st.winograd4_convolutions);
    j.end_object();
    // Per memory space: size, lower bound, bytes moved into it per invoke,
    // and the recomputations (device work) of the budget.
    j.begin_array("memory_spaces");
    j.begin_object();
    j.field("space", "device");
    j.field("size", st.arena_size);
    j.field("lower_bound", st.lower_bound);
    j.field("bytes_prefetched_per_invoke", st.bytes_prefetched);
    j.field("prefetches_per_invoke", st.prefetches);
    j.field("recomputed_instructions", st.recomputed_instructions);
    j.field("recomputed_flops", st.recomputed_flops);
    j.end_object();
    j.begin_object();
    j.field("space", "host");
    j.field("size", st.host_arena_size);
    j.field("lower_bound", st.host_lower_bound);
    j.field("bytes_evicted_per_invoke", st.bytes_evicted);
    j.field("evictions_per_invoke", st.evictions);
    // Weights streaming: constants kept here, and their prefetches (of the device's above).
    j.field("streamed_constant_bytes", st.constant_bytes_streamed);
    j.field("weight_prefetches_per_invoke", st.weight_prefetches);
    j.field("bytes_weights_prefetched_per_invoke", st.bytes_weights_prefetched);
    j.end_object();
    j.end_array();
    j.end_object();
  }
  j.end_array();

  j.begin_array("slots");
  for (uint32_t i = 0; i < count(m.slots()); ++i) {
    const fb::Slot& s = *m.slots()->Get(i);
    j.begin_object();
    j.field("index", i);
    j.field("name", str(s.name()));
    json_type(j, v.slot_types[i]);
    j.field("byte_size", s.byte_size());
    j.field("storage", format::storage_kind_name(s.storage()));
    j.field("usage", format::slot_usage_name(s.usage()));
    j.field("memory_space", s.memory_space() == fb::MemorySpace::Host ? "host" : "device");
    if (s.copy_of() >= 0) j.field("copy_of", s.copy_of());
    if (s.storage() == fb::StorageKind::Arena)
      j.field("arena_offset", s.arena_offset());
    else
      j.field("storage_index", s.index());
    j.end_object();
  }
  j.end_array();

  std::vector<int64_t> owner(count(m.instructions()), -1);
  for (uint32_t f = 0; f < count(m.functions()); ++f) {
    const fb::Function& fn = *m.functions()->Get(f);
    for (uint32_t k = 0; k < fn.instruction_count(); ++k) owner[fn.instruction_begin() + k] = f;
  }
  j.begin_array("instructions");
  for (uint32_t k = 0; k < count(m.instructions()); ++k) {
    const fb::Instruction& in = *m.instructions()->Get(k);
    j.begin_object();
    j.field("index", k);
    j.field("function",
            owner[k] >= 0 ? str(m.functions()->Get(static_cast<uint32_t>(owner[k]))->name()) : "");
    j.field("kernel", format::instruction_name(v, in));
    j.field("kernel_index", in.kernel());
    j.begin_array("inputs");
    for (uint32_t i = 0; i < in.input_count(); ++i) j.value(m.operand_pool()->Get(in.operand_begin() + i));
    j.end_array();
    if (in.operand_count() > in.input_count())  // control instructions have none
      j.field("output", m.operand_pool()->Get(in.operand_begin() + in.input_count()));  // the first
    j.begin_array("outputs");
    for (uint32_t o = in.input_count(); o < in.operand_count(); ++o)
      j.value(m.operand_pool()->Get(in.operand_begin() + o));
    j.end_array();
    j.begin_array("params");
    for (uint32_t p2 = 0; p2 < in.param_count(); ++p2) j.value(m.param_pool()->Get(in.param_begin() + p2));
    j.end_array();
    j.field("alias_mask", in.alias_mask());
    j.field("text", instruction_text(v, in));
    j.end_object();
  }
  j.end_array();
  j.end_object();
  std::printf("%s\n", j.text().c_str());
}

const std::string kUsage = std::string(
    "usage: hexir-dump FILE.hxe [--json] [--max-decompressed-bytes N] [--max-fill-bytes N]\n"
    "                  [--max-arena-bytes N]\n"
    "       hexir-dump FILE.hxe --plan-svg OUT.svg [--function NAME]\n"
    "  A file the VM would refuse at load is refused here too (the same limits, the same flags as\n"
    "  hexir-run):\n") + cli::kLoadLimitsUsage;

// Writes the arena picture of one function (default: the first) to `svg_path`.
Status write_plan_svg(const VerifiedModule& v, const std::string& function, const std::string& svg_path) {
  const fb::Module& m = *v.module;
  const uint32_t functions = count(m.functions());
  uint32_t f = 0;
  if (functions == 0) return failed_precondition("the module has no functions to draw");
  if (!function.empty()) {
    std::string names;
    for (f = 0; f < functions; ++f) {
      const std::string name = str(m.functions()->Get(f)->name());
      if (name == function || "@" + name == function) break;
      names += (names.empty() ? "'" : ", '") + name + "'";
    }
    if (f == functions) return not_found("no function '" + function + "' (the module has " + names + ")");
  }
  const inspect::PlanSvgInput picture = inspect::function_plan_picture(v, f);
  HEXIR_RETURN_IF_ERROR(cli::write_file(svg_path, inspect::render_plan_svg(picture)));
  const fb::Function& fn = *m.functions()->Get(f);
  std::printf("%s: @%s, %zu values, arena %" PRIu64 " bytes, lower bound %" PRIu64 " bytes\n",
              svg_path.c_str(), str(fn.name()), picture.rects.size(), fn.arena_size(), fn.lower_bound());
  return ok_status();
}

int run(int argc, char** argv) {
  std::string path, svg_path, function;
  bool json = false;
  format::LoadLimits limits;
  limits.name_flags = true;
  cli::Args args("hexir-dump", kUsage, argc, argv);
  while (args.next()) {
    if (args.load_limit(&limits)) continue;
    if (args.flag("--json"))
      json = true;
    else if (!args.value("--plan-svg", &svg_path) && !args.value("--function", &function))
      args.input(&path);
  }
  if (std::optional<int> rc = args.stop()) return *rc;
  if (path.empty()) return args.usage_error("no input file");
  if (!function.empty() && svg_path.empty())
    return args.usage_error("--function selects the function of --plan-svg");

  Result<MappedFile> file = MappedFile::open(path);
  if (!file.ok()) return args.fail(file.status().message());
  format::VerifyOptions options;
  options.verify_data_checksum = true;  // a dump is an inspection: check everything
  Result<VerifiedModule> verified = format::verify_executable(file->bytes(), options);
  if (!verified.ok()) return args.fail(path + ": " + verified.status().message());
  // The VM's load limits, before anything they bound is allocated.
  if (Status s = format::check_load_limits(*verified, limits); !s.ok()) return args.fail(path + ": " + s.message());
  // Compressed sections are decompressed (and so checked) like the VM does at load.
  std::vector<format::SectionBuffer> raw_sections;
  if (Status s = format::decompress_sections(*verified, raw_sections, limits.max_decompressed_bytes); !s.ok())
    return args.fail(path + ": " + s.message());
  if (!svg_path.empty()) {
    Status s = write_plan_svg(*verified, function, svg_path);
    return s.ok() ? cli::kExitOk : args.fail(s.message());
  }
  if (json)
    print_json(*verified);
  else
    print_text(path, *verified);
  return cli::kExitOk;
}

}  // namespace
}  // namespace hexir

int main(int argc, char** argv) {
  // Sizes are checked where they are read; this is the last line of defence.
  try {
    return hexir::run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("hexir-dump: out of memory\n", stderr);
    return hexir::cli::kExitFailure;
  }
}
