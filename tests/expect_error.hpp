// expect_error_naming(f, needle): f() throws ovl::Error and its message contains `needle` (the bad value, by name).
#pragma once

#include <gtest/gtest.h>

#include <string>

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

}  // namespace ovl::test
