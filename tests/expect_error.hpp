// expect_error_naming(f, needle): f() throws ovl::Error and its message contains `needle` (the bad value, by name);
// expect_error_naming_all(f, {needles}): every one of them.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ovl/error.hpp"

namespace ovl::test {

template <typename F>
void expect_error_naming(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

template <typename F>
void expect_error_naming_all(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << needles.front();
  } catch (const Error& e) {
    for (const std::string& needle : needles)
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace ovl::test
