// An SVG picture of a memory plan: time across, offset up, one rectangle per
// buffer, the lower bound as a horizontal line. Used by hexir-plan for CSV
// plans and meant for hexir-dump's picture of an executable's arena.
// Pure formatting: no IR, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hexir::serializer {

// Kind flags of a rectangle (bits; they change its colour and outline).
enum PlanRectKind : uint32_t {
  kPlanRectPlain = 0,
  kPlanRectAliased = 1u << 0,   // shares storage with another value (in place, view)
  kPlanRectDonated = 1u << 1,   // lives in a donated input's buffer
  kPlanRectExternal = 1u << 2,  // bound at invoke (inputs, outputs)
};

struct PlanRect {
  std::string label;              // drawn inside when the rectangle is big enough; always in the tooltip
  int64_t lower = 0, upper = 0;   // live over [lower, upper)
  uint64_t offset = 0, size = 0;  // bytes
  uint32_t kind = kPlanRectPlain;
};

struct PlanPicture {
  std::string title;
  std::vector<PlanRect> rects;
  uint64_t lower_bound = 0;  // drawn as a dashed line (0: not drawn)
  uint64_t arena_size = 0;   // drawn as a solid line at the top (0: the highest rectangle)
  int width = 1200;          // pixels of the whole picture
  int height = 700;
};

// A complete standalone SVG document.
std::string render_plan_svg(const PlanPicture& picture);

}  // namespace hexir::serializer
