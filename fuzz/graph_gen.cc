#include "graph_gen.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

namespace hexir::fuzz {
namespace {

using Dims = std::vector<int64_t>;

int64_t numel(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_str(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string type_str(const char* dtype, const Dims& dims) { return dtype + dims_str(dims); }

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Broadcast shape of a and b (numpy rules), or false.
bool broadcast(const Dims& a, const Dims& b, Dims& out) {
  const size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = std::max(da, db);
  }
  return true;
}

constexpr int64_t kMaxElements = 4096;

struct Val {
  std::string name;
  Dims dims;
  bool input = false;
};

class Generator {
 public:
  explicit Generator(ByteReader& r) : r_(r) {}

  std::string module(int max_nodes, GeneratedGraph& info) {
    std::string funcs;
    const int nfuncs = r_.range(1, 2);
    for (int f = 0; f < nfuncs; ++f) funcs += function(f == 0 ? "main" : "f" + std::to_string(f), max_nodes, info);
    info.functions = nfuncs;
    return "module @diff\n" + consts_ + funcs;
  }

 private:
  // A float whose decimal form is exact: k / 8 for k in [-24, 24].
  std::string literal() {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", (static_cast<int>(r_.byte() % 49) - 24) / 8.0);
    return buf;
  }

  void dense_body(const Dims& dims, size_t axis, std::string& out, bool integer, int64_t lo, int64_t hi) {
    if (axis == dims.size()) {
      if (integer)
        out += std::to_string(lo + static_cast<int64_t>(r_.byte()) % (hi - lo + 1));
      else
        out += literal();
      return;
    }
    out += "[";
    for (int64_t i = 0; i < dims[axis]; ++i) {
      if (i) out += ", ";
      dense_body(dims, axis + 1, out, integer, lo, hi);
    }
    out += "]";
  }

  // A module constant: dense or splat f32.
  std::string constant(const Dims& dims) {
    const std::string name = "@c" + std::to_string(const_count_++);
    std::string value;
    if (dims.empty() || r_.byte() % 4 == 0) {
      value = "splat " + literal();
    } else {
      value = "dense ";
      dense_body(dims, 0, value, false, 0, 0);
    }
    consts_ += "const " + name + " : " + type_str("f32", dims) + " = " + value + "\n";
    return name;
  }

  std::string index_constant(const Dims& dims, int64_t axis_size) {
    const std::string name = "@i" + std::to_string(const_count_++);
    std::string value = "dense ";
    dense_body(dims, 0, value, true, -axis_size, axis_size - 1);
    consts_ += "const " + name + " : " + type_str("i64", dims) + " = " + value + "\n";
    return name;
  }

  std::string fresh() { return "%v" + std::to_string(value_count_++); }

  // Recent values are likelier operands: chains (in place) and long lives both occur.
  const Val& pick() {
    const uint8_t b = r_.byte();
    const size_t n = pool_.size();
    if (b & 1) return pool_[n - 1 - (b >> 1) % std::min<size_t>(n, 4)];
    return pool_[(b >> 1) % n];
  }

  // A pool value of exactly these dims, or nullptr.
  const Val* find(const Dims& dims) {
    std::vector<const Val*> hits;
    for (const Val& v : pool_)
      if (v.dims == dims) hits.push_back(&v);
    if (hits.empty()) return nullptr;
    return hits[r_.byte() % hits.size()];
  }

  void emit(const Val& result, const std::string& op, const std::string& operands, const std::string& attrs,
            const char* dtype = "f32") {
    body_ += "  " + result.name + " = call @" + op + "(" + operands + ")" + (attrs.empty() ? "" : " {" + attrs + "}") +
             " : " + type_str(dtype, result.dims) + "\n";
    ++nodes_;
  }

  Val push(Dims dims) {
    Val v{fresh(), std::move(dims)};
    pool_.push_back(v);
    return v;
  }

  int axis_of(const Val& x) { return static_cast<int>(r_.byte() % x.dims.size()); }

  // One operator (or a short idiom) on values of the pool; false when the
  // chosen one does not fit the operand it drew.
  bool step() {
    const Val x = pick();
    const int rank = static_cast<int>(x.dims.size());
    switch (r_.byte() % 20) {
      case 0:
      case 1: {  // unary
        static const char* const kOps[] = {"relu", "neg",     "tanh",       "sigmoid",    "exp",  "abs",
                                           "silu", "gelu",    "erf",        "sqrt",       "log",  "reciprocal",
                                           "rsqrt", "hard_swish", "leaky_relu", "clip", "hard_sigmoid", "gelu"};
        const int k = r_.byte() % std::size(kOps);
        std::string attrs;
        if (std::string(kOps[k]) == "leaky_relu") attrs = "alpha = 0.125";
        if (std::string(kOps[k]) == "clip") attrs = "min = -1.5, max = 2";
        if (std::string(kOps[k]) == "hard_sigmoid") attrs = "alpha = 0.25, beta = 0.5";
        if (k == static_cast<int>(std::size(kOps)) - 1) attrs = "approximate = \"tanh\"";
        emit(push(x.dims), kOps[k], x.name, attrs);
        return true;
      }
      case 2:
      case 3:
      case 4: {  // binary: a pool value (broadcasting) or a constant that broadcasts
        static const char* const kOps[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "add", "mul"};
        const char* op = kOps[r_.byte() % std::size(kOps)];
        std::string other;
        Dims out;
        const uint8_t how = r_.byte() % 4;
        if (how == 0) {
          other = x.name;  // the same value twice
          out = x.dims;
        } else if (how == 1) {
          const Val y = pick();
          if (!broadcast(x.dims, y.dims, out) || numel(out) > kMaxElements) return false;
          other = y.name;
        } else {
          Dims c = x.dims;
          for (auto& d : c)
            if (r_.byte() % 2) d = 1;
          const size_t drop = r_.byte() % (c.size() + 1);
          c.erase(c.begin(), c.begin() + static_cast<long>(drop));
          other = constant(c);
          out = x.dims;
        }
        const Val result = push(out);
        emit(result, op, r_.byte() % 2 ? x.name + ", " + other : other + ", " + x.name, "");
        return true;
      }
      case 5: {  // matmul [.., M, K] x [K, N]
        if (rank < 2) return false;
        const int64_t k = x.dims.back();
        std::string rhs;
        int64_t n = 0;
        for (const Val& v : pool_)
          if (v.dims.size() == 2 && v.dims[0] == k && r_.byte() % 2) {
            rhs = v.name;
            n = v.dims[1];
            break;
          }
        if (rhs.empty()) {
          n = r_.range(1, 6);
          rhs = constant({k, n});
        }
        Dims out = x.dims;
        out.back() = n;
        if (numel(out) > kMaxElements) return false;
        emit(push(out), "matmul", x.name + ", " + rhs, "");
        return true;
      }
      case 6: {  // softmax over any axis (a non-last axis uses scratch)
        if (rank < 1) return false;
        const int axis = r_.byte() % 2 ? -1 : axis_of(x);
        emit(push(x.dims), "softmax", x.name, "axis = " + std::to_string(axis));
        return true;
      }
      case 7: {  // reductions
        if (rank < 1) return false;
        static const char* const kOps[] = {"reduce_sum", "reduce_mean", "reduce_max"};
        const char* op = kOps[r_.byte() % 3];
        const int axis = axis_of(x);
        const bool keep = r_.byte() % 2;
        Dims out = x.dims;
        if (keep)
          out[axis] = 1;
        else
          out.erase(out.begin() + axis);
        emit(push(out), op, x.name, "axes = [" + std::to_string(axis) + "], keepdims = " + (keep ? "1" : "0"));
        return true;
      }
      case 8: {  // transpose
        if (rank < 2) return false;
        std::vector<int64_t> perm(rank);
        std::iota(perm.begin(), perm.end(), 0);
        for (int i = rank - 1; i > 0; --i) std::swap(perm[i], perm[r_.byte() % (i + 1)]);
        Dims out(rank);
        for (int i = 0; i < rank; ++i) out[i] = x.dims[perm[i]];
        emit(push(out), "transpose", x.name, "perm = " + list_str(perm));
        return true;
      }
      case 9: {  // reshape: a view
        const int64_t p = numel(x.dims);
        Dims out;
        switch (r_.byte() % 4) {
          case 0:
            out = {p};
            break;
          case 1:
            out = x.dims;
            out.insert(out.begin(), 1);
            break;
          case 2: {
            std::vector<int64_t> divisors;
            for (int64_t d = 1; d <= p; ++d)
              if (p % d == 0) divisors.push_back(d);
            const int64_t d = divisors[r_.byte() % divisors.size()];
            out = {d, p / d};
            break;
          }
          default:
            if (rank == 2)
              out = {1, 1, x.dims[0], x.dims[1]};  // NCHW for conv and pooling
            else
              out = {p, 1};
            break;
        }
        if (out.size() > 4) return false;
        emit(push(out), "reshape", x.name, "");
        return true;
      }
      case 10: {  // split into two parts: two results
        if (rank < 1) return false;
        const int axis = axis_of(x);
        const int64_t d = x.dims[axis];
        if (d < 2) return false;
        Dims a = x.dims, b = x.dims;
        std::string attrs = "axis = " + std::to_string(axis);
        if (d % 2 == 0 && r_.byte() % 2) {
          a[axis] = b[axis] = d / 2;
        } else {
          a[axis] = r_.range(1, static_cast<int>(d) - 1);
          b[axis] = d - a[axis];
          attrs += ", sizes = [" + std::to_string(a[axis]) + ", " + std::to_string(b[axis]) + "]";
        }
        const Val va = push(a), vb = push(b);
        body_ += "  " + va.name + ", " + vb.name + " = call @split(" + x.name + ") {" + attrs + "} : " +
                 type_str("f32", a) + ", " + type_str("f32", b) + "\n";
        ++nodes_;
        return true;
      }
      case 11: {  // concat with a value equal but along the axis
        if (rank < 1) return false;
        const int axis = axis_of(x);
        std::string other = x.name;
        int64_t extra = x.dims[axis];
        for (const Val& v : pool_) {
          if (v.dims.size() != x.dims.size() || v.name == x.name) continue;
          bool ok = true;
          for (int i = 0; i < rank; ++i) ok = ok && (i == axis || v.dims[i] == x.dims[i]);
          if (ok && r_.byte() % 2) {
            other = v.name;
            extra = v.dims[axis];
            break;
          }
        }
        Dims out = x.dims;
        out[axis] += extra;
        if (numel(out) > kMaxElements) return false;
        emit(push(out), "concat", r_.byte() % 2 ? x.name + ", " + other : other + ", " + x.name,
             "axis = " + std::to_string(axis));
        return true;
      }
      case 12:
        emit(push(x.dims), "copy", x.name, "");
        return true;
      case 13: {  // layernorm over the last axis
        if (rank < 1) return false;
        const Dims g = {x.dims.back()};
        const std::string gamma = constant(g), beta = constant(g);
        emit(push(x.dims), "layernorm", x.name + ", " + gamma + ", " + beta, "axis = -1");
        return true;
      }
      case 14: {  // slice along one axis, ONNX clamping, steps 1, 2, -1, -2
        if (rank < 1) return false;
        const int axis = axis_of(x);
        const int64_t d = x.dims[axis];
        static const int64_t kSteps[] = {1, 2, -1, -2};
        const int64_t step = kSteps[r_.byte() % 4];
        int64_t start = r_.range(-static_cast<int>(d) - 1, static_cast<int>(d) + 1);
        int64_t end = r_.byte() % 4 == 0 ? (step > 0 ? 1000 : -1000) : r_.range(-static_cast<int>(d) - 1, static_cast<int>(d) + 1);
        int64_t s = start < 0 ? start + d : start, e = end < 0 ? end + d : end, size;
        if (step > 0) {
          s = std::clamp<int64_t>(s, 0, d);
          e = std::clamp<int64_t>(e, 0, d);
          size = e > s ? (e - s + step - 1) / step : 0;
        } else {
          s = std::clamp<int64_t>(s, 0, d - 1);
          e = std::clamp<int64_t>(e, -1, d - 1);
          size = s > e ? (s - e - step - 1) / -step : 0;
        }
        if (size < 1) return false;
        Dims out = x.dims;
        out[axis] = size;
        emit(push(out), "slice", x.name,
             "starts = [" + std::to_string(start) + "], ends = [" + std::to_string(end) + "], axes = [" +
                 std::to_string(axis) + "], steps = [" + std::to_string(step) + "]");
        return true;
      }
      case 15: {  // where(x > y, x, y) or (x < y): a bool value in between
        const Val y = pick();
        Dims out;
        if (!broadcast(x.dims, y.dims, out) || numel(out) > kMaxElements) return false;
        const std::string cond = fresh();
        emit(Val{cond, out}, r_.byte() % 2 ? "greater" : "less", x.name + ", " + y.name, "", "bool");
        emit(push(out), "where", cond + ", " + x.name + ", " + y.name, "");
        return true;
      }
      case 16: {  // cast to f16, i32 or bool and back
        static const char* const kTo[] = {"f16", "i32", "bool", "i64"};
        const char* to = kTo[r_.byte() % 4];
        const std::string mid = fresh();
        emit(Val{mid, x.dims}, "cast", x.name, std::string("to = \"") + to + "\"", to);
        emit(push(x.dims), "cast", mid, "to = \"f32\"");
        return true;
      }
      case 17: {  // gather with constant indices (negative ones count from the end)
        if (rank < 1) return false;
        const int axis = axis_of(x);
        const Dims idx = {static_cast<int64_t>(r_.range(1, 4))};
        const std::string indices = index_constant(idx, x.dims[axis]);
        Dims out = x.dims;
        out[axis] = idx[0];
        emit(push(out), "gather", x.name + ", " + indices, "axis = " + std::to_string(axis));
        return true;
      }
      case 18: {  // pad (constant, edge, reflect, wrap), or expand a dim of 1
        if (rank < 1) return false;
        if (r_.byte() % 2) {
          static const char* const kModes[] = {"constant", "edge", "reflect", "wrap"};
          const char* mode = kModes[r_.byte() % 4];
          std::vector<int64_t> pads(2 * rank);
          Dims out = x.dims;
          for (int i = 0; i < rank; ++i) {
            pads[i] = r_.range(0, 2);
            pads[rank + i] = r_.range(0, 2);
            out[i] += pads[i] + pads[rank + i];
          }
          if (numel(out) > kMaxElements) return false;
          std::string attrs = std::string("mode = \"") + mode + "\", pads = " + list_str(pads);
          if (std::string(mode) == "constant") attrs += ", value = " + literal();
          emit(push(out), "pad", x.name, attrs);
          return true;
        }
        Dims out = x.dims;
        bool any = false;
        for (auto& d : out)
          if (d == 1 && r_.byte() % 2) {
            d = r_.range(2, 4);
            any = true;
          }
        if (!any || numel(out) > kMaxElements) return false;
        emit(push(out), "expand", x.name, "shape = " + list_str(out));
        return true;
      }
      default: {  // conv2d or a pool on an NCHW value (a view of x made NCHW first)
        Val x4 = x;
        if (rank != 4) {
          x4 = push(rank == 2 ? Dims{1, 1, x.dims[0], x.dims[1]} : Dims{1, 1, 1, numel(x.dims)});
          emit(x4, "reshape", x.name, "");
        }
        const int64_t n = x4.dims[0], c = x4.dims[1], h = x4.dims[2], w = x4.dims[3];
        const int64_t kh = r_.range(1, 3), kw = r_.range(1, 3), stride = r_.range(1, 2);
        const int64_t pad = r_.range(0, static_cast<int>(std::min(kh, kw)) - 1);
        const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
        if (h + 2 * pad < kh || w + 2 * pad < kw || oh < 1 || ow < 1) return false;
        const std::string geometry = "strides = [" + std::to_string(stride) + ", " + std::to_string(stride) +
                                     "], pads = [" + std::to_string(pad) + ", " + std::to_string(pad) + ", " +
                                     std::to_string(pad) + ", " + std::to_string(pad) + "]";
        if (r_.byte() % 2) {
          const int64_t k = r_.range(1, 4);
          if (n * k * oh * ow > kMaxElements) return false;
          std::string operands = x4.name + ", " + constant({k, c, kh, kw});
          if (r_.byte() % 2) operands += ", " + constant({k});
          emit(push({n, k, oh, ow}), "conv2d", operands, geometry);
        } else {
          const char* op = r_.byte() % 2 ? "max_pool" : "average_pool";
          emit(push({n, c, oh, ow}), op, x4.name,
               "kernel_shape = [" + std::to_string(kh) + ", " + std::to_string(kw) + "], " + geometry);
        }
        return true;
      }
    }
  }

  std::string function(const std::string& name, int max_nodes, GeneratedGraph& info) {
    pool_.clear();
    body_.clear();
    nodes_ = 0;
    const Dims base = {r_.range(1, 6), r_.range(1, 6)};
    const int ninputs = r_.range(1, 3);
    const bool donate = r_.byte() % 3 == 0;
    std::string header = "func @" + name + "(";
    for (int i = 0; i < ninputs; ++i) {
      Dims dims = base;
      if (i > 0 && r_.byte() % 3 == 0) dims = {base[1]};  // a row that broadcasts
      Val v = push(dims);
      v.input = pool_.back().input = true;
      header += (i ? ", " : "") + v.name + ": " + type_str("f32", dims) + (donate && i == 0 ? " donate(0)" : "");
    }
    header += ")";
    for (int attempts = 0; nodes_ < max_nodes && attempts < 4 * max_nodes && !r_.empty(); ++attempts) step();
    if (nodes_ == 0 || donate) {
      // A donated first input is updated last (a KV cache's write): output 0
      // is computed in place on it, a donation the plan can always honour.
      const Val first = pool_[0], last = pool_.back();  // copies: push() may move the pool
      if (donate && !last.input && last.dims == first.dims)
        emit(push(first.dims), "add", first.name + ", " + last.name, "");
      else
        emit(push(first.dims), "relu", first.name, "");
    }

    // Outputs: the last value, and up to two more; never a function input.
    std::vector<const Val*> outs = {&pool_.back()};
    const int extra = r_.range(0, 2);
    for (int i = 0; i < extra; ++i) {
      const Val& v = pool_[r_.byte() % pool_.size()];
      if (v.input || std::find(outs.begin(), outs.end(), &v) != outs.end()) continue;
      outs.push_back(&v);
    }
    header += " -> (";
    std::string ret = "  return ";
    for (size_t i = 0; i < outs.size(); ++i) {
      header += (i ? ", " : "") + type_str("f32", outs[i]->dims);
      ret += (i ? ", " : "") + outs[i]->name;
    }
    info.nodes += nodes_;
    return header + ") {\n" + body_ + ret + "\n}\n";
  }

  ByteReader& r_;
  std::string consts_;
  int const_count_ = 0;
  std::vector<Val> pool_;
  std::string body_;
  int value_count_ = 0;
  int nodes_ = 0;
};

}  // namespace

GeneratedGraph generate_graph(const uint8_t* data, size_t size, int max_nodes) {
  ByteReader reader(data, size);
  GeneratedGraph graph;
  Generator gen(reader);
  graph.source = gen.module(max_nodes, graph);
  return graph;
}

}  // namespace hexir::fuzz
