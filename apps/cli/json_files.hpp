// Reading benchmark JSON files for `ovl calibrate` and `ovl validate`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ovl::cli {
// Parses each file; a missing or malformed file is a UsageError naming it. Bare NaN / inf values (Google Benchmark
// writes them for some aggregates) read as null.
std::vector<nlohmann::json> read_json_files(const std::vector<std::string>& paths);
// `text` with every bare NaN, -nan, inf, Infinity (outside strings, after ':', ',' or '[') replaced by null.
std::string nan_to_null(const std::string& text);
}  // namespace ovl::cli
