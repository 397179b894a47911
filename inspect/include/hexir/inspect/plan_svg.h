// An SVG picture of a memory plan: time across, offset up, one rectangle per
// value over its live range, the lower bound as a dashed line, axes with tick
// labels and a legend. Pure formatting (no flatbuffers, no I/O), so every
// tool can draw with it: hexir-dump for an executable's arena, hexir-plan for
// a planner problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hexir::inspect {

// Flags of a rectangle (bits); each has its own fill and a legend entry.
enum PlanSvgFlags : uint32_t {
  kPlanSvgPlain = 0,
  kPlanSvgAliased = 1u << 0,   // written in place over another value's storage (alias bit)
  kPlanSvgDonated = 1u << 1,   // lives in a donated input's buffer (caller memory)
  kPlanSvgView = 1u << 2,      // views (reshape) share its storage; its range covers theirs
  kPlanSvgExternal = 1u << 3,  // bound at invoke (inputs, outputs), not arena
  kPlanSvgHost = 1u << 4,      // in the host memory space (an offloaded value's host copy)
  kPlanSvgCopy = 1u << 5,      // a device copy prefetched from the host
};

struct PlanSvgRect {
  std::string label;              // drawn inside when it fits; always in the tooltip
  int64_t lower = 0, upper = 0;   // live over [lower, upper) (time units, e.g. instructions)
  uint64_t offset = 0, size = 0;  // bytes
  uint32_t flags = kPlanSvgPlain;
  std::string note;  // extra tooltip line (optional)
};

// A span of time drawn as a band behind the values: a loop's body, which
// runs once per iteration at the same offsets (time inside it is relative to
// the iteration).
struct PlanSvgSpan {
  std::string label;
  int64_t lower = 0, upper = 0;  // [lower, upper) in time units
};

struct PlanSvgInput {
  std::string title;
  std::vector<PlanSvgSpan> spans;  // loops, drawn first
  std::string x_label = "instruction";
  std::string y_label = "offset (bytes)";
  std::vector<PlanSvgRect> rects;
  uint64_t lower_bound = 0;  // dashed line (0: not drawn)
  uint64_t arena_size = 0;   // solid line (0: not drawn); the y axis covers it and every rectangle
  int width = 1200;          // pixels of the whole picture (clamped to 300..20000)
  int height = 700;
  // A second memory space drawn above (the host arena): its base and size,
  // a solid line at each end (0: none).
  uint64_t host_base = 0;
  uint64_t host_size = 0;
};

// A complete, standalone SVG document (valid XML: labels are escaped and
// invalid UTF-8 or control characters replaced). Every rectangle is a
// <rect class="value ...">, the lower bound a <line class="lower-bound">;
// a few thousand rectangles stay a few hundred KiB.
std::string render_plan_svg(const PlanSvgInput& input);

// Text made safe for XML character data and attribute values.
std::string xml_escape(const std::string& text);

}  // namespace hexir::inspect
