// Context validation that needs no GPU: bad options are refused with an ovl::Error naming the value before (or
// instead of) touching a device, and a machine without a GPU gives an ovl::Error, not a crash.
#include <gtest/gtest.h>

#include <string>

#include "ovl/core/ovl.hpp"
#include "ovl/error.hpp"

namespace ovl {
namespace {

TEST(ContextValidation, LoopbackWorldOutOfRangeIsNamed) {
  // Checked before the device is touched: the same error with or without a GPU.
  try {
    ContextOptions options;
    options.world = World::loopback(9);
    ADD_FAILURE() << "no error for a loopback world of 9 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loopback world of 9 ranks"), std::string::npos) << e.what();
  }
}

TEST(ContextValidation, LoopbackShareDefaultsToRank0) {
  EXPECT_EQ(ContextOptions{}.loopback_share, LoopbackShare::kRank0);
  EXPECT_EQ(to_string(LoopbackShare::kRank0), "rank0");
  EXPECT_EQ(to_string(LoopbackShare::kWholeWorld), "whole-world");
}

TEST(ContextValidation, BadLoopbackShareIsNamed) {
  ContextOptions options;
  options.loopback_share = static_cast<LoopbackShare>(7);
  // Checked before the device is touched: the same error with or without a GPU.
  try {
    Context ctx(options);
    ADD_FAILURE() << "no error for loopback_share = 7";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loopback_share = 7"), std::string::npos) << e.what();
  }
}

TEST(ContextValidation, BadDeviceIsAnError) {
  ContextOptions options;
  options.device = 999;
  // With a GPU: "device = 999 is not in [0, n)"; without one: the CUDA error of the device query. Never a crash.
  EXPECT_THROW({ Context ctx(options); }, Error);
}

}  // namespace
}  // namespace ovl
