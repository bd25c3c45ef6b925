// A small command-line parser for `ovl`: `--name value`, `--name=value`, `--flag`, and positionals.
// Every mistake is a UsageError whose message names the bad argument; the command prints it and exits 2.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ovl::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `valued`: options that take a value; `flags`: options that take none. Anything else starting with "--" is
  // an unknown option. A valued option may repeat (values() returns all of them).
  Args(const std::vector<std::string>& argv, const std::set<std::string>& valued, const std::set<std::string>& flags);

  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> value(const std::string& name) const;
  std::string value_or(const std::string& name, const std::string& fallback) const;
  std::vector<std::string> values(const std::string& name) const;
  // A whole number in [min, max]; a missing option gives `fallback`.
  int64_t integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  int64_t required_integer(const std::string& name, int64_t min, int64_t max) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positionals_;
};

int64_t parse_integer(const std::string& option, const std::string& text, int64_t min, int64_t max);

}  // namespace ovl::cli
