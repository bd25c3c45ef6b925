// Reading benchmark JSON files for `ovl calibrate` and `ovl validate`.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ovl::cli {
// Parses each file; a missing or malformed file is a UsageError naming it.
std::vector<nlohmann::json> read_json_files(const std::vector<std::string>& paths);
}  // namespace ovl::cli
