// The movers' rules (ovl/mover_rules.hpp) on the host, where the model reads them; the kernels compile the same
// functions for the device.
#include <gtest/gtest.h>

#include <cstdint>

#include "ovl/mover_rules.hpp"

namespace ovl {
namespace {

TEST(MoverRules, PullSlotsAreWhole16ByteVectorsThatFitTheStage) {
  for (std::uint32_t stage : {1024u, 48u * 1024u, 48u * 1024u + 16u, 100000u, 227u * 1024u}) {
    for (int world = 1; world <= 8; ++world) {
      const std::uint32_t slot = pull_slot_bytes(stage, world);
      SCOPED_TRACE(testing::Message() << "stage " << stage << " world " << world);
      EXPECT_EQ(slot % 16, 0u);
      EXPECT_LE(std::uint64_t(slot) * std::uint64_t(world), stage);  // W slots in one stage
      EXPECT_GT(slot + 16, stage / std::uint32_t(world));            // the largest such slot
    }
  }
  EXPECT_EQ(pull_slot_bytes(48u * 1024u, 3), 16384u);
  EXPECT_EQ(pull_slot_bytes(48u * 1024u, 7), 7008u);  // 7021.7 rounded down to 16
}

TEST(MoverRules, LinkBytesCountWhatCrossesRankZerosLink) {
  for (int world = 1; world <= 8; ++world) {
    EXPECT_EQ(link_bytes_per_byte(true, 0, world), double(world - 1));  // a pull sum reads every peer's source
    EXPECT_EQ(link_bytes_per_byte(false, 0, world), 0.0);               // rank 0's own bytes
    for (int peer = 1; peer < world; ++peer) EXPECT_EQ(link_bytes_per_byte(false, peer, world), 1.0);
  }
}

}  // namespace
}  // namespace ovl
