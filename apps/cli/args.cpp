#include "cli/args.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

namespace ovl::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& valued,
           const std::set<std::string>& flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-')
      throw UsageError(fmt::format("unknown option '{}' (options are spelled --name)", arg));
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positionals_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags.count(name)) {
      if (inline_value) throw UsageError(fmt::format("option --{} takes no value (got '{}')", name, *inline_value));
      flags_.insert(name);
    } else if (valued.count(name)) {
      if (inline_value) {
        values_[name].push_back(*inline_value);
      } else {
        if (i + 1 >= argv.size()) throw UsageError(fmt::format("option --{} needs a value", name));
        values_[name].push_back(argv[++i]);
      }
    } else {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    }
  }
}

std::optional<std::string> Args::value(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  if (it->second.size() > 1) throw UsageError(fmt::format("option --{} given {} times", name, it->second.size()));
  return it->second.front();
}

std::string Args::value_or(const std::string& name, const std::string& fallback) const {
  return value(name).value_or(fallback);
}

std::vector<std::string> Args::values(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t parse_integer(const std::string& option, const std::string& text, int64_t min, int64_t max) {
  if (text.empty()) throw UsageError(fmt::format("--{} needs a whole number, got an empty value", option));
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) {
    throw UsageError(fmt::format("--{} = '{}' is not a whole number", option, text));
  }
  if (v < min || v > max) throw UsageError(fmt::format("--{} = {} is out of range [{}, {}]", option, v, min, max));
  return v;
}

int64_t Args::integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  const auto v = value(name);
  return v ? parse_integer(name, *v, min, max) : fallback;
}

int64_t Args::required_integer(const std::string& name, int64_t min, int64_t max) const {
  const auto v = value(name);
  if (!v) throw UsageError(fmt::format("missing required option --{}", name));
  return parse_integer(name, *v, min, max);
}

}  // namespace ovl::cli
