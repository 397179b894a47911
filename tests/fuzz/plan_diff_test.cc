// The differential plan target (fuzz_targets.h: compare_plans) on random
// programs from fixed seeds: every program the generator writes compiles
// under every plan option and gives the naive plan's outputs bit for bit.
// libFuzzer explores further (fuzz/plan_diff_fuzzer.cc).
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "fuzz_targets.h"
#include "graph_gen.h"

TEST_CASE("plan_diff: random programs give the naive plan's outputs under every plan option") {
  int nodes = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> bytes(40 + rng() % 600);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    nodes += hexir::fuzz::generate_graph(bytes.data(), bytes.size()).nodes;
    INFO("seed " << seed);
    CHECK(hexir::fuzz::compare_plans(bytes.data(), bytes.size()) == "");
  }
  MESSAGE("operators over 40 programs: " << nodes);
  CHECK(nodes > 200);
}

TEST_CASE("plan_diff: the generator is deterministic and total") {
  const std::vector<uint8_t> bytes = {1, 2, 3, 250, 7, 9, 11, 0, 255, 128, 64, 32};
  CHECK(hexir::fuzz::generate_graph(bytes.data(), bytes.size()).source ==
        hexir::fuzz::generate_graph(bytes.data(), bytes.size()).source);
  // No bytes at all still make a valid program (one function, one operator).
  CHECK(hexir::fuzz::compare_plans(nullptr, 0) == "");
}
