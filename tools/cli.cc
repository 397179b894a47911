#include "cli.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "hexir/base/file_io.h"

namespace hexir::cli {

std::optional<uint64_t> parse_uint(std::string_view text, uint64_t max) {
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

Args::Args(std::string tool, std::string usage, int argc, char** argv)
    : tool_(std::move(tool)), usage_(std::move(usage)) {
  for (int i = 1; i < argc; ++i) args_.emplace_back(argv[i]);
}

Args::Args(std::string tool, std::vector<std::string> args)
    : tool_(std::move(tool)), args_(std::move(args)), quiet_(true) {}

bool Args::next() {
  if (state_ != State::kGoing || next_ >= args_.size()) return false;
  arg_ = args_[next_++];
  if (!quiet_ && (arg_ == "-h" || arg_ == "--help")) {
    std::fputs(usage_.c_str(), stdout);
    state_ = State::kHelp;
    return false;
  }
  return true;
}

bool Args::flag(std::string_view name) { return arg_ == name; }

std::optional<std::string> Args::take(std::string_view name) {
  if (arg_ == name) {
    if (next_ < args_.size() && !args_[next_].empty()) return args_[next_++];
  } else if (name.starts_with("--") && arg_.size() > name.size() && arg_.starts_with(name) &&
             arg_[name.size()] == '=') {
    if (arg_.size() > name.size() + 1) return arg_.substr(name.size() + 1);
  } else {
    return std::nullopt;
  }
  usage_error(std::string(name) + " needs a value");
  return std::string();
}

bool Args::value(std::string_view name, std::string* out) {
  std::optional<std::string> v = take(name);
  if (!v) return false;
  if (!failed()) *out = std::move(*v);
  return true;
}

bool Args::number_u64(std::string_view name, uint64_t* out, uint64_t min, uint64_t max, bool unbounded) {
  std::optional<std::string> v = take(name);
  if (!v) return false;
  if (failed()) return true;
  const std::optional<uint64_t> parsed = parse_uint(*v, max);
  if (parsed && *parsed >= min) {
    *out = *parsed;
    return true;
  }
  std::string expected = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  if (unbounded) {
    expected = min == 0   ? "a non-negative integer"
               : min == 1 ? "a positive integer"
                          : "an integer >= " + std::to_string(min);
    if (!parsed && parse_uint(*v)) expected += " up to " + std::to_string(max);  // digits, but too large
  }
  usage_error(std::string(name) + " expects " + expected + ", got '" + *v + "'");
  return true;
}

bool Args::choice(std::string_view name, std::initializer_list<std::string_view> choices, size_t* out) {
  std::optional<std::string> v = take(name);
  if (!v) return false;
  if (failed()) return true;
  std::string expected;
  size_t index = 0;
  for (std::string_view c : choices) {
    if (*v == c) {
      *out = index;
      return true;
    }
    expected += (index == 0 ? "" : index + 1 == choices.size() ? " or " : ", ") + std::string(c);
    ++index;
  }
  usage_error(std::string(name) + " expects " + expected + ", got '" + *v + "'");
  return true;
}

void Args::input(std::string* path) {
  if (arg_.size() > 1 && arg_[0] == '-')
    usage_error("unknown option '" + arg_ + "'");
  else if (!path->empty())
    usage_error("more than one input file ('" + *path + "' and '" + arg_ + "')");
  else
    *path = arg_;
}

std::optional<int> Args::stop() const {
  switch (state_) {
    case State::kHelp:
      return kExitOk;
    case State::kError:
      return kExitUsage;
    case State::kGoing:
      break;
  }
  return std::nullopt;
}

int Args::usage_error(const std::string& message) {
  if (!quiet_) std::fprintf(stderr, "%s: %s\n%s", tool_.c_str(), message.c_str(), usage_.c_str());
  error_ = message;
  state_ = State::kError;
  return kExitUsage;
}

int Args::fail(const std::string& message) const {
  std::fprintf(stderr, "%s: %s\n", tool_.c_str(), message.c_str());
  return kExitFailure;
}

std::string output_file_name(std::string_view name, size_t index) {
  if (name.empty()) return std::to_string(index) + ".npy";
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string file;
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '-' || (c == '.' && i > 0);
    if (plain) {
      file += static_cast<char>(c);
    } else {
      file += '%';
      file += kHex[c >> 4];
      file += kHex[c & 15];
    }
  }
  return file + ".npy";
}

Status write_file(const std::string& path, std::string_view bytes) {
  return write_output_file(path, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
}

}  // namespace hexir::cli
