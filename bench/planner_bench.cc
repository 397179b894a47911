// Planner benchmark over every instance of the public planning benchmarks
// (MiniMalloc CSV files under a directory, searched recursively):
//
//   planner_bench [DIR] [--budget-ms N] [--align N]
//
// Prints a markdown table: our peak against the lower bound, the time, the
// winning heuristic, the reference greedy and MiniMalloc figures from the
// instances' READMEs, and whether our target is met. Exit status 1 if any
// plan is invalid or a target is missed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "hexir/planner/arena_planner.h"
#include "hexir/planner/planner_csv.h"

namespace {

struct Reference {
  double gbs_percent;          // greedy by size, best fit, over the lower bound
  double best_greedy_percent;  // best of four greedy orders
  const char* minimalloc;      // as reported in the README
  // Target: peak <= cap (0: none) and percent over LB <= max_percent (< 0: none).
  uint64_t cap;
  double max_percent;
};

// From planning-benchmarks/minimalloc/README.md and idealloc/README.md.
const std::map<std::string, Reference>& references() {
  static const std::map<std::string, Reference> table = {
      {"A.1048576", {31.05, 29.00, "= LB, 6.9 s", 1048576, -1}},
      {"B.1048576", {34.67, 34.67, "= LB, 4.6 s", 1048576, -1}},
      {"C.1048576", {36.35, 36.35, "1,047,552 at cap; = LB at cap = LB, 0.02 s", 1048576, -1}},
      {"D.1048576", {32.29, 30.94, "1,048,576 (+6.33 %)", 1048576, -1}},
      {"E.1048576", {40.14, 36.91, "= LB, 4.7 s", 1048576, -1}},
      {"F.1048576", {36.72, 33.98, "= LB, 7.7 s", 1048576, -1}},
      {"G.1048576", {36.23, 36.23, "= LB, 1.7 s", 1048576, -1}},
      {"H.1048576", {34.08, 34.08, "= LB, 2.5 s", 1048576, -1}},
      {"I.1048576", {41.02, 41.02, "= LB, 5.4 s", 1048576, -1}},
      {"J.1048576", {34.78, 31.26, "1,048,576 (+6.00 %)", 1048576, -1}},
      {"K.1048576", {33.30, 27.73, "= LB, 0.8 s", 1048576, -1}},
      {"resnet50", {0.94, 0.45, "= LB, 0.35 s", 0, 0.5}},
      {"G_1", {0.35, 0.28, "= LB, 2.1 s", 0, 0.5}},
      {"pangu_2.6B", {3.34, 3.34, "no answer in 120 s", 0, 2.0}},
      {"S_1", {2.49, 2.49, "no answer in 120 s", 0, 2.0}},
      {"Y_1", {0.42, 0.35, "not run", 0, 0.5}},
  };
  return table;
}

std::string with_commas(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // DIR, else $HEXIR_PLANNING_BENCHMARKS, else ../shared/planning-benchmarks next to the checkout.
  std::string dir;
  hexir::planner::PlanOptions options;
  options.alignment = 1;
  options.budget_ms = 3000;
  hexir::cli::Args args("planner_bench", "usage: planner_bench [DIR] [--budget-ms N] [--align N]\n", argc,
                        argv);
  while (args.next())
    if (!args.number("--budget-ms", &options.budget_ms) &&
        !args.number("--align", &options.alignment, uint64_t{1}))
      args.input(&dir);
  if (std::optional<int> rc = args.stop()) return *rc;
  if (dir.empty()) {
    const char* from_env = std::getenv("HEXIR_PLANNING_BENCHMARKS");
    dir = from_env && *from_env ? from_env : HEXIR_PLANNING_BENCHMARKS;
  }
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    std::printf(
        "HEXIR_SKIP: planning benchmarks not found at %s (pass DIR or set HEXIR_PLANNING_BENCHMARKS)\n",
        dir.c_str());
    return 0;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, error))
    if (entry.is_regular_file() && entry.path().extension() == ".csv") files.push_back(entry.path());
  std::sort(files.begin(), files.end());

  std::printf("Budget %llu ms (deterministic work budget), alignment %llu.\n\n",
              static_cast<unsigned long long>(options.budget_ms),
              static_cast<unsigned long long>(options.alignment));
  std::printf(
      "| instance | buffers | lower bound | our peak | %% over LB | ms | cpu ms | winning heuristic | best "
      "greedy "
      "here (%% over) | ref. GBS | ref. best greedy | ref. MiniMalloc | target |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---|---|\n");
  int failures = 0;
  for (const auto& path : files) {
    auto problem = hexir::planner::read_plan_csv(path.string());
    if (!problem.ok()) {
      std::fprintf(stderr, "%s\n", problem.status().message().c_str());
      ++failures;
      continue;
    }
    hexir::planner::PlanReport report;
    auto start = std::chrono::steady_clock::now();
    std::clock_t cpu_start = std::clock();  // CPU time of the process, all threads
    auto plan = hexir::planner::plan_arena(problem->buffers, options, &report);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double cpu_ms = 1000.0 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    std::string name = path.stem().string();
    if (!plan.ok() || !hexir::planner::check_buffer_plan(problem->buffers, *plan, options.alignment).ok()) {
      std::printf("| %s | %zu | INVALID PLAN: %s |\n", name.c_str(), problem->buffers.size(),
                  plan.ok() ? "overlap" : plan.status().message().c_str());
      ++failures;
      continue;
    }
    auto percent = [&](uint64_t size) {
      return report.lower_bound
                 ? 100.0 * (static_cast<double>(size) - static_cast<double>(report.lower_bound)) /
                       static_cast<double>(report.lower_bound)
                 : 0.0;
    };
    double over = percent(plan->size);
    std::string ref_gbs = "", ref_best = "", ref_mm = "", target = "";
    auto it = references().find(name);
    if (it != references().end()) {
      const Reference& r = it->second;
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "+%.2f %%", r.gbs_percent);
      ref_gbs = buffer;
      std::snprintf(buffer, sizeof buffer, "+%.2f %%", r.best_greedy_percent);
      ref_best = buffer;
      ref_mm = r.minimalloc;
      bool met = over <= r.best_greedy_percent + 1e-9;
      std::string what = "<= best greedy";
      if (r.cap) {
        met = met && plan->size <= r.cap;
        what += ", <= " + with_commas(r.cap);
      }
      if (r.max_percent >= 0) {
        met = met && over <= r.max_percent;
        std::snprintf(buffer, sizeof buffer, ", <= +%.1f %%", r.max_percent);
        what += buffer;
      }
      target = (met ? "met (" : "MISSED (") + what + ")";
      if (!met) ++failures;
    }
    std::printf("| %s | %s | %s | %s | +%.2f %% | %.0f | %.0f | %s | %s (+%.2f %%) | %s | %s | %s | %s |\n",
                name.c_str(), with_commas(problem->buffers.size()).c_str(),
                with_commas(report.lower_bound).c_str(), with_commas(plan->size).c_str(), over, ms, cpu_ms,
                plan->heuristic.c_str(), report.greedy_winner.c_str(), percent(report.greedy_size),
                ref_gbs.c_str(), ref_best.c_str(), ref_mm.c_str(), target.c_str());
    std::fflush(stdout);
  }
  return failures ? 1 : 0;
}
