// Each enum's names written once, as a table of {value, name} beside the enum: to_string, parsing, the list of values
// and the "expected ..." of an error all read that table, so a new value is named in one place.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "ovl/error.hpp"

namespace ovl {

template <typename E>
struct Named {
  E value;
  std::string_view name;
};

// The name of `value` in `table`, "?" for a value the table lacks.
template <typename E, std::size_t N>
constexpr std::string_view name_in(const Named<E> (&table)[N], E value) {
  for (const Named<E>& n : table)
    if (n.value == value) return n.name;
  return "?";
}

// "a, b or c" of the `count` strings get(0), ..., get(count - 1).
template <typename Get>
std::string join_or(std::size_t count, Get get) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out += i + 1 == count ? " or " : ", ";
    out += get(i);
  }
  return out;
}

// "a, b or c".
template <typename E, std::size_t N>
std::string names_list(const Named<E> (&table)[N]) {
  return join_or(N, [&](std::size_t i) { return table[i].name; });
}

// The value named `text`, or nullopt.
template <typename E, std::size_t N>
constexpr std::optional<E> find_name(const Named<E> (&table)[N], std::string_view text) {
  for (const Named<E>& n : table)
    if (n.name == text) return n.value;
  return std::nullopt;
}

// The value named `text`, or an ovl::Error: unknown <what> "<text>" (expected a, b or c).
template <typename E, std::size_t N>
E parse_name(const Named<E> (&table)[N], std::string_view text, std::string_view what) {
  if (const std::optional<E> v = find_name(table, text)) return *v;
  OVL_FAIL("unknown {} \"{}\" (expected {})", what, text, names_list(table));
}

}  // namespace ovl
