// The one device error record's description, which needs no GPU: each kind of wait names what waited, for what,
// and the values the record holds; a zeroed record says there is no error.
#include <gtest/gtest.h>

#include <string>

#include "ovl/kernels/device_error.hpp"

namespace ovl::kernels {
namespace {

DeviceError timed_out(WaitKind wait) {
  DeviceError e{};
  e.code = 1;
  e.wait = std::uint32_t(wait);
  e.rank = 3;
  e.peer = 5;
  e.cta = 7;
  e.group = 11;
  e.observed = 13;
  e.expected = 17;
  return e;
}

void expect_names(const std::string& text, std::initializer_list<const char*> parts) {
  for (const char* part : parts) EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(DeviceError, ZeroedRecordIsNoError) { EXPECT_EQ(describe(DeviceError{}), "no error"); }

TEST(DeviceError, EveryKindNamesWhatWaitedAndTheValues) {
  expect_names(describe(timed_out(WaitKind::kStart)), {"rank 3 timed out waiting for the start flag", "from rank 5",
                                                       "slice 7", "saw epoch 13", "expected >= 17"});
  expect_names(describe(timed_out(WaitKind::kReduceScatterDone)), {"reduce-scatter done flag", "from rank 5"});
  expect_names(describe(timed_out(WaitKind::kAllGatherDone)), {"all-gather done flag", "from rank 5"});
  expect_names(describe(timed_out(WaitKind::kGroupReduceScatterDone)),
               {"rank 3 timed out waiting for rank 5 to reduce-scatter tile group 11", "slice 7",
                "done 13 groups of this call, expected >= 17"});
  expect_names(describe(timed_out(WaitKind::kGroupGathered)),
               {"rank 3 timed out waiting for the gathered rows of tile group 11 from rank 5", "slice 7",
                "pushed 13 groups of this call, expected >= 17"});
  expect_names(describe(timed_out(WaitKind::kGroupCounter)),
               {"persistent collective (rank 3, CTA 7)", "tile group 11 of rank 5's GEMM", "counter 13 of 17",
                "the GEMM did not signal it"});
  expect_names(describe(timed_out(WaitKind::kCounterWait)),
               {"counter wait kernel waited for tile group 11", "counter 13 of 17", "the GEMM did not signal it"});
  expect_names(describe(timed_out(WaitKind::kGatheredRows)),
               {"the GEMM waited for the gathered rows of tile group 11", "counter 13 of 17", "output is invalid"});
  expect_names(describe(timed_out(WaitKind(99))), {"unknown kind 99", "group 11"});
}

}  // namespace
}  // namespace ovl::kernels
