// The graph builder used without text (what an importer does), its checks
// and their locations, and constants whose bytes stay in their files.
#include <fstream>

#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

using ops::OpId;

const TensorType kF32_1x2{DType::kF32, {1, 2}};
const TensorType kF32_2x3{DType::kF32, {2, 3}};
const TensorType kF32_1x3{DType::kF32, {1, 3}};
const TensorType kF32_3{DType::kF32, {3}};

template <typename T>
T ok_value(Result<T> result) {
  INFO(result.status().to_string());
  REQUIRE(result.ok());
  return std::move(result).value();
}

void require_ok(const Status& status) {
  INFO(status.to_string());
  REQUIRE(status.ok());
}

// The same program as text and through the builder.
constexpr const char* kMlpText = R"(module @mlp
const @w : f32[2,3] = dense [1, 2, 3, 4, 5, 6]
const @b : f32[3] = splat 0.5
func @main(%x: f32[1,2], %cache: f32[1,3] donate) -> (f32[1,3], f32[1,3]) {
  %h = call @matmul(%x, @w) : f32[1,3]
  %y = call @add(%h, @b) : f32[1,3]
  %p = call @softmax(%y) {axis = -1} : f32[1,3]
  %c = call @add(%cache, %p) : f32[1,3]
  return %p, %c
}
)";

Module build_mlp() {
  GraphBuilder b("mlp");
  const int w = ok_value(b.add_constant("w", kF32_2x3, InlineBytes{f32_bytes({1, 2, 3, 4, 5, 6})}));
  const int bias = ok_value(b.add_constant("b", kF32_3, FillPattern{f32_bytes({0.5f})}));
  require_ok(b.begin_function("main"));
  const int x = ok_value(b.add_input("x", kF32_1x2));
  const int cache = ok_value(b.add_input("cache", kF32_1x3, /*donate=*/true));
  auto node = [&](OpId op, std::vector<int> inputs, const char* name, ops::AttrMap attrs = {}) {
    NodeSpec spec;
    spec.op = op;
    spec.inputs = std::move(inputs);
    spec.attrs = std::move(attrs);
    spec.names = {name};
    return ok_value(b.add_node(std::move(spec)))[0];
  };
  const int h = node(OpId::kMatmul, {x, ok_value(b.use_constant(w))}, "h");
  const int y = node(OpId::kAdd, {h, ok_value(b.use_constant(bias))}, "y");
  const int p = node(OpId::kSoftmax, {y}, "p", {{"axis", ops::AttrValue{int64_t{-1}}}});
  const int c = node(OpId::kAdd, {cache, p}, "c");
  require_ok(b.set_outputs({p, c}));
  require_ok(b.end_function());
  return ok_value(b.finish());
}

TEST_CASE("builder: a graph built without text compiles to the bytes of the same graph written as .hxir") {
  Module built = build_mlp();
  REQUIRE(built.functions.size() == 1);
  const Function& fn = built.functions[0];
  CHECK(fn.result_types == std::vector<TensorType>{kF32_1x3, kF32_1x3});  // taken from the returned values
  CHECK(fn.nodes[2].params == std::vector<int64_t>{1});
  for (CompileOptions options : {CompileOptions{}, CompileOptions{.plan = PlanStrategy::kNaive},
                                 CompileOptions{.data_checksum = true, .schedule = Schedule::kMemory}}) {
    std::vector<uint8_t> from_graph = ok_value(compile_module(built, options));
    std::vector<uint8_t> from_text = compile_ok(kMlpText, options);
    CHECK(from_graph == from_text);
    CHECK(format::verify_executable(from_graph).ok());
  }
}

TEST_CASE("outputs are named for the returned values, one value returned twice by position") {
  Module built = build_mlp();
  CHECK(built.functions[0].output_names == std::vector<std::string>{"p", "c"});
  std::vector<uint8_t> bytes = compile_ok(R"(module @m
func @main(%x: f32[3]) -> (f32[3], f32[3], f32[3]) {
  %y = call @relu(%x) : f32[3]
  return %y, %x, %y
}
)");
  Result<format::VerifiedModule> verified = format::verify_executable(bytes);
  REQUIRE(verified.ok());
  const fb::Function* fn = verified->module->functions()->Get(0);
  std::vector<std::string> names;
  for (const fb::Binding* b : *fn->outputs()) names.push_back(b->name()->str());
  CHECK(names == std::vector<std::string>{"y", "x", "y#2"});
}

TEST_CASE("builder: made-up names and result types taken from the rule") {
  GraphBuilder b;
  require_ok(b.begin_function("f"));
  const int x = ok_value(b.add_input("x", kF32_2x3));
  const std::vector<int> r = ok_value(b.add_node(OpId::kRelu, {x}));
  const std::vector<int> t = ok_value(b.add_node(OpId::kTranspose, r));
  const std::vector<int> e = ok_value(b.add_node(OpId::kExp, t));
  CHECK(b.value(r[0]).name == "relu_0");
  CHECK(b.value(t[0]).name == "transpose_1");
  CHECK(b.value(t[0]).type == TensorType{DType::kF32, {3, 2}});
  CHECK(b.value(e[0]).node == 2);
  CHECK(b.find_value("relu_0") == r[0]);
  require_ok(b.set_outputs(e));
  require_ok(b.end_function());
  Module m = ok_value(b.finish());
  CHECK(m.name == "module");
  std::vector<uint8_t> bytes = ok_value(compile_module(m));
  CHECK(format::verify_executable(bytes).ok());
}

TEST_CASE("location: a text position or an imported node") {
  auto file = std::make_shared<const std::string>("model.onnx");
  CHECK(Location::text(file, 3, 7).to_string() == "model.onnx:3:7");
  CHECK(Location::text(file, 3, 7).position() == "3:7");
  CHECK(Location::imported(file, "mm0", "MatMul").to_string() == "model.onnx: node 'mm0' (MatMul)");
  CHECK(Location::imported(nullptr, "mm0").to_string() == "node 'mm0'");
  CHECK(Location().to_string().empty());
  CHECK(error_at(Location(), "bad").message() == "bad");
  CHECK(error_at(Location::imported(file, "n", "Relu"), "bad").message() ==
        "model.onnx: node 'n' (Relu): bad");
}

TEST_CASE("builder errors name the imported node") {
  auto file = std::make_shared<const std::string>("model.onnx");
  GraphBuilder b;
  require_ok(b.begin_function("main", Location::imported(file, "graph")));
  const int x =
      ok_value(b.add_input("x", TensorType{DType::kF32, {1, 4}}, false, Location::imported(file, "x")));
  const int w =
      ok_value(b.add_input("w", TensorType{DType::kF32, {3, 2}}, false, Location::imported(file, "w")));
  const Location mm = Location::imported(file, "mm0", "MatMul");

  Status shape = b.add_node(OpId::kMatmul, {x, w}, {}, {}, mm).status();
  CHECK(shape.code() == StatusCode::kInvalidArgument);
  CHECK(shape.message().rfind("model.onnx: node 'mm0' (MatMul): @matmul: ", 0) == 0);

  Status count = b.add_node(OpId::kAdd, {x}, {}, {}, Location::imported(file, "add0", "Add")).status();
  CHECK(count.message() == "model.onnx: node 'add0' (Add): @add takes 2 operand(s), got 1");

  Status attrs = b.add_node(OpId::kRelu, {x}, {{"alpha", ops::AttrValue{0.1}}}, {},
                            Location::imported(file, "r", "Relu"))
                     .status();
  CHECK(attrs.message().rfind("model.onnx: node 'r' (Relu): @relu: unknown attribute 'alpha'", 0) == 0);

  Status declared =
      b.add_node(OpId::kRelu, {x}, {}, {TensorType{DType::kF32, {4}}}, Location::imported(file, "r2", "Relu"))
          .status();
  CHECK(declared.message() ==
        "model.onnx: node 'r2' (Relu): declared result type f32[4] does not match @relu's shape rule, which "
        "gives f32[1,4]");

  Status bad_id = b.add_node(OpId::kRelu, {42}, {}, {}, mm).status();
  CHECK(bad_id.message() == "model.onnx: node 'mm0' (MatMul): operand 42 is not a value of @main");

  NodeSpec twice;
  twice.op = OpId::kRelu;
  twice.inputs = {x};
  twice.names = {"x"};
  twice.locs.node = Location::imported(file, "relu_x", "Relu");
  CHECK(b.add_node(twice).status().message() ==
        "model.onnx: node 'relu_x' (Relu): redefinition of %x (first defined at node 'x')");

  // Nothing was added by the failed nodes.
  std::vector<int> ok =
      ok_value(b.add_node(OpId::kRelu, {x}, {}, {}, Location::imported(file, "r3", "Relu")));
  CHECK(ok[0] == 2);
  CHECK(b.value(ok[0]).loc.node == "r3");

  Status outputs = b.set_outputs({ok[0], x}, Location::imported(file, "graph"));
  CHECK(outputs.ok());
  Status ended = b.end_function();
  CHECK(ended.ok());
  Module m = ok_value(b.finish());
  CHECK(m.functions[0].nodes.size() == 1);
}

TEST_CASE("builder: misuse is an error, never a crash") {
  GraphBuilder b("m");
  CHECK(!b.add_input("x", kF32_3).ok());
  CHECK(!b.add_node(OpId::kRelu, {0}).ok());
  CHECK(!b.set_outputs({0}).ok());
  CHECK(!b.end_function().ok());
  require_ok(b.begin_function("f"));
  CHECK(b.begin_function("g").message().find("still open") != std::string::npos);
  const int x = ok_value(b.add_input("x", kF32_3));
  CHECK(b.add_input("x", kF32_3).status().message().find("redefinition of %x") != std::string::npos);
  CHECK(!b.add_input("big", TensorType{DType::kF32, {int64_t{1} << 62, 4}}).ok());
  CHECK(!b.use_constant(0).ok());
  CHECK(!b.add_node(static_cast<OpId>(ops::kOpCount), {x}).ok());
  CHECK(b.set_result_types({}).message().find("must return at least one value") != std::string::npos);
  CHECK(b.end_function().message().find("returns nothing") != std::string::npos);
  CHECK(b.finish().status().message().find("was not ended") != std::string::npos);
  require_ok(b.set_result_types({kF32_3, kF32_3}));
  CHECK(b.set_outputs({x}).message() == "function @f returns 1 value(s), its signature declares 2");
  require_ok(b.set_outputs({x, x}));
  require_ok(b.end_function());
  CHECK(b.begin_function("f").message() == "redefinition of function @f");
  require_ok(b.begin_function("g"));
  const int y = ok_value(b.add_input("y", kF32_3));
  const int r = ok_value(b.add_node(OpId::kRelu, {y}))[0];
  CHECK(b.add_input("z", kF32_3).status().message().find("inputs come before the nodes") !=
        std::string::npos);
  require_ok(b.set_outputs({r}));
  require_ok(b.end_function());
  Module m = ok_value(b.finish());
  CHECK(m.functions.size() == 2);
  CHECK(format::verify_executable(ok_value(compile_module(m))).ok());
}

TEST_CASE("builder: constant sources are checked when added") {
  TempDir dir;
  GraphBuilder b;
  CHECK(b.add_constant("a", kF32_3, InlineBytes{f32_bytes({1, 2})}).status().message() ==
        "constant @a has 8 byte(s), its type f32[3] needs 12");
  CHECK(b.add_constant("f", kF32_3, FillPattern{{1, 2}}).status().message() ==
        "fill of constant @f has a 2-byte pattern, one f32 element is 4");
  CHECK(b.add_constant("m", kF32_3, FileRange{dir.path() / "missing.bin", 0})
            .status()
            .message()
            .find("cannot open") != std::string::npos);
  {
    std::ofstream out(dir.path() / "raw.bin", std::ios::binary);
    out << std::string(20, 'x');
  }
  CHECK(b.add_constant("r", kF32_3, FileRange{dir.path() / "raw.bin", 10})
            .status()
            .message()
            .find("needs bytes [10, +12)") != std::string::npos);
  const int c = ok_value(b.add_constant("c", kF32_3, InlineBytes{f32_bytes({1, 2, 3})}));
  CHECK(b.add_constant("c", kF32_3, InlineBytes{f32_bytes({1, 2, 3})})
            .status()
            .message()
            .find("redefinition of constant @c") != std::string::npos);
  CHECK(b.find_constant("c") == c);
  CHECK(!b.find_constant("a"));
}

TEST_CASE("builder: a constant read from any byte range of a file") {
  TempDir dir;
  // 16 bytes of someone else's header, then the weights, then a trailer.
  std::vector<uint8_t> file(16, 0xee);
  std::vector<uint8_t> weights = f32_bytes({1, 2, 3, 4, 5, 6});
  file.insert(file.end(), weights.begin(), weights.end());
  file.insert(file.end(), 8, 0xdd);
  {
    std::ofstream out(dir.path() / "model.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  }
  GraphBuilder b("m");
  const int w = ok_value(b.add_constant("w", kF32_2x3, FileRange{dir.path() / "model.bin", 16}));
  CHECK(bytes_of(b.constant(w)) == weights);
  require_ok(b.begin_function("f"));
  const int x = ok_value(b.add_input("x", kF32_1x2));
  const int y = ok_value(b.add_node(OpId::kMatmul, {x, ok_value(b.use_constant(w))}))[0];
  require_ok(b.set_outputs({y}));
  require_ok(b.end_function());
  std::vector<uint8_t> bytes = ok_value(compile_module(ok_value(b.finish())));
  const fb::Module* m = module_of(bytes);
  REQUIRE(m->constants()->size() == 1);
  const fb::Section* s = m->sections()->Get(0);
  const uint64_t at = s->offset() + m->constants()->Get(0)->offset();
  CHECK(std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                             bytes.begin() + static_cast<std::ptrdiff_t>(at + 24)) == weights);
}

// ---- file constants stay in their files ---------------------------------------

constexpr const char* kWeighted = R"(
const @w : f32[2,3] = file "w.npy"
func @f(%x: f32[1,2]) -> (f32[1,3]) {
  %y = call @matmul(%x, @w) : f32[1,3]
  return %y
}
)";

TEST_CASE("file constants: parsing reads the header only; the bytes are read when written") {
  TempDir dir;
  const std::string path = (dir.path() / "w.npy").string();
  REQUIRE(write_npy(path, kF32_2x3, f32_bytes({1, 2, 3, 4, 5, 6})).ok());
  Module m = parse_ok(kWeighted, dir.path());
  const auto* range = std::get_if<FileRange>(&m.constants[0].source);
  REQUIRE(range);  // the parsed constant holds no bytes
  CHECK(range->path == dir.path() / "w.npy");
  CHECK(range->offset == std::filesystem::file_size(path) - 24);
  CHECK(m.constants[0].byte_size == 24);

  // Rewriting the weights after parsing changes what is compiled: they were not loaded.
  REQUIRE(write_npy(path, kF32_2x3, f32_bytes({6, 5, 4, 3, 2, 1})).ok());
  std::vector<uint8_t> bytes = ok_value(compile_module(m));
  const fb::Module* fm = module_of(bytes);
  const uint64_t at = fm->sections()->Get(0)->offset() + fm->constants()->Get(0)->offset();
  CHECK(std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                             bytes.begin() + static_cast<std::ptrdiff_t>(at + 24)) ==
        f32_bytes({6, 5, 4, 3, 2, 1}));

  // A file cut short after parsing is a clear error when its bytes are needed.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  Result<std::vector<uint8_t>> cut = compile_module(m);
  CHECK(cut.status().code() == StatusCode::kDataLoss);
  CHECK(cut.status().message().find("ended before the 24 bytes of constant @w") != std::string::npos);
  std::filesystem::remove(path);
  CHECK(compile_module(m).status().message().find("cannot open '" + path + "'") != std::string::npos);
}

TEST_CASE("read_npy_header agrees with read_npy on every fixture") {
  for (const auto& entry : std::filesystem::directory_iterator(data_dir())) {
    if (entry.path().extension() != ".npy") continue;
    INFO(entry.path().string());
    Result<NpyArray> full = read_npy(entry.path().string());
    Result<NpyHeader> header = read_npy_header(entry.path().string());
    REQUIRE(full.ok() == header.ok());
    if (!full.ok()) {
      CHECK(header.status().message() == full.status().message());
      CHECK(header.status().code() == full.status().code());
      continue;
    }
    CHECK(header->type == full->type);
    CHECK(header->data_offset + full->data.size() == std::filesystem::file_size(entry.path()));
  }
  TempDir dir;
  const std::vector<uint8_t> good = encode_npy(kF32_3, f32_bytes({1, 2, 3}));
  const std::vector<std::vector<uint8_t>> bad = {
      {},
      {0x93, 'N', 'U', 'M'},
      std::vector<uint8_t>(good.begin(), good.end() - 1),  // truncated data
      [&] {
        std::vector<uint8_t> extra = good;
        extra.push_back(0);
        return extra;
      }(),
      std::vector<uint8_t>(good.begin(), good.begin() + 40),  // truncated header
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::filesystem::path path = dir.path() / ("bad" + std::to_string(i) + ".npy");
    {
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bad[i].data()), static_cast<std::streamsize>(bad[i].size()));
    }
    INFO(i);
    Result<NpyArray> full = read_npy(path.string());
    Result<NpyHeader> header = read_npy_header(path.string());
    REQUIRE(!full.ok());
    REQUIRE(!header.ok());
    CHECK(header.status().message() == full.status().message());
  }
}

TEST_CASE("StreamingChecksum64 is checksum64 however the bytes are cut") {
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  for (size_t total : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{100}, size_t{1000}}) {
    const std::span<const uint8_t> all(bytes.data(), total);
    for (size_t piece : {size_t{1}, size_t{3}, size_t{8}, size_t{13}, size_t{1000}}) {
      StreamingChecksum64 checksum;
      for (size_t at = 0; at < total; at += piece)
        checksum.update(all.subspan(at, std::min(piece, total - at)));
      INFO(total, " in pieces of ", piece);
      CHECK(checksum.finish() == format::checksum64(all));
    }
  }
}

TEST_CASE("splats and dedupe read file constants in chunks") {
  TempDir dir;
  // Larger than a chunk, all equal except (in one file) the very last element.
  const size_t count = kConstantChunkSize / 4 + 100;
  std::vector<float> ones(count, 1.0f);
  std::vector<uint8_t> bytes(count * 4);
  std::memcpy(bytes.data(), ones.data(), bytes.size());
  const TensorType type{DType::kF32, {static_cast<int64_t>(count)}};
  REQUIRE(write_npy((dir.path() / "ones.npy").string(), type, bytes).ok());
  REQUIRE(write_npy((dir.path() / "ones2.npy").string(), type, bytes).ok());
  bytes[bytes.size() - 1] ^= 0x40;
  REQUIRE(write_npy((dir.path() / "almost.npy").string(), type, bytes).ok());
  REQUIRE(write_npy((dir.path() / "almost2.npy").string(), type, bytes).ok());
  const std::string t = type.to_string();
  const std::string source =
      "const @a : " + t + " = file \"ones.npy\"\nconst @b : " + t +
      " = file \"almost.npy\"\nconst @c : " + t + " = file \"almost2.npy\"\nconst @d : " + t +
      " = file \"ones2.npy\"\nfunc @f(%x: " + t + ") -> (" + t + ") {\n  %p = call @add(%x, @a) : " + t +
      "\n  %q = call @add(%p, @b) : " + t + "\n  %r = call @add(%q, @c) : " + t +
      "\n  %s = call @add(%r, @d) : " + t + "\n  return %s\n}\n";
  Module m = parse_ok(source, dir.path());
  ConstantPlan plan = plan_constants(m);
  REQUIRE(plan.fills[0]);
  CHECK(plan.fills[0]->count == count);
  CHECK(!plan.fills[1]);
  CHECK(plan.fills[3]);
  CHECK(plan.stored_index == std::vector<int>{0, 1, 1, 0});
  REQUIRE(plan.stored.size() == 2);
  CHECK(plan.rodata_size == count * 4);
}

TEST_CASE("compile_file_to streams the file and matches compile_file") {
  TempDir dir;
  REQUIRE(write_npy((dir.path() / "w.npy").string(), kF32_2x3, f32_bytes({1, 2, 3, 4, 5, 6})).ok());
  const std::filesystem::path source = dir.path() / "m.hxir";
  {
    std::ofstream out(source);
    out << kWeighted;
  }
  for (CompileOptions options : {CompileOptions{}, CompileOptions{.data_checksum = true},
                                 CompileOptions{.compression = SectionCompression::kZstd}}) {
    const std::filesystem::path out = dir.path() / "m.hxe";
    CompiledFile compiled = ok_value(compile_file_to(source, out, options));
    std::vector<uint8_t> expected = ok_value(compile_file(source, options));
    std::ifstream in(out, std::ios::binary);
    std::vector<uint8_t> written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(written == expected);
    CHECK(compiled.size == written.size());
    const format::Prelude p = prelude_of(written);
    REQUIRE(compiled.head.size() == 64 + p.metadata_size);
    CHECK(std::equal(compiled.head.begin(), compiled.head.end(), written.begin()));
    CHECK(!std::filesystem::exists(dir.path() / "m.hxe.tmp"));
  }
  // Errors leave nothing behind.
  Result<CompiledFile> no_dir = compile_file_to(source, dir.path() / "missing" / "m.hxe");
  CHECK(no_dir.status().message().find("cannot create") != std::string::npos);
  CHECK(compile_file_to(dir.path() / "none.hxir", dir.path() / "x.hxe").status().code() ==
        StatusCode::kNotFound);
  CHECK(!std::filesystem::exists(dir.path() / "x.hxe"));
  CHECK(!std::filesystem::exists(dir.path() / "x.hxe.tmp"));
}

}  // namespace
}  // namespace hexir::compiler::testing
