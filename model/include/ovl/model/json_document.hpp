// Reading a JSON file the loaders trust no more than its author: a depth limit before nlohmann's parser (which
// recurses once per level: ten thousand '[' overflow the stack) and errors that are ovl::Error naming the file.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace ovl {

// Arrays and objects nested deeper than this are refused; ovl's files (profiles, plans, planner and benchmark
// output) nest at most 5 levels.
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count). Not a validator:
// unbalanced text gets some depth and the parser reports it.
int json_depth(std::string_view text);
// `text` parsed as one JSON document. Throws ovl::Error "<what> is not valid JSON: ..." or "<what> nests arrays and
// objects N levels deep ..." (what: e.g. `plan "path"`).
nlohmann::json parse_json_document(std::string_view text, std::string_view what);
// The whole file. Throws ovl::Error "cannot open <what> "<path>"" when it cannot be read (a directory included).
std::string read_file_text(const std::string& path, std::string_view what);
// A JSON value as an error message shows it: scalars and small flat arrays and objects as JSON (strings keep their
// quotes, so "abc" reads as a string), cut at 80 characters; a larger or nested array or object by its size.
std::string json_excerpt(const nlohmann::json& value);

}  // namespace ovl
