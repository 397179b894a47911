#include "hexir/inspect/plan_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hexir::inspect {
namespace {

// Picture layout (pixels).
constexpr double kLeft = 84, kRight = 230, kTop = 44, kBottom = 56;
constexpr double kCharWidth = 6.0;  // of the 10px label font, roughly
constexpr double kLabelHeight = 11.0;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

// 0, 512 B, 4 KiB, 1.5 MiB, ...
std::string bytes_text(uint64_t v) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  double value = static_cast<double>(v);
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(v));
  else
    std::snprintf(buf, sizeof buf, "%.4g %s", value, kUnits[unit]);
  return buf;
}

// Tick step for `range` time units: 1, 2, 5, 10, 20, ... giving at most ~10
// ticks, whatever the range (the largest, 2^64 - 1, gets a step of 5e18).
uint64_t time_step(uint64_t range) {
  for (uint64_t magnitude = 1;; magnitude *= 10)
    for (uint64_t m : {1, 2, 5})
      if (range / (m * magnitude) <= 10) return m * magnitude;
}

// Byte tick step: a power of two giving at most ~8 ticks.
uint64_t byte_step(uint64_t range) {
  uint64_t step = 1;
  while (range / step > 8 && step < (uint64_t{1} << 62)) step <<= 1;
  return step;
}

// Decodes one UTF-8 sequence at s[i]; returns its length, 0 when invalid.
size_t utf8_length(const std::string& s, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n;
  uint32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xe0) == 0xc0) {
    n = 2, v = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, v = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, v = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (byte(i + k) & 0x3f);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;  // overlong, range, surrogate
  *cp = v;
  return n;
}

struct Style {
  const char* css_class;
  const char* fill;  // nullptr: the per-value colour
};

Style style_of(uint32_t flags) {
  if (flags & kPlanSvgDonated) return {"value donated", "url(#hatch-donated)"};
  if (flags & kPlanSvgAliased) return {"value aliased", "url(#hatch-aliased)"};
  if (flags & kPlanSvgExternal) return {"value external", "#d9d9d9"};
  if (flags & kPlanSvgHost) return {"value host", "#f4c27a"};
  if (flags & kPlanSvgCopy) return {"value prefetched", "#9fd89f"};
  return {"value", nullptr};
}

std::string flags_text(uint32_t flags) {
  std::string out;
  auto add = [&](uint32_t bit, const char* name) {
    if (flags & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(kPlanSvgAliased, "in place");
  add(kPlanSvgDonated, "donated buffer");
  add(kPlanSvgView, "has views");
  add(kPlanSvgExternal, "external");
  add(kPlanSvgHost, "host memory");
  add(kPlanSvgCopy, "prefetched");
  return out;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_length(text, i, &cp);
    if (n == 0) {  // invalid UTF-8 byte
      out += '?';
      ++i;
      continue;
    }
    switch (cp) {
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
      case '\'':
        out += "&apos;";
        break;
      default:
        if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xfffe || cp == 0xffff)
          out += '?';  // not allowed in XML 1.0
        else
          out.append(text, i, n);
    }
    i += n;
  }
  return out;
}

std::string render_plan_svg(const PlanSvgInput& input) {
  const double width = std::clamp(input.width, 300, 20000);
  const double height = std::clamp(input.height, 200, 20000);
  const double plot_w = width - kLeft - kRight, plot_h = height - kTop - kBottom;

  int64_t t_min = 0, t_max = 1;
  uint64_t y_max = std::max({input.arena_size, input.lower_bound,
                              input.host_size > 0 ? input.host_base + input.host_size : 0});
  if (!input.rects.empty()) {
    t_min = input.rects[0].lower;
    t_max = input.rects[0].upper;
  }
  for (const PlanSvgRect& r : input.rects) {
    t_min = std::min(t_min, std::min(r.lower, r.upper));
    t_max = std::max(t_max, std::max(r.lower, r.upper));
    y_max = std::max(y_max, r.offset + r.size < r.offset ? UINT64_MAX : r.offset + r.size);
  }
  t_min = std::min<int64_t>(t_min, 0);
  if (t_max <= t_min) t_max = t_min + 1;
  if (y_max == 0) y_max = 1;
  // Coordinates are scaled from the values in doubles, ticks counted: the
  // picture's size depends on the number of rectangles only, whatever the
  // times and offsets (ranges near INT64_MAX stepped ticks past the end
  // and wrapped around, forever).
  const uint64_t y_step = byte_step(y_max);
  const uint64_t y_ticks = y_max / y_step + (y_max % y_step != 0 ? 1 : 0);
  const double y_top = static_cast<double>(y_ticks) * static_cast<double>(y_step);  // axis ends on a tick
  const uint64_t t_range = static_cast<uint64_t>(t_max) - static_cast<uint64_t>(t_min);  // t_max > t_min
  const double t_span = static_cast<double>(t_range);

  const auto x_of = [&](int64_t t) {
    return kLeft + (static_cast<double>(t) - static_cast<double>(t_min)) * plot_w / t_span;
  };
  const auto y_of = [&](double offset) { return kTop + plot_h - offset * plot_h / y_top; };

  std::string s;
  s.reserve(4096 + input.rects.size() * 220);
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
       "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
       "\" font-family=\"sans-serif\" font-size=\"10\">\n";
  s += "<defs>\n"
       "<pattern id=\"hatch-aliased\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
       "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f9c98f\"/>"
       "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b35900\" stroke-width=\"2\"/></pattern>\n"
       "<pattern id=\"hatch-donated\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
       "patternTransform=\"rotate(-45)\"><rect width=\"6\" height=\"6\" fill=\"#b5e3ae\"/>"
       "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#2e7d32\" stroke-width=\"2\"/></pattern>\n"
       "<clipPath id=\"plot\"><rect x=\"" +
       num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(plot_w) + "\" height=\"" + num(plot_h) +
       "\"/></clipPath>\n</defs>\n";
  s += "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text class=\"title\" x=\"" + num(kLeft) + "\" y=\"24\" font-size=\"14\" font-weight=\"bold\">" +
       xml_escape(input.title) + "</text>\n";

  // Grid and axes with tick labels.
  s += "<g class=\"axes\" stroke=\"#999\" stroke-width=\"0.5\">\n";
  for (uint64_t v = 0; static_cast<double>(v) <= y_top; v += y_step) {
    const double y = y_of(static_cast<double>(v));
    s += "<line x1=\"" + num(kLeft - 4) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kLeft + plot_w) +
         "\" y2=\"" + num(y) + "\" stroke=\"#e4e4e4\"/>";
    s += "<text x=\"" + num(kLeft - 7) + "\" y=\"" + num(y + 3.5) +
         "\" text-anchor=\"end\" stroke=\"none\" fill=\"#333\">" + bytes_text(v) + "</text>\n";
    if (v > UINT64_MAX - y_step) break;
  }
  const uint64_t t_step = time_step(t_range);
  for (uint64_t k = 0; k <= t_range / t_step; ++k) {  // at most 11 ticks
    const int64_t t = static_cast<int64_t>(static_cast<uint64_t>(t_min) + k * t_step);
    const double x = x_of(t);
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop + plot_h) + "\" x2=\"" + num(x) + "\" y2=\"" +
         num(kTop + plot_h + 4) + "\"/>";
    s += "<text x=\"" + num(x) + "\" y=\"" + num(kTop + plot_h + 16) +
         "\" text-anchor=\"middle\" stroke=\"none\" fill=\"#333\">" + std::to_string(t) + "</text>\n";
  }
  s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop + plot_h) + "\" x2=\"" + num(kLeft + plot_w) +
       "\" y2=\"" + num(kTop + plot_h) + "\" stroke=\"#333\" stroke-width=\"1\"/>";
  s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(kLeft) + "\" y2=\"" +
       num(kTop + plot_h) + "\" stroke=\"#333\" stroke-width=\"1\"/>\n</g>\n";
  s += "<text class=\"x-label\" x=\"" + num(kLeft + plot_w / 2) + "\" y=\"" + num(height - 14) +
       "\" text-anchor=\"middle\" font-size=\"12\">" + xml_escape(input.x_label) + "</text>\n";
  s += "<text class=\"y-label\" x=\"16\" y=\"" + num(kTop + plot_h / 2) +
       "\" text-anchor=\"middle\" "
       "font-size=\"12\" transform=\"rotate(-90 16 " +
       num(kTop + plot_h / 2) + ")\">" + xml_escape(input.y_label) + "</text>\n";

  // Loop bodies: bands behind the values, labelled at the top.
  if (!input.spans.empty()) {
    s += "<g class=\"loops\" clip-path=\"url(#plot)\">\n";
    for (const PlanSvgSpan& span : input.spans) {
      const double x0 = x_of(span.lower), x1 = x_of(span.upper);
      s += "<g><title>" + xml_escape(span.label) + ": [" + std::to_string(span.lower) + ", " +
           std::to_string(span.upper) + ")</title><rect class=\"loop\" x=\"" + num(x0) + "\" y=\"" + num(kTop) +
           "\" width=\"" + num(std::max(x1 - x0, 0.5)) + "\" height=\"" + num(plot_h) +
           "\" fill=\"#fff3c4\" fill-opacity=\"0.6\" stroke=\"#c9a227\" stroke-dasharray=\"4,3\"/>";
      s += "<text x=\"" + num(x0 + 3) + "\" y=\"" + num(kTop + 12) + "\" fill=\"#7a6000\">" +
           xml_escape(span.label) + "</text></g>\n";
    }
    s += "</g>\n";
  }

  // Values: plain ones first, so hatched (in place, donated) ones are on top.
  const double stroke = input.rects.size() > 500 ? 0.2 : 0.6;
  uint32_t present = 0;
  s += "<g class=\"values\" clip-path=\"url(#plot)\">\n";
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < input.rects.size(); ++i) {
      const PlanSvgRect& r = input.rects[i];
      const bool on_top = (r.flags & (kPlanSvgAliased | kPlanSvgDonated)) != 0;
      if (on_top != (pass == 1)) continue;
      present |= r.flags;
      const double x0 = x_of(std::min(r.lower, r.upper)), x1 = x_of(std::max(r.lower, r.upper));
      const double top = static_cast<double>(r.offset) + static_cast<double>(r.size);
      const double y0 = y_of(top), y1 = y_of(static_cast<double>(r.offset));
      const double w = std::max(x1 - x0, 0.5), h = std::max(y1 - y0, 0.5);
      const Style style = style_of(r.flags);
      char colour[32];
      std::snprintf(colour, sizeof colour, "hsl(%zu,55%%,76%%)", (i * 47) % 360);
      const std::string label = xml_escape(r.label);
      const std::string flags = flags_text(r.flags);
      s += "<g><title>" + label + ": [" + std::to_string(r.lower) + ", " + std::to_string(r.upper) +
           ") offset " + std::to_string(r.offset) + " size " + std::to_string(r.size) +
           (flags.empty() ? "" : " (" + flags + ")") + (r.note.empty() ? "" : "; " + xml_escape(r.note)) +
           "</title>";
      s += "<rect class=\"" + std::string(style.css_class) + ((r.flags & kPlanSvgView) ? " view" : "") +
           "\" x=\"" + num(x0) + "\" y=\"" + num(y0) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
           "\" fill=\"" + (style.fill ? style.fill : colour) + "\" stroke=\"" +
           ((r.flags & kPlanSvgView) ? "#1f4e9e\" stroke-dasharray=\"3,2\" stroke-width=\"1.5\"/>"
                                     : "#333\" stroke-width=\"" + num(stroke) + "\"/>");
      // Left-aligned: an in-place successor drawn over this value's last column leaves it readable.
      if (w >= kCharWidth * static_cast<double>(r.label.size()) + 6 && h >= kLabelHeight)
        s += "<text x=\"" + num(x0 + 3) + "\" y=\"" + num(y0 + h / 2 + 3.5) + "\">" + label + "</text>";
      s += "</g>\n";
    }
  }
  s += "</g>\n";

  // Reference lines, labelled in the right margin.
  const double x_end = kLeft + plot_w;
  if (input.arena_size > 0) {
    const double y = y_of(static_cast<double>(input.arena_size));
    s += "<line class=\"arena-size\" x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x_end) +
         "\" y2=\"" + num(y) + "\" stroke=\"#222\" stroke-width=\"1.5\"/>";
    s += "<text x=\"" + num(x_end + 6) + "\" y=\"" + num(y + 3.5) + "\">arena " +
         bytes_text(input.arena_size) + "</text>\n";
  }
  if (input.host_size > 0) {  // the host arena: its base and its end
    for (const uint64_t at : {input.host_base, input.host_base + input.host_size}) {
      const double y = y_of(static_cast<double>(at));
      s += "<line class=\"host-arena\" x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x_end) +
           "\" y2=\"" + num(y) + "\" stroke=\"#b36b00\" stroke-width=\"1.5\"/>";
    }
    s += "<text x=\"" + num(x_end + 6) + "\" y=\"" + num(y_of(static_cast<double>(input.host_base + input.host_size)) + 3.5) +
         "\" fill=\"#b36b00\">host arena " + bytes_text(input.host_size) + "</text>\n";
  }
  if (input.lower_bound > 0) {
    const double y = y_of(static_cast<double>(input.lower_bound));
    s += "<line class=\"lower-bound\" x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x_end) +
         "\" y2=\"" + num(y) + "\" stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>";
    s += "<text x=\"" + num(x_end + 6) + "\" y=\"" +
         num(y + (input.arena_size == input.lower_bound ? 15 : 3.5)) + "\" fill=\"#d62728\">lower bound " +
         bytes_text(input.lower_bound) + "</text>\n";
  }

  // Legend: only what the picture uses.
  double ly = kTop + 40;
  const double lx = x_end + 6;
  s += "<g class=\"legend\">\n";
  auto entry = [&](const std::string& swatch, const char* text) {
    s += swatch + "<text x=\"" + num(lx + 26) + "\" y=\"" + num(ly + 9) + "\">" + text + "</text>\n";
    ly += 18;
  };
  const std::string plain_stroke = "stroke=\"#333\" stroke-width=\"0.6\"";
  auto box = [&](const std::string& fill, const std::string& stroke_attributes) {
    return "<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"20\" height=\"12\" fill=\"" + fill +
           "\" " + stroke_attributes + "/>";
  };
  entry(box("hsl(200,55%,76%)", plain_stroke), "value (live range)");
  if (present & kPlanSvgAliased)
    entry(box("url(#hatch-aliased)", plain_stroke), "written in place (alias bit)");
  if (present & kPlanSvgDonated)
    entry(box("url(#hatch-donated)", plain_stroke), "in a donated input's buffer");
  if (present & kPlanSvgView)
    entry(box("white", "stroke=\"#1f4e9e\" stroke-dasharray=\"3,2\" stroke-width=\"1.5\""),
          "has views (reshape)");
  if (present & kPlanSvgExternal) entry(box("#d9d9d9", plain_stroke), "external (bound at invoke)");
  if (present & kPlanSvgHost) entry(box("#f4c27a", plain_stroke), "host arena (offloaded)");
  if (present & kPlanSvgCopy) entry(box("#9fd89f", plain_stroke), "prefetched from host");
  if (!input.spans.empty())
    entry(box("#fff3c4", "stroke=\"#c9a227\" stroke-dasharray=\"4,3\""), "loop body (once per iteration)");
  if (input.lower_bound > 0)
    entry("<line x1=\"" + num(lx) + "\" y1=\"" + num(ly + 6) + "\" x2=\"" + num(lx + 20) + "\" y2=\"" +
              num(ly + 6) + "\" stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>",
          "lower bound");
  s += "</g>\n</svg>\n";
  return s;
}

}  // namespace hexir::inspect
