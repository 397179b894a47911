// Issue 10: the kept kernel libraries against Hexir's own CPU kernels, on the
// shapes of bench/cpu_kernels (the real models' GEMMs and convolutions), at 1
// and 2 threads. Each library is compiled in only where meson found it
// (HEXIR_HAVE_OPENBLAS, HEXIR_HAVE_DNNL, HEXIR_HAVE_XNNPACK).
//
//   build/bench/library_compare [--runs N] [--repeats R]
//
// Every timing is the median of N runs after two warm-ups; the best median of
// R repeats is kept. Prepare-time work (primitive/operator creation, weight
// reorders and packing, XNNPACK's setup with fixed pointers) is outside the
// timed loop; its time and bytes are printed. Per-invoke layout conversions
// (NCHW <-> oneDNN's blocked layout, NCHW <-> NHWC for XNNPACK) are timed
// separately. Every result is compared with Hexir's (max abs difference).
//
//   Hexir     the cpu device's queue, as bench/cpu_kernels (its thread pool).
//   OpenBLAS  cblas_sgemm; convolutions as an explicit im2col (single thread,
//             inside the timed loop) + one sgemm per group. Threads:
//             openblas_set_num_threads.
//   oneDNN    matmul / convolution_forward primitives, f32, forward_inference.
//             "plain": row-major / NCHW, OIHW, NCHW, as Hexir uses. "blocked":
//             format_tag::any for the weights (matmul) or for src, weights and
//             dst (convolution), weights reordered at prepare, activations
//             reordered per invoke (timed separately). Threads: OpenMP (the
//             Debian build's runtime), omp_set_num_threads before creation.
//   XNNPACK   fully_connected_nc_f32 (XNN_FLAG_TRANSPOSE_WEIGHTS, B as K x N)
//             and convolution2d_nhwc_f32 (weights OIHW -> OHWI at prepare);
//             the NCHW -> NHWC -> NCHW activation transposes are timed
//             separately. Also convolution2d_nchw_f32 where that operator
//             accepts the shape. Threads: pthreadpool_create(n).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "hexir/hal/cpu_kernels.h"
#include "hexir/hal/device.h"
#include "hexir/ops/op.h"

#ifdef HEXIR_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef HEXIR_HAVE_DNNL
#include <dnnl.hpp>
extern "C" void omp_set_num_threads(int);
#endif
#ifdef HEXIR_HAVE_XNNPACK
#include <pthreadpool.h>
#include <xnnpack.h>
#endif

namespace {

using hexir::DType;
using hexir::TensorType;
using hexir::ops::OpId;

struct Shape {
  const char* name;
  bool conv;
  int64_t m, k, n;                               // matmul: M x K * K x N
  int64_t c, h, w, oc, ks, stride, groups, pad;  // conv2d, NCHW, square kernel
  int64_t oh, ow;
  double flops;
  std::vector<TensorType> inputs;
  std::vector<int64_t> params;
};

TensorType f32(std::vector<int64_t> dims) { return {DType::kF32, std::move(dims)}; }

Shape matmul(const char* name, int64_t m, int64_t k, int64_t n) {
  Shape s{};
  s.name = name;
  s.m = m, s.k = k, s.n = n, s.groups = 1;
  s.flops = 2.0 * m * k * n;
  s.inputs = {f32({m, k}), f32({k, n})};
  return s;
}

Shape conv(const char* name, int64_t c, int64_t h, int64_t w, int64_t k, int64_t ks, int64_t stride, int64_t groups) {
  Shape s{};
  s.name = name;
  s.conv = true;
  s.c = c, s.h = h, s.w = w, s.oc = k, s.ks = ks, s.stride = stride, s.groups = groups, s.pad = ks / 2;
  s.oh = (h + 2 * s.pad - ks) / stride + 1, s.ow = (w + 2 * s.pad - ks) / stride + 1;
  s.flops = 2.0 * k * (c / groups) * ks * ks * s.oh * s.ow;
  s.inputs = {f32({1, c, h, w}), f32({k, c / groups, ks, ks})};
  s.params = {stride, stride, s.pad, s.pad, s.pad, s.pad, 1, 1, groups};
  return s;
}

int g_runs = 20, g_repeats = 2;

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best of g_repeats medians of g_runs timed calls (after two warm-ups).
double time_ms(const std::function<void()>& f) {
  double best = 1e30;
  for (int rep = 0; rep < g_repeats; ++rep) {
    std::vector<double> t;
    for (int r = 0; r < g_runs + 2; ++r) {
      const double t0 = now_ms();
      f();
      if (r >= 2) t.push_back(now_ms() - t0);
    }
    std::sort(t.begin(), t.end());
    best = std::min(best, t[t.size() / 2]);
  }
  return best;
}

// Lets the previous library's spinning workers (OpenMP, OpenBLAS) go to sleep
// before the next one is timed: the machine has two cores.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }

double rss_mib() {
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
  return d;
}

struct Timing {
  double ms = 0;          // the kernel
  double convert_ms = 0;  // per-invoke layout conversions around it
  bool ok = false;
};

struct Prepared {
  double ms = 0;       // creation + weight reorder/packing
  double bytes = 0;    // memory kept for the kernel (reordered/packed weights, scratchpads, buffers)
  std::string impl;    // what the library picked
  std::string note;
};

struct Row {
  std::map<std::string, Timing> t[2];          // by variant, [threads - 1]
  std::map<std::string, Prepared> prep;        // at 1 thread
  std::map<std::string, double> diff;          // max abs diff against Hexir
  double ref_max = 0;
};

// NCHW <-> NHWC for batch 1 (what a graph would pay at each layout edge).
void nchw_to_nhwc(const float* in, float* out, int64_t c, int64_t hw) {
  for (int64_t p = 0; p < hw; ++p)
    for (int64_t ch = 0; ch < c; ++ch) out[p * c + ch] = in[ch * hw + p];
}
void nhwc_to_nchw(const float* in, float* out, int64_t c, int64_t hw) {
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t p = 0; p < hw; ++p) out[ch * hw + p] = in[p * c + ch];
}

#ifdef HEXIR_HAVE_OPENBLAS
// Channels c0..c0+cg of x (NCHW, batch 1) into col[(cg*ks*ks) x (oh*ow)].
void im2col(const Shape& s, const float* x, int64_t c0, int64_t cg, float* col) {
  const int64_t plane = s.oh * s.ow;
  for (int64_t ch = 0; ch < cg; ++ch)
    for (int64_t ky = 0; ky < s.ks; ++ky)
      for (int64_t kx = 0; kx < s.ks; ++kx) {
        float* dst = col + ((ch * s.ks + ky) * s.ks + kx) * plane;
        const float* src = x + (c0 + ch) * s.h * s.w;
        for (int64_t oy = 0; oy < s.oh; ++oy) {
          const int64_t iy = oy * s.stride - s.pad + ky;
          for (int64_t ox = 0; ox < s.ow; ++ox) {
            const int64_t ix = ox * s.stride - s.pad + kx;
            dst[oy * s.ow + ox] = (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w) ? src[iy * s.w + ix] : 0.0f;
          }
        }
      }
}

void run_openblas(const Shape& s, const std::vector<float>& a, const std::vector<float>& b, Row& row,
                  const std::vector<float>& ref) {
  const bool direct = s.conv && s.ks == 1 && s.stride == 1;  // a 1x1 s1 convolution needs no im2col
  const int64_t cg = s.c / s.groups, kg = s.oc / s.groups, kdim = cg * s.ks * s.ks, plane = s.oh * s.ow;
  std::vector<float> out(ref.size()), col(s.conv && !direct ? kdim * plane : 0);
  auto run = [&] {
    if (!s.conv) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f,
                  out.data(), s.n);
      return;
    }
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* x = a.data() + g * cg * s.h * s.w;
      if (!direct) {
        im2col(s, a.data(), g * cg, cg, col.data());
        x = col.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kg, plane, kdim, 1.0f, b.data() + g * kg * kdim, kdim, x,
                  plane, 0.0f, out.data() + g * kg * plane, plane);
    }
  };
  row.prep["OpenBLAS"] = {0, static_cast<double>(col.size() * 4), openblas_get_corename(),
                          s.conv ? (direct ? "1x1: sgemm on the input" : "im2col buffer") : ""};
  for (int threads : {1, 2}) {
    openblas_set_num_threads(threads);
    settle();
    row.t[threads - 1]["OpenBLAS"] = {time_ms(run), 0, true};
    if (threads == 1) row.diff["OpenBLAS"] = max_abs_diff(out, ref);
  }
}
#endif

#ifdef HEXIR_HAVE_DNNL
void run_dnnl(const Shape& s, const std::vector<float>& a, const std::vector<float>& b, Row& row,
              const std::vector<float>& ref) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  memory::desc src_plain, w_plain, dst_plain;
  if (!s.conv) {
    src_plain = memory::desc({s.m, s.k}, dt::f32, tag::ab);
    w_plain = memory::desc({s.k, s.n}, dt::f32, tag::ab);
    dst_plain = memory::desc({s.m, s.n}, dt::f32, tag::ab);
  } else {
    src_plain = memory::desc({1, s.c, s.h, s.w}, dt::f32, tag::nchw);
    w_plain = s.groups == 1 ? memory::desc({s.oc, s.c, s.ks, s.ks}, dt::f32, tag::oihw)
                            : memory::desc({s.groups, s.oc / s.groups, s.c / s.groups, s.ks, s.ks}, dt::f32,
                                           tag::goihw);
    dst_plain = memory::desc({1, s.oc, s.oh, s.ow}, dt::f32, tag::nchw);
  }
  std::vector<float> out(ref.size());
  memory src_user(src_plain, eng, const_cast<float*>(a.data()));
  memory w_user(w_plain, eng, const_cast<float*>(b.data()));
  memory dst_user(dst_plain, eng, out.data());

  for (bool blocked : {false, true}) {
    const std::string name = blocked ? "oneDNN blocked" : "oneDNN plain";
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const double t0 = now_ms();
      primitive_attr attr;
      attr.set_scratchpad_mode(scratchpad_mode::user);
      primitive prim;
      memory::desc src_md, w_md, dst_md, scratch_md;
      std::string impl;
      if (!s.conv) {
        dnnl::matmul::desc d(src_plain, blocked ? memory::desc({s.k, s.n}, dt::f32, tag::any) : w_plain, dst_plain);
        dnnl::matmul::primitive_desc pd(d, attr, eng);
        prim = dnnl::matmul(pd);
        src_md = pd.src_desc(), w_md = pd.weights_desc(), dst_md = pd.dst_desc(), scratch_md = pd.scratchpad_desc();
        impl = pd.impl_info_str();
      } else {
        auto any = [](const memory::desc& md) { return memory::desc(md.dims(), dt::f32, tag::any); };
        convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                    blocked ? any(src_plain) : src_plain, blocked ? any(w_plain) : w_plain,
                                    blocked ? any(dst_plain) : dst_plain, {s.stride, s.stride}, {s.pad, s.pad},
                                    {s.pad, s.pad});
        convolution_forward::primitive_desc pd(d, attr, eng);
        prim = convolution_forward(pd);
        src_md = pd.src_desc(), w_md = pd.weights_desc(), dst_md = pd.dst_desc(), scratch_md = pd.scratchpad_desc();
        impl = pd.impl_info_str();
      }
      // Weights reordered once (prepare); activations per invoke where the layout differs.
      memory w_mem = w_user, src_mem = src_user, dst_mem = dst_user;
      double kept = 0;
      if (w_md != w_plain) {
        w_mem = memory(w_md, eng);
        reorder(w_user, w_mem).execute(strm, w_user, w_mem);
        kept += w_md.get_size();
      }
      std::vector<reorder> to_blocked, from_blocked;
      if (src_md != src_plain) {
        src_mem = memory(src_md, eng);
        kept += src_md.get_size();
        to_blocked.push_back(reorder(src_user, src_mem));
      }
      if (dst_md != dst_plain) {
        dst_mem = memory(dst_md, eng);
        kept += dst_md.get_size();
        from_blocked.push_back(reorder(dst_mem, dst_user));
      }
      memory scratch(scratch_md, eng);
      kept += scratch_md.get_size();
      strm.wait();
      const double prep_ms = now_ms() - t0;
      auto to = [&] {
        for (auto& r : to_blocked) r.execute(strm, src_user, src_mem);
        strm.wait();
      };
      auto from = [&] {
        for (auto& r : from_blocked) r.execute(strm, dst_mem, dst_user);
        strm.wait();
      };
      auto run = [&] {
        prim.execute(strm, {{DNNL_ARG_SRC, src_mem},
                            {DNNL_ARG_WEIGHTS, w_mem},
                            {DNNL_ARG_DST, dst_mem},
                            {DNNL_ARG_SCRATCHPAD, scratch}});
        strm.wait();
      };
      to();
      settle();
      Timing t{time_ms(run), 0, true};
      if (!to_blocked.empty() || !from_blocked.empty()) t.convert_ms = time_ms(to) + time_ms(from);
      from();
      row.t[threads - 1][name] = t;
      if (threads == 1) {
        row.diff[name] = max_abs_diff(out, ref);
        std::string layouts;
        if (blocked) {
          // oneDNN's tag notation: dims outermost first by stride, blocked dims in capitals, then the inner blocks.
          auto tagname = [](const memory::desc& md) {
            const auto& bd = md.data.format_desc.blocking;
            const int nd = md.data.ndims;
            std::vector<int> order(nd);
            for (int i = 0; i < nd; ++i) order[i] = i;
            std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return bd.strides[x] > bd.strides[y]; });
            std::string n;
            for (int i : order) {
              bool blocked_dim = false;
              for (int j = 0; j < bd.inner_nblks; ++j) blocked_dim |= bd.inner_idxs[j] == i;
              n += static_cast<char>((blocked_dim ? 'A' : 'a') + i);
            }
            for (int j = 0; j < bd.inner_nblks; ++j)
              n += std::to_string(bd.inner_blks[j]) + static_cast<char>('a' + bd.inner_idxs[j]);
            return n;
          };
          layouts = "src " + tagname(src_md) + ", weights " + tagname(w_md) + ", dst " + tagname(dst_md);
        }
        row.prep[name] = {prep_ms, kept, impl, layouts};
      }
    }
  }
}
#endif

#ifdef HEXIR_HAVE_XNNPACK
// Counts what XNNPACK allocates (packed weights, indirection buffers, operator).
struct XnnCounter {
  std::map<void*, size_t> live;
  size_t bytes = 0;
} g_xnn;

void* xnn_alloc(void*, size_t size) {
  void* p = std::malloc(size);
  if (p) g_xnn.live[p] = size, g_xnn.bytes += size;
  return p;
}
void xnn_free(void*, void* p) {
  auto it = g_xnn.live.find(p);
  if (it != g_xnn.live.end()) g_xnn.bytes -= it->second, g_xnn.live.erase(it);
  std::free(p);
}
void* xnn_realloc(void* ctx, void* p, size_t size) {
  auto it = g_xnn.live.find(p);
  if (it != g_xnn.live.end()) g_xnn.bytes -= it->second, g_xnn.live.erase(it);
  void* q = std::realloc(p, size);
  if (q) g_xnn.live[q] = size, g_xnn.bytes += size;
  (void)ctx;
  return q;
}
void* xnn_aligned_alloc(void*, size_t alignment, size_t size) {
  void* p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p) g_xnn.live[p] = size, g_xnn.bytes += size;
  return p;
}
xnn_allocator g_xnn_allocator{nullptr, xnn_alloc, xnn_realloc, xnn_free, xnn_aligned_alloc, xnn_free};

void run_xnnpack(const Shape& s, const std::vector<float>& a, const std::vector<float>& b, Row& row,
                 const std::vector<float>& ref) {
  const int64_t cg = s.c / s.groups, kg = s.oc / s.groups;
  std::vector<float> out(ref.size()), x_nhwc(s.conv ? a.size() : 0), y_nhwc(s.conv ? ref.size() : 0),
      w_ohwi(s.conv ? b.size() : 0);
  if (s.conv)  // OIHW -> per group [kg][ks][ks][cg] (prepare)
    for (int64_t o = 0; o < s.oc; ++o)
      for (int64_t i = 0; i < cg; ++i)
        for (int64_t kk = 0; kk < s.ks * s.ks; ++kk) w_ohwi[(o * s.ks * s.ks + kk) * cg + i] = b[(o * cg + i) * s.ks * s.ks + kk];
  for (bool nchw : {false, true}) {
    if (nchw && !s.conv) continue;
    const std::string name = nchw ? "XNNPACK NCHW" : "XNNPACK NHWC";
    for (int threads : {1, 2}) {
      pthreadpool_t pool = pthreadpool_create(threads);
      const size_t before = g_xnn.bytes;
      const double t0 = now_ms();
      xnn_operator_t op = nullptr;
      xnn_status st;
      if (!s.conv) {
        st = xnn_create_fully_connected_nc_f32(s.k, s.n, s.k, s.n, b.data(), nullptr, -INFINITY, INFINITY,
                                               XNN_FLAG_TRANSPOSE_WEIGHTS, &op);
        if (st == xnn_status_success) st = xnn_setup_fully_connected_nc_f32(op, s.m, a.data(), out.data(), pool);
      } else if (!nchw) {
        st = xnn_create_convolution2d_nhwc_f32(s.pad, s.pad, s.pad, s.pad, s.ks, s.ks, s.stride, s.stride, 1, 1,
                                               s.groups, cg, kg, s.c, s.oc, w_ohwi.data(), nullptr, -INFINITY,
                                               INFINITY, 0, &op);
        if (st == xnn_status_success)
          st = xnn_setup_convolution2d_nhwc_f32(op, 1, s.h, s.w, x_nhwc.data(), y_nhwc.data(), pool);
      } else {
        st = xnn_create_convolution2d_nchw_f32(s.pad, s.pad, s.pad, s.pad, s.ks, s.ks, s.stride, s.stride, 1, 1,
                                               s.groups, cg, kg, s.c, s.oc, w_ohwi.data(), nullptr, -INFINITY,
                                               INFINITY, 0, &op);
        if (st == xnn_status_success)
          st = xnn_setup_convolution2d_nchw_f32(op, 1, s.h, s.w, a.data(), out.data(), pool);
      }
      const double prep_ms = now_ms() - t0;
      const size_t kept = g_xnn.bytes - before;
      if (st != xnn_status_success) {
        if (threads == 1) row.prep[name] = {prep_ms, 0, "", "unsupported (status " + std::to_string(st) + ")"};
        if (op) xnn_delete_operator(op);
        pthreadpool_destroy(pool);
        continue;
      }
      auto run = [&] { xnn_run_operator(op, pool); };
      auto to = [&] { nchw_to_nhwc(a.data(), x_nhwc.data(), s.c, s.h * s.w); };
      auto from = [&] { nhwc_to_nchw(y_nhwc.data(), out.data(), s.oc, s.oh * s.ow); };
      const bool convert = s.conv && !nchw;
      if (convert) to();
      settle();
      Timing t{time_ms(run), 0, true};
      if (convert) t.convert_ms = time_ms(to) + time_ms(from);
      if (convert) from();
      row.t[threads - 1][name] = t;
      if (threads == 1) {
        row.diff[name] = max_abs_diff(out, ref);
        row.prep[name] = {prep_ms, static_cast<double>(kept), "", convert ? "+ NHWC in/out buffers" : ""};
      }
      xnn_delete_operator(op);
      pthreadpool_destroy(pool);
    }
  }
}
#endif

double clock_ghz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return std::atof(line.substr(line.find(':') + 1).c_str()) / 1000.0;
  return 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0) g_runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--repeats") == 0) g_repeats = std::max(1, std::atoi(argv[i + 1]));
  }
  const std::vector<Shape> shapes = {
      matmul("BERT-base MLP up 256x768 * 768x3072", 256, 768, 3072),
      matmul("BERT-base MLP down 256x3072 * 3072x768", 256, 3072, 768),
      matmul("BERT-base QKV 256x768 * 768x768", 256, 768, 768),
      matmul("encoder T=128 D=256 MLP 128x256 * 256x1024", 128, 256, 1024),
      conv("PP-OCR 3x3 s1 64->64 @ 40x80", 64, 40, 80, 64, 3, 1, 1),
      conv("PP-OCR 1x1 128->256 @ 20x40", 128, 20, 40, 256, 1, 1, 1),
      conv("BlazeFace 5x5 depthwise 48 @ 64x64", 48, 64, 64, 48, 5, 1, 48),
      conv("BlazeFace 1x1 48->96 @ 32x32", 48, 32, 32, 96, 1, 1, 1),
      conv("stem 3x3 s2 3->32 @ 224x224", 3, 224, 224, 32, 3, 2, 1),
  };
  std::vector<std::string> variants = {"Hexir"};
  std::printf("clock %.2f GHz (/proc/cpuinfo); %d runs, best median of %d repeats\n", clock_ghz(), g_runs, g_repeats);
#ifdef HEXIR_HAVE_OPENBLAS
  variants.push_back("OpenBLAS");
  std::printf("OpenBLAS: core %s, config %s\n", openblas_get_corename(), openblas_get_config());
#endif
#ifdef HEXIR_HAVE_DNNL
  variants.push_back("oneDNN plain");
  variants.push_back("oneDNN blocked");
  {
    const dnnl_version_t* v = dnnl::version();
    std::printf("oneDNN %d.%d.%d, cpu runtime %s, max ISA %d\n", v->major, v->minor, v->patch,
                v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", static_cast<int>(dnnl::get_effective_cpu_isa()));
  }
#endif
#ifdef HEXIR_HAVE_XNNPACK
  variants.push_back("XNNPACK NHWC");
  variants.push_back("XNNPACK NCHW");
  if (xnn_initialize(&g_xnn_allocator) != xnn_status_success) {
    std::fprintf(stderr, "xnn_initialize failed\n");
    return 1;
  }
  std::printf("XNNPACK initialized\n");
#endif
  std::map<std::string, double> rss_growth;  // first use of each library
  std::vector<Row> rows(shapes.size());
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& s = shapes[si];
    Row& row = rows[si];
    const OpId op = s.conv ? OpId::kConv2d : OpId::kMatmul;
    auto result = hexir::ops::infer_result_type(op, s.inputs, s.params);
    if (!result.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.name, result.status().to_string().c_str());
      return 1;
    }
    const std::vector<TensorType> outs{*result};
    auto plan = hexir::ops::plan_op(op, s.inputs, outs, s.params);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.name, plan.status().to_string().c_str());
      return 1;
    }
    std::vector<std::vector<float>> data;
    std::vector<void*> operands;
    for (const TensorType& t : s.inputs) {
      data.emplace_back(static_cast<size_t>(*hexir::element_count(t.dims.data(), t.dims.size())));
      for (size_t i = 0; i < data.back().size(); ++i) data.back()[i] = static_cast<float>((i * 7919) % 17) * 0.01f;
    }
    data.emplace_back(static_cast<size_t>(*hexir::element_count(outs[0].dims.data(), outs[0].dims.size())));
    for (auto& d : data) operands.push_back(d.data());
    const size_t ws_bytes = hexir::ops::workspace_bytes(op, s.inputs, s.params);
    std::vector<uint64_t> workspace((ws_bytes + 7) / 8);
    hexir::hal::Dispatch dispatch;
    dispatch.kernel =
        reinterpret_cast<uintptr_t>(hexir::hal::cpu::find_cpu_kernel(hexir::ops::kernel_key(op, s.inputs, outs)));
    dispatch.plan = plan->words().data();
    dispatch.operands = operands.data();
    dispatch.input_count = static_cast<uint32_t>(s.inputs.size());
    dispatch.output_count = 1;
    dispatch.workspace = workspace.empty() ? nullptr : workspace.data();
    dispatch.workspace_size = workspace.size() * 8;
    row.prep["Hexir"] = {0, static_cast<double>(ws_bytes), "", "workspace; B strips packed on the stack per call"};
    for (int threads : {1, 2}) {
      auto device = hexir::hal::create_device("cpu", {.threads = threads});
      auto queue = (*device)->create_queue();
      settle();
      hexir::Status st;
      row.t[threads - 1]["Hexir"] = {time_ms([&] {
                                       if (st.ok()) st = (*queue)->dispatch(dispatch);
                                     }),
                                     0, true};
      if (!st.ok()) {
        std::fprintf(stderr, "%s: %s\n", s.name, st.to_string().c_str());
        return 1;
      }
    }
    const std::vector<float> ref = data.back();
    for (float v : ref) row.ref_max = std::max(row.ref_max, static_cast<double>(std::fabs(v)));
    auto measure = [&](const char* lib, auto&& fn) {
      const double r0 = rss_mib();
      fn(s, data[0], data[1], row, ref);
      if (!rss_growth.count(lib)) rss_growth[lib] = rss_mib() - r0;
    };
#ifdef HEXIR_HAVE_OPENBLAS
    measure("OpenBLAS", run_openblas);
#endif
#ifdef HEXIR_HAVE_DNNL
    measure("oneDNN", run_dnnl);
#endif
#ifdef HEXIR_HAVE_XNNPACK
    measure("XNNPACK", run_xnnpack);
#endif
    // Machine-readable lines for merging several runs (best median per cell).
    for (int threads : {1, 2})
      for (const auto& [v, t] : row.t[threads - 1])
        std::fprintf(stderr, "RESULT\t%s\t%s\t%d\t%.6f\t%.6f\n", s.name, v.c_str(), threads, t.ms, t.convert_ms);
  }

  // GFLOP/s tables: kernel alone, ratio to Hexir, and with per-invoke layout conversions.
  for (int threads : {1, 2}) {
    std::printf("\n**%d thread%s** — GFLOP/s (ratio to Hexir); \"w/ conv.\": including per-invoke activation "
                "layout conversions\n\n| shape | GFLOP |",
                threads, threads == 1 ? "" : "s");
    for (const auto& v : variants) std::printf(" %s |", v.c_str());
    std::printf("\n| --- | ---: |");
    for (size_t i = 0; i < variants.size(); ++i) std::printf(" ---: |");
    std::printf("\n");
    for (size_t si = 0; si < shapes.size(); ++si) {
      const auto& tm = rows[si].t[threads - 1];
      const double hexir = shapes[si].flops / tm.at("Hexir").ms / 1e6;
      std::printf("| %s | %.3f |", shapes[si].name, shapes[si].flops / 1e9);
      for (const auto& v : variants) {
        auto it = tm.find(v);
        if (it == tm.end()) {
          std::printf(" — |");
          continue;
        }
        const double g = shapes[si].flops / it->second.ms / 1e6;
        if (v == "Hexir") {
          std::printf(" %.1f |", g);
          continue;
        }
        std::printf(" %.1f (%.2fx)", g, g / hexir);
        if (it->second.convert_ms > 0) {
          const double gc = shapes[si].flops / (it->second.ms + it->second.convert_ms) / 1e6;
          std::printf("; w/ conv. %.1f (%.2fx)", gc, gc / hexir);
        }
        std::printf(" |");
      }
      std::printf("\n");
    }
  }
  std::printf("\n**Milliseconds** (1 thread / 2 threads; conversions in brackets)\n\n| shape |");
  for (const auto& v : variants) std::printf(" %s |", v.c_str());
  std::printf("\n| --- |");
  for (size_t i = 0; i < variants.size(); ++i) std::printf(" ---: |");
  std::printf("\n");
  for (size_t si = 0; si < shapes.size(); ++si) {
    std::printf("| %s |", shapes[si].name);
    for (const auto& v : variants) {
      auto a = rows[si].t[0].find(v), b = rows[si].t[1].find(v);
      if (a == rows[si].t[0].end()) {
        std::printf(" — |");
        continue;
      }
      std::printf(" %.3f / %.3f", a->second.ms, b->second.ms);
      if (a->second.convert_ms > 0) std::printf(" [+%.3f / +%.3f]", a->second.convert_ms, b->second.convert_ms);
      std::printf(" |");
    }
    std::printf("\n");
  }
  std::printf("\n**Prepare** (1 thread): ms, MiB kept for the kernel, max abs diff against Hexir (|Hexir| max)\n\n"
              "| shape | variant | prepare ms | kept MiB | max abs diff | implementation / note |\n"
              "| --- | --- | ---: | ---: | ---: | --- |\n");
  for (size_t si = 0; si < shapes.size(); ++si)
    for (const auto& v : variants) {
      auto it = rows[si].prep.find(v);
      if (it == rows[si].prep.end()) continue;
      auto d = rows[si].diff.find(v);
      char diff[64] = "—";
      if (v == "Hexir")
        std::snprintf(diff, sizeof diff, "(%.3g)", rows[si].ref_max);
      else if (d != rows[si].diff.end())
        std::snprintf(diff, sizeof diff, "%.2g", d->second);
      std::printf("| %s | %s | %.2f | %.3f | %s | %s%s%s |\n", shapes[si].name, v.c_str(), it->second.ms,
                  it->second.bytes / (1 << 20), diff, it->second.impl.c_str(),
                  !it->second.impl.empty() && !it->second.note.empty() ? "; " : "", it->second.note.c_str());
    }
  std::printf("\nRSS growth at each library's first use (its init, buffers and code pages touched):");
  for (const auto& [lib, mib] : rss_growth) std::printf(" %s %.1f MiB;", lib.c_str(), mib);
  std::printf("\n");
  return 0;
}
