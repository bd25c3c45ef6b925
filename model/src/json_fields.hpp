// Private: typed reads of JSON fields with errors that name the object, the field and the bad value.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "ovl/error.hpp"
#include "ovl/model/json_document.hpp"

namespace ovl::detail {

using ovl::json_excerpt;

inline const nlohmann::json& require_field(const nlohmann::json& j, const char* field, const char* what) {
  OVL_CHECK(j.is_object(), "{} JSON must be an object, got {}", what, json_excerpt(j));
  const auto it = j.find(field);
  OVL_CHECK(it != j.end(), "{} field \"{}\" is missing", what, field);
  return *it;
}

inline double as_number(const nlohmann::json& v, const char* field, const char* what) {
  OVL_CHECK(v.is_number(), "{} field \"{}\" = {} is not a number", what, field, json_excerpt(v));
  const double x = v.get<double>();
  OVL_CHECK(std::isfinite(x), "{} field \"{}\" = {} is not finite", what, field, json_excerpt(v));
  return x;
}

inline int64_t as_int(const nlohmann::json& v, const char* field, const char* what) {
  OVL_CHECK(v.is_number(), "{} field \"{}\" = {} is not a number", what, field, json_excerpt(v));
  // An unsigned value above INT64_MAX would wrap to a negative one and be reported as that.
  OVL_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
            "{} field \"{}\" = {} is out of range", what, field, json_excerpt(v));
  if (v.is_number_integer()) return v.get<int64_t>();
  const double x = v.get<double>();
  OVL_CHECK(std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e18, "{} field \"{}\" = {} is not an integer",
            what, field, json_excerpt(v));
  return static_cast<int64_t>(x);
}

inline int as_int32(const nlohmann::json& v, const char* field, const char* what) {
  const int64_t x = as_int(v, field, what);
  OVL_CHECK(x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max(),
            "{} field \"{}\" = {} is out of range", what, field, x);
  return static_cast<int>(x);
}

inline std::string as_string(const nlohmann::json& v, const char* field, const char* what) {
  OVL_CHECK(v.is_string(), "{} field \"{}\" = {} is not a string", what, field, json_excerpt(v));
  return v.get<std::string>();
}

inline bool as_bool(const nlohmann::json& v, const char* field, const char* what) {
  OVL_CHECK(v.is_boolean(), "{} field \"{}\" = {} is not true or false", what, field, json_excerpt(v));
  return v.get<bool>();
}

inline double read_number(const nlohmann::json& j, const char* field, const char* what) {
  return as_number(require_field(j, field, what), field, what);
}
inline int64_t read_int(const nlohmann::json& j, const char* field, const char* what) {
  return as_int(require_field(j, field, what), field, what);
}
inline int read_int32(const nlohmann::json& j, const char* field, const char* what) {
  return as_int32(require_field(j, field, what), field, what);
}
inline std::string read_string(const nlohmann::json& j, const char* field, const char* what) {
  return as_string(require_field(j, field, what), field, what);
}
inline bool read_bool(const nlohmann::json& j, const char* field, const char* what) {
  return as_bool(require_field(j, field, what), field, what);
}

}  // namespace ovl::detail
