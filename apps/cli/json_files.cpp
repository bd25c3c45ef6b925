#include "cli/json_files.hpp"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/args.hpp"
#include "ovl/error.hpp"
#include "ovl/model/json_document.hpp"

namespace ovl::cli {

std::string nan_to_null(const std::string& text) {
  // Google Benchmark prints a non-finite counter (e.g. the "_cv" of a counter that is 0 in every repetition) as a bare
  // NaN / -nan / inf, which is not JSON. Outside strings, such a token after ':', ',' or '[' becomes null.
  static const char* const kTokens[] = {"-Infinity", "Infinity", "-NaN", "-nan", "NaN", "nan", "-inf", "inf"};
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  char last = 0;  // the last character outside strings and whitespace
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      last = c;
      continue;
    }
    if (last == ':' || last == ',' || last == '[') {
      bool replaced = false;
      for (const char* token : kTokens) {
        const size_t n = std::char_traits<char>::length(token);
        if (text.compare(i, n, token) != 0) continue;  // also when fewer than n characters are left
        const bool ends = i + n == text.size() || !std::isalnum(static_cast<unsigned char>(text[i + n]));
        if (ends) {
          out += "null";
          i += n - 1;
          last = 'l';
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    out += c;
    if (!std::isspace(static_cast<unsigned char>(c))) last = c;
  }
  return out;
}

std::vector<nlohmann::json> read_json_files(const std::vector<std::string>& paths) {
  std::vector<nlohmann::json> docs;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) throw UsageError(fmt::format("'{}' is not a readable file", path));
    std::ifstream in(path);
    if (!in) throw UsageError(fmt::format("cannot open '{}'", path));
    std::ostringstream text;
    text << in.rdbuf();
    try {
      docs.push_back(parse_json_document(nan_to_null(text.str()), fmt::format("'{}'", path)));
    } catch (const Error& e) {
      throw UsageError(e.message());
    }
  }
  return docs;
}

void add_link_profile(std::vector<nlohmann::json>& files, const std::optional<LinkProfile>& link) {
  if (!link) return;
  for (nlohmann::json& f : files) {
    if (!f.is_object() || !f.contains("context") || !f["context"].is_object()) continue;
    nlohmann::json& ctx = f["context"];
    const bool real =
        ctx.contains("world_backend") && (ctx["world_backend"] == "threads" || ctx["world_backend"] == "mpi");
    if (!real || ctx.contains("link_profile")) continue;
    ctx["link_profile_name"] = link->name;
    ctx["link_profile"] = nlohmann::json(*link).dump();
  }
}

}  // namespace ovl::cli
