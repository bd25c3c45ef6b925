#include "profiles.hpp"

#include "ovl/error.hpp"

namespace ovl::detail {

std::string_view embedded_profile(std::string_view stem) {
  for (const EmbeddedProfile& p : embedded_profiles())
    if (p.stem == stem) return p.text;
  OVL_FAIL("no built-in profile file \"{}.json\"", stem);
}

}  // namespace ovl::detail
