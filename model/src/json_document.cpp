#include "ovl/model/json_document.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ovl/error.hpp"

namespace ovl {

int json_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_json_document(std::string_view text, std::string_view what) {
  const int depth = json_depth(text);
  OVL_CHECK(depth <= kMaxJsonDepth, "{} nests arrays and objects {} levels deep, more than the {} a loader accepts",
            what, depth, kMaxJsonDepth);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    OVL_FAIL("{} is not valid JSON: {}", what, e.what());
  }
}

std::string read_file_text(const std::string& path, std::string_view what) {
  std::error_code ec;
  OVL_CHECK(!std::filesystem::is_directory(path, ec), "cannot read {} \"{}\": it is a directory", what, path);
  std::ifstream in(path, std::ios::binary);
  OVL_CHECK(in.good(), "cannot open {} \"{}\"", what, path);
  std::ostringstream text;
  text << in.rdbuf();
  OVL_CHECK(!in.bad(), "reading {} \"{}\" failed", what, path);
  return text.str();
}

std::string json_excerpt(const nlohmann::json& value) {
  constexpr size_t kMaxChars = 80, kMaxElements = 16;
  // Only a small flat array or object is shown: dumping a nested one recurses once per level (a value built in
  // memory has no depth limit).
  const bool flat = !value.is_structured() ||
                    std::none_of(value.begin(), value.end(), [](const nlohmann::json& v) { return v.is_structured(); });
  if (value.is_structured() && (value.size() > kMaxElements || !flat))
    return fmt::format("{} of {} {}{}", value.is_array() ? "an array" : "an object", value.size(),
                       value.is_array() ? "element" : "field", value.size() == 1 ? "" : "s");
  std::string text = value.dump();
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars - 3) + "...";
  return text;
}

}  // namespace ovl
