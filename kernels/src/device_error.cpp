// The device error record's names and description (see ovl/kernels/device_error.hpp).
#include "ovl/kernels/device_error.hpp"

#include <fmt/format.h>

namespace ovl::kernels {

std::string describe(const DeviceError& e) {
  if (e.code == 0) return "no error";
  constexpr const char* kNoSignal =
      "the GEMM did not signal it (failed, skipped or fewer tiles than the plan) or a peer is missing";
  switch (WaitKind(e.wait)) {
    case WaitKind::kStart:
    case WaitKind::kReduceScatterDone:
    case WaitKind::kAllGatherDone:
      return fmt::format("rank {} timed out waiting for the {} from rank {} (slice {}): saw epoch {}, expected >= {}",
                         e.rank, to_string(WaitKind(e.wait)), e.peer, e.cta, e.observed, e.expected);
    case WaitKind::kGroupReduceScatterDone:
      return fmt::format(
          "rank {} timed out waiting for rank {} to reduce-scatter tile group {} (slice {}, its group flag): it had "
          "done {} groups of this call, expected >= {}",
          e.rank, e.peer, e.group, e.cta, e.observed, e.expected);
    case WaitKind::kGroupGathered:
      return fmt::format(
          "rank {} timed out waiting for the gathered rows of tile group {} from rank {} (slice {}, its group flag): "
          "it had pushed {} groups of this call, expected >= {}",
          e.rank, e.group, e.peer, e.cta, e.observed, e.expected);
    case WaitKind::kGroupCounter:
      return fmt::format(
          "the persistent collective (rank {}, CTA {}) waited for tile group {} of rank {}'s GEMM (counter {} of {} "
          "expected); {}",
          e.rank, e.cta, e.group, e.peer, e.observed, e.expected, kNoSignal);
    case WaitKind::kCounterWait:
      return fmt::format("the counter wait kernel waited for tile group {} (counter {} of {} expected); {}", e.group,
                         e.observed, e.expected, kNoSignal);
    case WaitKind::kGatheredRows:
      return fmt::format(
          "the GEMM waited for the gathered rows of tile group {} (counter {} of {} expected): the gather did not "
          "finish (its collective failed or had no SMs to run on); the output is invalid",
          e.group, e.observed, e.expected);
    case WaitKind::kNone:
      break;
  }
  return fmt::format("a device-side wait of unknown kind {} timed out (group {}, counter {} of {} expected)", e.wait,
                     e.group, e.observed, e.expected);
}

}  // namespace ovl::kernels
