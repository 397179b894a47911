#include "json.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace hexir::cli {
namespace {

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no
// overlongs, no surrogates, nothing past U+10FFFF), or 0.
size_t utf8_sequence(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) low = 0xa0;
    if (c == 0xed) high = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) low = 0x90;
    if (c == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return length;
}

void append_escape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u00";
  out += kHex[c >> 4];
  out += kHex[c & 0xf];
}

}  // namespace

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = utf8_sequence(text, i);
      if (length == 0) {
        append_escape(out, c);
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f)
          append_escape(out, c);
        else
          out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
  return out;
}

void JsonWriter::prefix(std::string_view key, bool keyed) {
  if (need_comma_) out_ += style_ == Style::kSpaced ? ", " : ",";
  need_comma_ = true;
  if (keyed) {
    out_ += json_string(key);
    out_ += style_ == Style::kSpaced ? ": " : ":";
  }
}

void JsonWriter::open(std::string_view key, bool keyed, char bracket) {
  prefix(key, keyed);
  out_ += bracket;
  depth_.push_back(bracket);
  need_comma_ = false;
}

void JsonWriter::close(char bracket) {
  if (!depth_.empty()) depth_.pop_back();
  out_ += bracket;
  need_comma_ = true;
}

void JsonWriter::number(double v, int decimals) {
  if (!std::isfinite(v)) {
    out_ += "null";
    return;
  }
  if (decimals < 0) decimals = 0;
  if (decimals > 17) decimals = 17;
  // Sized for any double in %.17f: 309 digits, sign, point, decimals.
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  out_ += buf;
}

void JsonWriter::field(std::string_view key, std::string_view value) {
  prefix(key, true);
  out_ += json_string(value);
}
void JsonWriter::field(std::string_view key, bool value) {
  prefix(key, true);
  out_ += value ? "true" : "false";
}
void JsonWriter::field(std::string_view key, int64_t value) {
  prefix(key, true);
  out_ += std::to_string(value);
}
void JsonWriter::field(std::string_view key, uint64_t value) {
  prefix(key, true);
  out_ += std::to_string(value);
}
void JsonWriter::field(std::string_view key, double value, int decimals) {
  prefix(key, true);
  number(value, decimals);
}

void JsonWriter::value(std::string_view v) {
  prefix({}, false);
  out_ += json_string(v);
}
void JsonWriter::value(bool v) {
  prefix({}, false);
  out_ += v ? "true" : "false";
}
void JsonWriter::value(int64_t v) {
  prefix({}, false);
  out_ += std::to_string(v);
}
void JsonWriter::value(uint64_t v) {
  prefix({}, false);
  out_ += std::to_string(v);
}
void JsonWriter::value(double v, int decimals) {
  prefix({}, false);
  number(v, decimals);
}

}  // namespace hexir::cli
