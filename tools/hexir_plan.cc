// hexir-plan IN.csv [--budget-ms N] [--align N] [-o OUT.csv] [--svg FILE.svg]
//
// Plans offsets for a MiniMalloc CSV (`id,lower,upper,size`, live over
// [lower, upper)), writes the rows with an `offset` column, and prints one
// JSON line: buffers, lower_bound, peak, ms, heuristic, ...
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "cli.h"
#include "hexir/inspect/plan_svg.h"
#include "hexir/planner/arena_planner.h"
#include "hexir/planner/planner_csv.h"

namespace {

constexpr const char* kUsage =
    "usage: hexir-plan IN.csv [--budget-ms N] [--align N] [-o OUT.csv] [--svg FILE.svg]\n"
    "  --budget-ms N  improvement search budget (default 1000); a fixed amount of counted work,\n"
    "                 so the same input and budget always give the same plan\n"
    "  --align N      offset alignment, a power of two (default 1)\n";

}  // namespace

namespace cli = hexir::cli;

int main(int argc, char** argv) {
  std::string input, output, svg;
  hexir::planner::PlanOptions options;
  options.alignment = 1;
  options.budget_ms = 1000;
  cli::Args args("hexir-plan", kUsage, argc, argv);
  while (args.next()) {
    if (args.value("-o", &output) || args.value("--svg", &svg) ||
        args.number("--budget-ms", &options.budget_ms))
      continue;
    if (args.number("--align", &options.alignment, uint64_t{1})) {
      if ((options.alignment & (options.alignment - 1)) != 0)
        args.usage_error("--align expects a power of two, got " + std::to_string(options.alignment));
      continue;
    }
    args.input(&input);
  }
  if (std::optional<int> rc = args.stop()) return *rc;
  if (input.empty()) return args.usage_error("no input file");

  auto problem = hexir::planner::read_plan_csv(input);
  if (!problem.ok()) return args.fail(problem.status().message());
  hexir::planner::PlanReport report;
  auto start = std::chrono::steady_clock::now();
  auto plan = hexir::planner::plan_arena(problem->buffers, options, &report);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!plan.ok()) return args.fail(input + ": " + plan.status().message());
  if (!output.empty()) {
    hexir::Status written = cli::write_file(output, hexir::planner::format_plan_csv(*problem, plan->offsets));
    if (!written.ok()) return args.fail(written.message());
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
    hexir::Status written = cli::write_file(svg, hexir::inspect::render_plan_svg(picture));
    if (!written.ok()) return args.fail(written.message());
  }
  std::printf(
      "{\"buffers\": %zu, \"lower_bound\": %llu, \"peak\": %llu, \"ms\": %.1f, \"heuristic\": %s, "
      "\"greedy_heuristic\": %s, \"greedy_peak\": %llu, \"optimal\": %s, \"align\": %llu, \"budget_ms\": "
      "%llu, "
      "\"work_used\": %llu}\n",
      problem->buffers.size(), static_cast<unsigned long long>(report.lower_bound),
      static_cast<unsigned long long>(plan->size), ms, cli::json_string(plan->heuristic).c_str(),
      cli::json_string(report.greedy_winner).c_str(), static_cast<unsigned long long>(report.greedy_size),
      report.reached_lower_bound ? "true" : "false", static_cast<unsigned long long>(options.alignment),
      static_cast<unsigned long long>(options.budget_ms), static_cast<unsigned long long>(report.work_used));
  return 0;
}
