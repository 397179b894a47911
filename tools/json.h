// The one JSON writer of the tools (hexir-run --stats-json, hexir-dump --json,
// hexir-plan's summary line): streams into a growing string, so nothing is
// ever cut at a buffer's size, and escapes every string it writes (keys
// included), so the output is valid JSON whatever names a module holds.
//
//   cli::JsonWriter j;
//   j.begin_object();
//   j.field("function", sig.name);
//   j.begin_object("invoke");
//   j.field("ms_median", median, 4);
//   j.end_object();
//   j.end_object();
//   write(j.text());
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hexir::cli {

// `text` as a JSON string, quotes included: `"` and `\` escaped, control
// characters as \b, \f, \n, \r, \t or \u00XX, DEL as \u007f. Well-formed
// UTF-8 passes through; a byte that is not part of a well-formed sequence is
// written as \u00XX (its Latin-1 reading), so the result is always valid.
std::string json_string(std::string_view text);

class JsonWriter {
 public:
  // kCompact: {"a":1,"b":2}. kSpaced: {"a": 1, "b": 2} (one line either way).
  enum class Style { kCompact, kSpaced };
  explicit JsonWriter(Style style = Style::kCompact) : style_(style) {}

  // Containers: with a key inside an object, without one inside an array or at the top.
  void begin_object() { open({}, false, '{'); }
  void begin_object(std::string_view key) { open(key, true, '{'); }
  void end_object() { close('}'); }
  void begin_array() { open({}, false, '['); }
  void begin_array(std::string_view key) { open(key, true, '['); }
  void end_array() { close(']'); }

  // Members of an object.
  void field(std::string_view key, std::string_view value);
  void field(std::string_view key, const char* value) { field(key, std::string_view(value)); }
  void field(std::string_view key, const std::string& value) { field(key, std::string_view(value)); }
  void field(std::string_view key, bool value);
  void field(std::string_view key, int64_t value);
  void field(std::string_view key, uint64_t value);
  void field(std::string_view key, int32_t value) { field(key, int64_t{value}); }
  void field(std::string_view key, uint32_t value) { field(key, uint64_t{value}); }
  // `decimals` digits after the point; NaN and infinities (not JSON) as null.
  void field(std::string_view key, double value, int decimals = 3);

  // Elements of an array.
  void value(std::string_view v);
  void value(const char* v) { value(std::string_view(v)); }
  void value(const std::string& v) { value(std::string_view(v)); }
  void value(bool v);
  void value(int64_t v);
  void value(uint64_t v);
  void value(int32_t v) { value(int64_t{v}); }
  void value(uint32_t v) { value(uint64_t{v}); }
  void value(double v, int decimals = 3);

  // The document so far; complete once every container is closed.
  const std::string& text() const { return out_; }
  bool complete() const { return depth_.empty() && !out_.empty(); }

 private:
  void open(std::string_view key, bool keyed, char bracket);
  void close(char bracket);
  void prefix(std::string_view key, bool keyed);
  void number(double v, int decimals);

  Style style_;
  std::string out_;
  std::vector<char> depth_;  // open brackets
  bool need_comma_ = false;
};

}  // namespace hexir::cli
