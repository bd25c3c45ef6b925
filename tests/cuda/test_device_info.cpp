// query_system() (behind `ovl info`) never throws: without a driver or a GPU it says so in `status`; with one it
// reports each GPU, its green-context granularity and a square peer matrix.
#include <gtest/gtest.h>

#include "ovl/core/device_info.hpp"
#include "ovl/core/driver_api.hpp"
#include "ovl/error.hpp"

namespace {

TEST(DeviceInfo, ReportsGpusOrSaysWhyNot) {
  ovl::SystemInfo info;
  ASSERT_NO_THROW(info = ovl::query_system());
  EXPECT_GT(info.runtime_version, 0);
  EXPECT_GT(info.nccl_version, 0);
  if (!info.ok) {
    EXPECT_FALSE(info.status.empty());
    EXPECT_TRUE(info.gpus.empty());
    return;
  }
  ASSERT_FALSE(info.gpus.empty());
  EXPECT_GT(info.driver_version, 0);
  for (const ovl::GpuInfo& g : info.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.sm_count, 0);
    if (g.green_min_partition > 0) EXPECT_EQ(g.green_sm_count % g.green_alignment, 0);
  }
  ASSERT_EQ(info.peer_access.size(), info.gpus.size());
  for (size_t i = 0; i < info.gpus.size(); ++i) {
    ASSERT_EQ(info.peer_access[i].size(), info.gpus.size());
    EXPECT_EQ(info.peer_access[i][i], 1);
  }
}

TEST(DeviceInfo, VersionStrings) {
  EXPECT_EQ(ovl::version_string(13000), "13.0");
  EXPECT_EQ(ovl::version_string(12080), "12.8");
  EXPECT_EQ(ovl::nccl_version_string(22803), "2.28.3");
}

TEST(DeviceInfo, DriverTableIsSafeWithoutADriver) {
  const ovl::DriverApi& api = ovl::driver_api();
  if (!ovl::driver_available()) {
    EXPECT_EQ(api.cuGreenCtxCreate, nullptr);
    EXPECT_THROW(ovl::require_green_contexts(), ovl::Error);
  } else {
    EXPECT_NE(api.cuDriverGetVersion, nullptr);
  }
}

}  // namespace
