// hexir-plan IN.csv [--budget-ms N] [--align N] [-o OUT.csv] [--svg FILE.svg]
//
// Plans offsets for a MiniMalloc CSV (`id,lower,upper,size`, live over
// [lower, upper)), writes the rows with an `offset` column, and prints one
// JSON line: buffers, lower_bound, peak, ms, heuristic, ...
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "hexir/inspect/plan_svg.h"
#include "hexir/planner/arena_planner.h"
#include "hexir/planner/planner_csv.h"

namespace {

constexpr const char* kUsage =
    "usage: hexir-plan IN.csv [--budget-ms N] [--align N] [-o OUT.csv] [--svg FILE.svg]\n"
    "  --budget-ms N  improvement search budget (default 1000); a fixed amount of counted work,\n"
    "                 so the same input and budget always give the same plan\n"
    "  --align N      offset alignment, a power of two (default 1)\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "hexir-plan: %s\n%s", message.c_str(), kUsage);
  return 2;
}

bool parse_u64(std::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = value;
  return true;
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, output, svg;
  hexir::serializer::PlanOptions options;
  options.alignment = 1;
  options.budget_ms = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value_of = [&](std::string_view flag, std::string_view* value) {
      if (arg == flag) {
        if (i + 1 >= argc) return false;
        *value = argv[++i];
        return true;
      }
      *value = arg.substr(flag.size() + 1);
      return true;
    };
    std::string_view value;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "-o" || arg == "--svg") {
      if (i + 1 >= argc) return usage_error(std::string(arg) + " needs a file name");
      (arg == "-o" ? output : svg) = argv[++i];
    } else if (arg == "--budget-ms" || arg.starts_with("--budget-ms=")) {
      if (!value_of("--budget-ms", &value)) return usage_error("--budget-ms needs a number");
      if (!parse_u64(value, &options.budget_ms))
        return usage_error("--budget-ms expects a number, got '" + std::string(value) + "'");
    } else if (arg == "--align" || arg.starts_with("--align=")) {
      if (!value_of("--align", &value)) return usage_error("--align needs a number");
      if (!parse_u64(value, &options.alignment) || options.alignment == 0 ||
          (options.alignment & (options.alignment - 1)) != 0)
        return usage_error("--align expects a power of two, got '" + std::string(value) + "'");
    } else if (arg.starts_with("-") && arg != "-") {
      return usage_error("unknown option '" + std::string(arg) + "'");
    } else if (input.empty()) {
      input = arg;
    } else {
      return usage_error("more than one input file");
    }
  }
  if (input.empty()) return usage_error("no input file");

  auto problem = hexir::serializer::read_plan_csv(input);
  if (!problem.ok()) {
    std::fprintf(stderr, "hexir-plan: %s\n", problem.status().message().c_str());
    return 1;
  }
  hexir::serializer::PlanReport report;
  auto start = std::chrono::steady_clock::now();
  auto plan = hexir::serializer::plan_arena(problem->buffers, options, &report);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!plan.ok()) {
    std::fprintf(stderr, "hexir-plan: %s: %s\n", input.c_str(), plan.status().message().c_str());
    return 1;
  }
  if (!output.empty() && !write_text(output, hexir::serializer::format_plan_csv(*problem, plan->offsets))) {
    std::fprintf(stderr, "hexir-plan: cannot write '%s'\n", output.c_str());
    return 1;
  }
  if (!svg.empty()) {
    hexir::inspect::PlanSvgInput picture;
    picture.title = input + ": " + std::to_string(plan->size) + " bytes (" + plan->heuristic +
                    "), lower bound " + std::to_string(report.lower_bound);
    picture.x_label = "time";
    picture.lower_bound = report.lower_bound;
    picture.arena_size = plan->size;
    for (size_t i = 0; i < problem->buffers.size(); ++i) {
      const auto& b = problem->buffers[i];
      picture.rects.push_back({problem->ids[i], b.lower, b.upper, plan->offsets[i], b.size, 0, ""});
    }
    if (!write_text(svg, hexir::inspect::render_plan_svg(picture))) {
      std::fprintf(stderr, "hexir-plan: cannot write '%s'\n", svg.c_str());
      return 1;
    }
  }
  std::printf(
      "{\"buffers\": %zu, \"lower_bound\": %llu, \"peak\": %llu, \"ms\": %.1f, \"heuristic\": \"%s\", "
      "\"greedy_heuristic\": \"%s\", \"greedy_peak\": %llu, \"optimal\": %s, \"align\": %llu, \"budget_ms\": "
      "%llu, "
      "\"work_used\": %llu}\n",
      problem->buffers.size(), static_cast<unsigned long long>(report.lower_bound),
      static_cast<unsigned long long>(plan->size), ms, json_escape(plan->heuristic).c_str(),
      json_escape(report.greedy_winner).c_str(), static_cast<unsigned long long>(report.greedy_size),
      report.reached_lower_bound ? "true" : "false", static_cast<unsigned long long>(options.alignment),
      static_cast<unsigned long long>(options.budget_ms), static_cast<unsigned long long>(report.work_used));
  return 0;
}
