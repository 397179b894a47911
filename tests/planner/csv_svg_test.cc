// The MiniMalloc CSV reader/writer, and the hexir-plan tool with its SVG
// picture (drawn by the same writer as hexir-dump --plan-svg).
#include <doctest/doctest.h>
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

}  // namespace
}  // namespace hexir::planner
