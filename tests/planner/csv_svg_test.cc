// The MiniMalloc CSV reader/writer, and the hexir-plan tool with its SVG
// picture (drawn by the same writer as hexir-dump --plan-svg).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "hexir/planner/planner_csv.h"
#include "xml_check.h"

namespace hexir::planner {
namespace {

TEST_CASE("csv: header, blank lines, spaces, CRLF, string ids, offset column") {
  Result<CsvProblem> p =
      parse_plan_csv("id,lower,upper,size\r\n b1 , 0 ,3, 4\r\n\r\nx,3,9,4,128\n\t7,9,21,0");
  REQUIRE(p.ok());
  REQUIRE(p->buffers.size() == 3);
  CHECK(p->ids == std::vector<std::string>{"b1", "x", "7"});
  CHECK(p->buffers[0].lower == 0);
  CHECK(p->buffers[0].upper == 3);
  CHECK(p->buffers[0].size == 4);
  CHECK(p->buffers[2].size == 0);
  // No header at all is fine too.
  Result<CsvProblem> bare = parse_plan_csv("0,1,2,3\n");
  REQUIRE(bare.ok());
  CHECK(bare->buffers.size() == 1);
  CHECK(parse_plan_csv("")->buffers.empty());
}

TEST_CASE("csv: malformed rows name their line") {
  auto message = [](const char* text) {
    Result<CsvProblem> p = parse_plan_csv(text);
    return p.ok() ? std::string("ok") : p.status().message();
  };
  CHECK(message("id,lower,upper,size\n0,1,2,3\n1,1,2\n") ==
        "line 3: expected 4 fields id,lower,upper,size, got 3");
  CHECK(message("id,lower,upper,size\n0,1,x,3\n") == "line 2: upper 'x' is not an integer");
  CHECK(message("id,lower,upper,size\n0,1,2,-3\n") == "line 2: size '-3' is not a non-negative integer");
  CHECK(message("id,lower,upper,size\n0,5,2,3\n") == "line 2: upper 2 is before lower 5");
  CHECK(message("id,lower,upper,size\n\n\n,1,2,3\n") == "line 4: empty id");
  CHECK(message("0,1,2,3\n1,1,2,99999999999999999999999\n").starts_with("line 2: size"));
}

TEST_CASE("csv: written rows carry the offset") {
  Result<CsvProblem> p = parse_plan_csv("id,lower,upper,size\na,0,3,4\nb,3,9,8\n");
  REQUIRE(p.ok());
  CHECK(format_plan_csv(*p, {16, 0}) == "id,lower,upper,size,offset\na,0,3,4,16\nb,3,9,8,0\n");
}

TEST_CASE("csv: read_plan_csv opens regular files only, as the .hxir reader does") {
  // It read with std::ifstream: /dev/null was an empty problem, a FIFO
  // without a writer hung, /dev/zero read until memory ran out.
  Result<CsvProblem> null = read_plan_csv("/dev/null");
  REQUIRE(!null.ok());
  CHECK(null.status().message() == "'/dev/null' is not a regular file (a character device)");
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hexir_csv_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "fifo.csv").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  Result<CsvProblem> from_fifo = read_plan_csv(fifo);
  REQUIRE(!from_fifo.ok());
  CHECK(from_fifo.status().message() == "'" + fifo + "' is not a regular file (a FIFO)");
  CHECK(read_plan_csv(dir.string()).status().message().find("is not a regular file") != std::string::npos);
  CHECK(read_plan_csv((dir / "missing.csv").string()).status().code() == StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

struct Run {
  int status;
  std::string output;
};

Run run(const std::string& arguments) {
  std::string command = std::string(HEXIR_PLAN) + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string output;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST_CASE("hexir-plan: JSON line, CSV with offsets, SVG; errors exit 1 with the line") {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hexir_plan_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "in.csv")
        << "id,lower,upper,size\r\nb1,0,3,4\r\nb2,3,9,4\r\nb3,0,9,4\r\nb4,9,21,4\r\nb5,0,21,4\r\n";
    std::ofstream(dir / "bad.csv") << "id,lower,upper,size\n0,1,2,3\n1,1,two,3\n";
  }
  Run ok = run((dir / "in.csv").string() + " --budget-ms 5 --align 1 -o " + (dir / "out.csv").string() +
               " --svg " + (dir / "plan.svg").string());
  CHECK(ok.status == 0);
  CHECK(ok.output.find("\"buffers\": 5") != std::string::npos);
  CHECK(ok.output.find("\"lower_bound\": 12") != std::string::npos);
  CHECK(ok.output.find("\"peak\": 12") != std::string::npos);
  CHECK(ok.output.find("\"ms\": ") != std::string::npos);
  CHECK(ok.output.find("\"heuristic\": \"") != std::string::npos);
  CHECK(std::count(ok.output.begin(), ok.output.end(), '\n') == 1);
  std::stringstream out;
  out << std::ifstream(dir / "out.csv").rdbuf();
  CHECK(out.str().starts_with("id,lower,upper,size,offset\nb1,0,3,4,"));
  std::stringstream svg;
  svg << std::ifstream(dir / "plan.svg").rdbuf();
  const testing::XmlCheck xml = testing::check_xml(svg.str());
  REQUIRE_MESSAGE(xml.ok, xml.error);
  CHECK(xml.count_class("rect", "value") == 5);
  CHECK(xml.count_class("line", "lower-bound") == 1);
  CHECK(xml.count_class("line", "arena-size") == 1);
  CHECK(svg.str().find(">b5</text>") != std::string::npos);

  Run bad = run((dir / "bad.csv").string());
  CHECK(bad.status == 1);
  CHECK(bad.output.find("line 3: upper 'two' is not an integer") != std::string::npos);
  CHECK(run((dir / "missing.csv").string()).status == 1);
  CHECK(run("--align 3 " + (dir / "in.csv").string()).status != 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("hexir-plan --svg: times near INT64_MAX make a picture the size of its buffers") {
  // The time ticks stepped past INT64_MAX and wrapped around: the picture
  // grew until bad_alloc (2.2 GB, 70 s). Coordinates are scaled now and the
  // ticks counted, so three rectangles make a few KiB whatever the values.
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hexir_plan_svg_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "far.csv") << "id,lower,upper,size\n"
                                    "a,0,9223372036854775000,16\n"
                                    "b,9223372036854775000,9223372036854775807,16\n"
                                    "c,-9223372036854775808,9223372036854775807,1152921504606846976\n";
  Run r = run((dir / "far.csv").string() + " --budget-ms 0 --svg " + (dir / "far.svg").string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::stringstream svg;
  svg << std::ifstream(dir / "far.svg").rdbuf();
  const std::string text = svg.str();
  CHECK(text.size() < 16384);
  const testing::XmlCheck xml = testing::check_xml(text);
  REQUIRE_MESSAGE(xml.ok, xml.error);
  CHECK(xml.count_class("rect", "value") == 3);
  CHECK(text.find("nan") == std::string::npos);
  CHECK(text.find("inf") == std::string::npos);
  // The first and last time ticks: the smallest time, and at most 10 steps on.
  CHECK(text.find(">-9223372036854775808</text>") != std::string::npos);
  CHECK(text.find(">8776627963145224192</text>") != std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hexir::planner
