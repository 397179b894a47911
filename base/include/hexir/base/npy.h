// numpy .npy files (format 1.0-3.0, C order, little-endian): weights for
// `const ... = file "x.npy"`, and inputs/outputs of hexir-run and the tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"

namespace hexir {

struct NpyArray {
  TensorType type;
  std::vector<uint8_t> data;  // byte_size(type) bytes, C order
};

// Larger arrays are refused by read_npy unless the caller raises the limit.
inline constexpr uint64_t kDefaultMaxNpyBytes = uint64_t{4} << 30;

// Errors name the file and what is wrong (bad magic, fortran order,
// unsupported dtype '<f8', truncated data, ...). Only a regular file is read
// (a FIFO or a device is refused without blocking), its header is checked
// before any data is allocated, and exactly the declared data is read; data
// over `max_data_bytes` is kResourceExhausted naming the limit.
Result<NpyArray> read_npy(const std::string& path, uint64_t max_data_bytes = kDefaultMaxNpyBytes);
Result<NpyArray> parse_npy(std::span<const uint8_t> bytes, const std::string& name_for_errors);

// The header of an .npy file: the array's type and where its data begins.
struct NpyHeader {
  TensorType type;
  uint64_t data_offset = 0;
};
// Reads only the preamble and header of the file at `path` (weights stay on
// disk) and checks that the file holds exactly the data the header declares.
Result<NpyHeader> read_npy_header(const std::string& path);
// The same from the first bytes of a file of `file_size` bytes; `bytes` must
// hold at least the preamble and the header.
Result<NpyHeader> parse_npy_header(std::span<const uint8_t> bytes, uint64_t file_size,
                                   const std::string& name_for_errors);
// Writes through OutputFile (hexir/base/file_io.h): a new temporary beside
// `path` renamed over it, or the bytes written through to a device or FIFO.
Status write_npy(const std::string& path, const TensorType& type, std::span<const uint8_t> data);
std::vector<uint8_t> encode_npy(const TensorType& type, std::span<const uint8_t> data);

}  // namespace hexir
