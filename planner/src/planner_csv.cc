#include "hexir/planner/planner_csv.h"

#include <charconv>
#include <cstdio>

#include "hexir/base/file_io.h"

namespace hexir::planner {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    fields.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

template <typename T>
bool parse_integer(std::string_view text, T* out) {
  if (text.empty()) return false;
  if (text.front() == '+') text.remove_prefix(1);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

Result<CsvProblem> parse_plan_csv(std::string_view text) {
  CsvProblem problem;
  size_t line_number = 0, start = 0;
  bool first_content = true;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    std::string_view line =
        text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? text.size() + 1 : end + 1;
    ++line_number;
    line = trim(line);
    if (line.empty()) continue;
    std::vector<std::string_view> fields = split_fields(line);
    auto where = [&](const std::string& what) {
      return invalid_argument("line " + std::to_string(line_number) + ": " + what);
    };
    if (first_content) {
      first_content = false;
      int64_t probe;
      if (fields.size() >= 2 && !parse_integer(fields[1], &probe)) continue;  // header
    }
    if (fields.size() != 4 && fields.size() != 5)
      return where("expected 4 fields id,lower,upper,size, got " + std::to_string(fields.size()));
    if (fields[0].empty()) return where("empty id");
    PlanBuffer b;
    if (!parse_integer(fields[1], &b.lower))
      return where("lower '" + std::string(fields[1]) + "' is not an integer");
    if (!parse_integer(fields[2], &b.upper))
      return where("upper '" + std::string(fields[2]) + "' is not an integer");
    if (!parse_integer(fields[3], &b.size))
      return where("size '" + std::string(fields[3]) + "' is not a non-negative integer");
    if (b.upper < b.lower)
      return where("upper " + std::to_string(b.upper) + " is before lower " + std::to_string(b.lower));
    problem.ids.emplace_back(fields[0]);
    problem.buffers.push_back(b);
  }
  return problem;
}

Result<CsvProblem> read_plan_csv(const std::string& path) {
  HEXIR_ASSIGN_OR_RETURN(std::string content, read_file_limited(path, kMaxPlanCsvBytes, "planner CSV limit"));
  Result<CsvProblem> problem = parse_plan_csv(content);
  if (!problem.ok()) return problem.status().annotate(path);
  return problem;
}

std::string format_plan_csv(const CsvProblem& problem, const std::vector<uint64_t>& offsets) {
  std::string out = "id,lower,upper,size,offset\n";
  char row[128];
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const PlanBuffer& b = problem.buffers[i];
    std::snprintf(row, sizeof row, ",%lld,%lld,%llu,%llu\n", static_cast<long long>(b.lower),
                  static_cast<long long>(b.upper), static_cast<unsigned long long>(b.size),
                  static_cast<unsigned long long>(offsets[i]));
    out += problem.ids[i];
    out += row;
  }
  return out;
}

}  // namespace hexir::planner
