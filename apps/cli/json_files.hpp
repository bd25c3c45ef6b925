// Reading benchmark JSON files for `ovl calibrate` and `ovl validate`.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ovl/model/link_profile.hpp"

namespace ovl::cli {
// Parses each file; a missing or malformed file is a UsageError naming it. Bare NaN / inf values (Google Benchmark
// writes them for some aggregates) read as null.
std::vector<nlohmann::json> read_json_files(const std::vector<std::string>& paths);
// `text` with every bare NaN, -nan, inf, Infinity (outside strings, after ':', ',' or '[') replaced by null.
std::string nan_to_null(const std::string& text);
// calibrate's and validate's --link-profile: the link the files' real-world runs went over, written into the context
// of each file of real ranks ("world_backend" threads or mpi) that names none, as bench_overlap records
// OVL_LINK_PROFILE; its measured tables then price those runs' calls (ovl::with_link). nullopt: nothing changes.
void add_link_profile(std::vector<nlohmann::json>& files, const std::optional<LinkProfile>& link);
}  // namespace ovl::cli
