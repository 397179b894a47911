// The ONNX front end end to end: models built here with the protobuf API
// (onnx::ModelProto), imported, compiled, run on the cpu device and compared
// with references computed here; errors name the node or input; the .hxir
// printer round-trips an imported graph to the same executable; and a few of
// libonnx-testdata's node tests run against their stored outputs.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/compiler/graph.h"
#include "hexir/compiler/hxir.h"
#include "hexir/compiler/onnx.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace fs = std::filesystem;
using hexir::DType;
using hexir::TensorType;
using hexir::compiler::OnnxImportOptions;

namespace {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("hexir_onnx_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// ---- building models ----------------------------------------------------------

constexpr int kF = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

struct Attr {
  std::string name;
  std::function<void(onnx::AttributeProto&)> set;
};
Attr ai(std::string name, int64_t v) {
  return {std::move(name), [v](onnx::AttributeProto& a) {
            a.set_type(onnx::AttributeProto::INT);
            a.set_i(v);
          }};
}
Attr af(std::string name, float v) {
  return {std::move(name), [v](onnx::AttributeProto& a) {
            a.set_type(onnx::AttributeProto::FLOAT);
            a.set_f(v);
          }};
}
Attr ais(std::string name, std::vector<int64_t> v) {
  return {std::move(name), [v](onnx::AttributeProto& a) {
            a.set_type(onnx::AttributeProto::INTS);
            for (int64_t x : v) a.add_ints(x);
          }};
}
Attr as(std::string name, std::string v) {
  return {std::move(name), [v](onnx::AttributeProto& a) {
            a.set_type(onnx::AttributeProto::STRING);
            a.set_s(v);
          }};
}

class Model {
 public:
  explicit Model(int64_t opset = 17) {
    proto_.set_ir_version(8);
    auto* o = proto_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    proto_.mutable_graph()->set_name("test_graph");
  }
  // dims: -1 is a dynamic dim named "N".
  Model& input(const std::string& name, int type, const std::vector<int64_t>& dims) {
    fill_value_info(proto_.mutable_graph()->add_input(), name, type, dims);
    return *this;
  }
  Model& output(const std::string& name, int type = kF, const std::vector<int64_t>* dims = nullptr) {
    auto* v = proto_.mutable_graph()->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    if (dims)
      for (int64_t d : *dims) v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    return *this;
  }
  // raw: stored in raw_data (else the typed field).
  Model& init_f(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v, bool raw = true) {
    auto* t = proto_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(kF);
    for (int64_t d : dims) t->add_dims(d);
    if (raw)
      t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    else
      for (float x : v) t->add_float_data(x);
    return *this;
  }
  Model& init_i64(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v, bool raw = true) {
    auto* t = proto_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(kI64);
    for (int64_t d : dims) t->add_dims(d);
    if (raw)
      t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
    else
      for (int64_t x : v) t->add_int64_data(x);
    return *this;
  }
  // Raw bytes of any element type (int8, uint8 weights and zero points).
  Model& init_bytes(const std::string& name, int type, const std::vector<int64_t>& dims, const std::string& raw) {
    auto* t = proto_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(raw);
    return *this;
  }
  Model& node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
              const std::vector<Attr>& attrs = {}, const std::string& name = "") {
    auto* n = proto_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(proto_.graph().node_size()) : name);
    for (const auto& i : in) n->add_input(i);
    for (const auto& o : out) n->add_output(o);
    for (const auto& a : attrs) {
      auto* p = n->add_attribute();
      p->set_name(a.name);
      a.set(*p);
    }
    return *this;
  }
  onnx::ModelProto& proto() { return proto_; }
  fs::path save(const fs::path& path) const {
    std::ofstream out(path, std::ios::binary);
    REQUIRE(proto_.SerializeToOstream(&out));
    return path;
  }

 private:
  static void fill_value_info(onnx::ValueInfoProto* v, const std::string& name, int type,
                              const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  }
  onnx::ModelProto proto_;
};

// ---- running ---------------------------------------------------------------------

struct Tensor {
  TensorType type;
  std::vector<uint8_t> bytes;
  std::vector<float> f32() const {
    std::vector<float> v(bytes.size() / 4);
    if (!bytes.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};
Tensor f32(std::vector<int64_t> dims, const std::vector<float>& v) {
  Tensor t{{DType::kF32, std::move(dims)}, std::vector<uint8_t>(v.size() * 4)};
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

hexir::compiler::Module import_ok(const fs::path& model, const OnnxImportOptions& options = {}) {
  auto m = hexir::compiler::import_onnx(model, options);
  INFO(m.status().to_string());
  REQUIRE(m.ok());
  return std::move(m).value();
}

std::string import_error(const fs::path& model, const OnnxImportOptions& options = {}) {
  auto m = hexir::compiler::import_onnx(model, options);
  return m.ok() ? std::string() : m.status().message();
}

std::vector<uint8_t> compile_ok(const hexir::compiler::Module& module) {
  auto bytes = hexir::compiler::compile_module(module, {}, "model");
  INFO(bytes.status().to_string());
  REQUIRE(bytes.ok());
  return std::move(bytes).value();
}

// Compiles, loads and runs `module` on the cpu device; returns every output.
// `instructions`: the number of instructions of the function run.
std::vector<Tensor> run(const hexir::compiler::Module& module, const std::vector<Tensor>& inputs,
                        const fs::path& dir, const hexir::compiler::CompileOptions& options = {},
                        size_t* instructions = nullptr, hexir::vm::PhaseStats* prepare_stats = nullptr) {
  const fs::path exe = dir / "model.hxe";
  auto compiled = hexir::compiler::compile_module_to(module, exe, options);
  INFO(compiled.status().to_string());
  REQUIRE(compiled.ok());
  auto loaded = hexir::vm::Module::load_file(exe.string());
  INFO(loaded.status().to_string());
  REQUIRE(loaded.ok());
  auto device = hexir::hal::create_device("cpu");
  REQUIRE(device.ok());
  auto program = hexir::vm::Program::prepare(*loaded, **device);
  INFO(program.status().to_string());
  REQUIRE(program.ok());
  if (prepare_stats) *prepare_stats = program->prepare_stats();
  auto context = hexir::vm::Context::create(*program);
  REQUIRE(context.ok());
  std::vector<hexir::vm::TensorRef> refs;
  for (const Tensor& t : inputs)
    refs.push_back({const_cast<uint8_t*>(t.bytes.data()), t.bytes.size(), t.type});
  hexir::Status invoked = context->invoke(0, refs);
  INFO(invoked.to_string());
  REQUIRE(invoked.ok());
  std::vector<Tensor> out;
  if (instructions) *instructions = loaded->instructions(0).size();
  const auto& sig = loaded->function(0);
  for (size_t i = 0; i < sig.outputs.size(); ++i) {
    Tensor t{sig.outputs[i].type, std::vector<uint8_t>(sig.outputs[i].byte_size)};
    REQUIRE(context->read_output(0, i, t.bytes).ok());
    auto actual = context->output_type(0, i);  // a bounded output: its actual shape
    REQUIRE(actual.ok());
    t.type = *actual;
    t.bytes.resize(*hexir::byte_size(t.type));
    out.push_back(std::move(t));
  }
  return out;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element ", i);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
      continue;
    }
    CHECK(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])));
  }
}

int count_nodes(const hexir::compiler::Module& m, hexir::ops::OpId op) {
  int n = 0;
  for (const auto& node : m.functions[0].nodes) n += node.op == op;
  return n;
}

// Prints the graph as .hxir, parses it back and checks both compile to the same bytes.
void check_round_trip(const hexir::compiler::Module& module, const fs::path& dir, uint64_t dense_max = 256) {
  hexir::compiler::HxirPrintOptions print;
  print.data_dir = dir / "model.data";
  print.data_ref = "model.data";
  print.dense_max_bytes = dense_max;
  auto text = hexir::compiler::print_hxir(module, print);
  INFO(text.status().to_string());
  REQUIRE(text.ok());
  INFO(*text);
  auto parsed = hexir::compiler::parse_hxir(*text, "printed.hxir", dir);
  INFO(parsed.status().to_string());
  REQUIRE(parsed.ok());
  CHECK(compile_ok(*parsed) == compile_ok(module));
}

std::vector<float> matmul(const std::vector<float>& a, const std::vector<float>& b, int m, int k, int n) {
  std::vector<float> c(static_cast<size_t>(m * n), 0.f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += static_cast<double>(a[i * k + p]) * b[p * n + j];
      c[i * n + j] = static_cast<float>(s);
    }
  return c;
}

std::vector<float> ramp(size_t n, float scale = 0.25f, float offset = -1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7) % 11);
  return v;
}

}  // namespace

TEST_CASE("Gemm/Relu MLP: transB, alpha, beta, a typed-field bias") {
  TempDir dir;
  const std::vector<float> w1 = ramp(12, 0.1f, -0.5f), b1 = {0.1f, -0.2f, 0.3f};
  const std::vector<float> w2 = ramp(6, 0.3f, -0.7f), c2 = {0.5f, -1.f};
  Model m;
  m.input("x", kF, {2, 4})
      .init_f("w1", {3, 4}, w1)
      .init_f("b1", {3}, b1)
      .init_f("w2", {3, 2}, w2)
      .init_f("c2", {2}, c2, /*raw=*/false)
      .node("Gemm", {"x", "w1", "b1"}, {"h"}, {ai("transB", 1)})
      .node("Relu", {"h"}, {"r"})
      .node("Gemm", {"r", "w2", "c2"}, {"y"}, {af("alpha", 0.5f), af("beta", 2.f)})
      .output("y");
  const fs::path path = m.save(dir.path() / "mlp.onnx");
  auto module = import_ok(path);
  // transB of a constant folds: no transpose runs.
  CHECK(count_nodes(module, hexir::ops::OpId::kTranspose) == 0);
  const std::vector<float> x = ramp(8);
  // Reference.
  std::vector<float> w1t(12);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) w1t[j * 3 + i] = w1[i * 4 + j];
  std::vector<float> h = matmul(x, w1t, 2, 4, 3);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) h[i * 3 + j] = std::max(0.f, h[i * 3 + j] + b1[j]);
  std::vector<float> y = matmul(h, w2, 2, 3, 2);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) y[i * 2 + j] = 0.5f * y[i * 2 + j] + 2.f * c2[j];
  auto out = run(module, {f32({2, 4}, x)}, dir.path());
  REQUIRE(out.size() == 1);
  CHECK(out[0].type == TensorType{DType::kF32, {2, 2}});
  check_close(out[0].f32(), y);
  // The raw_data initializers are read from the model file, not copied.
  int from_file = 0;
  for (const auto& c : module.constants) from_file += std::holds_alternative<hexir::compiler::FileRange>(c.source);
  CHECK(from_file >= 2);
  check_round_trip(module, dir.path());
  check_round_trip(module, dir.path(), /*dense_max=*/0);  // every constant as an .npy file
}

namespace {

// Direct NCHW convolution (one image, one group) with explicit pads.
std::vector<float> conv_ref(const std::vector<float>& x, int c, int h, int w, const std::vector<float>& k, int kn,
                            int kh, int kw, int stride, int pt, int pl, int oh, int ow) {
  std::vector<float> y(static_cast<size_t>(kn * oh * ow), 0.f);
  for (int o = 0; o < kn; ++o)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        double s = 0;
        for (int ci = 0; ci < c; ++ci)
          for (int a = 0; a < kh; ++a)
            for (int b = 0; b < kw; ++b) {
              const int yy = i * stride + a - pt, xx = j * stride + b - pl;
              if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
              s += static_cast<double>(x[(ci * h + yy) * w + xx]) * k[((o * c + ci) * kh + a) * kw + b];
            }
        y[(o * oh + i) * ow + j] = static_cast<float>(s);
      }
  return y;
}

}  // namespace

TEST_CASE("Conv with auto_pad SAME_UPPER / SAME_LOWER / VALID") {
  struct Case {
    const char* auto_pad;
    int k, stride, pt, pl, oh;
  };
  // 5x5 input. SAME: out = ceil(5 / stride); an even kernel pads 1 in total,
  // at the end (UPPER) or the beginning (LOWER).
  for (Case cs : {Case{"SAME_UPPER", 2, 1, 0, 0, 5}, Case{"SAME_LOWER", 2, 1, 1, 1, 5},
                  Case{"SAME_UPPER", 3, 2, 1, 1, 3}, Case{"VALID", 3, 2, 0, 0, 2}}) {
    CAPTURE(cs.auto_pad);
    CAPTURE(cs.k);
    TempDir dir;
    const std::vector<float> x = ramp(2 * 25), w = ramp(3 * 2 * cs.k * cs.k, 0.2f, -0.6f);
    Model m(11);
    m.input("x", kF, {1, 2, 5, 5})
        .init_f("w", {3, 2, cs.k, cs.k}, w)
        .node("Conv", {"x", "w"}, {"y"},
              {as("auto_pad", cs.auto_pad), ais("strides", {cs.stride, cs.stride}), ais("kernel_shape", {cs.k, cs.k})})
        .output("y");
    auto module = import_ok(m.save(dir.path() / "conv.onnx"));
    auto out = run(module, {f32({1, 2, 5, 5}, x)}, dir.path());
    CHECK(out[0].type == TensorType{DType::kF32, {1, 3, cs.oh, cs.oh}});
    check_close(out[0].f32(), conv_ref(x, 2, 5, 5, w, 3, cs.k, cs.k, cs.stride, cs.pt, cs.pl, cs.oh, cs.oh));
  }
}

TEST_CASE("Conv 1-D with bias, pads and groups") {
  TempDir dir;
  const std::vector<float> x = ramp(4 * 6), w = ramp(4 * 2 * 3, 0.2f, -0.6f), b = {0.5f, -0.5f, 1.f, 0.f};
  Model m(13);
  m.input("x", kF, {1, 4, 6})
      .init_f("w", {4, 2, 3}, w)
      .init_f("b", {4}, b)
      .node("Conv", {"x", "w", "b"}, {"y"}, {ais("pads", {1, 1}), ai("group", 2)})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "conv1d.onnx"));
  auto out = run(module, {f32({1, 4, 6}, x)}, dir.path());
  CHECK(out[0].type == TensorType{DType::kF32, {1, 4, 6}});
  // Reference: per group of 2 channels, 1-D correlation with pad 1.
  std::vector<float> want(24);
  for (int o = 0; o < 4; ++o)
    for (int t = 0; t < 6; ++t) {
      double s = b[o];
      const int g = o / 2;
      for (int ci = 0; ci < 2; ++ci)
        for (int k = 0; k < 3; ++k) {
          const int at = t + k - 1;
          if (at >= 0 && at < 6) s += static_cast<double>(x[(g * 2 + ci) * 6 + at]) * w[(o * 2 + ci) * 3 + k];
        }
      want[o * 6 + t] = static_cast<float>(s);
    }
  check_close(out[0].f32(), want);
}

TEST_CASE(
    "Conv 3-D (video): strides, pads and dilation along time, groups, two clips, with and without a bias") {
  // x [2, 4, T=7, 5, 6], w [6, 2, 3, 3, 2]: groups 2; time stride 2, pads 2 / 1, dilation 2 (out T = 3);
  // space stride 1 and 2, pads 1 / 0 / 0 / 1; a 1-tap time window too (r2plus1d's spatial convs).
  struct Case {
    int64_t kt, st, pt0, pt1, dt;
    bool bias;
  };
  for (const Case c : {Case{3, 2, 2, 1, 2, true}, Case{3, 1, 1, 1, 1, false}, Case{1, 1, 0, 0, 1, true}}) {
    CAPTURE(c.kt);
    CAPTURE(c.st);
    TempDir dir;
    const int64_t n = 2, ci = 4, t = 7, h = 5, wd = 6, k = 6, g = 2, kh = 3, kw = 2;
    const std::vector<float> x = ramp(n * ci * t * h * wd, 0.01f, -1.0f);
    const std::vector<float> w = ramp(k * (ci / g) * c.kt * kh * kw, 0.03f, -0.7f),
                             b = {0.5f, -0.5f, 1.f, 0.f, 0.25f, 2.f};
    const int64_t ot = (t + c.pt0 + c.pt1 - c.dt * (c.kt - 1) - 1) / c.st + 1, oh = (h + 1 + 0 - kh) / 1 + 1,
                  ow = (wd + 0 + 1 - kw) / 2 + 1;
    Model m(13);
    m.input("x", kF, {n, ci, t, h, wd}).init_f("w", {k, ci / g, c.kt, kh, kw}, w);
    std::vector<std::string> inputs = {"x", "w"};
    if (c.bias) {
      m.init_f("b", {k}, b);
      inputs.push_back("b");
    }
    m.node("Conv", inputs, {"y"},
           {ais("strides", {c.st, 1, 2}), ais("pads", {c.pt0, 1, 0, c.pt1, 0, 1}),
            ais("dilations", {c.dt, 1, 1}), ai("group", g)})
        .output("y");
    auto module = import_ok(m.save(dir.path() / "conv3d.onnx"));
    auto out = run(module, {f32({n, ci, t, h, wd}, x)}, dir.path());
    CHECK(out[0].type == TensorType{DType::kF32, {n, k, ot, oh, ow}});
    std::vector<float> want;
    for (int64_t b0 = 0; b0 < n; ++b0)
      for (int64_t o = 0; o < k; ++o)
        for (int64_t z = 0; z < ot; ++z)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t xx = 0; xx < ow; ++xx) {
              double s = c.bias ? b[static_cast<size_t>(o)] : 0.0;
              const int64_t grp = o / (k / g);
              for (int64_t cc = 0; cc < ci / g; ++cc)
                for (int64_t a = 0; a < c.kt; ++a)
                  for (int64_t dy = 0; dy < kh; ++dy)
                    for (int64_t dx = 0; dx < kw; ++dx) {
                      const int64_t it = z * c.st - c.pt0 + a * c.dt, iy = y - 1 + dy, ix = xx * 2 + dx;
                      if (it < 0 || it >= t || iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                      const int64_t channel = grp * (ci / g) + cc;
                      s += static_cast<double>(
                               x[static_cast<size_t>((((b0 * ci + channel) * t + it) * h + iy) * wd + ix)]) *
                           w[static_cast<size_t>((((o * (ci / g) + cc) * c.kt + a) * kh + dy) * kw + dx)];
                    }
              want.push_back(static_cast<float>(s));
            }
    check_close(out[0].f32(), want);
  }
}

TEST_CASE("Conv 3-D after Conv 3-D reads its frames: no transposes between them, the same bits") {
  // A video residual block: a 1x3x3 conv, relu, a 3x1x1 conv (time pads: zero frames), plus a 1x1x1
  // projection of x, relu. With `barrier` a multiply by a scalar one after each relu (a broadcast the
  // frames path does not take) keeps the [N, C, T, H, W] transposes between the convolutions.
  auto block = [](bool barrier) {
    const int64_t c = 3, k = 4, t = 5, h = 6, w = 7;
    Model m(13);
    m.input("x", kF, {1, c, t, h, w})
        .init_f("wa", {k, c, 1, 3, 3}, ramp(k * c * 9, 0.05f, -0.6f))
        .init_f("ba", {k}, {0.1f, -0.2f, 0.3f, 0.0f})
        .init_f("wb", {k, k, 3, 1, 1}, ramp(k * k * 3, 0.07f, -0.8f))
        .init_f("wp", {k, c, 1, 1, 1}, ramp(k * c, 0.2f, -1.1f))
        .init_f("one", {}, {1.0f})
        .node("Conv", {"x", "wa", "ba"}, {"a"}, {ais("pads", {0, 1, 1, 0, 1, 1})})
        .node("Relu", {"a"}, {"ra"});
    std::string ra = "ra";
    if (barrier) m.node("Mul", {"ra", "one"}, {"ra1"}), ra = "ra1";
    m.node("Conv", {ra, "wb"}, {"b"}, {ais("pads", {1, 0, 0, 1, 0, 0})})
        .node("Conv", {"x", "wp"}, {"p"})
        .node("Add", {"b", "p"}, {"s"})
        .node("Relu", {"s"}, {"y0"});
    if (barrier)
      m.node("Mul", {"y0", "one"}, {"y1"});
    else
      m.node("Identity", {"y0"}, {"y1"});
    m.node("Conv", {"y1", "wb"}, {"y"}, {ais("pads", {1, 0, 0, 1, 0, 0})}).output("y");
    return m;
  };
  TempDir dir;
  auto direct = import_ok(block(false).save(dir.path() / "frames.onnx"));
  auto barred = import_ok(block(true).save(dir.path() / "barred.onnx"));
  // x to frames (read by two convolutions, transposed once) and the last result back.
  CHECK(count_nodes(direct, hexir::ops::OpId::kTranspose) == 2);
  CHECK(count_nodes(barred, hexir::ops::OpId::kTranspose) > 2);
  const std::vector<float> x = ramp(3 * 5 * 6 * 7, 0.013f, -1.0f);
  auto a = run(direct, {f32({1, 3, 5, 6, 7}, x)}, dir.path());
  auto b = run(barred, {f32({1, 3, 5, 6, 7}, x)}, dir.path());
  REQUIRE(a[0].type == TensorType{DType::kF32, {1, 4, 5, 6, 7}});
  CHECK(a[0].f32() == b[0].f32());
}

TEST_CASE("Conv 3-D refuses negative pads, an empty window, a window longer than the frames, wide time pads") {
  TempDir dir;
  struct Case {
    std::vector<int64_t> w_dims, pads, dilations;
    const char* error;
  };
  const Case cases[] = {
      {{2, 3, 3, 3, 3}, {-1, 1, 1, 0, 1, 1}, {1, 1, 1}, "pads must be >= 0"},
      {{2, 3, 0, 3, 3}, {0, 1, 1, 0, 1, 1}, {1, 1, 1}, "has an empty dim"},
      {{2, 3, 3, 3, 3}, {0, 1, 1, 0, 1, 1}, {4, 1, 1}, "is longer than the 5 padded frames"},
      {{2, 3, 3, 3, 3}, {3, 1, 1, 0, 1, 1}, {1, 1, 1}, "time pads 3, 0 are wider than its window's 2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.error);
    int64_t count = 1;
    for (int64_t d : c.w_dims) count *= d;
    Model m(13);
    m.input("x", kF, {1, 3, 5, 6, 6})
        .init_f("w", c.w_dims, std::vector<float>(static_cast<size_t>(count), 0.5f))
        .node("Conv", {"x", "w"}, {"y"}, {ais("pads", c.pads), ais("dilations", c.dilations)})
        .output("y");
    CHECK(import_error(m.save(dir.path() / "conv3d_bad.onnx")).find(c.error) != std::string::npos);
  }
}

TEST_CASE("Reshape with 0 and -1, and a shape subgraph that folds (Shape -> Gather -> Concat -> Reshape)") {
  TempDir dir;
  Model m(13);
  m.input("x", kF, {2, 3, 4})
      .init_i64("zero_minus_one", {2}, {0, -1})
      .init_i64("idx", {}, {0}, /*raw=*/false)
      .init_i64("axes0", {1}, {0})
      .init_i64("minus_one", {1}, {-1})
      .node("Reshape", {"x", "zero_minus_one"}, {"a"})  // [2, 12]
      .node("Shape", {"x"}, {"s"})
      .node("Gather", {"s", "idx"}, {"n"}, {ai("axis", 0)})
      .node("Unsqueeze", {"n", "axes0"}, {"n1"})
      .node("Concat", {"minus_one", "n1"}, {"shape"}, {ai("axis", 0)})
      .node("Reshape", {"a", "shape"}, {"b"})  // [12, 2]
      .node("Relu", {"b"}, {"y"})
      .output("a")
      .output("y");
  auto module = import_ok(m.save(dir.path() / "reshape.onnx"));
  // Only views and the relu run: the shape computation folded.
  CHECK(module.functions[0].nodes.size() == 3);
  CHECK(count_nodes(module, hexir::ops::OpId::kReshape) == 2);
  const std::vector<float> x = ramp(24);
  auto out = run(module, {f32({2, 3, 4}, x)}, dir.path());
  REQUIRE(out.size() == 2);
  CHECK(out[0].type == TensorType{DType::kF32, {2, 12}});
  CHECK(out[1].type == TensorType{DType::kF32, {12, 2}});
  check_close(out[0].f32(), x);
  std::vector<float> relu = x;
  for (float& v : relu) v = std::max(v, 0.f);
  check_close(out[1].f32(), relu);
  check_round_trip(module, dir.path());

  // allowzero = 1: a 0 is a zero-sized dim, not a copy.
  Model z(14);
  z.input("x", kF, {2, 0})
      .init_i64("shape", {2}, {0, 5})
      .node("Reshape", {"x", "shape"}, {"y"}, {ai("allowzero", 1)})
      .output("y");
  auto zm = import_ok(z.save(dir.path() / "allowzero.onnx"));
  CHECK(zm.functions[0].values[static_cast<size_t>(zm.functions[0].outputs[0])].type ==
        TensorType{DType::kF32, {0, 5}});

  // A shape whose given dims multiply past 64 bits (found by the onnx fuzzer):
  // a clear error, with and without a -1 to infer, not signed overflow.
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{805306365, 68719476735, -1}, std::vector<int64_t>{805306365, 68719476735, 0}}) {
    CAPTURE(shape[2]);
    Model o(14);
    o.input("x", kF, {2, 3, 4})
        .init_i64("shape", {3}, shape)
        .node("Reshape", {"x", "shape"}, {"y"}, {}, "huge")
        .output("y");
    const std::string e = import_error(o.save(dir.path() / "overflow.onnx"));
    CHECK_MESSAGE(e.find("node 'huge' (Reshape)") != std::string::npos, e);
    CHECK_MESSAGE(e.find("cannot reshape") != std::string::npos, e);
  }
}

TEST_CASE("Squeeze/Unsqueeze: axes as attributes before opset 13, as inputs from it") {
  for (int64_t opset : {11, 13}) {
    CAPTURE(opset);
    TempDir dir;
    Model m(opset);
    m.input("x", kF, {1, 3, 1, 2});
    if (opset < 13) {
      m.node("Squeeze", {"x"}, {"s"}, {ais("axes", {0, -2})}).node("Unsqueeze", {"s"}, {"u"}, {ais("axes", {1, -1})});
    } else {
      m.init_i64("sq", {2}, {0, -2}).init_i64("uq", {2}, {1, -1});
      m.node("Squeeze", {"x", "sq"}, {"s"}).node("Unsqueeze", {"s", "uq"}, {"u"});
    }
    m.node("Neg", {"u"}, {"y"}).node("Squeeze", {"x"}, {"all"}).output("y").output("all");
    auto module = import_ok(m.save(dir.path() / "squeeze.onnx"));
    const std::vector<float> x = ramp(6);
    auto out = run(module, {f32({1, 3, 1, 2}, x)}, dir.path());
    CHECK(out[0].type == TensorType{DType::kF32, {3, 1, 2, 1}});
    CHECK(out[1].type == TensorType{DType::kF32, {3, 2}});
    std::vector<float> neg = x;
    for (float& v : neg) v = -v;
    check_close(out[0].f32(), neg);
    check_close(out[1].f32(), x);
  }
}

TEST_CASE("Dropout: training mode with a constant ratio 0 is the identity, another ratio is refused") {
  for (float ratio : {0.0f, 0.1f}) {
    CAPTURE(ratio);
    TempDir dir;
    Model m(13);
    m.input("x", kF, {2, 3}).init_f("ratio", {}, {ratio}).init_i64("one", {}, {1});
    m.node("Cast", {"one"}, {"training"}, {ai("to", 9)})
        .node("Dropout", {"x", "ratio", "training"}, {"y"})
        .output("y");
    const fs::path file = m.save(dir.path() / "dropout.onnx");
    if (ratio != 0.0f) {
      CHECK(import_error(file).find("training_mode is true with a ratio other than a constant 0") !=
            std::string::npos);
      continue;
    }
    auto module = import_ok(file);
    const std::vector<float> x = ramp(6);
    check_close(run(module, {f32({2, 3}, x)}, dir.path())[0].f32(), x);
  }
}

TEST_CASE("names with ':' and '/' are kept, print quoted and round-trip") {
  TempDir dir;
  Model m;
  m.input("input:0", kF, {2, 3})
      .init_f("w.1:0", {3}, {1.f, 2.f, 3.f})
      .node("Mul", {"input:0", "w.1:0"}, {"mul/out:0"})
      .node("Identity", {"mul/out:0"}, {"output:0"})
      .output("output:0")
      .output("mul/out:0");
  auto module = import_ok(m.save(dir.path() / "names.onnx"));
  const auto& fn = module.functions[0];
  CHECK(fn.values[static_cast<size_t>(fn.arguments[0].value)].name == "input:0");
  CHECK(fn.values[static_cast<size_t>(fn.outputs[0])].name == "output:0");
  CHECK(fn.values[static_cast<size_t>(fn.outputs[1])].name == "mul/out:0");
  auto text = hexir::compiler::print_hxir(module);
  REQUIRE(text.ok());
  CHECK(text->find("%\"input:0\"") != std::string::npos);
  CHECK(text->find("@\"w.1:0\"") != std::string::npos);
  check_round_trip(module, dir.path());
  const std::vector<float> x = ramp(6);
  auto out = run(module, {f32({2, 3}, x)}, dir.path());
  std::vector<float> want = x;
  for (size_t i = 0; i < 6; ++i) want[i] *= static_cast<float>(i % 3 + 1);
  check_close(out[0].f32(), want);
  check_close(out[1].f32(), want);
  // The VM sees the input under its ONNX name.
  const std::vector<uint8_t> bytes = compile_ok(module);
  const fs::path hxe = dir.path() / "names.hxe";
  std::ofstream(hxe, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                             static_cast<std::streamsize>(bytes.size()));
  auto exe = hexir::vm::Module::load_file(hxe.string());
  INFO(exe.status().to_string());
  REQUIRE(exe.ok());
  CHECK(exe->function(0).inputs[0].name == "input:0");
  REQUIRE(exe->function(0).outputs.size() == 2);
  CHECK(exe->function(0).outputs[0].name == "output:0");
  CHECK(exe->function(0).outputs[1].name == "mul/out:0");
}

TEST_CASE("outputs that are inputs or constants under other names get copies named for them") {
  TempDir dir;
  Model m;
  m.input("x", kF, {2})
      .init_f("w", {2}, {5.f, 6.f})
      .node("Identity", {"x"}, {"x_out"})
      .node("Identity", {"w"}, {"w_out"})
      .output("x_out")
      .output("w_out")
      .output("x");
  auto module = import_ok(m.save(dir.path() / "passthrough.onnx"));
  const auto& fn = module.functions[0];
  CHECK(fn.values[static_cast<size_t>(fn.outputs[0])].name == "x_out");
  CHECK(fn.values[static_cast<size_t>(fn.outputs[1])].name == "w_out");
  CHECK(fn.values[static_cast<size_t>(fn.outputs[2])].name == "x");
  auto out = run(module, {f32({2}, {1.f, 2.f})}, dir.path());
  check_close(out[0].f32(), {1.f, 2.f});
  check_close(out[1].f32(), {5.f, 6.f});
  check_close(out[2].f32(), {1.f, 2.f});
  check_round_trip(module, dir.path());
}

TEST_CASE("Softmax before opset 13 coerces to 2-D at axis; LayerNormalization; ReduceMean keepdims") {
  TempDir dir;
  Model m(11);
  m.input("x", kF, {2, 3, 4}).node("Softmax", {"x"}, {"y"}, {ai("axis", 1)}).output("y");
  auto module = import_ok(m.save(dir.path() / "softmax.onnx"));
  const std::vector<float> x = ramp(24);
  auto out = run(module, {f32({2, 3, 4}, x)}, dir.path());
  std::vector<float> want(24);
  for (int b = 0; b < 2; ++b) {  // softmax over the 12 trailing elements of each batch row
    double mx = -1e30, sum = 0;
    for (int i = 0; i < 12; ++i) mx = std::max(mx, static_cast<double>(x[b * 12 + i]));
    for (int i = 0; i < 12; ++i) sum += std::exp(x[b * 12 + i] - mx);
    for (int i = 0; i < 12; ++i) want[b * 12 + i] = static_cast<float>(std::exp(x[b * 12 + i] - mx) / sum);
  }
  check_close(out[0].f32(), want);

  Model l(17);
  l.input("x", kF, {2, 4})
      .init_f("g", {4}, {1.f, 2.f, 0.5f, 1.f})
      .node("LayerNormalization", {"x", "g"}, {"y"}, {af("epsilon", 1e-5f)})
      .node("ReduceMean", {"y"}, {"m"}, {ais("axes", {1})})
      .output("y")
      .output("m");
  auto lm = import_ok(l.save(dir.path() / "ln.onnx"));
  auto lout = run(lm, {f32({2, 4}, ramp(8))}, dir.path());
  CHECK(lout[1].type == TensorType{DType::kF32, {2, 1}});
  const std::vector<float> lx = ramp(8), g = {1.f, 2.f, 0.5f, 1.f};
  std::vector<float> ly(8), lmean(2);
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += lx[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) var += (lx[r * 4 + i] - mean) * (lx[r * 4 + i] - mean) / 4.0;
    double acc = 0;
    for (int i = 0; i < 4; ++i) {
      ly[r * 4 + i] = static_cast<float>((lx[r * 4 + i] - mean) / std::sqrt(var + 1e-5) * g[i]);
      acc += ly[r * 4 + i];
    }
    lmean[r] = static_cast<float>(acc / 4);
  }
  check_close(lout[0].f32(), ly, 1e-4);
  check_close(lout[1].f32(), lmean, 1e-4);
}

// ONNX GroupNormalization in double: x [N, C, S], per-channel scale and bias.
std::vector<float> group_norm_want(const std::vector<float>& x, int64_t n, int64_t c, int64_t s, int64_t groups,
                                   const std::vector<float>& scale, const std::vector<float>& bias, double eps) {
  std::vector<float> y(x.size());
  const int64_t block = c / groups * s;
  for (int64_t b = 0; b < n * groups; ++b) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < block; ++i) mean += x[b * block + i] / static_cast<double>(block);
    for (int64_t i = 0; i < block; ++i) var += (x[b * block + i] - mean) * (x[b * block + i] - mean) / block;
    for (int64_t i = 0; i < block; ++i) {
      const int64_t ch = (b * block + i) / s % c;
      y[b * block + i] = static_cast<float>((x[b * block + i] - mean) / std::sqrt(var + eps) * scale[ch] + bias[ch]);
    }
  }
  return y;
}

TEST_CASE("GroupNormalization: opset 18's per-group scale and bias (run-time and constant), opset 21's per channel") {
  TempDir dir;
  const std::vector<float> x = ramp(2 * 4 * 3);
  for (int run_time_scale = 0; run_time_scale < 2; ++run_time_scale) {
    CAPTURE(run_time_scale);
    Model m(18);  // scale and bias per group: [2], each repeated over its group's 2 channels
    m.input("x", kF, {2, 4, 3});
    if (run_time_scale) m.input("g", kF, {2});
    else m.init_f("g", {2}, {2.f, -1.f});
    m.init_f("b", {2}, {0.5f, 3.f})
        .node("GroupNormalization", {"x", "g", "b"}, {"y"}, {ai("num_groups", 2), af("epsilon", 1e-3f)})
        .output("y");
    auto module = import_ok(m.save(dir.path() / "gn18.onnx"));
    std::vector<Tensor> inputs{f32({2, 4, 3}, x)};
    if (run_time_scale) inputs.push_back(f32({2}, {2.f, -1.f}));
    auto out = run(module, inputs, dir.path());
    check_close(out[0].f32(), group_norm_want(x, 2, 4, 3, 2, {2.f, 2.f, -1.f, -1.f}, {0.5f, 0.5f, 3.f, 3.f}, 1e-3),
                1e-4);
  }
  Model m21(21);
  m21.input("x", kF, {2, 4, 3})
      .init_f("g", {4}, {1.f, 2.f, 3.f, 4.f})
      .init_f("b", {4}, {0.f, 1.f, 0.f, -1.f})
      .node("GroupNormalization", {"x", "g", "b"}, {"y"}, {ai("num_groups", 2)})
      .output("y");
  auto module = import_ok(m21.save(dir.path() / "gn21.onnx"));
  auto out = run(module, {f32({2, 4, 3}, x)}, dir.path());
  check_close(out[0].f32(), group_norm_want(x, 2, 4, 3, 2, {1.f, 2.f, 3.f, 4.f}, {0.f, 1.f, 0.f, -1.f}, 1e-5), 1e-4);

  Model bad(21);
  bad.input("x", kF, {2, 4, 3})
      .init_f("g", {4}, {1.f, 2.f, 3.f, 4.f})
      .init_f("b", {4}, {0.f, 1.f, 0.f, -1.f})
      .node("GroupNormalization", {"x", "g", "b"}, {"y"}, {ai("num_groups", 3)})
      .output("y");
  CHECK(import_error(bad.save(dir.path() / "gn_bad.onnx")).find("num_groups 3 does not divide the 4 channels") !=
        std::string::npos);
}

TEST_CASE("PRelu: the slope broadcasts to x, never x to the slope") {
  TempDir dir;
  Model m(16);
  m.input("x", kF, {2, 3}).init_f("s", {3}, {0.5f, -1.f, 2.f}).node("PRelu", {"x", "s"}, {"y"}).output("y");
  auto module = import_ok(m.save(dir.path() / "prelu.onnx"));
  auto out = run(module, {f32({2, 3}, {-1.f, -2.f, -3.f, 4.f, 5.f, -6.f})}, dir.path());
  check_close(out[0].f32(), {-0.5f, 2.f, -6.f, 4.f, 5.f, -12.f});
  Model bad(16);
  bad.input("x", kF, {3}).init_f("s", {2, 3}, {1.f, 1.f, 1.f, 1.f, 1.f, 1.f}).node("PRelu", {"x", "s"}, {"y"}).output("y");
  CHECK(import_error(bad.save(dir.path() / "prelu_bad.onnx")).find("does not broadcast to x") != std::string::npos);
}

TEST_CASE("Constant folding: Shape/Slice/Cast/Range/ConstantOfShape/Expand/Equal/Where on small tensors") {
  TempDir dir;
  Model m(13);
  m.input("x", kF, {2, 3})
      .init_i64("starts", {1}, {1})
      .init_i64("ends", {1}, {INT64_MAX})
      .init_i64("lo", {}, {0})
      .init_i64("delta", {}, {1})
      .node("Shape", {"x"}, {"s"})                       // [2, 3]
      .node("Slice", {"s", "starts", "ends"}, {"last"})  // [3]
      .node("Squeeze", {"last"}, {"n"})                  // 3
      .node("Range", {"lo", "n", "delta"}, {"r"})        // [0, 1, 2]
      .node("Cast", {"r"}, {"rf"}, {ai("to", kF)})       // f32 [0, 1, 2]
      .node("ConstantOfShape", {"s"}, {"zeros"})         // f32 [2, 3] of 0
      .node("Add", {"zeros", "rf"}, {"grid"})            // [[0,1,2],[0,1,2]]
      .node("Equal", {"r", "lo"}, {"is0"})               // [T, F, F]
      .node("Where", {"is0", "x", "grid"}, {"pick"})     // runs: x is an input
      .node("Expand", {"rf", "s"}, {"e"})                // folded [2, 3]
      .node("Mul", {"pick", "e"}, {"y"})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "fold.onnx"));
  // Only where and mul run; the rest became constants.
  CHECK(module.functions[0].nodes.size() == 2);
  const std::vector<float> x = ramp(6);
  auto out = run(module, {f32({2, 3}, x)}, dir.path());
  std::vector<float> want(6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) want[i * 3 + j] = (j == 0 ? x[i * 3 + j] : static_cast<float>(j)) * static_cast<float>(j);
  check_close(out[0].f32(), want);
  check_round_trip(module, dir.path());
}

TEST_CASE("Constant nodes' raw_data stays in the file (weights kept in Constant nodes are streamed, not parsed)") {
  TempDir dir;
  Model m(13);
  m.input("x", kF, {2, 3});
  auto constant_node = [&](const std::string& out, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    auto* n = m.proto().mutable_graph()->add_node();
    n->set_op_type("Constant");
    n->set_name(out + "_node");
    n->add_output(out);
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(kF);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  };
  constant_node("w", {3}, {1.f, 2.f, 3.f});
  constant_node("two", {}, {2.f});
  m.node("Mul", {"w", "two"}, {"w2"})  // folds: read back from the file
      .node("Mul", {"x", "w"}, {"y0"})
      .node("Add", {"y0", "w2"}, {"y1"});
  // ConstantOfShape's value tensor is stripped by the same scan.
  m.init_i64("shape", {2}, {2, 3});
  {
    auto* n = m.proto().mutable_graph()->add_node();
    n->set_op_type("ConstantOfShape");
    n->add_input("shape");
    n->add_output("half");
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(kF);
    a->mutable_t()->add_dims(1);
    const float half = 0.5f;
    a->mutable_t()->set_raw_data(std::string(reinterpret_cast<const char*>(&half), 4));
  }
  m.node("Add", {"y1", "half"}, {"y"}).output("y");
  auto module = import_ok(m.save(dir.path() / "constants.onnx"));
  bool w_from_file = false;
  for (const auto& c : module.constants)
    if (c.name == "w") w_from_file = std::holds_alternative<hexir::compiler::FileRange>(c.source);
  CHECK(w_from_file);
  const std::vector<float> x = ramp(6);
  auto out = run(module, {f32({2, 3}, x)}, dir.path());
  std::vector<float> want(6);
  for (int i = 0; i < 6; ++i) want[i] = x[i] * static_cast<float>(i % 3 + 1) + 2.f * static_cast<float>(i % 3 + 1) + 0.5f;
  check_close(out[0].f32(), want);
  check_round_trip(module, dir.path());
}

TEST_CASE("Expand of a run-time value, Split by sizes, Slice with steps, Gather, Transpose, Concat, BatchNorm") {
  TempDir dir;
  Model m(13);
  m.input("x", kF, {1, 4})
      .init_i64("shape", {2}, {3, 1})
      .init_i64("sizes", {2}, {1, 3})
      .init_i64("st", {1}, {3})
      .init_i64("en", {1}, {-5})
      .init_i64("ax", {1}, {1})
      .init_i64("sp", {1}, {-2})
      .init_i64("ix", {2}, {2, -1})
      .node("Expand", {"x", "shape"}, {"e"})                     // [3, 4]
      .node("Split", {"e", "sizes"}, {"p0", "p1"}, {ai("axis", 1)})  // [3,1], [3,3]
      .node("Slice", {"e", "st", "en", "ax", "sp"}, {"sl"})      // columns 3, 1 -> [3, 2]
      .node("Gather", {"e", "ix"}, {"g"}, {ai("axis", 1)})       // columns 2, 3 -> [3, 2]
      .node("Transpose", {"p1"}, {"t"}, {ais("perm", {1, 0})})   // [3, 3]
      .node("Concat", {"sl", "g", "p0"}, {"c"}, {ai("axis", 1)})  // [3, 5]
      .output("c")
      .output("t");
  auto module = import_ok(m.save(dir.path() / "layout.onnx"));
  const std::vector<float> x = {1.f, 2.f, 3.f, 4.f};
  auto out = run(module, {f32({1, 4}, x)}, dir.path());
  CHECK(out[0].type == TensorType{DType::kF32, {3, 5}});
  check_close(out[0].f32(), {4, 2, 3, 4, 1, 4, 2, 3, 4, 1, 4, 2, 3, 4, 1});
  check_close(out[1].f32(), {2, 2, 2, 3, 3, 3, 4, 4, 4});
  check_round_trip(module, dir.path());

  Model b(15);
  b.input("x", kF, {1, 2, 2, 2})
      .init_f("scale", {2}, {1.f, 2.f})
      .init_f("bias", {2}, {0.f, 1.f})
      .init_f("mean", {2}, {1.f, -1.f})
      .init_f("var", {2}, {4.f, 1.f})
      .node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, {af("epsilon", 0.f)})
      .node("GlobalAveragePool", {"y"}, {"p"})
      .node("Flatten", {"p"}, {"f"})
      .output("f");
  auto bm = import_ok(b.save(dir.path() / "bn.onnx"));
  const std::vector<float> bx = {1, 2, 3, 4, 5, 6, 7, 8};
  auto bout = run(bm, {f32({1, 2, 2, 2}, bx)}, dir.path());
  CHECK(bout[0].type == TensorType{DType::kF32, {1, 2}});
  // channel 0: (x - 1) / 2 averaged over 1..4 -> 0.75; channel 1: 2 (x + 1) + 1 averaged over 5..8 -> 16
  check_close(bout[0].f32(), {0.75f, 16.f});
}

TEST_CASE(
    "CumSum, Tile, OneHot, Trilu and NegativeLogLikelihoodLoss on run-time values (kernels and "
    "compositions)") {
  TempDir dir;
  Model m(14);
  m.input("x", kF, {2, 3})
      .input("t", kI64, {2})
      .init_i64("axis", {}, {1})
      .init_i64("reps", {2}, {2, 1})
      .init_i64("depth", {}, {3})
      .init_f("vals", {2}, {0.f, 5.f})
      .init_f("w", {3}, {1.f, 2.f, 0.5f})
      .node("CumSum", {"x", "axis"}, {"cs"}, {ai("exclusive", 1)})
      .node("Tile", {"x", "reps"}, {"tl"})
      .node("OneHot", {"t", "depth", "vals"}, {"oh"})
      .node("Trilu", {"x"}, {"tr"}, {ai("upper", 0)})
      .node("NegativeLogLikelihoodLoss", {"x", "t", "w"}, {"nll"}, {ai("ignore_index", 2)})
      .output("cs")
      .output("tl")
      .output("oh")
      .output("tr")
      .output("nll");
  auto module = import_ok(m.save(dir.path() / "indexing.onnx"));
  CHECK(count_nodes(module, hexir::ops::OpId::kCumSum) == 1);
  CHECK(count_nodes(module, hexir::ops::OpId::kExpand) == 1);  // Tile: one pass, the reshapes are views
  CHECK(count_nodes(module, hexir::ops::OpId::kGatherElements) == 1);
  Tensor t{{DType::kI64, {2}}, std::vector<uint8_t>(16)};
  const int64_t targets[2] = {1, 2};  // the second is ignore_index
  std::memcpy(t.bytes.data(), targets, 16);
  auto out = run(module, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), t}, dir.path());
  check_close(out[0].f32(), {0, 1, 3, 0, 4, 9});
  check_close(out[1].f32(), {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  check_close(out[2].f32(), {0, 5, 0, 0, 0, 5});
  check_close(out[3].f32(), {1, 0, 0, 4, 5, 0});
  CHECK(out[4].type == TensorType{DType::kF32, {}});
  check_close(out[4].f32(), {-2});  // -x[0, 1] * w[1] over w[1]; the ignored target counts nothing
  check_round_trip(module, dir.path());
}

TEST_CASE("PP-OCR's block: Conv, BatchNorm, the exported hard swish, a scalar affine, a 1x1 Conv: folded and fused") {
  TempDir dir;
  const int C = 3, K = 4, H = 5, W = 6;
  std::vector<float> w1 = ramp(static_cast<size_t>(K * C * 9), 0.05f, -0.3f), w2 = ramp(static_cast<size_t>(K * K), 0.2f, -0.9f);
  Model m(13);
  m.input("x", kF, {1, C, H, W})
      .init_f("w1", {K, C, 3, 3}, w1)
      .init_f("gamma", {K}, {1.5f, 0.5f, -0.75f, 2.0f})
      .init_f("beta", {K}, {0.1f, -0.2f, 0.3f, 0.0f})
      .init_f("mean", {K}, {0.05f, -0.1f, 0.2f, 0.4f})
      .init_f("var", {K}, {1.0f, 0.25f, 4.0f, 0.5f})
      .init_f("three", {}, {3.f})
      .init_f("zero", {}, {0.f})
      .init_f("six", {}, {6.f})
      .init_f("s", {1}, {0.8f})
      .init_f("t", {1}, {-0.05f})
      .init_f("w2", {K, K, 1, 1}, w2)
      .init_f("b2", {K}, {0.5f, -0.5f, 0.25f, 1.0f})
      .node("Conv", {"x", "w1"}, {"c"}, {ais("pads", {1, 1, 1, 1})})
      .node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"bn"}, {af("epsilon", 1e-5f)})
      .node("Add", {"bn", "three"}, {"a"})
      .node("Clip", {"a", "zero", "six"}, {"cl"})
      .node("Mul", {"bn", "cl"}, {"mu"})
      .node("Div", {"mu", "six"}, {"hs"})
      .node("Mul", {"s", "hs"}, {"sc"})
      .node("Add", {"sc", "t"}, {"af"})
      .node("Conv", {"af", "w2", "b2"}, {"y"})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "block.onnx"));
  CHECK(count_nodes(module, hexir::ops::OpId::kHardSwish) == 1);
  CHECK(count_nodes(module, hexir::ops::OpId::kClip) == 0);
  const std::vector<float> x = ramp(static_cast<size_t>(C * H * W), 0.3f, -1.5f);
  hexir::compiler::CompileOptions plain;
  plain.fuse_epilogues = false;
  size_t fused_count = 0, plain_count = 0;
  auto fused = run(module, {f32({1, C, H, W}, x)}, dir.path(), {}, &fused_count);
  auto unfused = run(module, {f32({1, C, H, W}, x)}, dir.path(), plain, &plain_count);
  // conv2d (BatchNorm folded, hard_swish its epilogue) then conv2d (the affine folded in).
  CHECK(fused_count == 2);
  CHECK(plain_count == 7);  // conv, mul, add, hard_swish, mul, add, conv
  check_close(fused[0].f32(), unfused[0].f32(), 2e-6);
}

TEST_CASE("operators found by name when this build has them: LeakyRelu, Clip, Pow, Less, Abs, Erf, HardSigmoid") {
  TempDir dir;
  Model m(13);
  m.input("x", kF, {6})
      .init_f("lo", {}, {-0.5f})
      .init_i64("two", {}, {2})
      .init_f("zero", {}, {0.f})
      .node("LeakyRelu", {"x"}, {"l"}, {af("alpha", 0.1f)})
      .node("Clip", {"l", "lo"}, {"c"})
      .node("Pow", {"c", "two"}, {"p"})
      .node("Less", {"x", "zero"}, {"neg"})
      .node("Abs", {"x"}, {"a"})
      .node("Where", {"neg", "a", "p"}, {"w"})
      .node("Erf", {"w"}, {"e"})
      .node("HardSigmoid", {"e"}, {"y"}, {af("alpha", 0.5f)})
      .output("y");
  const fs::path path = m.save(dir.path() / "newops.onnx");
  bool have_all = true;
  for (const char* op : {"leaky_relu", "clip", "pow", "less", "abs", "erf", "hard_sigmoid"})
    have_all = have_all && hexir::ops::find_op(op).has_value();
  if (!have_all) {
    const std::string e = import_error(path);
    CHECK(e.find("this build of Hexir has no") != std::string::npos);
    return;
  }
  auto module = import_ok(path);
  check_round_trip(module, dir.path());
  const std::vector<float> x = {-2.f, -0.25f, 0.f, 0.5f, 1.f, 3.f};
  auto out = run(module, {f32({6}, x)}, dir.path());
  std::vector<float> want;
  for (float v : x) {
    const double l = v < 0 ? 0.1f * v : v;
    const double c = std::max(l, -0.5);
    const double w = v < 0 ? std::fabs(v) : c * c;
    want.push_back(static_cast<float>(std::max(0.0, std::min(1.0, 0.5 * std::erf(w) + 0.5))));
  }
  check_close(out[0].f32(), want, 1e-5);
}

TEST_CASE("MaxPool, AveragePool (2-D and 1-D), ReduceMax when this build has them") {
  TempDir dir;
  Model m(17);
  m.input("x", kF, {1, 1, 4, 4})
      .input("s", kF, {1, 2, 5})
      .node("MaxPool", {"x"}, {"mp"}, {ais("kernel_shape", {2, 2}), ais("strides", {2, 2})})
      .node("AveragePool", {"x"}, {"ap"}, {ais("kernel_shape", {3, 3}), ais("pads", {1, 1, 1, 1})})
      .node("MaxPool", {"s"}, {"mp1"}, {ais("kernel_shape", {2}), ais("pads", {0, 1})})
      .node("ReduceMax", {"x"}, {"rm"}, {ais("axes", {3}), ai("keepdims", 0)})
      .output("mp")
      .output("ap")
      .output("mp1")
      .output("rm");
  const fs::path path = m.save(dir.path() / "pool.onnx");
  if (!hexir::ops::find_op("max_pool") || !hexir::ops::find_op("average_pool") || !hexir::ops::find_op("reduce_max")) {
    CHECK(import_error(path).find("this build of Hexir has no") != std::string::npos);
    return;
  }
  auto module = import_ok(path);
  check_round_trip(module, dir.path());
  std::vector<float> x(16), s(10);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>((i * 5) % 16) - 7.f;
  for (int i = 0; i < 10; ++i) s[i] = static_cast<float>((i * 3) % 10) - 4.f;
  auto out = run(module, {f32({1, 1, 4, 4}, x), f32({1, 2, 5}, s)}, dir.path());
  std::vector<float> mp(4), ap(16), mp1(10), rm(4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float v = -1e30f;
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) v = std::max(v, x[(2 * i + a) * 4 + 2 * j + b]);
      mp[i * 2 + j] = v;
    }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double sum = 0;
      int taps = 0;
      for (int a = -1; a <= 1; ++a)
        for (int b = -1; b <= 1; ++b)
          if (i + a >= 0 && i + a < 4 && j + b >= 0 && j + b < 4) sum += x[(i + a) * 4 + j + b], ++taps;
      ap[i * 4 + j] = static_cast<float>(sum / taps);  // count_include_pad = 0
    }
  for (int c = 0; c < 2; ++c)
    for (int t = 0; t < 5; ++t) mp1[c * 5 + t] = t + 1 < 5 ? std::max(s[c * 5 + t], s[c * 5 + t + 1]) : s[c * 5 + t];
  for (int i = 0; i < 4; ++i) rm[i] = *std::max_element(x.begin() + 4 * i, x.begin() + 4 * i + 4);
  CHECK(out[2].type == TensorType{DType::kF32, {1, 2, 5}});
  check_close(out[0].f32(), mp);
  check_close(out[1].f32(), ap);
  check_close(out[2].f32(), mp1);
  check_close(out[3].f32(), rm);
}

TEST_CASE("Resize (scales and sizes inputs, opset 10 and 13), Upsample-9, ConvTranspose 1-D and 2-D") {
  TempDir dir;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  // Opset 13: scales 0.6 with align_corners (coordinates over the unrounded
  // length), then sizes; ConvTranspose 2-D strided and 1-D.
  Model m(13);
  m.input("x", kF, {1, 1, 2, 4})
      .input("s", kF, {1, 1, 3})
      .init_f("scales", {4}, {1.f, 1.f, 0.6f, 0.6f})
      .init_i64("sizes", {4}, {1, 1, 3, 5})
      .init_f("w", {1, 1, 2, 2}, {1.f, 2.f, 3.f, 4.f})
      .init_f("w1", {1, 2, 2}, {1.f, -1.f, 0.5f, 2.f})
      .node("Resize", {"x", "", "scales"}, {"down"},
            {as("mode", "linear"), as("coordinate_transformation_mode", "align_corners")})
      .node("Resize", {"x", "", "", "sizes"}, {"up"},
            {as("coordinate_transformation_mode", "asymmetric"), as("nearest_mode", "floor")})
      .node("ConvTranspose", {"x", "w"}, {"ct"}, {ais("strides", {2, 2})})
      .node("ConvTranspose", {"s", "w1"}, {"ct1"}, {ais("strides", {2}), ais("pads", {1, 0})})
      .output("down")
      .output("up")
      .output("ct")
      .output("ct1");
  const fs::path path = m.save(dir.path() / "resize.onnx");
  if (!hexir::ops::find_op("resize") || !hexir::ops::find_op("conv_transpose")) {
    CHECK(import_error(path).find("this build of Hexir has no") != std::string::npos);
    return;
  }
  auto module = import_ok(path);
  check_round_trip(module, dir.path());
  auto out = run(module, {f32({1, 1, 2, 4}, x), f32({1, 1, 3}, {1.f, 2.f, 3.f})}, dir.path());
  CHECK(out[0].type == TensorType{DType::kF32, {1, 1, 1, 2}});
  check_close(out[0].f32(), {1.f, 3.142857f});
  CHECK(out[1].type == TensorType{DType::kF32, {1, 1, 3, 5}});
  // asymmetric floor: row floor(y * 2 / 3), column floor(x * 4 / 5)
  std::vector<float> up;
  for (int y = 0; y < 3; ++y)
    for (int c = 0; c < 5; ++c) up.push_back(x[static_cast<size_t>((y * 2 / 3) * 4 + c * 4 / 5)]);
  check_close(out[1].f32(), up);
  // Stride 2 with a 2x2 kernel: every input element writes its own 2x2 block.
  CHECK(out[2].type == TensorType{DType::kF32, {1, 1, 4, 8}});
  std::vector<float> ct(32);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) ct[static_cast<size_t>((2 * i + a) * 8 + 2 * j + b)] = x[static_cast<size_t>(i * 4 + j)] * (1.f + static_cast<float>(a * 2 + b));
  check_close(out[2].f32(), ct);
  // 1-D, 1 input channel to 2, stride 2, pads [1, 0]: full length 6, the first dropped.
  CHECK(out[3].type == TensorType{DType::kF32, {1, 2, 5}});
  check_close(out[3].f32(), {-1.f, 2.f, -2.f, 3.f, -3.f, 2.f, 1.f, 4.f, 1.5f, 6.f});

  // Opset 10: Resize(X, scales), asymmetric; nearest takes the floor going up.
  Model m10(10);
  m10.input("x", kF, {1, 1, 2, 4})
      .init_f("scales", {4}, {1.f, 1.f, 1.5f, 1.5f})
      .node("Resize", {"x", "scales"}, {"y"})
      .output("y");
  auto module10 = import_ok(m10.save(dir.path() / "resize10.onnx"));
  check_round_trip(module10, dir.path());
  auto out10 = run(module10, {f32({1, 1, 2, 4}, x)}, dir.path());
  CHECK(out10[0].type == TensorType{DType::kF32, {1, 1, 3, 6}});
  std::vector<float> want10;
  for (int y = 0; y < 3; ++y)
    for (int c = 0; c < 6; ++c)
      want10.push_back(x[static_cast<size_t>(static_cast<int>(y / 1.5) * 4 + static_cast<int>(c / 1.5))]);
  check_close(out10[0].f32(), want10);

  // Upsample-9 is Resize-10 under another name.
  Model m9(9);
  m9.input("x", kF, {1, 1, 2, 4})
      .init_f("scales", {4}, {1.f, 1.f, 1.5f, 1.5f})
      .node("Upsample", {"x", "scales"}, {"y"})
      .output("y");
  auto out9 = run(import_ok(m9.save(dir.path() / "upsample9.onnx")), {f32({1, 1, 2, 4}, x)}, dir.path());
  check_close(out9[0].f32(), want10);

  // What the kernels do not do is refused, naming it.
  Model cubic(13);
  cubic.input("x", kF, {1, 1, 2, 4})
      .init_f("scales", {4}, {1.f, 1.f, 2.f, 2.f})
      .node("Resize", {"x", "", "scales"}, {"y"}, {as("mode", "cubic")})
      .output("y");
  CHECK(import_error(cubic.save(dir.path() / "cubic.onnx")).find("mode 'cubic' is not supported") != std::string::npos);
}

TEST_CASE("folding of the same operators on constants needs no operator") {
  TempDir dir;
  Model m(13);
  m.input("x", kF, {3})
      .init_f("k", {3}, {-2.f, 0.5f, 4.f})
      .init_i64("two", {}, {2})
      .node("LeakyRelu", {"k"}, {"l"}, {af("alpha", 0.5f)})  // -1, 0.5, 4
      .node("Pow", {"l", "two"}, {"p"})                       // 1, 0.25, 16
      .node("Clip", {"p"}, {"c"})
      .node("Mul", {"x", "c"}, {"y"})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "fold2.onnx"));
  CHECK(module.functions[0].nodes.size() == 1);
  auto out = run(module, {f32({3}, {1.f, 2.f, 3.f})}, dir.path());
  check_close(out[0].f32(), {1.f, 0.5f, 48.f});
}

TEST_CASE("constant folding through the operators: ReduceMax -> Ceil on constants folds (no host rule for ReduceMax)") {
  // ssdlite320_mobilenet_v3_large's anchors: a Ceil of a ReduceMax over a
  // constant. Ceil has no run-time operator; ReduceMax folds by its kernel.
  TempDir dir;
  Model m(13);
  m.input("x", kF, {2})
      .init_f("k", {2, 3}, {0.5f, 2.25f, -1.f, 3.5f, 1.f, 0.f})
      .node("ReduceMax", {"k"}, {"mx"}, {ais("axes", {1}), ai("keepdims", 0)})  // 2.25, 3.5
      .node("Ceil", {"mx"}, {"c"})                                                // 3, 4
      .node("Mul", {"x", "c"}, {"y"})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "reduce_ceil.onnx"));
  CHECK(module.functions[0].nodes.size() == 1);  // only the mul runs
  auto out = run(module, {f32({2}, {1.f, 2.f})}, dir.path());
  check_close(out[0].f32(), {3.f, 8.f});
}

TEST_CASE("constant folding through the operators: a folded result is the kernel's run-time result, bit for bit") {
  // Each operator twice: on the constant k (folded at import) and on the
  // input x given k's values (run by the same kernel): the same bytes.
  // Transcendentals in f32 differ from a double evaluation in the last bit.
  TempDir dir;
  Model m(13);
  std::vector<float> k(24);
  for (size_t i = 0; i < k.size(); ++i) k[i] = -3.f + 0.2719f * static_cast<float>(i);
  m.input("x", kF, {4, 6}).init_f("k", {4, 6}, k);
  const std::vector<std::pair<std::string, std::vector<Attr>>> ops = {
      {"Sigmoid", {}}, {"Tanh", {}}, {"Exp", {}}, {"Erf", {}}, {"Softplus", {}},
      {"Softmax", {ai("axis", 1)}}, {"ReduceMean", {ais("axes", {1})}}, {"HardSwish", {}}};
  for (const auto& [op, attrs] : ops) {
    m.node(op, {"k"}, {op + "_folded"}, attrs).node(op, {"x"}, {op + "_run"}, attrs);
    m.output(op + "_folded").output(op + "_run");
  }
  auto module = import_ok(m.save(dir.path() / "bits.onnx"));
  int run_time = 0;
  for (const auto& node : module.functions[0].nodes) run_time += node.op != hexir::ops::OpId::kCopy;
  CHECK(run_time == static_cast<int>(ops.size()));  // the folded half runs nothing (a copy names an output)
  auto out = run(module, {f32({4, 6}, k)}, dir.path());
  REQUIRE(out.size() == 2 * ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    INFO(ops[i].first);
    CHECK(out[2 * i].bytes == out[2 * i + 1].bytes);
  }
}

TEST_CASE("constant folding through the operators: a result over fold_max_bytes runs instead") {
  TempDir dir;
  Model m(13);
  m.input("x", kF, {4, 4})
      .init_f("a", {4, 1}, {1.f, 2.f, 3.f, 4.f})
      .init_f("b", {1, 4}, {10.f, 20.f, 30.f, 40.f})
      .node("Add", {"a", "b"}, {"ab"})  // f32[4,4]: 64 bytes
      .node("Mul", {"x", "ab"}, {"y"})
      .output("y");
  const fs::path path = m.save(dir.path() / "limit.onnx");
  CHECK(import_ok(path).functions[0].nodes.size() == 1);  // folded by default
  OnnxImportOptions small;
  small.fold_max_bytes = 63;  // the operands (16 bytes) are held, the result is not
  auto module = import_ok(path, small);
  CHECK(count_nodes(module, hexir::ops::OpId::kAdd) == 1);
  std::vector<float> want(16);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) want[i * 4 + j] = static_cast<float>((i + 1) + 10 * (j + 1));
  auto out = run(module, {f32({4, 4}, std::vector<float>(16, 1.f))}, dir.path());
  check_close(out[0].f32(), want);
  small.fold_max_bytes = 64;
  CHECK(import_ok(path, small).functions[0].nodes.size() == 1);
}

TEST_CASE("If with a condition that folds: the branch taken is inlined, the other never read") {
  for (int64_t rows : {2, 3}) {
    CAPTURE(rows);
    TempDir dir;
    Model m(13);
    m.input("x", kF, {rows, 3})
        .init_i64("zero", {1}, {0})
        .init_i64("two", {}, {2})
        .node("Shape", {"x"}, {"s"})
        .node("Gather", {"s", "zero"}, {"n"})
        .node("Squeeze", {"n", "zero"}, {"n0"})
        .node("Equal", {"n0", "two"}, {"cond"})
        .node("If", {"cond"}, {"y"}, {}, "if0")
        .output("y");
    auto* node = m.proto().mutable_graph()->mutable_node(m.proto().graph().node_size() - 1);
    auto branch = [&](const char* name, const char* op, bool with_initializer) {
      auto* a = node->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::GRAPH);
      auto* g = a->mutable_g();
      g->set_name(name);
      auto* n1 = g->add_node();
      n1->set_op_type(op);
      n1->add_input("x");  // an outer value
      n1->add_output(std::string(name) + "_t");
      auto* n2 = g->add_node();
      n2->set_op_type("Mul");
      n2->add_input(std::string(name) + "_t");
      n2->add_input(with_initializer ? "k" : std::string(name) + "_t");
      n2->add_output(std::string(name) + "_out");
      if (with_initializer) {
        auto* t = g->add_initializer();
        t->set_name("k");
        t->set_data_type(kF);
        t->add_float_data(10.f);
      }
      auto* dead = g->add_node();  // nothing needs it
      dead->set_op_type("GridSample");
      dead->add_input("x");
      dead->add_output(std::string(name) + "_dead");
      g->add_output()->set_name(std::string(name) + "_out");
    };
    branch("then_branch", "Relu", true);
    branch("else_branch", rows == 2 ? "GridSample" : "Neg", false);  // never imported when rows == 2
    auto module = import_ok(m.save(dir.path() / "if.onnx"));
    const std::vector<float> x = ramp(static_cast<size_t>(rows * 3));
    auto out = run(module, {f32({rows, 3}, x)}, dir.path());
    std::vector<float> want;
    for (float v : x) want.push_back(rows == 2 ? std::max(v, 0.f) * 10.f : v * v);
    check_close(out[0].f32(), want);
    check_round_trip(module, dir.path());
  }
}

// Adds `name` (then_branch / else_branch) to an If node: one node per
// {op, inputs, output}, the last output the branch's result.
void add_branch(onnx::NodeProto* node, const char* name,
                const std::vector<std::tuple<const char*, std::vector<std::string>, std::string>>& nodes) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* g = a->mutable_g();
  g->set_name(name);
  for (const auto& [op, inputs, output] : nodes) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (const std::string& in : inputs) n->add_input(in);
    n->add_output(output);
  }
  g->add_output()->set_name(std::get<2>(nodes.back()));
}

TEST_CASE("If with a run-time condition: both branches in the VM; one that cannot be built fails when taken") {
  for (bool buildable : {true, false}) {
    CAPTURE(buildable);
    TempDir dir;
    Model m(13);
    m.input("c", onnx::TensorProto::BOOL, {1}).input("x", kF, {2, 3}).init_i64("four", {1}, {4});
    m.node("If", {"c"}, {"y"}, {}, "if1").node("Neg", {"y"}, {"z"}).output("z");
    auto* node = m.proto().mutable_graph()->mutable_node(0);
    add_branch(node, "then_branch", {{"Relu", {"x"}, "t"}, {"Mul", {"t", "t"}, "t2"}});
    if (buildable)
      add_branch(node, "else_branch", {{"Neg", {"x"}, "e"}});
    else  // 6 elements into 4: no graph at these shapes
      add_branch(node, "else_branch", {{"Reshape", {"x", "four"}, "e"}, {"Reshape", {"e", "four"}, "e2"}});
    auto module = import_ok(m.save(dir.path() / "if.onnx"));
    check_round_trip(module, dir.path());
    const std::vector<float> x = {-1.5f, 2.f, 0.5f, -3.f, 4.f, 0.f};
    const fs::path exe = dir.path() / "if.hxe";
    auto compiled = hexir::compiler::compile_module_to(module, exe, {});
    REQUIRE_MESSAGE(compiled.ok(), compiled.status().to_string());
    auto loaded = hexir::vm::Module::load_file(exe.string());
    REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
    auto device = hexir::hal::create_device("cpu");
    REQUIRE(device.ok());
    auto program = hexir::vm::Program::prepare(*loaded, **device);
    REQUIRE(program.ok());
    auto context = hexir::vm::Context::create(*program);
    REQUIRE(context.ok());
    for (uint8_t c : {uint8_t{1}, uint8_t{0}}) {
      CAPTURE(int{c});
      Tensor xt = f32({2, 3}, x);
      std::vector<hexir::vm::TensorRef> refs = {{&c, 1, TensorType{DType::kBool, {1}}},
                                                {xt.bytes.data(), xt.bytes.size(), xt.type}};
      std::vector<float> z(6);
      const hexir::vm::TensorRef outs[] = {{z.data(), 24, TensorType{DType::kF32, {2, 3}}}};
      hexir::Status st = context->invoke(0, refs, outs);
      if (!c && !buildable) {
        REQUIRE(!st.ok());
        CHECK_MESSAGE(st.message().find("else_branch of If node 'if1' cannot be built at the compiled shapes") !=
                          std::string::npos,
                      st.to_string());
        CHECK_MESSAGE(st.message().find("(Reshape)") != std::string::npos, st.to_string());
        continue;
      }
      REQUIRE_MESSAGE(st.ok(), st.to_string());
      std::vector<float> want;
      for (float v : x) want.push_back(c ? -(std::max(v, 0.f) * std::max(v, 0.f)) : v);
      check_close(z, want);
    }
  }
  {  // neither branch: an import error naming both
    TempDir dir;
    Model m(13);
    m.input("c", onnx::TensorProto::BOOL, {}).input("x", kF, {2, 3}).init_i64("four", {1}, {4});
    m.node("If", {"c"}, {"y"}, {}, "if2").output("y");
    auto* node = m.proto().mutable_graph()->mutable_node(0);
    add_branch(node, "then_branch", {{"Reshape", {"x", "four"}, "t"}});
    add_branch(node, "else_branch", {{"Reshape", {"x", "four"}, "e"}});
    const std::string e = import_error(m.save(dir.path() / "if2.onnx"));
    CHECK_MESSAGE(e.find("node 'if2' (If): neither branch can be built: then_branch") != std::string::npos, e);
    CHECK_MESSAGE(e.find("; else_branch") != std::string::npos, e);
  }
  {  // a condition that is not one bool
    TempDir dir;
    Model m(13);
    m.input("c", kF, {}).input("x", kF, {2}).node("If", {"c"}, {"y"}, {}, "if3").output("y");
    const std::string e = import_error(m.save(dir.path() / "if3.onnx"));
    CHECK_MESSAGE(e.find("node 'if3' (If): the condition ('c') is FLOAT[]; an If takes one BOOL") != std::string::npos, e);
  }
}

// Adds a Loop body: inputs named `inputs` (iteration number, condition,
// carried values), one node per {op, inputs, output}, outputs `outputs`.
void add_body(onnx::NodeProto* node, const std::vector<std::string>& inputs,
              const std::vector<std::tuple<const char*, std::vector<std::string>, std::string>>& nodes,
              const std::vector<std::string>& outputs) {
  auto* a = node->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* g = a->mutable_g();
  g->set_name("body");
  for (const std::string& in : inputs) g->add_input()->set_name(in);
  for (const auto& [op, ins, output] : nodes) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (const std::string& in : ins) n->add_input(in);
    n->add_output(output);
  }
  for (const std::string& out : outputs) g->add_output()->set_name(out);
}

Tensor i64_scalar(int64_t v) {
  Tensor t{{DType::kI64, {}}, std::vector<uint8_t>(8)};
  std::memcpy(t.bytes.data(), &v, 8);
  return t;
}

TEST_CASE("Loop: a counted loop with a run-time trip count, carried values, scan outputs") {
  {  // acc <- acc * 0.5 + x, M times (M a run-time input)
    TempDir dir;
    Model m(13);
    m.input("M", onnx::TensorProto::INT64, {}).input("x", kF, {3}).init_f("half", {}, {0.5f});
    m.node("Loop", {"M", "", "x"}, {"acc"}, {}, "loop0").output("acc");
    add_body(m.proto().mutable_graph()->mutable_node(0), {"i", "cond", "a"},
             {{"Mul", {"a", "half"}, "h"}, {"Add", {"h", "x"}, "a2"}, {"Identity", {"cond"}, "cond2"}},
             {"cond2", "a2"});
    auto module = import_ok(m.save(dir.path() / "loop.onnx"));
    check_round_trip(module, dir.path());
    const std::vector<float> x = {1.f, -2.f, 4.f};
    for (int64_t trips : {0, 1, 5}) {
      CAPTURE(trips);
      auto out = run(module, {i64_scalar(trips), f32({3}, x)}, dir.path());
      std::vector<float> want = x;
      for (int64_t k = 0; k < trips; ++k)
        for (size_t j = 0; j < 3; ++j) want[j] = want[j] * 0.5f + x[j];
      check_close(out[0].f32(), want);
    }
  }
  {  // M = 4 at import: the scan output stacks x * i, the carried sum adds them up
    TempDir dir;
    Model m(13);
    m.input("x", kF, {2}).init_i64("four", {}, {4}).init_f("zero2", {2}, {0.f, 0.f});
    m.node("Loop", {"four", "", "zero2"}, {"sum", "rows"}, {}, "loop1").output("sum").output("rows");
    auto* node = m.proto().mutable_graph()->mutable_node(0);
    add_body(node, {"i", "cond", "s"},
             {{"Cast", {"i"}, "fi"}, {"Mul", {"x", "fi"}, "row"}, {"Add", {"s", "row"}, "s2"},
              {"Identity", {"cond"}, "c2"}},
             {"c2", "s2", "row"});
    auto* cast = node->mutable_attribute(0)->mutable_g()->mutable_node(0)->add_attribute();
    cast->set_name("to");
    cast->set_type(onnx::AttributeProto::INT);
    cast->set_i(kF);
    auto module = import_ok(m.save(dir.path() / "scan.onnx"));
    const std::vector<float> x = {1.5f, -1.f};
    auto out = run(module, {f32({2}, x)}, dir.path());
    REQUIRE(out.size() == 2);
    CHECK(out[1].type == TensorType{DType::kF32, {4, 2}});
    check_close(out[0].f32(), {1.5f * 6, -1.f * 6});
    check_close(out[1].f32(), {0.f, 0.f, 1.5f, -1.f, 3.f, -2.f, 4.5f, -3.f});
  }
  {  // a while loop: the body's condition is computed
    TempDir dir;
    Model m(13);
    m.input("M", onnx::TensorProto::INT64, {}).input("x", kF, {});
    m.node("Loop", {"M", "", "x"}, {"acc"}, {}, "loop2").output("acc");
    add_body(m.proto().mutable_graph()->mutable_node(0), {"i", "cond", "a"},
             {{"Add", {"a", "x"}, "a2"}, {"Less", {"a2", "x"}, "c2"}}, {"c2", "a2"});
    const std::string e = import_error(m.save(dir.path() / "while.onnx"));
    CHECK_MESSAGE(e.find("node 'loop2' (Loop): the body's condition output ('c2') is not true at import: a while "
                         "loop is not supported") != std::string::npos,
                  e);
  }
  {  // no trip count
    TempDir dir;
    Model m(13);
    m.input("c", onnx::TensorProto::BOOL, {}).input("x", kF, {});
    m.node("Loop", {"", "c", "x"}, {"acc"}, {}, "loop3").output("acc");
    add_body(m.proto().mutable_graph()->mutable_node(0), {"i", "cond", "a"}, {{"Identity", {"a"}, "a2"}},
             {"cond", "a2"});
    const std::string e = import_error(m.save(dir.path() / "nom.onnx"));
    CHECK_MESSAGE(e.find("a Loop without a trip count M (a while loop) is not supported") != std::string::npos, e);
  }
}

namespace {

// ---- recurrent operators: a direct reference of ONNX's equations ----

enum class Cell { kRnn, kGru, kLstm };

struct Act {
  std::string name;
  float alpha = 0, beta = 0;
};

float act_ref(const Act& a, float x) {
  if (a.name == "Relu") return std::max(0.f, x);
  if (a.name == "Tanh") return std::tanh(x);
  if (a.name == "Sigmoid") return 1.f / (1.f + std::exp(-x));
  if (a.name == "LeakyRelu") return x < 0 ? a.alpha * x : x;
  if (a.name == "HardSigmoid") return std::clamp(a.alpha * x + a.beta, 0.f, 1.f);
  if (a.name == "Softsign") return x / (1 + std::fabs(x));
  if (a.name == "Softplus") return std::log1p(std::exp(x));
  if (a.name == "Affine") return a.alpha * x + a.beta;
  if (a.name == "ScaledTanh") return a.alpha * std::tanh(a.beta * x);
  if (a.name == "ThresholdedRelu") return x > a.alpha ? x : 0.f;
  FAIL("no reference for " << a.name);
  return 0;
}

// One recurrent node, layout 0: X [seq, batch, in], W [dirs, G*H, in],
// R [dirs, G*H, H], B [dirs, 2*G*H], h0/c0 [dirs, batch, H], P [dirs, 3H];
// acts per direction in the operator's order.
struct RnnCase {
  Cell cell = Cell::kGru;
  int seq = 4, batch = 2, in = 3, hidden = 5, dirs = 1;
  bool reverse = false, lbr = false, input_forget = false;
  float clip = 0;  // 0: none
  std::vector<std::vector<Act>> acts;
  std::vector<float> x, w, r, b, h0, c0, p;
  int gates() const { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4; }
};

struct RnnResult {
  std::vector<float> y, y_h, y_c;  // [seq, dirs, batch, H], [dirs, batch, H]
};

RnnResult rnn_ref(const RnnCase& c) {
  const int H = c.hidden, G = c.gates(), B = c.batch, I = c.in;
  RnnResult out;
  out.y.assign(static_cast<size_t>(c.seq * c.dirs * B * H), 0.f);
  out.y_h.assign(static_cast<size_t>(c.dirs * B * H), 0.f);
  out.y_c = out.y_h;
  for (int d = 0; d < c.dirs; ++d) {
    const std::vector<Act>& act = c.acts[static_cast<size_t>(d)];
    auto W = [&](int row, int k) { return c.w[static_cast<size_t>((d * G * H + row) * I + k)]; };
    auto R = [&](int row, int k) { return c.r[static_cast<size_t>((d * G * H + row) * H + k)]; };
    auto Wb = [&](int row) { return c.b.empty() ? 0.f : c.b[static_cast<size_t>(d * 2 * G * H + row)]; };
    auto Rb = [&](int row) { return c.b.empty() ? 0.f : c.b[static_cast<size_t>(d * 2 * G * H + G * H + row)]; };
    auto P = [&](int row) { return c.p.empty() ? 0.f : c.p[static_cast<size_t>(d * 3 * H + row)]; };
    auto f = [&](int which, float v) {
      if (c.clip > 0) v = std::clamp(v, -c.clip, c.clip);
      return act_ref(act[static_cast<size_t>(which)], v);
    };
    for (int bi = 0; bi < B; ++bi) {
      std::vector<float> h(static_cast<size_t>(H), 0.f), cs(static_cast<size_t>(H), 0.f);
      for (int j = 0; j < H; ++j) {
        if (!c.h0.empty()) h[j] = c.h0[static_cast<size_t>((d * B + bi) * H + j)];
        if (!c.c0.empty()) cs[j] = c.c0[static_cast<size_t>((d * B + bi) * H + j)];
      }
      for (int k = 0; k < c.seq; ++k) {
        const int t = (c.reverse || d == 1) ? c.seq - 1 - k : k;
        const float* xt = &c.x[static_cast<size_t>((t * B + bi) * I)];
        // xw[g] = Xt W_g^T + Wb_g; hr[g] = H R_g^T + Rb_g (g over G*H rows)
        std::vector<double> xw(static_cast<size_t>(G * H)), hr(static_cast<size_t>(G * H));
        for (int g = 0; g < G * H; ++g) {
          double sx = Wb(g), sh = Rb(g);
          for (int q = 0; q < I; ++q) sx += static_cast<double>(xt[q]) * W(g, q);
          for (int q = 0; q < H; ++q) sh += static_cast<double>(h[q]) * R(g, q);
          xw[g] = sx;
          hr[g] = sh;
        }
        std::vector<float> next(static_cast<size_t>(H));
        if (c.cell == Cell::kRnn) {
          for (int j = 0; j < H; ++j) next[j] = f(0, static_cast<float>(xw[j] + hr[j]));
        } else if (c.cell == Cell::kGru) {
          std::vector<float> z(static_cast<size_t>(H)), rg(static_cast<size_t>(H));
          for (int j = 0; j < H; ++j) {
            z[j] = f(0, static_cast<float>(xw[j] + hr[j]));
            rg[j] = f(0, static_cast<float>(xw[H + j] + hr[H + j]));
          }
          for (int j = 0; j < H; ++j) {
            double rec;
            if (c.lbr) {
              rec = rg[j] * hr[2 * H + j];  // r (H Rh^T + Rbh)
            } else {
              rec = Rb(2 * H + j);  // (r H) Rh^T + Rbh
              for (int q = 0; q < H; ++q) rec += static_cast<double>(rg[q] * h[q]) * R(2 * H + j, q);
            }
            const float nt = f(1, static_cast<float>(xw[2 * H + j] + rec));
            next[j] = (1 - z[j]) * nt + z[j] * h[j];
          }
        } else {  // i, o, f, c
          for (int j = 0; j < H; ++j) {
            const float i = f(0, static_cast<float>(xw[j] + hr[j] + P(j) * cs[j]));
            const float fg =
                c.input_forget ? 1 - i : f(0, static_cast<float>(xw[2 * H + j] + hr[2 * H + j] + P(2 * H + j) * cs[j]));
            const float ct = f(1, static_cast<float>(xw[3 * H + j] + hr[3 * H + j]));
            cs[j] = fg * cs[j] + i * ct;
            const float o = f(0, static_cast<float>(xw[H + j] + hr[H + j] + P(H + j) * cs[j]));
            next[j] = o * act_ref(act[2], cs[j]);
          }
        }
        h = next;
        for (int j = 0; j < H; ++j) out.y[static_cast<size_t>(((t * c.dirs + d) * B + bi) * H + j)] = h[j];
      }
      for (int j = 0; j < H; ++j) {
        out.y_h[static_cast<size_t>((d * B + bi) * H + j)] = h[j];
        out.y_c[static_cast<size_t>((d * B + bi) * H + j)] = cs[j];
      }
    }
  }
  return out;
}

// Fills a case's tensors with small varied values (W, R, B always; h0, c0, P when asked).
void fill_case(RnnCase& c, bool h0, bool c0, bool p) {
  const int G = c.gates(), H = c.hidden;
  auto wave = [](size_t n, float scale, float phase) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * static_cast<float>(i) + phase);
    return v;
  };
  c.x = wave(static_cast<size_t>(c.seq * c.batch * c.in), 1.f, 0.1f);
  c.w = wave(static_cast<size_t>(c.dirs * G * H * c.in), 0.5f, 0.3f);
  c.r = wave(static_cast<size_t>(c.dirs * G * H * H), 0.4f, 0.9f);
  c.b = wave(static_cast<size_t>(c.dirs * 2 * G * H), 0.3f, 1.7f);
  c.h0 = h0 ? wave(static_cast<size_t>(c.dirs * c.batch * H), 0.6f, 2.1f) : std::vector<float>{};
  c.c0 = c0 ? wave(static_cast<size_t>(c.dirs * c.batch * H), 0.8f, 0.5f) : std::vector<float>{};
  c.p = p ? wave(static_cast<size_t>(c.dirs * 3 * H), 0.2f, 1.3f) : std::vector<float>{};
}

const char* cell_op(Cell cell) { return cell == Cell::kRnn ? "RNN" : cell == Cell::kGru ? "GRU" : "LSTM"; }

Attr afs(std::string name, std::vector<float> v) {
  return {std::move(name), [v](onnx::AttributeProto& a) {
            a.set_type(onnx::AttributeProto::FLOATS);
            for (float x : v) a.add_floats(x);
          }};
}
Attr astrs(std::string name, std::vector<std::string> v) {
  return {std::move(name), [v](onnx::AttributeProto& a) {
            a.set_type(onnx::AttributeProto::STRINGS);
            for (const auto& x : v) a.add_strings(x);
          }};
}

// The node of case `c`: W, R, B (and P, h0, c0 when the case has them) as
// initializers, X an input; outputs Y, Y_h (, Y_c).
Model rnn_model(const RnnCase& c, std::vector<Attr> extra = {}) {
  const int64_t G = c.gates(), H = c.hidden, D = c.dirs;
  Model m;
  m.input("X", kF, {c.seq, c.batch, c.in})
      .init_f("W", {D, G * H, c.in}, c.w)
      .init_f("R", {D, G * H, H}, c.r)
      .init_f("B", {D, 2 * G * H}, c.b);
  std::vector<std::string> in{"X", "W", "R", "B", "", c.h0.empty() ? "" : "h0"};
  if (!c.h0.empty()) m.init_f("h0", {D, c.batch, H}, c.h0);
  if (c.cell == Cell::kLstm) {
    in.push_back(c.c0.empty() ? "" : "c0");
    in.push_back(c.p.empty() ? "" : "P");
    if (!c.c0.empty()) m.init_f("c0", {D, c.batch, H}, c.c0);
    if (!c.p.empty()) m.init_f("P", {D, 3 * H}, c.p);
  }
  while (!in.empty() && in.back().empty()) in.pop_back();
  std::vector<Attr> attrs{ai("hidden_size", H),
                          as("direction", D == 2 ? "bidirectional" : c.reverse ? "reverse" : "forward")};
  if (c.cell == Cell::kGru) attrs.push_back(ai("linear_before_reset", c.lbr));
  if (c.clip > 0) attrs.push_back(af("clip", c.clip));
  if (c.input_forget) attrs.push_back(ai("input_forget", 1));
  attrs.insert(attrs.end(), extra.begin(), extra.end());
  std::vector<std::string> out{"Y", "Y_h"};
  if (c.cell == Cell::kLstm) out.push_back("Y_c");
  m.node(cell_op(c.cell), in, out, attrs);
  for (const auto& o : out) m.output(o);
  return m;
}

std::vector<Act> default_acts(Cell cell) {
  if (cell == Cell::kRnn) return {{"Tanh"}};
  if (cell == Cell::kGru) return {{"Sigmoid"}, {"Tanh"}};
  return {{"Sigmoid"}, {"Tanh"}, {"Tanh"}};
}

// Imports, runs and compares case `c` with the reference.
void check_rnn_case(const RnnCase& c, const std::vector<Attr>& extra = {}) {
  TempDir dir;
  const fs::path path = rnn_model(c, extra).save(dir.path() / "rnn.onnx");
  auto module = import_ok(path);
  auto out = run(module, {f32({c.seq, c.batch, c.in}, c.x)}, dir.path());
  const RnnResult want = rnn_ref(c);
  REQUIRE(out.size() == (c.cell == Cell::kLstm ? 3u : 2u));
  CHECK(out[0].type == TensorType{DType::kF32, {c.seq, c.dirs, c.batch, c.hidden}});
  CHECK(out[1].type == TensorType{DType::kF32, {c.dirs, c.batch, c.hidden}});
  check_close(out[0].f32(), want.y, 1e-4);
  check_close(out[1].f32(), want.y_h, 1e-4);
  if (c.cell == Cell::kLstm) check_close(out[2].f32(), want.y_c, 1e-4);
}

}  // namespace

TEST_CASE("Slice with run-time bounds ends = starts + c: a dynamic_slice of extent c (a Loop's window, test_loop11)") {
  {  // rows pos .. pos + 2 of x; a start past dim - 2 is clamped (the extent is static)
    TempDir dir;
    Model m(13);
    m.input("x", kF, {6, 4}).input("pos", kI64, {1}).init_i64("two", {}, {2}).init_i64("axis0", {1}, {0});
    m.node("Add", {"pos", "two"}, {"end"}).node("Slice", {"x", "pos", "end", "axis0"}, {"y"}).output("y");
    auto module = import_ok(m.save(dir.path() / "window.onnx"));
    CHECK(count_nodes(module, hexir::ops::OpId::kDynamicSlice) == 1);
    check_round_trip(module, dir.path());
    const std::vector<float> x = ramp(24);
    for (int64_t pos : {0, 3, 5}) {
      CAPTURE(pos);
      Tensor p{{DType::kI64, {1}}, std::vector<uint8_t>(8)};
      std::memcpy(p.bytes.data(), &pos, 8);
      auto out = run(module, {f32({6, 4}, x), p}, dir.path());
      REQUIRE(out[0].type == TensorType{DType::kF32, {2, 4}});
      const int64_t at = std::min<int64_t>(pos, 4);
      check_close(out[0].f32(), std::vector<float>(x.begin() + at * 4, x.begin() + at * 4 + 8));
    }
  }
  {  // y += x[i:i+1] in a Loop over i (test_loop11's body), the partial sums as a scan output
    TempDir dir;
    Model m(13);
    m.init_i64("M", {}, {5}).init_f("y0", {1}, {0.f}).init_f("x", {5}, {1.f, 2.f, 3.f, 4.f, 5.f});
    m.init_i64("one", {}, {1}).init_i64("axes", {1}, {0});
    m.node("Loop", {"M", "", "y0"}, {"y", "sums"}, {}, "loop").output("y").output("sums");
    add_body(m.proto().mutable_graph()->mutable_node(0), {"i", "cond", "y_in"},
             {{"Add", {"i", "one"}, "end"},
              {"Unsqueeze", {"i", "axes"}, "start1"},
              {"Unsqueeze", {"end", "axes"}, "end1"},
              {"Slice", {"x", "start1", "end1"}, "xi"},
              {"Add", {"y_in", "xi"}, "y_out"},
              {"Identity", {"cond"}, "cond_out"},
              {"Identity", {"y_out"}, "scan"}},
             {"cond_out", "y_out", "scan"});
    auto module = import_ok(m.save(dir.path() / "loop_window.onnx"));
    auto out = run(module, {}, dir.path());
    check_close(out[0].f32(), {15.f});
    check_close(out[1].f32(), {1.f, 3.f, 6.f, 10.f, 15.f});
  }
}

TEST_CASE("Slice with run-time bounds of another form names the run-time operand") {
  TempDir dir;
  Model m(13);
  m.input("x", kF, {6}).input("pos", kI64, {1}).input("end", kI64, {1});
  m.node("Slice", {"x", "pos", "end"}, {"y"}).output("y");
  CHECK(import_error(m.save(dir.path() / "slice.onnx")).find("must be a constant") != std::string::npos);
}

TEST_CASE("GRU: linear_before_reset 0 and 1, forward, reverse and bidirectional, initial state, Y and Y_h") {
  for (bool lbr : {false, true})
    for (int mode = 0; mode < 3; ++mode) {
      CAPTURE(lbr);
      CAPTURE(mode);
      RnnCase c;
      c.cell = Cell::kGru;
      c.lbr = lbr;
      c.dirs = mode == 2 ? 2 : 1;
      c.reverse = mode == 1;
      c.acts.assign(static_cast<size_t>(c.dirs), default_acts(c.cell));
      fill_case(c, /*h0=*/mode != 0, false, false);
      check_rnn_case(c);
    }
}

TEST_CASE("RNN: default Tanh, per-direction activations with alpha (LeakyRelu, Affine), clip") {
  RnnCase c;
  c.cell = Cell::kRnn;
  c.acts = {default_acts(c.cell)};
  fill_case(c, true, false, false);
  check_rnn_case(c);
  c.dirs = 2;
  c.clip = 0.7f;
  c.acts = {{{"LeakyRelu", 0.2f}}, {{"Affine", 0.5f, 0.25f}}};
  fill_case(c, false, false, false);
  check_rnn_case(c, {astrs("activations", {"LeakyRelu", "Affine"}), afs("activation_alpha", {0.2f, 0.5f}),
                     afs("activation_beta", {0.25f})});
  // One set of names for both directions; defaults for the alphas not given.
  c.acts = {{{"ThresholdedRelu", 1.f}}, {{"ThresholdedRelu", 1.f}}};
  check_rnn_case(c, {astrs("activations", {"ThresholdedRelu"})});
}

TEST_CASE("LSTM: clip, input_forget, HardSigmoid/ScaledTanh/Softsign with alpha and beta, peepholes, reverse") {
  RnnCase c;
  c.cell = Cell::kLstm;
  c.reverse = true;
  c.clip = 0.9f;
  c.input_forget = true;
  c.acts = {{{"HardSigmoid", 0.3f, 0.4f}, {"ScaledTanh", 1.5f, 0.5f}, {"Softsign"}}};
  fill_case(c, true, true, true);
  check_rnn_case(c, {astrs("activations", {"HardSigmoid", "ScaledTanh", "Softsign"}),
                     afs("activation_alpha", {0.3f, 1.5f}), afs("activation_beta", {0.4f, 0.5f})});
  c.dirs = 2;
  c.reverse = false;
  c.clip = 0;
  c.input_forget = false;
  c.acts.assign(2, default_acts(c.cell));
  fill_case(c, true, true, true);
  check_rnn_case(c);
}

TEST_CASE("LSTM and GRU with layout 1: X, initial states and outputs batch-major") {
  for (Cell cell : {Cell::kLstm, Cell::kGru}) {
    RnnCase c;
    c.cell = cell;
    c.dirs = 2;
    c.acts.assign(2, default_acts(cell));
    fill_case(c, true, cell == Cell::kLstm, false);
    const int64_t S = c.seq, N = c.batch, H = c.hidden, I = c.in, D = 2;
    // The same values batch-major: X [batch, seq, in], states [batch, dirs, H].
    auto swap01 = [](const std::vector<float>& v, int64_t a, int64_t b, int64_t inner) {
      std::vector<float> t(v.size());
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < b; ++j)
          for (int64_t k = 0; k < inner; ++k) t[(j * a + i) * inner + k] = v[(i * b + j) * inner + k];
      return t;
    };
    TempDir dir;
    Model m;
    m.input("X", kF, {N, S, I})
        .init_f("W", {D, c.gates() * H, I}, c.w)
        .init_f("R", {D, c.gates() * H, H}, c.r)
        .init_f("B", {D, 2 * c.gates() * H}, c.b)
        .init_f("h0", {N, D, H}, swap01(c.h0, D, N, H));
    std::vector<std::string> in{"X", "W", "R", "B", "", "h0"}, outs{"Y", "Y_h"};
    if (cell == Cell::kLstm) {
      m.init_f("c0", {N, D, H}, swap01(c.c0, D, N, H));
      in.push_back("c0");
      outs.push_back("Y_c");
    }
    m.node(cell_op(cell), in, outs, {ai("hidden_size", H), as("direction", "bidirectional"), ai("layout", 1)});
    for (const auto& o : outs) m.output(o);
    auto module = import_ok(m.save(dir.path() / "batchwise.onnx"));
    auto out = run(module, {f32({N, S, I}, swap01(c.x, S, N, I))}, dir.path());
    const RnnResult want = rnn_ref(c);
    // Y [seq, dirs, batch, H] -> [batch, seq, dirs, H]
    std::vector<float> y(want.y.size());
    for (int64_t t = 0; t < S; ++t)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < N; ++b)
          for (int64_t j = 0; j < H; ++j) y[((b * S + t) * D + d) * H + j] = want.y[((t * D + d) * N + b) * H + j];
    CHECK(out[0].type == TensorType{DType::kF32, {N, S, D, H}});
    check_close(out[0].f32(), y, 1e-4);
    check_close(out[1].f32(), swap01(want.y_h, D, N, H), 1e-4);
    if (cell == Cell::kLstm) check_close(out[2].f32(), swap01(want.y_c, D, N, H), 1e-4);
  }
}

TEST_CASE("GRU as torch exports two bidirectional layers: Transpose/Reshape between, sequence_lens full") {
  RnnCase l1, l2;
  for (RnnCase* c : {&l1, &l2}) {
    c->cell = Cell::kGru;
    c->lbr = true;  // torch.nn.GRU's form
    c->dirs = 2;
    c->acts.assign(2, default_acts(Cell::kGru));
  }
  l2.in = 2 * l1.hidden;
  fill_case(l1, true, false, false);
  fill_case(l2, true, false, false);
  const RnnResult r1 = rnn_ref(l1);
  // Layer 2 reads layer 1's Y [seq, 2, batch, H] as [seq, batch, 2H].
  l2.x.assign(r1.y.size(), 0.f);
  const int S = l1.seq, N = l1.batch, H = l1.hidden;
  for (int t = 0; t < S; ++t)
    for (int d = 0; d < 2; ++d)
      for (int b = 0; b < N; ++b)
        for (int j = 0; j < H; ++j)
          l2.x[static_cast<size_t>(((t * N + b) * 2 + d) * H + j)] =
              r1.y[static_cast<size_t>(((t * 2 + d) * N + b) * H + j)];
  const RnnResult r2 = rnn_ref(l2);
  TempDir dir;
  Model m;
  const int64_t G = 3;
  m.input("X", kF, {S, N, l1.in})
      .init_f("W1", {2, G * H, l1.in}, l1.w)
      .init_f("R1", {2, G * H, H}, l1.r)
      .init_f("B1", {2, 2 * G * H}, l1.b)
      .init_f("h01", {2, N, H}, l1.h0)
      .init_f("W2", {2, G * H, l2.in}, l2.w)
      .init_f("R2", {2, G * H, H}, l2.r)
      .init_f("B2", {2, 2 * G * H}, l2.b)
      .init_f("h02", {2, N, H}, l2.h0)
      .init_i64("lens", {N}, std::vector<int64_t>(static_cast<size_t>(N), S))
      .init_i64("shape", {3}, {0, 0, -1});
  const std::vector<Attr> attrs{ai("hidden_size", H), as("direction", "bidirectional"), ai("linear_before_reset", 1)};
  m.node("GRU", {"X", "W1", "R1", "B1", "lens", "h01"}, {"y1", "h1"}, attrs)
      .node("Transpose", {"y1"}, {"y1t"}, {ais("perm", {0, 2, 1, 3})})
      .node("Reshape", {"y1t", "shape"}, {"x2"})
      .node("GRU", {"x2", "W2", "R2", "B2", "lens", "h02"}, {"y2", "h2"}, attrs)
      .output("y2")
      .output("h1")
      .output("h2");
  auto module = import_ok(m.save(dir.path() / "gru2.onnx"));
  hexir::vm::PhaseStats prepared;
  auto out = run(module, {f32({S, N, l1.in}, l1.x)}, dir.path(), {}, nullptr, &prepared);
  check_close(out[0].f32(), r2.y, 1e-4);
  check_close(out[1].f32(), r1.y_h, 1e-4);
  check_close(out[2].f32(), r2.y_h, 1e-4);
  // Each layer's R^T is prepared once for its direction's steps, not once
  // per step: a bound independent of the sequence length (4 steps x 2
  // directions x 2 layers = 16 recurrent matmuls).
  CHECK(prepared.device_allocations <= 8);
}

TEST_CASE("recurrent operators over long sequences run as a loop: RNN, GRU (both forms), LSTM, bidirectional") {
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    RnnCase c;
    c.cell = k == 0 ? Cell::kRnn : k == 3 ? Cell::kLstm : Cell::kGru;
    c.lbr = k == 2;
    c.seq = 70;  // past the unrolling limit (64 steps)
    c.hidden = 4;
    c.dirs = 2;
    c.acts.assign(2, default_acts(c.cell));
    fill_case(c, true, true, c.cell == Cell::kLstm);
    check_rnn_case(c);
    TempDir dir;
    auto module = import_ok(rnn_model(c).save(dir.path() / "long.onnx"));
    int loops = 0;
    for (const auto& node : module.functions[0].nodes) loops += node.kind == hexir::compiler::NodeKind::kLoopBegin;
    CHECK(loops == 2);  // one per direction, not 70 steps each
    CHECK(count_nodes(module, hexir::ops::OpId::kMatmul) <= 2 * 3);
  }
}

TEST_CASE("LSTM with ONNX's default cell steps through lstm_cell, unrolled and as a loop; peepholes do not") {
  for (int64_t seq : {3, 70}) {
    for (bool peep : {false, true}) {
      CAPTURE(seq);
      CAPTURE(peep);
      RnnCase c;
      c.cell = Cell::kLstm;
      c.seq = seq;
      c.hidden = 5;
      c.dirs = 2;
      c.acts.assign(2, default_acts(c.cell));
      fill_case(c, true, true, peep);
      check_rnn_case(c);
      TempDir dir;
      auto module = import_ok(rnn_model(c).save(dir.path() / "lstm.onnx"));
      const int cells = count_nodes(module, hexir::ops::OpId::kLstmCell);
      if (peep) {
        CHECK(cells == 0);
      } else {
        CHECK(cells == (seq > 64 ? 2 : static_cast<int>(2 * seq)));  // one per step, or per loop body
        CHECK(count_nodes(module, hexir::ops::OpId::kSigmoid) == 0);
      }
    }
  }
}

TEST_CASE("recurrent refusals name what and why") {
  RnnCase c;
  c.cell = Cell::kGru;
  c.acts = {default_acts(c.cell)};
  fill_case(c, false, false, false);
  TempDir dir;
  auto refused = [&](Model m) { return import_error(m.save(dir.path() / "refused.onnx")); };
  CHECK(refused(rnn_model(c, {astrs("activations", {"Elu", "Tanh"})})).find("activation 'Elu' is not supported") !=
        std::string::npos);
  CHECK(refused(rnn_model(c, {astrs("activations", {"Affine", "Tanh"})}))
            .find("'Affine' needs a value in activation_alpha") != std::string::npos);
  CHECK(refused(rnn_model(c, {astrs("activations", {"Sigmoid"})})).find("GRU takes 2 per direction") !=
        std::string::npos);
  CHECK(refused(rnn_model(c, {afs("activation_alpha", {0.5f})})).find("more values than the activations take") !=
        std::string::npos);
  Model short_lens = rnn_model(c);
  short_lens.init_i64("lens", {c.batch}, {c.seq, c.seq - 1});
  short_lens.proto().mutable_graph()->mutable_node(0)->add_input("lens");  // inputs X, W, R, B: the 5th
  CHECK(refused(short_lens).find("sequence_lens shorter than the sequence") != std::string::npos);
}

namespace {

// A direct loop nest over every label's values: out[output labels] = sum over
// the others of the product of the operands at their labels (a dim of 1
// broadcasts). `equation` is explicit, letters only.
std::vector<float> einsum_reference(const std::string& equation, const std::vector<std::vector<int64_t>>& dims,
                                    const std::vector<std::vector<float>>& data) {
  const size_t arrow = equation.find("->");
  std::vector<std::string> terms;
  for (size_t begin = 0;;) {
    const size_t comma = equation.find(',', begin);
    terms.push_back(equation.substr(begin, std::min(comma, arrow) - begin));
    if (comma == std::string::npos || comma > arrow) break;
    begin = comma + 1;
  }
  const std::string out = equation.substr(arrow + 2);
  std::string labels;
  std::map<char, int64_t> size;
  for (size_t t = 0; t < terms.size(); ++t)
    for (size_t i = 0; i < terms[t].size(); ++i) {
      const char l = terms[t][i];
      if (labels.find(l) == std::string::npos) labels += l;
      size[l] = std::max(size[l], dims[t][i]);
    }
  int64_t out_count = 1;
  for (char l : out) out_count *= size[l];
  std::vector<double> acc(static_cast<size_t>(out_count), 0.0);
  std::map<char, int64_t> at;
  std::function<void(size_t)> walk = [&](size_t depth) {
    if (depth == labels.size()) {
      double p = 1;
      for (size_t t = 0; t < terms.size(); ++t) {
        int64_t flat = 0;
        for (size_t i = 0; i < terms[t].size(); ++i) flat = flat * dims[t][i] + (dims[t][i] == 1 ? 0 : at[terms[t][i]]);
        p *= data[t][static_cast<size_t>(flat)];
      }
      int64_t o = 0;
      for (char l : out) o = o * size[l] + at[l];
      acc[static_cast<size_t>(o)] += p;
      return;
    }
    for (at[labels[depth]] = 0; at[labels[depth]] < size[labels[depth]]; ++at[labels[depth]]) walk(depth + 1);
  };
  walk(0);
  return std::vector<float>(acc.begin(), acc.end());
}

struct EinsumCase {
  std::string equation;              // as the node has it
  std::vector<std::vector<int64_t>> dims;
  std::string reference;             // explicit, letters only (ellipsis spelled out)
  int matmuls = -1, transposes = -1;  // the nodes the import should make (-1: not checked)
  bool constant_rhs = false;         // the last operand an initializer
};

}  // namespace

TEST_CASE("Einsum: contractions as matmul/mul, transposes, reductions, ellipsis, three operands; vs a loop nest") {
  const std::vector<EinsumCase> cases = {
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, "bij,bjk->bik", 1, 0},
      {" bij, bjk -> bik ", {{2, 3, 4}, {2, 4, 5}}, "bij,bjk->bik", 1, 0},
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}, "bhqd,bhkd->bhqk", 1, 1},
      {"bhqk,bhkd->bhqd", {{2, 2, 3, 5}, {2, 2, 5, 4}}, "bhqk,bhkd->bhqd", 1, 0},
      {"ij,jk", {{3, 4}, {4, 5}}, "ij,jk->ik", 1, 0},
      {"ij,jk->ik", {{3, 4}, {4, 5}}, "ij,jk->ik", 1, 0, true},
      {"ij,kj->ik", {{3, 4}, {5, 4}}, "ij,kj->ik", 1, -1, true},
      {"i,i", {{5}, {5}}, "i,i->", 1, 0},
      {"i,j->ij", {{3}, {4}}, "i,j->ij", 0, 0},
      {"bi,bi->bi", {{3, 4}, {3, 4}}, "bi,bi->bi", 0, 0},
      {"bij,bkj->bki", {{2, 3, 4}, {2, 5, 4}}, "bij,bkj->bki", 1, -1},
      {"abc,cd->abd", {{2, 3, 4}, {4, 5}}, "abc,cd->abd", 1, 0},
      {"ij,jk->", {{3, 4}, {4, 5}}, "ij,jk->", -1, -1},
      {"ijk,k->ij", {{2, 3, 4}, {4}}, "ijk,k->ij", 1, 0},
      {"bij,bjk->bik", {{1, 3, 4}, {2, 4, 5}}, "bij,bjk->bik", 1, -1},
      {"...ij,...jk->...ik", {{2, 3, 4}, {4, 5}}, "bij,jk->bik", 1, -1},
      {"...ij,...jk", {{2, 2, 3, 4}, {2, 2, 4, 5}}, "abij,abjk->abik", 1, 0},
      {"bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}, "bn,anm,bm->ba", -1, -1},
      {"ij->ji", {{3, 4}}, "ij->ji", 0, 1},
      {"ij->i", {{3, 4}}, "ij->i", 0, 0},
      {"ijk->ki", {{2, 3, 4}}, "ijk->ki", 0, 1},
      {"ij", {{3, 4}}, "ij->ij", 0, 0},
      {"ji", {{3, 4}}, "ji->ij", 0, 1},
      {"ij->", {{3, 4}}, "ij->", 0, 0},
  };
  for (const EinsumCase& c : cases) {
    CAPTURE(c.equation);
    TempDir dir;
    Model m(12);
    std::vector<std::string> names;
    std::vector<std::vector<float>> data;
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < c.dims.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      size_t count = 1;
      for (int64_t d : c.dims[i]) count *= static_cast<size_t>(d);
      data.push_back(ramp(count, 0.125f * static_cast<float>(i + 1), -0.5f));
      if (c.constant_rhs && i + 1 == c.dims.size()) {
        m.init_f(names.back(), c.dims[i], data.back());
      } else {
        m.input(names.back(), kF, c.dims[i]);
        inputs.push_back(f32(c.dims[i], data.back()));
      }
    }
    m.node("Einsum", names, {"y"}, {as("equation", c.equation)}).output("y");
    auto module = import_ok(m.save(dir.path() / "einsum.onnx"));
    if (c.matmuls >= 0) CHECK(count_nodes(module, hexir::ops::OpId::kMatmul) == c.matmuls);
    if (c.transposes >= 0) CHECK(count_nodes(module, hexir::ops::OpId::kTranspose) == c.transposes);
    auto out = run(module, inputs, dir.path());
    check_close(out[0].f32(), einsum_reference(c.reference, c.dims, data), 1e-5);
  }
}

TEST_CASE("Einsum refusals name what and why") {
  TempDir dir;
  auto refused = [&](const std::string& equation, const std::vector<std::vector<int64_t>>& dims) {
    Model m(12);
    std::vector<std::string> names;
    for (size_t i = 0; i < dims.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      m.input(names.back(), kF, dims[i]);
    }
    m.node("Einsum", names, {"y"}, {as("equation", equation)}).output("y");
    return import_error(m.save(dir.path() / "refused.onnx"));
  };
  CHECK(refused("ii->i", {{3, 3}}).find("label 'i' repeats in operand 0 (a diagonal)") != std::string::npos);
  CHECK(refused("...ii->...i", {{2, 3, 3}}).find("(a diagonal)") != std::string::npos);
  CHECK(refused("ij,jk->ix", {{2, 3}, {3, 4}}).find("output label 'x' is in no operand") != std::string::npos);
  CHECK(refused("ij,jk->ik", {{2, 3}, {4, 5}}).find("label 'j' has size 3 in one operand and 4") != std::string::npos);
  CHECK(refused("ij,jk->ik", {{2, 3}}).find("has 2 operands, the node 1 inputs") != std::string::npos);
  CHECK(refused("ijk,jk->ik", {{2, 3}, {3, 4}}).find("operand 0 has rank 2") != std::string::npos);
  CHECK(refused("i$,j->ij", {{2, 3}, {3}}).find("has '$'") != std::string::npos);
  CHECK(refused("...ij,jk->ik", {{5, 2, 3}, {3, 4}}).find("no '...'") != std::string::npos);
}

TEST_CASE("Pad: constant (with a value), edge, reflect, wrap and negative pads, as concat/gather/slice") {
  struct Case {
    const char* mode;
    std::vector<int64_t> pads;  // [b0, b1, e0, e1] on a [2, 4] input
    std::vector<float> want;
  };
  // x = [[0, 1, 2, 3], [4, 5, 6, 7]]
  const std::vector<Case> cases = {
      {"constant", {0, 1, 1, 0}, {9, 0, 1, 2, 3, 9, 4, 5, 6, 7, 9, 9, 9, 9, 9}},
      {"edge", {0, 2, 0, 1}, {0, 0, 0, 1, 2, 3, 3, 4, 4, 4, 5, 6, 7, 7}},
      {"reflect", {0, 2, 0, 1}, {2, 1, 0, 1, 2, 3, 2, 6, 5, 4, 5, 6, 7, 6}},
      {"wrap", {0, 1, 0, 1}, {3, 0, 1, 2, 3, 0, 7, 4, 5, 6, 7, 4}},
      {"constant", {0, -1, 0, -2}, {1, 5}},
      {"edge", {1, -1, 0, 1}, {1, 2, 3, 3, 1, 2, 3, 3, 5, 6, 7, 7}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.mode);
    TempDir dir;
    Model m(18);
    m.input("x", kF, {2, 4}).init_i64("pads", {4}, c.pads).init_f("v", {}, {9.f});
    m.node("Pad", {"x", "pads", std::string(c.mode) == "constant" ? "v" : ""}, {"y"}, {as("mode", c.mode)}).output("y");
    auto module = import_ok(m.save(dir.path() / "pad.onnx"));
    auto out = run(module, {f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})}, dir.path());
    CHECK(out[0].type.dims == std::vector<int64_t>{2 + c.pads[0] + c.pads[2], 4 + c.pads[1] + c.pads[3]});
    check_close(out[0].f32(), c.want);
    check_round_trip(module, dir.path());
  }
}

TEST_CASE("errors name the node, its op type and what is missing") {
  TempDir dir;
  Model m;
  m.input("x", kF, {2, 2}).node("GridSample", {"x"}, {"y"}, {}, "hm0").output("y");
  const std::string e = import_error(m.save(dir.path() / "unsupported.onnx"));
  CHECK(e.find("unsupported.onnx") != std::string::npos);
  CHECK(e.find("node 'hm0' (GridSample)") != std::string::npos);
  CHECK(e.find("not supported") != std::string::npos);

  Model a;
  a.input("x", kF, {2, 2}).node("Gemm", {"x", "x"}, {"y"}, {ai("transC", 1)}, "g0").output("y");
  const std::string ea = import_error(a.save(dir.path() / "attr.onnx"));
  CHECK(ea.find("node 'g0' (Gemm)") != std::string::npos);
  CHECK(ea.find("'transC'") != std::string::npos);

  // A node the graph does not need is never looked at.
  Model dead;
  dead.input("x", kF, {2}).node("GridSample", {"x"}, {"unused"}).node("Relu", {"x"}, {"y"}).output("y");
  import_ok(dead.save(dir.path() / "dead.onnx"));

  // An operator's own rule, reported at the node.
  Model t;
  t.input("x", kI64, {2}).node("Relu", {"x"}, {"y"}, {}, "r0").output("y", kI64);
  const std::string et = import_error(t.save(dir.path() / "int.onnx"));
  CHECK(et.find("node 'r0' (Relu)") != std::string::npos);
  CHECK(et.find("f32") != std::string::npos);

  // A run-time shape.
  Model r;
  r.input("x", kF, {4}).input("s", kI64, {2}).node("Reshape", {"x", "s"}, {"y"}, {}, "rs").output("y");
  const std::string er = import_error(r.save(dir.path() / "shape.onnx"));
  CHECK(er.find("node 'rs' (Reshape)") != std::string::npos);
  CHECK(er.find("must be a constant") != std::string::npos);
  // ... which folds once the input is given a value.
  OnnxImportOptions given;
  given.input_values["s"] = {TensorType{DType::kI64, {2}}, std::vector<uint8_t>(16)};
  const int64_t shape[2] = {2, 2};
  std::memcpy(given.input_values["s"].bytes.data(), shape, 16);
  auto rm = import_ok(dir.path() / "shape.onnx", given);
  CHECK(rm.functions[0].arguments.size() == 1);
}

TEST_CASE("dynamic dims must be fixed: the error names the input and the dim; --input-shape and --bind") {
  TempDir dir;
  Model m;
  m.input("tokens", kF, {-1, 4}).input("scale", kF, {}).node("Mul", {"tokens", "scale"}, {"y"}).output("y");
  const fs::path path = m.save(dir.path() / "dynamic.onnx");
  const std::string e = import_error(path);
  CHECK(e.find("'tokens'") != std::string::npos);
  CHECK(e.find("'N'") != std::string::npos);
  CHECK(e.find("--input-shape") != std::string::npos);

  OnnxImportOptions options;
  REQUIRE(hexir::compiler::parse_input_shape_option("tokens=3x4", options).ok());
  REQUIRE(hexir::compiler::parse_bind_option("scale=2.5", options).ok());
  auto module = import_ok(path, options);
  CHECK(module.functions[0].arguments.size() == 1);  // scale became a constant
  auto out = run(module, {f32({3, 4}, ramp(12))}, dir.path());
  std::vector<float> want = ramp(12);
  for (float& v : want) v *= 2.5f;
  check_close(out[0].f32(), want);

  OnnxImportOptions wrong;
  REQUIRE(hexir::compiler::parse_input_shape_option("tokens=3x5", wrong).ok());
  CHECK(import_error(path, wrong).find("fixes it to 4") != std::string::npos);
  OnnxImportOptions unknown;
  REQUIRE(hexir::compiler::parse_input_shape_option("token=3x4", unknown).ok());
  CHECK(import_error(path, unknown).find("no model input named 'token'") != std::string::npos);
  CHECK(!hexir::compiler::parse_input_shape_option("x=3xx4", unknown).ok());
  CHECK(!hexir::compiler::parse_bind_option("x=abc", unknown).ok());
}

TEST_CASE("an initializer with external data reads its own file; tensor_from_proto") {
  TempDir dir;
  const std::vector<float> w = {1.f, -2.f, 3.f, -4.f};
  {
    std::ofstream data(dir.path() / "weights.bin", std::ios::binary);
    const char pad[8] = {};
    data.write(pad, 8);
    data.write(reinterpret_cast<const char*>(w.data()), 16);
  }
  Model m;
  m.input("x", kF, {4}).node("Add", {"x", "w"}, {"y"}).output("y");
  auto* t = m.proto().mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(kF);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* k, const char* v) {
    auto* kv = t->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "8");
  add_kv("length", "16");
  auto module = import_ok(m.save(dir.path() / "external.onnx"));
  REQUIRE(module.constants.size() == 1);
  const auto* range = std::get_if<hexir::compiler::FileRange>(&module.constants[0].source);
  REQUIRE(range);
  CHECK(range->offset == 8);
  auto out = run(module, {f32({4}, {1, 1, 1, 1})}, dir.path());
  check_close(out[0].f32(), {2, -1, 4, -3});

  auto converted = hexir::compiler::tensor_from_proto(*t, dir.path());
  REQUIRE(converted.ok());
  CHECK(converted->type == TensorType{DType::kF32, {4}});
  CHECK(converted->bytes.size() == 16);
  onnx::TensorProto ints;
  ints.set_data_type(onnx::TensorProto::INT32);
  ints.add_dims(2);
  ints.add_int32_data(7);
  ints.add_int32_data(-3);
  auto ci = hexir::compiler::tensor_from_proto(ints);
  REQUIRE(ci.ok());
  CHECK(ci->type == TensorType{DType::kI32, {2}});
  onnx::TensorProto dbl;
  dbl.set_data_type(onnx::TensorProto::DOUBLE);
  CHECK(!hexir::compiler::tensor_from_proto(dbl).ok());
}

// ---- hostile files: protobuf merges, duplicate names, confinement, nesting ----------

namespace {

// One length-delimited protobuf field: what a writer appends to give a field again.
std::string wire_field(uint32_t number, const std::string& payload) {
  std::string out;
  auto varint = [&out](uint64_t v) {
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    out.push_back(static_cast<char>(v));
  };
  varint((uint64_t{number} << 3) | 2);
  varint(payload.size());
  return out + payload;
}

fs::path save_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  return path;
}

// A Constant node `out` holding f32 `v` in raw_data.
void add_constant(onnx::GraphProto& g, const std::string& out, const std::vector<float>& v) {
  auto* n = g.add_node();
  n->set_op_type("Constant");
  n->set_name(out + "_node");
  n->add_output(out);
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(kF);
  a->mutable_t()->add_dims(static_cast<int64_t>(v.size()));
  a->mutable_t()->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
}

}  // namespace

TEST_CASE("a graph given twice (protobuf merges the two) is refused, not read per occurrence") {
  TempDir dir;
  // y = a + a + x, a = [1,2,3,4] a Constant; a second `graph` field holds a
  // dead Constant whose raw_data the wire scan once numbered as node 0.
  Model m;
  add_constant(*m.proto().mutable_graph(), "a", {1, 2, 3, 4});
  m.input("x", kF, {4}).node("Add", {"a", "a"}, {"b"}).node("Add", {"b", "x"}, {"y"}).output("y");
  const fs::path good = m.save(dir.path() / "once.onnx");
  auto out = run(import_ok(good), {f32({4}, {0, 0, 0, 0})}, dir.path());
  check_close(out[0].f32(), {2, 4, 6, 8});

  onnx::GraphProto dead;
  add_constant(dead, "dead", {100, 200, 300, 400});
  const std::string twice = m.proto().SerializeAsString() + wire_field(7, dead.SerializeAsString());
  onnx::ModelProto merged;  // what protobuf sees: one graph, both graphs' nodes
  REQUIRE(merged.ParseFromString(twice));
  CHECK(merged.graph().node_size() == 4);
  const std::string e = import_error(save_bytes(dir.path() / "twice.onnx", twice));
  INFO(e);
  CHECK(e.find("twice.onnx") != std::string::npos);
  CHECK(e.find("'graph'") != std::string::npos);
  CHECK(e.find("more than once") != std::string::npos);
}

TEST_CASE("a Constant's tensor given twice in one attribute is refused (protobuf merges the two)") {
  TempDir dir;
  Model m;
  m.input("x", kF, {4}).node("Add", {"x", "c"}, {"y"}).output("y");
  onnx::AttributeProto attr;
  attr.set_name("value");
  attr.set_type(onnx::AttributeProto::TENSOR);
  attr.mutable_t()->set_data_type(kF);
  attr.mutable_t()->add_dims(4);
  const std::vector<float> first = {1, 2, 3, 4}, second = {100, 200, 300, 400};
  attr.mutable_t()->set_raw_data(std::string(reinterpret_cast<const char*>(first.data()), 16));
  onnx::TensorProto again;  // raw_data only: merged into the first, its bytes replace the first's
  again.set_raw_data(std::string(reinterpret_cast<const char*>(second.data()), 16));
  onnx::NodeProto node;
  node.set_op_type("Constant");
  node.set_name("c_node");
  node.add_output("c");
  const std::string node_bytes =
      node.SerializeAsString() + wire_field(5, attr.SerializeAsString() + wire_field(5, again.SerializeAsString()));
  // The Constant first, then the graph's own nodes.
  onnx::ModelProto rest = m.proto();
  std::string graph_bytes = wire_field(1, node_bytes) + rest.graph().SerializeAsString();
  rest.clear_graph();
  const std::string bytes = rest.SerializeAsString() + wire_field(7, graph_bytes);
  onnx::ModelProto merged;
  REQUIRE(merged.ParseFromString(bytes));
  REQUIRE(merged.graph().node(0).attribute_size() == 1);
  const std::string e = import_error(save_bytes(dir.path() / "t_twice.onnx", bytes));
  INFO(e);
  CHECK(e.find("'t'") != std::string::npos);
  CHECK(e.find("more than once") != std::string::npos);
  CHECK(e.find("graph.node[0].attribute[0]") != std::string::npos);
}

TEST_CASE("a value defined twice in a graph is refused: node outputs, initializers, inputs, attributes") {
  TempDir dir;
  Model outputs;  // the later node used to win silently
  outputs.input("x", kF, {2}).node("Relu", {"x"}, {"y"}, {}, "first").node("Neg", {"x"}, {"y"}, {}, "second").output("y");
  std::string e = import_error(outputs.save(dir.path() / "outputs.onnx"));
  INFO(e);
  CHECK(e.find("'y'") != std::string::npos);
  CHECK(e.find("defined more than once") != std::string::npos);
  CHECK(e.find("node 'second'") != std::string::npos);

  Model inits;
  inits.input("x", kF, {2}).init_f("w", {2}, {1, 2}).init_f("w", {2}, {3, 4}).node("Add", {"x", "w"}, {"y"}).output("y");
  e = import_error(inits.save(dir.path() / "inits.onnx"));
  CHECK(e.find("'w'") != std::string::npos);
  CHECK(e.find("defined more than once") != std::string::npos);

  Model inputs;
  inputs.input("x", kF, {2}).input("x", kF, {2}).node("Relu", {"x"}, {"y"}).output("y");
  e = import_error(inputs.save(dir.path() / "inputs.onnx"));
  CHECK(e.find("'x'") != std::string::npos);
  CHECK(e.find("defined more than once") != std::string::npos);

  Model shadow;  // a node output naming an initializer
  shadow.input("x", kF, {2}).init_f("w", {2}, {1, 2}).node("Relu", {"x"}, {"w"}).node("Add", {"x", "w"}, {"y"}).output("y");
  CHECK(import_error(shadow.save(dir.path() / "shadow.onnx")).find("defined more than once") != std::string::npos);

  Model attrs;
  attrs.input("x", kF, {2, 2}).node("Gemm", {"x", "x"}, {"y"}, {af("alpha", 1.f), af("alpha", 3.f)}, "g").output("y");
  e = import_error(attrs.save(dir.path() / "attrs.onnx"));
  CHECK(e.find("node 'g' (Gemm)") != std::string::npos);
  CHECK(e.find("attribute 'alpha' is given more than once") != std::string::npos);

  // An empty name is ONNX's "no value": a graph input or initializer without one is refused.
  Model unnamed;
  unnamed.input("x", kF, {2}).input("", kF, {2}).node("Relu", {"x"}, {"y"}).output("y");
  CHECK(import_error(unnamed.save(dir.path() / "unnamed.onnx")).find("graph input 1 has no name") != std::string::npos);
  Model unnamed_init;
  unnamed_init.input("x", kF, {2}).init_f("", {2}, {1, 2}).node("Relu", {"x"}, {"y"}).output("y");
  CHECK(import_error(unnamed_init.save(dir.path() / "unnamed_init.onnx")).find("initializer 0 has no name") != std::string::npos);

  // Dims whose product overflows (found by the onnx fuzzer: UBSan) are refused.
  Model huge;
  huge.input("x", kF, {2}).init_f("w", {int64_t{1} << 40, int64_t{1} << 30}, {1, 2}).node("Add", {"x", "w"}, {"y"}).output("y");
  CHECK(import_error(huge.save(dir.path() / "huge.onnx")).find("more bytes than a 64-bit size") != std::string::npos);

  // An initializer listed as an input too (IR < 4; a default value from IR 4) is one value.
  Model listed;
  listed.input("x", kF, {2}).input("w", kF, {2}).init_f("w", {2}, {1, 2}).node("Add", {"x", "w"}, {"y"}).output("y");
  auto out = run(import_ok(listed.save(dir.path() / "listed.onnx")), {f32({2}, {1, 1})}, dir.path());
  check_close(out[0].f32(), {2, 3});
}

namespace {

// x -> `depth` If nodes nested in each other's then_branch (the condition,
// an initializer of the model, folds), the innermost an Identity; its
// messages nest 2 + 3 * depth deep, 4 + 3 * depth with `tensor` (an
// attribute holding a tensor on the Identity).
onnx::ModelProto nested_ifs(int depth, bool tensor = false) {
  Model m;
  m.input("x", kF, {2}).output("y");
  auto* c = m.proto().mutable_graph()->add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::BOOL);
  c->set_raw_data(std::string(1, '\1'));
  onnx::GraphProto* g = m.proto().mutable_graph();
  std::string out = "y";
  for (int level = 0; level < depth; ++level) {
    auto* node = g->add_node();
    node->set_op_type("If");
    node->set_name("if" + std::to_string(level));
    node->add_input("c");
    node->add_output(out);
    auto* other = node->add_attribute();
    other->set_name("else_branch");
    other->set_type(onnx::AttributeProto::GRAPH);
    auto* identity = other->mutable_g()->add_node();
    identity->set_op_type("Identity");
    identity->add_input("x");
    identity->add_output("e" + std::to_string(level));
    other->mutable_g()->add_output()->set_name("e" + std::to_string(level));
    auto* then = node->add_attribute();
    then->set_name("then_branch");
    then->set_type(onnx::AttributeProto::GRAPH);
    g = then->mutable_g();
    out = "t" + std::to_string(level);
    g->add_output()->set_name(out);
  }
  auto* identity = g->add_node();
  identity->set_op_type("Identity");
  identity->add_input("x");
  identity->add_output(out);
  if (tensor) {
    auto* a = identity->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(kF);
  }
  return m.proto();
}

}  // namespace

TEST_CASE("If nested beyond protobuf's recursion limit: the error says so; 30 deep imports") {
  TempDir dir;
  const auto save = [&](int depth) {
    return save_bytes(dir.path() / ("nested" + std::to_string(depth) + ".onnx"), nested_ifs(depth).SerializeAsString());
  };
  auto out = run(import_ok(save(30)), {f32({2}, {1, -2})}, dir.path());
  check_close(out[0].f32(), {1, -2});
  // The check agrees with protobuf at the limit: 100 deep parses, 101 does not.
  for (auto [d, t] : {std::pair{32, true}, std::pair{33, false}, std::pair{32, false}}) {
    const int depth = d;  // INFO captures: clang 14 cannot capture structured bindings
    const bool tensor = t;
    const std::string bytes = nested_ifs(depth, tensor).SerializeAsString();
    onnx::ModelProto parsed;
    const bool parses = parsed.ParseFromString(bytes);
    CHECK(parses == (depth * 3 + (tensor ? 4 : 2) <= 100));
    const std::string e = import_error(save_bytes(dir.path() / "limit.onnx", bytes));
    INFO(depth, " ", tensor, ": ", e);
    CHECK(parses == (e.find("recursion limit") == std::string::npos));
  }
  for (int depth : {33, 40, 2000}) {
    const std::string e = import_error(save(depth));
    INFO(depth, ": ", e);
    CHECK(e.find("nested") != std::string::npos);
    CHECK(e.find("recursion limit of 100") != std::string::npos);
    CHECK(e.find("protobuf parse failed") == std::string::npos);
  }
}

// An If whose condition folds (`folded`) or is the input c; x is f32[2,3].
Model if_model(bool folded) {
  Model m(13);
  if (folded)
    m.init_i64("two", {}, {2}).node("Equal", {"two", "two"}, {"c"});
  else
    m.input("c", onnx::TensorProto::BOOL, {1});
  m.input("x", kF, {2, 3});
  return m;
}

TEST_CASE("a subgraph's names are its own: a branch neither shadows an outer value after the If nor leaks one") {
  const std::vector<float> x = {-1.5f, 2.f, 0.5f, -3.f, 4.f, 0.f};
  for (bool folded : {true, false}) {
    CAPTURE(folded);
    TempDir dir;
    // The then branch names its Relu 'a', as the outer Neg is named: after
    // the If, 'a' is the outer value again (it was the branch's).
    Model m = if_model(folded);
    m.node("Neg", {"x"}, {"a"}).node("If", {"c"}, {"y"}, {}, "if0").node("Add", {"a", "y"}, {"z"}).output("z");
    auto* node = m.proto().mutable_graph()->mutable_node(m.proto().graph().node_size() - 2);
    add_branch(node, "then_branch", {{"Relu", {"x"}, "a"}, {"Mul", {"a", "a"}, "t2"}});
    add_branch(node, "else_branch", {{"Abs", {"x"}, "e"}});
    auto module = import_ok(m.save(dir.path() / "shadow.onnx"));
    for (uint8_t c : {uint8_t{1}, uint8_t{0}}) {
      if (folded && !c) continue;
      CAPTURE(int{c});
      std::vector<Tensor> inputs = {f32({2, 3}, x)};
      if (!folded) inputs.insert(inputs.begin(), Tensor{{DType::kBool, {1}}, {c}});
      auto out = run(module, inputs, dir.path());
      std::vector<float> want;
      for (float v : x) want.push_back(-v + (c ? std::max(v, 0.f) * std::max(v, 0.f) : std::abs(v)));
      check_close(out[0].f32(), want);
    }
    // A name only the branch defines is not defined after the If.
    Model leak = if_model(folded);
    leak.node("If", {"c"}, {"y"}, {}, "if1").node("Add", {"t", "y"}, {"z"}).output("z");
    node = leak.proto().mutable_graph()->mutable_node(leak.proto().graph().node_size() - 2);
    add_branch(node, "then_branch", {{"Relu", {"x"}, "t"}, {"Neg", {"t"}, "t2"}});
    add_branch(node, "else_branch", {{"Abs", {"x"}, "e"}});
    const std::string e = import_error(leak.save(dir.path() / "leak.onnx"));
    CHECK_MESSAGE(e.find("input 't' is not defined before this node") != std::string::npos, e);
  }
}

TEST_CASE("external data: symlinks out of the model's folder, FIFOs, devices and NULs are refused") {
  TempDir dir;
  const fs::path model_dir = dir.path() / "model", outside = dir.path() / "outside";
  fs::create_directories(model_dir / "sub");
  fs::create_directories(outside);
  const std::vector<float> secret = {7, 7, 7, 7}, mine = {1, 2, 3, 4};
  save_bytes(outside / "secret.bin", std::string(reinterpret_cast<const char*>(secret.data()), 16));
  save_bytes(model_dir / "sub" / "w.bin", std::string(reinterpret_cast<const char*>(mine.data()), 16));
  fs::create_symlink("../outside/secret.bin", model_dir / "w.bin");
  fs::create_symlink("../outside", model_dir / "linked");
  fs::create_symlink("sub/w.bin", model_dir / "inside.bin");  // a symlink that stays inside is fine
  fs::create_symlink("/dev/zero", model_dir / "zero.bin");
  REQUIRE(::mkfifo((model_dir / "fifo.bin").c_str(), 0600) == 0);
  const auto model_at = [&](const std::string& location) {
    Model m;
    m.input("x", kF, {4}).node("Add", {"x", "w"}, {"y"}).output("y");
    auto* t = m.proto().mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(kF);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    return m.save(model_dir / "model.onnx");
  };
  for (const char* location : {"sub/w.bin", "inside.bin", "./sub/w.bin"}) {
    INFO(std::string(location));
    auto out = run(import_ok(model_at(location)), {f32({4}, {1, 1, 1, 1})}, dir.path());
    check_close(out[0].f32(), {2, 3, 4, 5});
  }
  for (const char* location : {"w.bin", "linked/secret.bin", "zero.bin"}) {
    const std::string e = import_error(model_at(location));
    INFO(std::string(location), ": ", e);
    CHECK(e.find(location) != std::string::npos);
    CHECK(e.find("outside the model's directory") != std::string::npos);
  }
  std::string e = import_error(model_at("fifo.bin"));
  INFO(e);
  CHECK(e.find("is not a regular file (a FIFO)") != std::string::npos);
  e = import_error(model_at("sub"));
  CHECK(e.find("is not a regular file (a directory)") != std::string::npos);
  e = import_error(model_at(std::string("sub/w.bin\0.txt", 14)));  // opened "sub/w.bin" once
  CHECK(e.find("NUL") != std::string::npos);

  // tensor_from_proto (--input-value files) is confined alike.
  onnx::TensorProto t;
  t.set_name("v");
  t.set_data_type(kF);
  t.add_dims(4);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t.add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  auto escaped = hexir::compiler::tensor_from_proto(t, model_dir);
  CHECK(!escaped.ok());
  CHECK(escaped.status().message().find("outside the model's directory") != std::string::npos);
  kv->set_value("fifo.bin");
  auto fifo = hexir::compiler::tensor_from_proto(t, model_dir);
  CHECK(!fifo.ok());
  CHECK(fifo.status().message().find("(a FIFO)") != std::string::npos);
  kv->set_value("sub/w.bin");
  auto inside = hexir::compiler::tensor_from_proto(t, model_dir);
  REQUIRE(inside.ok());
  CHECK(inside->bytes.size() == 16);

  // The model file itself: a FIFO is refused without blocking.
  REQUIRE(::mkfifo((dir.path() / "fifo.onnx").c_str(), 0600) == 0);
  CHECK(import_error(dir.path() / "fifo.onnx").find("is not a regular file (a FIFO)") != std::string::npos);
}

// ---- libonnx-testdata node tests ----------------------------------------------------

namespace {

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

void run_node_test(const std::string& name) {
  CAPTURE(name);
  const fs::path dir = kNodeTests / name;
  if (!fs::exists(dir / "model.onnx")) {
    MESSAGE("skipped: " << dir.string() << " not found (apt-get install libonnx-testdata)");
    return;
  }
  std::vector<Tensor> inputs;
  for (int i = 0;; ++i) {
    const fs::path p = dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    auto t = hexir::compiler::read_onnx_tensor_file(p);
    INFO(t.status().to_string());
    REQUIRE(t.ok());
    inputs.push_back({t->type, t->bytes});
  }
  // Integer inputs an operator needs at import (sequence lengths, pads) are given as values.
  OnnxImportOptions options;
  if (!hexir::compiler::import_onnx(dir / "model.onnx").ok()) {
    onnx::ModelProto proto;
    std::ifstream in(dir / "model.onnx", std::ios::binary);
    REQUIRE(proto.ParseFromIstream(&in));
    std::vector<Tensor> runtime;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].type.dtype == DType::kF32) {
        runtime.push_back(inputs[i]);
        continue;
      }
      options.input_values[proto.graph().input(static_cast<int>(i)).name()] = {inputs[i].type, inputs[i].bytes};
    }
    inputs = std::move(runtime);
  }
  auto module = import_ok(dir / "model.onnx", options);
  TempDir tmp;
  auto out = run(module, inputs, tmp.path());
  for (size_t i = 0; i < out.size(); ++i) {
    auto want = hexir::compiler::read_onnx_tensor_file(dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb"));
    REQUIRE(want.ok());
    CHECK(out[i].type == want->type);
    check_close(out[i].f32(), Tensor{want->type, want->bytes}.f32(), 1e-4);
  }
}

}  // namespace

TEST_CASE("libonnx-testdata node tests") {
  for (const char* name : {"test_relu", "test_gemm_default_no_bias", "test_conv_with_strides_padding",
                           "test_gemm_all_attributes", "test_softmax_axis_1", "test_matmul_3d",
                           "test_conv_with_autopad_same", "test_flatten_axis2", "test_lstm_defaults",
                           "test_lstm_with_peepholes", "test_lstm_batchwise", "test_reflect_pad", "test_edge_pad",
                           "test_maxpool_2d_pads", "test_averagepool_2d_pads"})
    run_node_test(name);
}

// ---- detector post-processing over bounded dims ------------------------------------

namespace {

// torchvision's SSD post-processing as torch.onnx.export writes it, per class:
// NonZero of a score threshold, GatherND, K = min(3, kept) read from the
// Shape at run time, TopK by that K, the class's labels from ConstantOfShape
// of the Shape of the scores; then Concat of the classes (along the bounded
// dim), an If on an empty result, in the else branch ReduceMax of the boxes
// (batched NMS's coordinate offset), NonMaxSuppression, and keep[:4].
Model detector_post_processing() {
  Model m(17);
  m.input("scores", kF, {8, 3}).input("boxes", kF, {8, 4});
  m.init_f("threshold", {}, {0.3f}).init_i64("zero", {}, {0}).init_i64("axis0", {1}, {0});
  m.init_i64("k_max", {1}, {3}).init_i64("one_dim", {1}, {1});
  std::vector<std::string> boxes, scores, labels;
  for (int64_t c : {1, 2}) {
    const std::string p = "c" + std::to_string(c) + "_";
    m.init_i64(p + "index", {}, {c});
    m.node("Gather", {"scores", p + "index"}, {p + "column"}, {ai("axis", 1)});
    m.node("Greater", {p + "column", "threshold"}, {p + "passes"});
    m.node("NonZero", {p + "passes"}, {p + "nz"});
    m.node("Transpose", {p + "nz"}, {p + "rows"}, {ais("perm", {1, 0})});
    m.node("GatherND", {p + "column", p + "rows"}, {p + "s"});
    m.node("GatherND", {"boxes", p + "rows"}, {p + "b"});
    m.node("Shape", {p + "s"}, {p + "shape"});
    m.node("Gather", {p + "shape", "zero"}, {p + "n"}, {ai("axis", 0)});
    m.node("Unsqueeze", {p + "n", "axis0"}, {p + "n1"});
    m.node("Concat", {"k_max", p + "n1"}, {p + "both"}, {ai("axis", 0)});
    m.node("ReduceMin", {p + "both"}, {p + "k0"}, {ai("keepdims", 0)});
    m.node("Reshape", {p + "k0", "one_dim"}, {p + "k"});
    m.node("TopK", {p + "s", p + "k"}, {p + "top", p + "top_i"}, {ai("axis", -1)});
    m.node("Gather", {p + "b", p + "top_i"}, {p + "top_b"}, {ai("axis", 0)});
    m.node("Shape", {p + "top"}, {p + "top_shape"});
    m.node("ConstantOfShape", {p + "top_shape"}, {p + "labels"},
           {Attr{"value", [c](onnx::AttributeProto& a) {
              a.set_type(onnx::AttributeProto::TENSOR);
              a.mutable_t()->set_data_type(kI64);
              a.mutable_t()->add_dims(1);
              a.mutable_t()->add_int64_data(c);
            }}});
    boxes.push_back(p + "top_b");
    scores.push_back(p + "top");
    labels.push_back(p + "labels");
  }
  m.node("Concat", boxes, {"all_boxes"}, {ai("axis", 0)});
  m.node("Concat", scores, {"all_scores"}, {ai("axis", 0)});
  m.node("Concat", labels, {"all_labels"}, {ai("axis", 0)});
  m.init_i64("empty", {}, {0});
  m.node("Shape", {"all_boxes"}, {"boxes_shape"});
  m.node("ReduceProd", {"boxes_shape"}, {"numel"}, {ai("keepdims", 0)});
  m.node("Equal", {"numel", "empty"}, {"is_empty"});
  m.node("If", {"is_empty"}, {"keep"}, {}, "if_empty");
  auto* node = m.proto().mutable_graph()->mutable_node(m.proto().graph().node_size() - 1);
  auto* then_attr = node->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  Model then_graph;
  then_graph.node("Constant", {}, {"nothing"},
                  {Attr{"value", [](onnx::AttributeProto& a) {
                     a.set_type(onnx::AttributeProto::TENSOR);
                     a.mutable_t()->set_data_type(kI64);
                     a.mutable_t()->add_dims(0);
                   }}});
  *then_attr->mutable_g() = then_graph.proto().graph();
  then_attr->mutable_g()->add_output()->set_name("nothing");
  auto* else_attr = node->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  Model else_graph;
  else_graph.init_f("one", {}, {1.f}).init_i64("last", {1}, {1}).init_i64("first", {1}, {0});
  else_graph.init_i64("max_out", {1}, {100}).init_f("iou", {1}, {0.5f}).init_i64("col", {}, {2});
  else_graph.node("ReduceMax", {"all_boxes"}, {"max_coordinate"}, {ai("keepdims", 0)})
      .node("Cast", {"all_labels"}, {"labels_f"}, {ai("to", kF)})
      .node("Add", {"max_coordinate", "one"}, {"spacing"})
      .node("Mul", {"labels_f", "spacing"}, {"offsets"})
      .node("Unsqueeze", {"offsets", "last"}, {"offsets_2d"})
      .node("Add", {"all_boxes", "offsets_2d"}, {"nms_boxes"})
      .node("Unsqueeze", {"nms_boxes", "first"}, {"nms_boxes_3d"})
      .node("Unsqueeze", {"all_scores", "first"}, {"s2"})
      .node("Unsqueeze", {"s2", "first"}, {"s3"})
      .node("NonMaxSuppression", {"nms_boxes_3d", "s3", "max_out", "iou"}, {"selected"})
      .node("Gather", {"selected", "col"}, {"box_index"}, {ai("axis", 1)});
  *else_attr->mutable_g() = else_graph.proto().graph();
  else_attr->mutable_g()->add_output()->set_name("box_index");
  m.init_i64("start", {1}, {0}).init_i64("end", {1}, {4});
  m.node("Slice", {"keep", "start", "end"}, {"kept"});
  m.node("Gather", {"all_boxes", "kept"}, {"out_boxes"}, {ai("axis", 0)});
  m.node("Gather", {"all_scores", "kept"}, {"out_scores"}, {ai("axis", 0)});
  m.node("Gather", {"all_labels", "kept"}, {"out_labels"}, {ai("axis", 0)});
  m.output("out_boxes").output("out_scores").output("out_labels", kI64);
  return m;
}

struct Detections {
  std::vector<float> boxes, scores;
  std::vector<int64_t> labels;
};

// The same steps written out (an independent reference).
Detections reference_detections(const std::vector<float>& scores, const std::vector<float>& boxes) {
  Detections all;
  for (int64_t c : {1, 2}) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < 8; ++i)
      if (scores[static_cast<size_t>(i * 3 + c)] > 0.3f) rows.push_back(i);
    std::stable_sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) {
      return scores[static_cast<size_t>(a * 3 + c)] > scores[static_cast<size_t>(b * 3 + c)];
    });
    rows.resize(std::min<size_t>(rows.size(), 3));
    for (int64_t i : rows) {
      all.scores.push_back(scores[static_cast<size_t>(i * 3 + c)]);
      for (int k = 0; k < 4; ++k) all.boxes.push_back(boxes[static_cast<size_t>(i * 4 + k)]);
      all.labels.push_back(c);
    }
  }
  if (all.labels.empty()) return all;
  const float spacing = *std::max_element(all.boxes.begin(), all.boxes.end()) + 1.f;
  std::vector<float> shifted = all.boxes;
  for (size_t i = 0; i < shifted.size(); ++i) shifted[i] += static_cast<float>(all.labels[i / 4]) * spacing;
  std::vector<size_t> order(all.labels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return all.scores[a] > all.scores[b]; });
  auto iou = [&](size_t a, size_t b) {  // corners [y1, x1, y2, x2], y1 < y2 and x1 < x2 here
    const float* p = &shifted[a * 4];
    const float* q = &shifted[b * 4];
    const float h = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
    const float w = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
    const float inter = h * w;
    const float area = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]);
    return inter / (area - inter);
  };
  std::vector<size_t> kept;
  for (size_t i : order) {
    bool keep = true;
    for (size_t k : kept) keep = keep && iou(k, i) <= 0.5f;
    if (keep) kept.push_back(i);
  }
  kept.resize(std::min<size_t>(kept.size(), 4));
  Detections out;
  for (size_t i : kept) {
    out.scores.push_back(all.scores[i]);
    out.labels.push_back(all.labels[i]);
    for (int k = 0; k < 4; ++k) out.boxes.push_back(all.boxes[i * 4 + k]);
  }
  return out;
}

}  // namespace

TEST_CASE("detector post-processing: NonZero, TopK by a K read from a run-time shape, Concat of bounded rows, "
          "an If on an empty result, NMS and a slice, each over bounded dims, match a reference") {
  TempDir dir;
  auto module = import_ok(detector_post_processing().save(dir.path() / "post.onnx"));
  // Two classes with overlapping boxes, one with a single box, and nothing above the threshold.
  const std::vector<float> boxes = {0, 0, 10, 10, 1, 1, 11, 11, 20, 20, 30, 30, 0, 0, 10, 10,
                                    50, 50, 60, 60, 21, 21, 31, 31, 5, 5, 6, 6, 40, 0, 45, 5};
  std::vector<std::vector<float>> inputs = {
      {0, .9f, .1f, 0, .8f, .2f, 0, .7f, .6f, 0, .2f, .95f, 0, .65f, .1f, 0, .1f, .31f, 0, .5f, .4f, 0, .1f, .1f},
      {0, .1f, .1f, 0, .2f, .2f, 0, .1f, .9f, 0, .2f, .1f, 0, .1f, .1f, 0, .1f, .1f, 0, .1f, .1f, 0, .1f, .1f},
      std::vector<float>(24, 0.1f)};
  for (const std::vector<float>& scores : inputs) {
    const Detections want = reference_detections(scores, boxes);
    auto out = run(module, {f32({8, 3}, scores), f32({8, 4}, boxes)}, dir.path());
    REQUIRE(out.size() == 3);
    CHECK(out[0].type.dims == std::vector<int64_t>{static_cast<int64_t>(want.labels.size()), 4});
    check_close(out[0].f32(), want.boxes);
    check_close(out[1].f32(), want.scores);
    std::vector<int64_t> labels(out[2].bytes.size() / 8);
    if (!labels.empty()) std::memcpy(labels.data(), out[2].bytes.data(), out[2].bytes.size());
    CHECK(labels == want.labels);
  }
  CHECK(count_nodes(module, hexir::ops::OpId::kBound) > 0);
}

TEST_CASE("--dim-bound: a NonZero output named is planned at the bound given; a name that is none is refused") {
  TempDir dir;
  const fs::path model = detector_post_processing().save(dir.path() / "post.onnx");
  OnnxImportOptions options;
  options.dim_bounds["c1_nz"] = 5;
  auto module = import_ok(model, options);
  int bounded = 0;
  for (const auto& node : module.functions[0].nodes) {
    if (node.op != hexir::ops::OpId::kNonZero) continue;
    const TensorType& type = module.functions[0].values[static_cast<size_t>(node.results[0])].type;
    bounded += type.to_string() == "i64[1,<=5]";
  }
  CHECK(bounded == 1);  // c2_nz keeps its derived bound, 8
  const std::vector<float> scores = {0, .9f, .1f, 0, .8f, .2f, 0, .7f, .6f, 0, .2f, .95f,
                                     0, .65f, .1f, 0, .1f, .31f, 0, .5f, .4f, 0, .1f, .1f};
  std::vector<float> boxes(32);
  for (size_t i = 0; i < boxes.size(); ++i) boxes[i] = static_cast<float>(i % 4 < 2 ? i : i + 4);
  const Detections want = reference_detections(scores, boxes);
  auto out = run(module, {f32({8, 3}, scores), f32({8, 4}, boxes)}, dir.path());
  check_close(out[1].f32(), want.scores);
  options.dim_bounds["no_such_output"] = 3;
  CHECK(import_error(model, options).find("--dim-bound no_such_output") != std::string::npos);
  options.dim_bounds.erase("no_such_output");
  options.dim_bounds["c1_nz"] = 9;  // above the derived bound
  CHECK(import_error(model, options).find("bound 9 is not in [0, 8]") != std::string::npos);
}

TEST_CASE("QDQ: an int8 weight stays int8 in the module, dequantized at run time; activations through quantize_linear") {
  TempDir dir;
  constexpr int64_t K = 64, N = 48;
  // W int8 [K, N], per column scales (axis 1); x quantized to uint8 at scale 0.05, zero point 128.
  std::string w(static_cast<size_t>(K * N), '\0');
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<char>(static_cast<int>((i * 37) % 255) - 127);
  std::vector<float> w_scale(N);
  for (int64_t j = 0; j < N; ++j) w_scale[static_cast<size_t>(j)] = 0.01f + 0.001f * static_cast<float>(j);
  Model m(13);
  m.input("x", kF, {2, K})
      .init_bytes("w_q", onnx::TensorProto::INT8, {K, N}, w)
      .init_f("w_scale", {N}, w_scale)
      .init_bytes("w_zero", onnx::TensorProto::INT8, {N}, std::string(static_cast<size_t>(N), '\0'))
      .init_f("x_scale", {}, {0.05f})
      .init_bytes("x_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(128)))
      .node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"})
      .node("DequantizeLinear", {"x_q", "x_scale", "x_zero"}, {"x_dq"})
      .node("DequantizeLinear", {"w_q", "w_scale", "w_zero"}, {"w_dq"}, {ai("axis", 1)})
      .node("MatMul", {"x_dq", "w_dq"}, {"y"})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "qdq.onnx"));
  CHECK(count_nodes(module, hexir::ops::OpId::kDequantizeLinear) == 2);
  CHECK(count_nodes(module, hexir::ops::OpId::kQuantizeLinear) == 1);
  bool int8_weight = false, f32_weight = false;
  for (const auto& c : module.constants) {
    int8_weight = int8_weight || (c.type.dtype == DType::kI8 && c.type.dims == std::vector<int64_t>{K, N});
    f32_weight = f32_weight || (c.type.dtype == DType::kF32 && c.type.dims == std::vector<int64_t>{K, N});
  }
  CHECK(int8_weight);
  CHECK_FALSE(f32_weight);  // never widened into an f32 copy
  std::vector<float> x(static_cast<size_t>(2 * K));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(static_cast<int>(i % 23) - 11) + 0.013f;
  // The weight's dequantize goes: quantized_matmul reads the int8 rows (compiled, not imported).
  size_t instructions = 0, unfused_instructions = 0;
  const std::vector<float> y = run(module, {f32({2, K}, x)}, dir.path(), {}, &instructions)[0].f32();
  hexir::compiler::CompileOptions unfused;
  unfused.fuse_epilogues = false;
  const std::vector<float> y_unfused = run(module, {f32({2, K}, x)}, dir.path(), unfused, &unfused_instructions)[0].f32();
  CHECK(instructions == 3);           // quantize_linear, dequantize_linear, quantized_matmul
  CHECK(unfused_instructions == 4);   // and the weight's dequantize_linear, then matmul
  check_close(y, y_unfused, 1e-5);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t j = 0; j < N; ++j) {
      double want = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float q = std::clamp(std::nearbyint(x[static_cast<size_t>(r * K + k)] / 0.05f) + 128.0f, 0.0f, 255.0f);
        want += double{(q - 128.0f) * 0.05f} * (static_cast<float>(w[static_cast<size_t>(k * N + j)]) *
                                                w_scale[static_cast<size_t>(j)]);
      }
      CHECK(y[static_cast<size_t>(r * N + j)] == doctest::Approx(want).epsilon(1e-5));
    }
  // Blocked quantization (opset 21's block_size) is refused, naming the node.
  Model blocked(21);
  blocked.input("q", onnx::TensorProto::INT8, {4, 8})
      .init_f("s", {4, 2}, std::vector<float>(8, 0.5f))
      .node("DequantizeLinear", {"q", "s"}, {"y"}, {ai("block_size", 4)}, "dq_blocked")
      .output("y");
  const std::string e = import_error(blocked.save(dir.path() / "blocked.onnx"));
  CHECK(e.find("dq_blocked") != std::string::npos);
  CHECK(e.find("block_size") != std::string::npos);
}

TEST_CASE("MatMulInteger with int8 weights and zero point 0 compiles to integer_matmul: exact past 2^24, weights int8") {
  TempDir dir;
  // K = 2048: sums reach 2048 * 252 * 127, past float's exact 2^24; the float composition rounds them.
  constexpr int64_t M = 3, K = 2048, N = 8;
  std::string w(static_cast<size_t>(K * N), '\0');
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<char>(i % 7 == 0 ? -128 : 127 - static_cast<int>(i % 5));
  Model m(13);
  m.input("a", onnx::TensorProto::UINT8, {M, K})
      .init_bytes("w", onnx::TensorProto::INT8, {K, N}, w)
      .init_bytes("a_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(3)))
      .init_bytes("w_zero", onnx::TensorProto::INT8, {}, std::string(1, '\0'))
      .node("MatMulInteger", {"a", "w", "a_zero", "w_zero"}, {"y"})
      .output("y", onnx::TensorProto::INT32);
  auto module = import_ok(m.save(dir.path() / "mmi.onnx"));
  Tensor a{{DType::kU8, {M, K}}, std::vector<uint8_t>(static_cast<size_t>(M * K))};
  for (size_t i = 0; i < a.bytes.size(); ++i) a.bytes[i] = static_cast<uint8_t>(i % 3 == 0 ? 255 : 250 + i % 5);
  size_t instructions = 0;
  const std::vector<Tensor> out = run(module, {a}, dir.path(), {}, &instructions);
  CHECK(instructions == 1);  // integer_matmul alone: no dequantize, matmul or cast
  REQUIRE(out[0].type == (TensorType{DType::kI32, {M, N}}));
  bool past_float = false;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      int64_t want = 0;
      for (int64_t k = 0; k < K; ++k)
        want += (int64_t{a.bytes[static_cast<size_t>(i * K + k)]} - 3) * static_cast<int8_t>(w[static_cast<size_t>(k * N + j)]);
      int32_t got = 0;
      std::memcpy(&got, out[0].bytes.data() + (i * N + j) * 4, 4);
      CHECK(int64_t{got} == want);
      past_float = past_float || std::abs(want) > (int64_t{1} << 24);
    }
  CHECK(past_float);
}

TEST_CASE("QDQ convolutions (dense with relu, depthwise, 1x1 stride 2) compile to quantized_conv2d, channels-last "
          "between them, within a quantization step of the float composition; int8 activations as u8") {
  // int8 activations (a zero point of int8): the same values as u8 with the zero point + 128, so the
  // same instructions and the same bytes.
  std::vector<float> u8_result;
  for (const bool int8 : {false, true}) {
  INFO((int8 ? "int8 activations" : "uint8 activations"));
  TempDir dir;
  Model m(13);
  const int zero_type = int8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  const auto zero = [&](int z) { return std::string(1, static_cast<char>(int8 ? z - 128 : z)); };
  m.input("x", kF, {1, 8, 12, 12})
      .init_f("x_scale", {}, {0.05f})
      .init_bytes("x_zero", zero_type, {}, zero(128));
  // Each layer: int8 per-channel weights, an int32 bias at x_scale * w_scale, the output quantized.
  struct Layer {
    const char* name;
    int64_t k, cg, kernel, stride, pad, group;
    float y_scale;
    int y_zero;
    bool relu;
  };
  const std::vector<Layer> layers = {{"c1", 16, 8, 3, 1, 1, 1, 0.04f, 0, true},
                                     {"c2", 16, 1, 3, 2, 1, 16, 0.03f, 120, false},
                                     {"c3", 24, 16, 1, 2, 0, 1, 0.06f, 100, false}};
  std::string x = "x_dq";
  float x_scale = 0.05f;
  m.node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"}).node("DequantizeLinear", {"x_q", "x_scale", "x_zero"}, {"x_dq"});
  uint32_t seed = 1;
  for (const Layer& l : layers) {
    const std::string n = l.name;
    const int64_t count = l.k * l.cg * l.kernel * l.kernel;
    std::string w(static_cast<size_t>(count), '\0'), b(static_cast<size_t>(l.k * 4), '\0');
    for (auto& c : w) c = static_cast<char>(static_cast<int>((seed = seed * 1103515245u + 12345u) >> 16) % 255 - 127);
    std::vector<float> w_scale(static_cast<size_t>(l.k)), b_scale(static_cast<size_t>(l.k));
    for (int64_t k = 0; k < l.k; ++k) {
      w_scale[static_cast<size_t>(k)] = 0.004f + 0.0003f * static_cast<float>(k);
      b_scale[static_cast<size_t>(k)] = x_scale * w_scale[static_cast<size_t>(k)];
      const int32_t bias = static_cast<int32_t>(k * 37 % 200) - 100;
      std::memcpy(b.data() + k * 4, &bias, 4);
    }
    m.init_bytes(n + "_w", onnx::TensorProto::INT8, {l.k, l.cg, l.kernel, l.kernel}, w)
        .init_f(n + "_w_scale", {l.k}, w_scale)
        .init_bytes(n + "_w_zero", onnx::TensorProto::INT8, {l.k}, std::string(static_cast<size_t>(l.k), '\0'))
        .init_bytes(n + "_b", onnx::TensorProto::INT32, {l.k}, b)
        .init_f(n + "_b_scale", {l.k}, b_scale)
        .init_bytes(n + "_b_zero", onnx::TensorProto::INT32, {l.k}, std::string(static_cast<size_t>(l.k * 4), '\0'))
        .init_f(n + "_y_scale", {}, {l.y_scale})
        .init_bytes(n + "_y_zero", zero_type, {}, zero(l.y_zero))
        .node("DequantizeLinear", {n + "_w", n + "_w_scale", n + "_w_zero"}, {n + "_w_dq"}, {ai("axis", 0)})
        .node("DequantizeLinear", {n + "_b", n + "_b_scale", n + "_b_zero"}, {n + "_b_dq"}, {ai("axis", 0)})
        .node("Conv", {x, n + "_w_dq", n + "_b_dq"}, {n + "_y"},
              {ais("pads", {l.pad, l.pad, l.pad, l.pad}), ais("strides", {l.stride, l.stride}), ai("group", l.group)});
    std::string y = n + "_y";
    if (l.relu) {
      m.node("Relu", {y}, {n + "_relu"});
      y = n + "_relu";
    }
    m.node("QuantizeLinear", {y, n + "_y_scale", n + "_y_zero"}, {n + "_q"})
        .node("DequantizeLinear", {n + "_q", n + "_y_scale", n + "_y_zero"}, {n + "_dq"});
    x = n + "_dq";
    x_scale = l.y_scale;
  }
  m.node("Identity", {x}, {"y"}).output("y");
  auto module = import_ok(m.save(dir.path() / "qdq_conv.onnx"));
  std::vector<float> input(static_cast<size_t>(8 * 12 * 12));
  for (size_t i = 0; i < input.size(); ++i) input[i] = 3.0f * std::sin(0.37f * static_cast<float>(i)) + 0.5f;
  size_t instructions = 0, unfused_instructions = 0;
  const std::vector<float> y = run(module, {f32({1, 8, 12, 12}, input)}, dir.path(), {}, &instructions)[0].f32();
  hexir::compiler::CompileOptions unfused;
  unfused.fuse_epilogues = false;
  const std::vector<float> reference =
      run(module, {f32({1, 8, 12, 12}, input)}, dir.path(), unfused, &unfused_instructions)[0].f32();
  // quantize, the entry transpose, three quantized_conv2d, the exit transpose, the last dequantize.
  CHECK(instructions == 7);
  CHECK(unfused_instructions > instructions);
  // Integer sums rounded once against float sums rounded per layer: a value at a rounding
  // boundary lands one step away, and moves the next layer's sums by that step's weight.
  REQUIRE(y.size() == reference.size());
  double worst = 0, total = 0;
  size_t differ = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = std::fabs(double{y[i]} - double{reference[i]});
    worst = std::max(worst, d);
    total += d;
    differ += d > 0;
  }
  INFO("max " << worst / 0.06 << " steps, " << differ << " of " << y.size() << " differ");
  CHECK(worst <= 2 * 0.06 + 1e-6);
  CHECK(total / static_cast<double>(y.size()) <= 0.1 * 0.06);
  if (int8) CHECK(y == u8_result);
  u8_result = y;
  }
}

TEST_CASE("QDQ MatMul (rank 3, its bias an Add) and Gemm (transB, relu) compile to 1x1 quantized_conv2d over the rows, "
          "within a quantization step of the float composition") {
  TempDir dir;
  constexpr int64_t K = 40, N = 24, N2 = 12;
  Model m(13);
  std::string w(static_cast<size_t>(K * N), '\0'), w2(static_cast<size_t>(N2 * N), '\0'), b2(N2 * 4, '\0');
  uint32_t seed = 7;
  for (auto* s : {&w, &w2})
    for (auto& c : *s) c = static_cast<char>(static_cast<int>((seed = seed * 1103515245u + 12345u) >> 16) % 255 - 127);
  std::vector<float> w_scale(N), w2_scale(N2), b2_scale(N2), bias(N);
  for (int64_t j = 0; j < N; ++j) {
    w_scale[static_cast<size_t>(j)] = 0.01f + 0.0005f * static_cast<float>(j);
    bias[static_cast<size_t>(j)] = 0.1f * static_cast<float>(j % 5) - 0.2f;
  }
  for (int64_t j = 0; j < N2; ++j) {
    w2_scale[static_cast<size_t>(j)] = 0.02f + 0.001f * static_cast<float>(j);
    b2_scale[static_cast<size_t>(j)] = 0.07f * w2_scale[static_cast<size_t>(j)];
    const int32_t b = static_cast<int32_t>(j * 53 % 300) - 150;
    std::memcpy(b2.data() + j * 4, &b, 4);
  }
  m.input("x", kF, {2, 5, K})
      .init_f("x_scale", {}, {0.03f})
      .init_bytes("x_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(120)))
      .init_bytes("w", onnx::TensorProto::INT8, {K, N}, w)
      .init_f("w_scale", {N}, w_scale)
      .init_bytes("w_zero", onnx::TensorProto::INT8, {N}, std::string(N, '\0'))
      .init_f("bias", {N}, bias)
      .init_f("h_scale", {}, {0.07f})
      .init_bytes("h_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(130)))
      .init_bytes("w2", onnx::TensorProto::INT8, {N2, N}, w2)
      .init_f("w2_scale", {N2}, w2_scale)
      .init_bytes("w2_zero", onnx::TensorProto::INT8, {N2}, std::string(N2, '\0'))
      .init_bytes("b2", onnx::TensorProto::INT32, {N2}, b2)
      .init_f("b2_scale", {N2}, b2_scale)
      .init_bytes("b2_zero", onnx::TensorProto::INT32, {N2}, std::string(N2 * 4, '\0'))
      .init_f("y_scale", {}, {0.05f})
      .init_bytes("y_zero", onnx::TensorProto::UINT8, {}, std::string(1, '\0'))
      .init_i64("flat", {2}, {10, N})
      .node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"})
      .node("DequantizeLinear", {"x_q", "x_scale", "x_zero"}, {"x_dq"})
      .node("DequantizeLinear", {"w", "w_scale", "w_zero"}, {"w_dq"}, {ai("axis", 1)})
      .node("MatMul", {"x_dq", "w_dq"}, {"mm"})
      .node("Add", {"mm", "bias"}, {"h"})
      .node("QuantizeLinear", {"h", "h_scale", "h_zero"}, {"h_q"})
      .node("DequantizeLinear", {"h_q", "h_scale", "h_zero"}, {"h_dq"})
      .node("Reshape", {"h_dq", "flat"}, {"h_flat"})
      .node("QuantizeLinear", {"h_flat", "h_scale", "h_zero"}, {"h2_q"})
      .node("DequantizeLinear", {"h2_q", "h_scale", "h_zero"}, {"h2"})
      .node("DequantizeLinear", {"w2", "w2_scale", "w2_zero"}, {"w2_dq"}, {ai("axis", 0)})
      .node("DequantizeLinear", {"b2", "b2_scale", "b2_zero"}, {"b2_dq"}, {ai("axis", 0)})
      .node("Gemm", {"h2", "w2_dq", "b2_dq"}, {"g"}, {ai("transB", 1)})
      .node("Relu", {"g"}, {"r"})
      .node("QuantizeLinear", {"r", "y_scale", "y_zero"}, {"y_q"})
      .node("DequantizeLinear", {"y_q", "y_scale", "y_zero"}, {"y"})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "qdq_matmul.onnx"));
  std::vector<float> input(static_cast<size_t>(2 * 5 * K));
  for (size_t i = 0; i < input.size(); ++i) input[i] = 2.5f * std::cos(0.29f * static_cast<float>(i)) + 0.3f;
  size_t instructions = 0;
  const std::vector<float> y = run(module, {f32({2, 5, K}, input)}, dir.path(), {}, &instructions)[0].f32();
  hexir::compiler::CompileOptions unfused;
  unfused.fuse_epilogues = false;
  const std::vector<float> reference = run(module, {f32({2, 5, K}, input)}, dir.path(), unfused)[0].f32();
  // quantize, quantized_conv2d, quantized_conv2d, the dequantize: the reshape between them (with a
  // dequantize and a quantize of one scale around it, as onnxruntime's quantizer writes a Flatten's)
  // moves the u8 values, and the reshapes are views.
  CHECK(instructions == 4);
  REQUIRE(y.size() == reference.size());
  double worst = 0;
  bool positive = false;
  for (size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::fabs(double{y[i]} - double{reference[i]}));
    CHECK(y[i] >= 0.0f);  // the relu, as the clamp at the zero point
    positive = positive || y[i] > 0.0f;
  }
  CHECK(positive);
  CHECK(worst <= 2 * 0.05 + 1e-6);
}

TEST_CASE("QDQ MatMuls sharing one dequantized weight (tied weights) both fuse, over one packed copy") {
  TempDir dir;
  constexpr int64_t K = 64;
  Model m(13);
  std::string w(static_cast<size_t>(K * K), '\0');
  uint32_t seed = 11;
  for (auto& c : w) c = static_cast<char>(static_cast<int>((seed = seed * 1103515245u + 12345u) >> 16) % 255 - 127);
  m.input("x", kF, {3, K})
      .init_f("x_scale", {}, {0.03f})
      .init_bytes("x_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(120)))
      .init_bytes("w", onnx::TensorProto::INT8, {K, K}, w)
      .init_f("w_scale", {}, {0.004f})
      .init_bytes("w_zero", onnx::TensorProto::INT8, {}, std::string(1, '\0'))
      .init_f("h_scale", {}, {0.06f})
      .init_bytes("h_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(128)))
      .init_f("y_scale", {}, {0.09f})
      .init_bytes("y_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(128)))
      .node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"})
      .node("DequantizeLinear", {"x_q", "x_scale", "x_zero"}, {"x_dq"})
      .node("DequantizeLinear", {"w", "w_scale", "w_zero"}, {"w_dq"})
      .node("MatMul", {"x_dq", "w_dq"}, {"h"})
      .node("QuantizeLinear", {"h", "h_scale", "h_zero"}, {"h_q"})
      .node("DequantizeLinear", {"h_q", "h_scale", "h_zero"}, {"h_dq"})
      .node("MatMul", {"h_dq", "w_dq"}, {"g"})
      .node("QuantizeLinear", {"g", "y_scale", "y_zero"}, {"y_q"})
      .node("DequantizeLinear", {"y_q", "y_scale", "y_zero"}, {"y"})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "qdq_tied.onnx"));
  std::vector<float> input(static_cast<size_t>(3 * K));
  for (size_t i = 0; i < input.size(); ++i) input[i] = 2.0f * std::sin(0.37f * static_cast<float>(i));
  size_t instructions = 0;
  const std::vector<float> y = run(module, {f32({3, K}, input)}, dir.path(), {}, &instructions)[0].f32();
  CHECK(instructions == 4);  // quantize, two quantized_conv2d, dequantize (the reshapes are views)
  // One packed copy of the 64 x 64 weights (4096 bytes) beside the biases, multipliers and scales.
  auto loaded = hexir::vm::Module::load_file((dir.path() / "model.hxe").string());
  REQUIRE(loaded.ok());
  CHECK(loaded->constant_bytes() >= uint64_t{K * K});
  CHECK(loaded->constant_bytes() < uint64_t{2 * K * K});
  hexir::compiler::CompileOptions unfused;
  unfused.fuse_epilogues = false;
  const std::vector<float> reference = run(module, {f32({3, K}, input)}, dir.path(), unfused)[0].f32();
  REQUIRE(y.size() == reference.size());
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(double{y[i]} - double{reference[i]}));
  CHECK(worst <= 2 * 0.09 + 1e-6);
}

TEST_CASE("QDQ max pool: the pool moves before the dequantize (u8 max_pool), the bytes of the group") {
  // A stem's 3x3 stride-2 pad-1 pool between two quantized convolutions' scales (ResNet's), GoogLeNet's
  // ceil-mode pools (a last window that would start past the input is not made: 1x1 stride 3 over 9
  // rows takes rows 0, 3 and 6); kept in float where a window may reach pads only: a dilated pool.
  struct PoolCase {
    const char* name;
    std::vector<Attr> attrs;
    bool u8;
  };
  const std::vector<PoolCase> cases = {
      {"3x3 stride 2 pad 1", {ais("kernel_shape", {3, 3}), ais("strides", {2, 2}), ais("pads", {1, 1, 1, 1})}, true},
      {"dilated", {ais("kernel_shape", {2, 2}), ais("dilations", {2, 2})}, false},
      {"3x3 stride 2 ceil mode", {ais("kernel_shape", {3, 3}), ais("strides", {2, 2}), ai("ceil_mode", 1)}, true},
      {"3x3 stride 1 pad 1 ceil mode", {ais("kernel_shape", {3, 3}), ais("pads", {1, 1, 1, 1}), ai("ceil_mode", 1)},
       true},
      {"1x1 stride 3 ceil mode", {ais("kernel_shape", {1, 1}), ais("strides", {3, 3}), ai("ceil_mode", 1)}, true},
  };
  for (const PoolCase& c : cases) {
    INFO(std::string(c.name));
    const bool dilated = !c.u8;
    TempDir dir;
    Model m(13);
    m.input("x", kF, {1, 8, 9, 10})
        .init_f("x_scale", {}, {0.0371f})
        .init_bytes("x_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(121)))
        .init_f("y_scale", {}, {0.0409f})
        .init_bytes("y_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(100)))
        .node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"})
        .node("DequantizeLinear", {"x_q", "x_scale", "x_zero"}, {"x_dq"})
        .node("MaxPool", {"x_dq"}, {"p"}, c.attrs)
        .node("QuantizeLinear", {"p", "y_scale", "y_zero"}, {"y"})
        .output("y", onnx::TensorProto::UINT8);
    auto module = import_ok(m.save(dir.path() / "qdq_pool.onnx"));
    std::vector<float> input(8 * 9 * 10);
    for (size_t i = 0; i < input.size(); ++i) input[i] = 4.0f * std::sin(0.37f * static_cast<float>(i)) + 0.5f;
    size_t instructions = 0;
    const Tensor y = run(module, {f32({1, 8, 9, 10}, input)}, dir.path(), {}, &instructions)[0];
    auto loaded = hexir::vm::Module::load_file((dir.path() / "model.hxe").string());
    REQUIRE(loaded.ok());
    bool u8_pool = false, float_pool = false;
    for (const hexir::vm::InstructionInfo& in : loaded->instructions(0)) {
      u8_pool = u8_pool || (in.op == "max_pool" && in.type.dtype == hexir::DType::kU8);
      float_pool = float_pool || (in.op == "max_pool" && in.type.dtype == hexir::DType::kF32);
    }
    CHECK(u8_pool != dilated);
    CHECK(float_pool == dilated);
    hexir::compiler::CompileOptions unfused;
    unfused.fuse_epilogues = false;
    const Tensor reference = run(module, {f32({1, 8, 9, 10}, input)}, dir.path(), unfused)[0];
    CHECK(y.bytes == reference.bytes);
  }
}

TEST_CASE("QDQ data movement (DQ -> Reshape / Transpose / Concat -> Q of one scale) moves the u8 values") {
  // onnxruntime's quantizer writes such groups around a transformer's head reshapes and a network's
  // concats, the output sharing its input's scale; another scale keeps the float group.
  for (const bool same_scale : {true, false}) {
    INFO((same_scale ? "one scale" : "two scales"));
    TempDir dir;
    Model m(13);
    m.input("a", kF, {2, 3, 4})
        .input("b", kF, {2, 3, 4})
        .init_f("s", {}, {0.0371f})
        .init_bytes("z", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(121)))
        .init_f("t", {}, {same_scale ? 0.0371f : 0.0409f})
        .init_i64("shape", {2}, {6, 4})
        .node("QuantizeLinear", {"a", "s", "z"}, {"a_q"})
        .node("DequantizeLinear", {"a_q", "s", "z"}, {"a_dq"})
        .node("QuantizeLinear", {"b", "s", "z"}, {"b_q"})
        .node("DequantizeLinear", {"b_q", "s", "z"}, {"b_dq"})
        .node("Reshape", {"a_dq", "shape"}, {"r"})
        .node("QuantizeLinear", {"r", "t", "z"}, {"r_q"})
        .node("Transpose", {"b_dq"}, {"p"}, {ais("perm", {2, 0, 1})})
        .node("QuantizeLinear", {"p", "t", "z"}, {"p_q"})
        .node("Concat", {"a_dq", "b_dq"}, {"c"}, {ai("axis", 1)})
        .node("QuantizeLinear", {"c", "t", "z"}, {"c_q"})
        .output("r_q", onnx::TensorProto::UINT8)
        .output("p_q", onnx::TensorProto::UINT8)
        .output("c_q", onnx::TensorProto::UINT8);
    auto module = import_ok(m.save(dir.path() / "qdq_move.onnx"));
    std::vector<float> a(24), b(24);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = 4.0f * std::sin(0.37f * static_cast<float>(i));
      b[i] = 3.0f * std::cos(0.23f * static_cast<float>(i)) + 0.5f;
    }
    size_t instructions = 0;
    const std::vector<Tensor> y = run(module, {f32({2, 3, 4}, a), f32({2, 3, 4}, b)}, dir.path(), {}, &instructions);
    // One scale: the two quantizes, a u8 reshape (a view), transpose and concat; else their dequantizes,
    // float ops and quantizes too.
    if (same_scale) CHECK(instructions == 4);
    else CHECK(instructions > 6);
    hexir::compiler::CompileOptions unfused;
    unfused.fuse_epilogues = false;
    const std::vector<Tensor> reference = run(module, {f32({2, 3, 4}, a), f32({2, 3, 4}, b)}, dir.path(), unfused);
    REQUIRE(y.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(y[i].bytes == reference[i].bytes);
  }
}

TEST_CASE("quantized_add gives the bytes of the DQ, DQ -> Add -> [Relu] -> Q group it replaces") {
  // Every pair of u8 inputs, with scales for which the ratio-of-scales form (a*(sa/sy) + b*(sb/sy))
  // gives 17 (13 with the relu) other bytes of the 65536 and a product by 1/sy 4 (7): the group's
  // steps are a dequantize, a float sum and a division.
  for (const bool relu : {false, true}) {
    INFO((relu ? "with relu" : "without relu"));
    TempDir dir;
    constexpr int64_t N = 256 * 256;
    Model m(13);
    m.input("a", kF, {N})
        .input("b", kF, {N})
        .init_f("a_scale", {}, {0.0663f})
        .init_bytes("a_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(121)))
        .init_f("b_scale", {}, {0.0907f})
        .init_bytes("b_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(97)))
        .init_f("y_scale", {}, {0.0798f})
        .init_bytes("y_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(relu ? 0 : 140)))
        .node("QuantizeLinear", {"a", "a_scale", "a_zero"}, {"a_q"})
        .node("DequantizeLinear", {"a_q", "a_scale", "a_zero"}, {"a_dq"})
        .node("QuantizeLinear", {"b", "b_scale", "b_zero"}, {"b_q"})
        .node("DequantizeLinear", {"b_q", "b_scale", "b_zero"}, {"b_dq"})
        .node("Add", {"a_dq", "b_dq"}, {"s"});
    if (relu) m.node("Relu", {"s"}, {"r"});
    m.node("QuantizeLinear", {relu ? "r" : "s", "y_scale", "y_zero"}, {"y"}).output("y", onnx::TensorProto::UINT8);
    auto module = import_ok(m.save(dir.path() / "qdq_add_exact.onnx"));
    std::vector<float> a(N), b(N);
    for (int64_t i = 0; i < N; ++i) {
      a[static_cast<size_t>(i)] = 0.0663f * static_cast<float>(i / 256 - 121);
      b[static_cast<size_t>(i)] = 0.0907f * static_cast<float>(i % 256 - 97);
    }
    size_t instructions = 0;
    const Tensor y = run(module, {f32({N}, a), f32({N}, b)}, dir.path(), {}, &instructions)[0];
    hexir::compiler::CompileOptions unfused;
    unfused.fuse_epilogues = false;
    const Tensor reference = run(module, {f32({N}, a), f32({N}, b)}, dir.path(), unfused)[0];
    CHECK(instructions == 3);  // two quantize_linear, quantized_add
    CHECK(y.bytes == reference.bytes);
  }
}

TEST_CASE("A QDQ residual join (DQ, DQ -> Add -> Relu -> Q) compiles to quantized_add, within a quantization step") {
  TempDir dir;
  constexpr int64_t C = 8, H = 6, W = 7;
  Model m(13);
  std::string w(static_cast<size_t>(C * C * 9), '\0');
  uint32_t seed = 3;
  for (auto& c : w) c = static_cast<char>(static_cast<int>((seed = seed * 1103515245u + 12345u) >> 16) % 255 - 127);
  m.input("x", kF, {1, C, H, W})
      .init_f("x_scale", {}, {0.04f})
      .init_bytes("x_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(110)))
      .init_bytes("w", onnx::TensorProto::INT8, {C, C, 3, 3}, w)
      .init_f("w_scale", {C}, std::vector<float>(C, 0.003f))
      .init_bytes("w_zero", onnx::TensorProto::INT8, {C}, std::string(C, '\0'))
      .init_f("c_scale", {}, {0.05f})
      .init_bytes("c_zero", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(128)))
      .init_f("y_scale", {}, {0.06f})
      .init_bytes("y_zero", onnx::TensorProto::UINT8, {}, std::string(1, '\0'))
      .node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"})
      .node("DequantizeLinear", {"x_q", "x_scale", "x_zero"}, {"x_dq"})
      .node("DequantizeLinear", {"w", "w_scale", "w_zero"}, {"w_dq"}, {ai("axis", 0)})
      .node("Conv", {"x_dq", "w_dq"}, {"c"}, {ais("pads", {1, 1, 1, 1})})
      .node("QuantizeLinear", {"c", "c_scale", "c_zero"}, {"c_q"})
      .node("DequantizeLinear", {"c_q", "c_scale", "c_zero"}, {"c_dq"})
      .node("Add", {"c_dq", "x_dq"}, {"s"})
      .node("Relu", {"s"}, {"r"})
      .node("QuantizeLinear", {"r", "y_scale", "y_zero"}, {"y_q"})
      .node("DequantizeLinear", {"y_q", "y_scale", "y_zero"}, {"y"})
      .output("y");
  auto module = import_ok(m.save(dir.path() / "qdq_add.onnx"));
  std::vector<float> input(static_cast<size_t>(C * H * W));
  for (size_t i = 0; i < input.size(); ++i) input[i] = 2.0f * std::sin(0.61f * static_cast<float>(i)) + 0.7f;
  size_t instructions = 0;
  const std::vector<float> y = run(module, {f32({1, C, H, W}, input)}, dir.path(), {}, &instructions)[0].f32();
  hexir::compiler::CompileOptions unfused;
  unfused.fuse_epilogues = false;
  const std::vector<float> reference = run(module, {f32({1, C, H, W}, input)}, dir.path(), unfused)[0].f32();
  // quantize, transpose, quantized_conv2d, transpose back (x_q is NCHW), quantized_add, dequantize.
  CHECK(instructions == 6);
  REQUIRE(y.size() == reference.size());
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::fabs(double{y[i]} - double{reference[i]}));
    CHECK(y[i] >= 0.0f);
  }
  CHECK(worst <= 0.06 + 1e-6);
}
