// The built-in profiles: model/profiles/*.json, embedded in the library at build time (model/embed_profiles.cmake)
// and read through the same JSON loaders as a user's files.
#pragma once

#include <span>
#include <string_view>

namespace ovl::detail {

struct EmbeddedProfile {
  std::string_view stem;  // the file name without .json: "h200", "nvlink4-node8", ...
  std::string_view text;  // the file's JSON
};
// Every file of model/profiles (the generated embedded_profiles.cpp).
std::span<const EmbeddedProfile> embedded_profiles();

// The JSON text of model/profiles/<stem>.json; throws ovl::Error naming the stem when there is none.
std::string_view embedded_profile(std::string_view stem);

}  // namespace ovl::detail
