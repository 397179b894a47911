// The MiniMalloc CSV format (`id,lower,upper,size`, live over [lower, upper)),
// read and written for hexir-plan, the planner benchmark and tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/planner/arena_planner.h"

namespace hexir::planner {

struct CsvProblem {
  std::vector<std::string> ids;     // the first column, verbatim
  std::vector<PlanBuffer> buffers;  // one per data row, in file order
};

// Tolerates a header line (any first line whose second field is not a
// number), blank lines, spaces and tabs around fields, CRLF line ends and a
// trailing `offset` column (ignored). Errors name the 1-based line.
Result<CsvProblem> parse_plan_csv(std::string_view text);
// The file at `path`, opened the checked way of hexir/base/file_io.h: a
// regular file only (a FIFO, a device or a directory is refused: "'p' is not
// a regular file (a FIFO)"), at most kMaxPlanCsvBytes.
inline constexpr uint64_t kMaxPlanCsvBytes = uint64_t{2} << 30;
Result<CsvProblem> read_plan_csv(const std::string& path);

// `id,lower,upper,size,offset` rows in input order.
std::string format_plan_csv(const CsvProblem& problem, const std::vector<uint64_t>& offsets);

}  // namespace hexir::planner
