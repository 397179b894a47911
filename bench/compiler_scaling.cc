// Scaling of the compiler and the offset planner on hostile sizes,
// each case at 1x, 10x and 100x a base size, with the growth of the time
// from one size to the next (10x the input should cost about 10x the time,
// a little more for n log n; a quadratic step shows as ~100x):
//
//   compiler_scaling [--quick] [--case NAME]
//
// Cases (base size in brackets):
//   chain      compile_source of N in-place elementwise ops in one chain [2,000]
//   passes     the passes alone on that chain (no parse, no writing) [2,000]
//   functions  parse N one-node functions (duplicate-name checks) [1,000]
//   results    parse one split with N named results [1,000]
//   constants  parse N constants, each used once [1,000]
//   donations  the passes over N donated inputs, each its output in place,
//              under the memory schedule (N ready at once) [1,000]
//   plan-hostile  plan_arena greedy phase (budget 0) on N rows with both ends
//              uniform over the horizon [10,000]
//   plan-short    the same on N rows living 1-100 steps [10,000]
// --quick: 1x and 10x only. Prints a markdown table (docs/hardening.md).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/compiler/hxir.h"
#include "hexir/planner/arena_planner.h"
#include "passes/arena.h"
#include "passes/in_place.h"
#include "passes/liveness.h"
#include "passes/schedule.h"
#include "passes/storage.h"

namespace {

namespace sz = hexir::compiler;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void must(const hexir::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "compiler_scaling: %s: %s\n", what, s.to_string().c_str());
  std::exit(1);
}

std::string chain_text(size_t n) {
  std::string text = "func @main(%x: f32[16]) -> f32[16] {\n  %v0 = call @relu(%x) : f32[16]\n";
  for (size_t i = 1; i < n; ++i)
    text += "  %v" + std::to_string(i) + " = call @" + (i % 2 ? "neg" : "relu") + "(%v" +
            std::to_string(i - 1) + ") : f32[16]\n";
  return text + "  return %v" + std::to_string(n - 1) + "\n}\n";
}

std::string functions_text(size_t n) {
  std::string text;
  for (size_t i = 0; i < n; ++i)
    text += "func @f" + std::to_string(i) +
            "(%x: f32[2]) -> f32[2] {\n  %y = call @neg(%x) : f32[2]\n  return %y\n}\n";
  return text;
}

std::string results_text(size_t n) {
  std::string names, types;
  for (size_t i = 0; i < n; ++i) {
    names += (i ? ", %p" : "%p") + std::to_string(i);
    types += i ? ", f32[1]" : "f32[1]";
  }
  return "func @main(%x: f32[" + std::to_string(n) + "]) -> f32[1] {\n  " + names +
         " = call @split(%x) {axis = 0} : " + types + "\n  %y = call @neg(%p0) : f32[1]\n  return %y\n}\n";
}

std::string constants_text(size_t n) {
  std::string text;
  for (size_t i = 0; i < n; ++i)
    text += "const @c" + std::to_string(i) + " : f32[2] = splat " + std::to_string(i) + ".0\n";
  text += "func @main(%x: f32[2]) -> f32[2] {\n  %v0 = call @add(%x, @c0) : f32[2]\n";
  for (size_t i = 1; i < n; ++i)
    text += "  %v" + std::to_string(i) + " = call @add(%v" + std::to_string(i - 1) + ", @c" +
            std::to_string(i) + ") : f32[2]\n";
  return text + "  return %v" + std::to_string(n - 1) + "\n}\n";
}

sz::Module parse(const std::string& text) {
  hexir::Result<sz::Module> m = sz::parse_hxir(text, "bench.hxir", ".");
  must(m.status(), "parse");
  return std::move(m).value();
}

void run_passes(const sz::Function& fn, sz::Schedule schedule) {
  sz::FunctionPlan plan;
  sz::assign_storage(fn, plan);
  if (schedule == sz::Schedule::kMemory) sz::schedule_for_memory(fn, plan);
  sz::assign_in_place(fn, plan);
  sz::place_donations(fn, plan);
  sz::record_last_uses(fn, plan);
  sz::record_workspaces(fn, plan);
  std::string heuristic;
  must(sz::plan_function_arena(fn, plan, sz::PlanStrategy::kArena, 64, &heuristic, 0), "plan");
}

sz::Module donations_module(size_t n) {
  sz::GraphBuilder b("donations");
  must(b.begin_function("main"), "begin");
  std::vector<int> outputs;
  for (size_t i = 0; i < n; ++i)
    must(b.add_input("x" + std::to_string(i), {hexir::DType::kF32, {4}}, true).status(), "input");
  for (size_t i = 0; i < n; ++i)
    outputs.push_back((*b.add_node(hexir::ops::OpId::kRelu, {static_cast<int>(i)}))[0]);
  must(b.set_outputs(outputs), "outputs");
  must(b.end_function(), "end");
  hexir::Result<sz::Module> m = b.finish();
  must(m.status(), "finish");
  return std::move(m).value();
}

std::vector<hexir::planner::PlanBuffer> rows(size_t n, bool hostile, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<hexir::planner::PlanBuffer> out(n);
  for (auto& b : out) {
    int64_t lo = static_cast<int64_t>(rng() % n), hi = 0;
    if (hostile) {
      hi = static_cast<int64_t>(rng() % n);
      if (lo > hi) std::swap(lo, hi);
      hi += 1;
    } else {
      hi = lo + 1 + static_cast<int64_t>(rng() % 100);
    }
    b = {1 + rng() % (1 << 20), lo, hi};
  }
  return out;
}

double plan_rows(size_t n, bool hostile, std::string* note) {
  std::vector<hexir::planner::PlanBuffer> buffers = rows(n, hostile, 1);
  hexir::planner::PlanReport report;
  const auto t0 = Clock::now();
  auto plan = hexir::planner::plan_arena(buffers, {1, 0}, &report);
  const double s = seconds_since(t0);
  must(plan.status(), "plan_arena");
  char text[160];
  std::snprintf(text, sizeof text, "%zu heuristics%s%s, %+.1f %% over the lower bound", report.greedy.size(),
                report.greedy_capped ? ", capped" : "",
                report.greedy_stopped_early ? ", phase allowance spent" : "",
                100.0 * static_cast<double>(plan->size) / static_cast<double>(report.lower_bound) - 100.0);
  *note = text;
  return s;
}

struct Case {
  const char* name;
  size_t base;
  // Seconds for size n (only the measured part); may set a note.
  std::function<double(size_t, std::string*)> run;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: compiler_scaling [--quick] [--case NAME]\n");
      return 2;
    }
  }
  const std::vector<Case> cases = {
      {"chain", 2000,
       [](size_t n, std::string*) {
         const std::string text = chain_text(n);
         const auto t0 = Clock::now();
         must(sz::compile_source(text, "bench.hxir", ".").status(), "compile");
         return seconds_since(t0);
       }},
      {"passes", 2000,
       [](size_t n, std::string*) {
         const sz::Module m = parse(chain_text(n));
         const auto t0 = Clock::now();
         run_passes(m.functions[0], sz::Schedule::kSource);
         return seconds_since(t0);
       }},
      {"functions", 1000,
       [](size_t n, std::string*) {
         const std::string text = functions_text(n);
         const auto t0 = Clock::now();
         parse(text);
         return seconds_since(t0);
       }},
      {"results", 1000,
       [](size_t n, std::string*) {
         const std::string text = results_text(n);
         const auto t0 = Clock::now();
         parse(text);
         return seconds_since(t0);
       }},
      {"constants", 1000,
       [](size_t n, std::string*) {
         const std::string text = constants_text(n);
         const auto t0 = Clock::now();
         parse(text);
         return seconds_since(t0);
       }},
      {"donations", 1000,
       [](size_t n, std::string*) {
         const sz::Module m = donations_module(n);
         const auto t0 = Clock::now();
         run_passes(m.functions[0], sz::Schedule::kMemory);
         return seconds_since(t0);
       }},
      {"plan-hostile", 10000, [](size_t n, std::string* note) { return plan_rows(n, true, note); }},
      {"plan-short", 10000, [](size_t n, std::string* note) { return plan_rows(n, false, note); }},
  };
  std::printf(
      "| case | n | seconds | x previous size | us per element | note |\n|---|---:|---:|---:|---:|---|\n");
  std::fflush(stdout);
  for (const Case& c : cases) {
    if (!only.empty() && only != c.name) continue;
    double previous = 0;
    for (size_t scale : {size_t{1}, size_t{10}, size_t{100}}) {
      if (quick && scale == 100) break;
      const size_t n = c.base * scale;
      std::string note;
      const double s = c.run(n, &note);
      char growth[32] = "";
      if (previous > 0) std::snprintf(growth, sizeof growth, "%.1f", s / previous);
      std::printf("| %s | %zu | %.3f | %s | %.2f | %s |\n", c.name, n, s, growth,
                  1e6 * s / static_cast<double>(n), note.c_str());
      std::fflush(stdout);
      previous = s;
    }
  }
  return 0;
}
