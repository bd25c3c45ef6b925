// The TMA collectives' and the local ring's argument checks, which need no GPU: each bad value is refused by name
// before anything touches a device (CollectiveKernel::can_implement, launch_local_ring's checks).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ovl/error.hpp"
#include "ovl/kernels/collectives.hpp"

namespace ovl::kernels {
namespace {

// Plausible device addresses: never dereferenced, 16-byte aligned unless a test says otherwise.
void* fake(std::uintptr_t at) { return reinterpret_cast<void*>(at); }

// A world-of-2 AllReduce that can_implement accepts: 4 KB per owner, one uniform range each.
CollectiveArguments good_arguments(DeviceError* error, std::uint32_t* flags) {
  CollectiveArguments a;
  a.world_size = 2;
  a.num_played_ranks = 2;
  for (int r = 0; r < 2; ++r) {
    a.src[r] = fake(0x100000 + 0x10000 * std::uintptr_t(r));
    a.dst[r] = fake(0x200000 + 0x10000 * std::uintptr_t(r));
    a.flags[r] = flags;
  }
  a.chunk_bytes = 4096;
  a.src_owner_stride = a.dst_owner_stride = 4096;
  a.src_bytes = a.dst_bytes = 8192;
  a.error = error;
  return a;
}

std::string refusal(const LocalRingArguments& a) {
  try {
    launch_local_ring(a, nullptr);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(CollectiveArguments, GoodArgumentsPass) {
  DeviceError error{};
  alignas(8) std::uint32_t flags[64] = {};
  EXPECT_EQ(CollectiveKernel::can_implement(good_arguments(&error, flags)), "");
}

TEST(CollectiveArguments, EachBadValueIsNamed) {
  DeviceError error{};
  alignas(8) std::uint32_t flags[64] = {};
  const auto refused = [&](auto&& change) {
    CollectiveArguments a = good_arguments(&error, flags);
    change(a);
    return CollectiveKernel::can_implement(a);
  };
  EXPECT_NE(refused([](CollectiveArguments& a) { a.world_size = 9; }).find("world_size = 9"), std::string::npos);
  EXPECT_NE(refused([](CollectiveArguments& a) { a.num_ctas = 0; }).find("num_ctas = 0"), std::string::npos);
  for (CommAlgo algo : {CommAlgo::kNcclRing, CommAlgo::kCopyEngine, CommAlgo::kNcclSymmetric})
    EXPECT_NE(refused([&](CollectiveArguments& a) { a.algo = algo; }).find(fmt::format("algo = {}", to_string(algo))),
              std::string::npos);
  EXPECT_NE(refused([](CollectiveArguments& a) {
              a.algo = CommAlgo::kTmaPull;
              a.pull_warps = 9;
            }).find("pull_warps = 9"),
            std::string::npos);
  EXPECT_NE(refused([](CollectiveArguments& a) { a.error = nullptr; }).find("error = null"), std::string::npos);
  EXPECT_NE(refused([](CollectiveArguments& a) { a.epoch = 0; }).find("epoch = 0"), std::string::npos);
  EXPECT_NE(refused([](CollectiveArguments& a) {
              a.src[1] = fake(0x110008);
            }).find("src or dst of rank 1 is not 16-byte aligned"),
            std::string::npos);
  EXPECT_NE(refused([](CollectiveArguments& a) {
              a.flags[1] = static_cast<std::uint32_t*>(fake(0x300004));
            }).find("flags of rank 1 (0x300004) are not 8-byte aligned"),
            std::string::npos);
  EXPECT_NE(refused([](CollectiveArguments& a) { a.dst_bytes = 4096; }).find("dst_bytes = 4096"), std::string::npos);
}

// Gathered counters go only with an AllGather on tma-push or tma-pull, for every played rank, 4-byte aligned.
TEST(CollectiveArguments, GatheredCountersAreCheckedByName) {
  DeviceError error{};
  alignas(8) std::uint32_t flags[64] = {};
  const auto checked = [&](auto&& change) {
    CollectiveArguments a = good_arguments(&error, flags);
    a.op = Collective::kAllGather;
    a.gathered[0] = static_cast<std::uint32_t*>(fake(0x400000));
    a.gathered[1] = static_cast<std::uint32_t*>(fake(0x400100));
    change(a);
    return CollectiveKernel::can_implement(a);
  };
  EXPECT_EQ(checked([](CollectiveArguments&) {}), "");
  EXPECT_EQ(checked([](CollectiveArguments& a) { a.algo = CommAlgo::kTmaPull; }), "");
  EXPECT_EQ(checked([](CollectiveArguments& a) {
              a.num_played_ranks = 1;  // rank 0 only: rank 1's counters are not needed
              a.gathered[1] = nullptr;
            }),
            "");
  EXPECT_NE(
      checked([](CollectiveArguments& a) { a.op = Collective::kReduceScatter; }).find("got reducescatter tma-push"),
      std::string::npos);
  EXPECT_NE(checked([](CollectiveArguments& a) { a.op = Collective::kAllReduce; }).find("got allreduce tma-push"),
            std::string::npos);
  EXPECT_NE(checked([](CollectiveArguments& a) { a.algo = CommAlgo::kSimt; }).find("got allgather simt"),
            std::string::npos);
  EXPECT_NE(
      checked([](CollectiveArguments& a) { a.gathered[1] = nullptr; }).find("gathered[1] (a played rank's) is null"),
      std::string::npos);
  EXPECT_NE(checked([](CollectiveArguments& a) {
              a.gathered[1] = static_cast<std::uint32_t*>(fake(0x400102));
            }).find("gathered[1] (0x400102) is not 4-byte aligned"),
            std::string::npos);
}

TEST(LocalRingArguments, EachBadValueIsNamed) {
  LocalRingArguments a;
  a.dst = fake(0x100000);
  a.src = fake(0x200000);
  a.bytes = 1 << 20;
  a.num_ctas = 0;
  EXPECT_NE(refusal(a).find("num_ctas = 0"), std::string::npos) << refusal(a);
  a.num_ctas = 4;
  a.shape = {9, 16 * 1024};
  EXPECT_NE(refusal(a).find("9 stages"), std::string::npos) << refusal(a);
  a.shape = {4, 1000};
  EXPECT_NE(refusal(a).find("stage_bytes = 1000"), std::string::npos) << refusal(a);
  a.shape = {8, 64 * 1024};
  EXPECT_NE(refusal(a).find("shared memory"), std::string::npos) << refusal(a);
  a.shape = {2, 113 * 1024};  // 227 KiB with the header: no room left for the kernels' static shared memory
  EXPECT_NE(refusal(a).find("kept for the kernels' own __shared__"), std::string::npos) << refusal(a);
  a.shape = kDefaultTmaRing;
  a.src = fake(0x200008);
  EXPECT_NE(refusal(a).find("src (0x200008) is not 16-byte aligned"), std::string::npos) << refusal(a);
  a.src = nullptr;
  EXPECT_NE(refusal(a).find("is null"), std::string::npos) << refusal(a);
  a.src = fake(0x180000);  // 512 KiB above dst: the 1 MiB copies would overlap
  EXPECT_NE(refusal(a).find("overlap"), std::string::npos) << refusal(a);
  a.src = fake(0x200000);
  a.op = RingOp::kReduceAddBf16;
  a.bytes = 1000;
  EXPECT_NE(refusal(a).find("bytes = 1000"), std::string::npos) << refusal(a);
}

}  // namespace
}  // namespace ovl::kernels
