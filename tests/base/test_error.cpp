// ovl::Error and OVL_CHECK: the message names the bad value and the place; what() carries all of it.
#include <gtest/gtest.h>

#include <string>

#include "ovl/error.hpp"

namespace {

void check_positive(int comm_sms) { OVL_CHECK(comm_sms > 0, "comm_sms = {} must be positive", comm_sms); }

TEST(Error, CheckPassesWhenTrue) { EXPECT_NO_THROW(check_positive(8)); }

TEST(Error, CheckThrowsWithFormattedMessage) {
  try {
    check_positive(-3);
    FAIL() << "OVL_CHECK did not throw";
  } catch (const ovl::Error& e) {
    EXPECT_EQ(e.api(), "ovl");
    EXPECT_EQ(e.message(), "comm_sms = -3 must be positive");
    EXPECT_EQ(e.file(), "test_error.cpp");  // basename only
    EXPECT_GT(e.line(), 0);
    const std::string what = e.what();
    EXPECT_NE(what.find("test_error.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("comm_sms = -3"), std::string::npos) << what;
  }
}

TEST(Error, IsARuntimeError) {
  EXPECT_THROW(OVL_FAIL("bad {}", 1), std::runtime_error);
}

TEST(Error, BasenameStripsDirectories) {
  EXPECT_EQ(ovl::detail::basename("/a/b/c.cpp"), "c.cpp");
  EXPECT_EQ(ovl::detail::basename("c.cpp"), "c.cpp");
}

}  // namespace
