#include "cli/json_files.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "cli/args.hpp"

namespace ovl::cli {

std::vector<nlohmann::json> read_json_files(const std::vector<std::string>& paths) {
  std::vector<nlohmann::json> docs;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) throw UsageError(fmt::format("'{}' is not a readable file", path));
    std::ifstream in(path);
    if (!in) throw UsageError(fmt::format("cannot open '{}'", path));
    try {
      docs.push_back(nlohmann::json::parse(in));
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(fmt::format("'{}' is not JSON: {}", path, e.what()));
    }
  }
  return docs;
}

}  // namespace ovl::cli
