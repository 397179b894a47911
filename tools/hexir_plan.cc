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
#include "hexir/base/file_io.h"
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

  // A regular file only, opened without blocking (a FIFO would hang the reader): hexir/base/file_io.h.
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
  // One line, through the tools' one JSON writer (tools/json.h).
  cli::JsonWriter j(cli::JsonWriter::Style::kSpaced);
  j.begin_object();
  j.field("buffers", uint64_t{problem->buffers.size()});
  j.field("lower_bound", report.lower_bound);
  j.field("peak", plan->size);
  j.field("ms", ms, 1);
  j.field("heuristic", plan->heuristic);
  j.field("greedy_heuristic", report.greedy_winner);
  j.field("greedy_peak", report.greedy_size);
  j.field("optimal", report.reached_lower_bound);
  j.field("align", options.alignment);
  j.field("budget_ms", options.budget_ms);
  j.field("work_used", report.work_used);
  j.end_object();
  std::printf("%s\n", j.text().c_str());
  return 0;
}
