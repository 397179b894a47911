// cuda_compare GOT.npy WANT.npy [--rtol R] [--atol A]
// Compares two .npy results element by element (|got - want| <= atol +
// rtol * |want|; NaN matches NaN; other dtypes must match bytewise). Prints one
// line with the worst element; exit status 0 when everything is within
// tolerance, 1 otherwise, 2 on bad usage. Used by scripts/gpu-check.sh to
// compare cuda results with the cpu's.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hexir/base/npy.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: cuda_compare GOT.npy WANT.npy [--rtol R] [--atol A]\n");
    return 2;
  }
  double rtol = 1e-4, atol = 1e-5;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rtol") == 0) {
      rtol = std::atof(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--atol") == 0) {
      atol = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "cuda_compare: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  auto got = hexir::read_npy(argv[1]);
  auto want = hexir::read_npy(argv[2]);
  if (!got.ok() || !want.ok()) {
    std::fprintf(stderr, "cuda_compare: %s\n", (!got.ok() ? got : want).status().to_string().c_str());
    return 2;
  }
  if (!(got->type == want->type) || got->data.size() != want->data.size()) {
    std::printf("MISMATCH %s: type %s vs %s\n", argv[1], got->type.to_string().c_str(),
                want->type.to_string().c_str());
    return 1;
  }
  if (want->type.dtype != hexir::DType::kF32) {
    const bool same = got->data == want->data;
    std::printf("%s %s: %zu bytes %s\n", same ? "OK" : "MISMATCH", argv[1], want->data.size(),
                same ? "identical" : "differ");
    return same ? 0 : 1;
  }
  const size_t n = want->data.size() / 4;
  const float* g = reinterpret_cast<const float*>(got->data.data());
  const float* w = reinterpret_cast<const float*>(want->data.data());
  size_t bad = 0, worst = 0;
  double worst_abs = 0, worst_excess = -1e300;
  for (size_t i = 0; i < n; ++i) {
    const bool both_nan = std::isnan(g[i]) && std::isnan(w[i]);
    const double diff = both_nan ? 0.0 : std::fabs(double(g[i]) - double(w[i]));
    const double excess = diff - (atol + rtol * std::fabs(double(w[i])));
    if (!(excess <= 0)) ++bad;
    if (!(excess <= worst_excess)) {
      worst_excess = excess;
      worst = i;
      worst_abs = diff;
    }
  }
  std::printf(
      "%s %s: %zu elements, %zu out of tolerance (rtol %g, atol %g); worst element %zu: got %.9g, want "
      "%.9g, |diff| %.3g\n",
      bad == 0 ? "OK" : "MISMATCH", argv[1], n, bad, rtol, atol, worst, n ? g[worst] : 0.0f,
      n ? w[worst] : 0.0f, worst_abs);
  return bad == 0 ? 0 : 1;
}
