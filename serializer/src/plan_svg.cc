#include "plan_svg.h"

#include <algorithm>
#include <cstdio>

namespace hexir::serializer {
namespace {

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format(const char* fmt, auto... args) {
  char buffer[512];
  int n = std::snprintf(buffer, sizeof buffer, fmt, args...);
  return std::string(buffer, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buffer - 1));
}

// 1234567 -> "1.18 MiB"
std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? format("%llu B", static_cast<unsigned long long>(bytes))
                   : format("%.2f %s", value, units[unit]);
}

std::string fill_for(size_t index, uint32_t kind) {
  if (kind & kPlanRectDonated) return "#f2b134";
  if (kind & kPlanRectExternal) return "#9aa5b1";
  // Golden-angle hues: neighbours differ, the same index keeps its colour.
  int hue = static_cast<int>((index * 137) % 360);
  return format("hsl(%d,55%%,%d%%)", hue, (kind & kPlanRectAliased) ? 80 : 65);
}

}  // namespace

std::string render_plan_svg(const PlanPicture& picture) {
  const double left = 90, right = 20, top = 40, bottom = 40;
  const double width = std::max(picture.width, 200), height = std::max(picture.height, 150);
  const double plot_w = width - left - right, plot_h = height - top - bottom;

  int64_t t0 = 0, t1 = 1;
  uint64_t highest = std::max(picture.arena_size, picture.lower_bound);
  if (!picture.rects.empty()) {
    t0 = picture.rects[0].lower;
    t1 = picture.rects[0].upper;
  }
  for (const PlanRect& r : picture.rects) {
    t0 = std::min(t0, r.lower);
    t1 = std::max(t1, r.upper);
    highest = std::max(highest, r.offset + r.size);
  }
  if (t1 <= t0) t1 = t0 + 1;
  if (highest == 0) highest = 1;
  const double x_scale = plot_w / static_cast<double>(t1 - t0);
  const double y_scale = plot_h / static_cast<double>(highest);
  auto x_of = [&](int64_t t) { return left + static_cast<double>(t - t0) * x_scale; };
  auto y_of = [&](uint64_t offset) { return top + plot_h - static_cast<double>(offset) * y_scale; };

  std::string svg = format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      width, height, width, height);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += format("<text x=\"%g\" y=\"20\" font-size=\"14\">", left) + escape_xml(picture.title) + "</text>\n";
  // Axes and a few ticks.
  svg += format("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", left, top + plot_h,
                left + plot_w, top + plot_h);
  svg += format("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", left, top, left,
                top + plot_h);
  for (int i = 0; i <= 4; ++i) {
    int64_t t = t0 + (t1 - t0) * i / 4;
    svg += format("<text x=\"%g\" y=\"%g\" text-anchor=\"%s\">%lld</text>\n", x_of(t), top + plot_h + 15,
                  i == 0   ? "start"
                  : i == 4 ? "end"
                           : "middle",
                  static_cast<long long>(t));
    uint64_t offset = static_cast<uint64_t>(static_cast<double>(highest) * i / 4);
    svg += format("<text x=\"%g\" y=\"%g\" text-anchor=\"end\">", left - 5, y_of(offset) + 4) +
           human_bytes(offset) + "</text>\n";
  }
  svg +=
      format("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">time</text>\n", left + plot_w / 2, height - 5);

  svg += "<g stroke=\"#333\" stroke-width=\"0.3\">\n";
  for (size_t i = 0; i < picture.rects.size(); ++i) {
    const PlanRect& r = picture.rects[i];
    if (r.size == 0 || r.upper <= r.lower) continue;
    double x = x_of(r.lower), w = std::max(0.5, static_cast<double>(r.upper - r.lower) * x_scale);
    double y = y_of(r.offset + r.size), h = std::max(0.5, static_cast<double>(r.size) * y_scale);
    svg +=
        format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"%s>", x, y, w, h,
               fill_for(i, r.kind).c_str(), (r.kind & kPlanRectAliased) ? " stroke-dasharray=\"2,1\"" : "");
    svg += "<title>" + escape_xml(r.label) +
           format(" [%lld, %lld) offset %llu size %llu", static_cast<long long>(r.lower),
                  static_cast<long long>(r.upper), static_cast<unsigned long long>(r.offset),
                  static_cast<unsigned long long>(r.size)) +
           "</title></rect>\n";
    // Label when it fits (about 6.5 px per character at 11 px).
    if (!r.label.empty() && h >= 12 && w >= 6.5 * static_cast<double>(r.label.size()) + 4)
      svg += format("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" stroke=\"none\">", x + w / 2,
                    y + h / 2 + 4) +
             escape_xml(r.label) + "</text>\n";
  }
  svg += "</g>\n";
  if (picture.arena_size)
    svg += format("<line x1=\"%g\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" stroke=\"black\" stroke-width=\"1\"/>\n",
                  left, y_of(picture.arena_size), left + plot_w, y_of(picture.arena_size));
  if (picture.lower_bound) {
    double y = y_of(picture.lower_bound);
    svg += format(
        "<line x1=\"%g\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" stroke=\"red\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"6,3\"/>\n",
        left, y, left + plot_w, y);
    svg += format("<text x=\"%g\" y=\"%.2f\" text-anchor=\"end\" fill=\"red\">lower bound ", left + plot_w,
                  y - 4) +
           human_bytes(picture.lower_bound) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace hexir::serializer
