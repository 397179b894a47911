// Random valid .hxir programs from fuzzer bytes, for the differential plan
// target (fuzz_targets.h: compare_plans). Every byte string maps to a program
// the compiler must accept: the generator tracks each value's shape and only
// emits operators whose rules the operands satisfy. The bytes choose shapes,
// operators, operands and attributes; when they run out the program ends, so
// longer inputs give longer programs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hexir::fuzz {

// Consumes bytes front to back; past the end every read is 0.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // An integer in [lo, hi].
  int range(int lo, int hi) { return hi <= lo ? lo : lo + byte() % (hi - lo + 1); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

struct GeneratedGraph {
  std::string source;  // .hxir text
  int functions = 0;
  int nodes = 0;
};

// At most `max_nodes` operator calls per function.
GeneratedGraph generate_graph(const uint8_t* data, size_t size, int max_nodes = 48);

}  // namespace hexir::fuzz
