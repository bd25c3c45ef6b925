// The one record of a device-side wait that gave up. Every kernel that waits on another party (the GEMM for gathered
// rows, the counter wait kernel, the loopback movers, the TMA collective for its peers' flags and the GEMM's group
// counters) spins with a timeout and, when it expires, writes this record; the host reads it after a
// synchronization and turns it into an ovl::Error (describe). The first timeout wins: later ones leave the record
// as it is, so describe() names the first. The GEMM's waits, the counter wait kernel and the loopback movers also
// poll the record and give up at once when it holds a timeout: every call that shares the record (a Context's)
// after the first timeout, until the host reads and clears it, computes on whatever its inputs hold. The TMA
// collective stops on a timeout of its own CTA's waits instead (an abort flag in shared memory).
#pragma once

#include <cstdint>
#include <string>

#include "ovl/names.hpp"

#if defined(__CUDACC__)
#include "ovl/kernels/tma_ptx.cuh"
#endif

namespace ovl::kernels {

// What waited, for what.
enum class WaitKind : std::uint32_t {
  kNone = 0,
  kStart = 1,              // a collective for a peer's start flag (the peer entered the collective)
  kReduceScatterDone = 2,  // a collective for a peer's reduce-scatter done flag
  kAllGatherDone = 3,      // a collective for a peer's all-gather done flag
  kGroupCounter = 4,       // a collective kernel (TMA collective, loopback mover) for a GEMM group counter
  kCounterWait = 5,        // the counter wait kernel before a group's collective, for the GEMM group counter
  kGatheredRows = 6,       // the GEMM for a group of gathered rows (AllGather+GEMM)
  // the tma-push AllReduce for a peer's group flag (the peer reduce-scattered a tile group)
  kGroupReduceScatterDone = 7,
  // the tma-push AllGather with gathered counters for a peer's group flag (the peer pushed its rows of a tile group)
  kGroupGathered = 8,
};
inline constexpr Named<WaitKind> kWaitKindNames[] = {
    {WaitKind::kNone, "none"},
    {WaitKind::kStart, "start flag (peer entered the collective)"},
    {WaitKind::kReduceScatterDone, "reduce-scatter done flag"},
    {WaitKind::kAllGatherDone, "all-gather done flag"},
    {WaitKind::kGroupCounter, "GEMM group counter"},
    {WaitKind::kCounterWait, "GEMM group counter (counter wait kernel)"},
    {WaitKind::kGatheredRows, "gathered rows"},
    {WaitKind::kGroupReduceScatterDone, "reduce-scatter done flag of a tile group"},
    {WaitKind::kGroupGathered, "gathered rows of a tile group"}};
inline std::string_view to_string(WaitKind kind) { return name_in(kWaitKindNames, kind); }

// Lives in device memory (or mapped host memory) of the launching device, zeroed before first use; written with
// system-scope atomics. Fields a kind does not use stay 0.
struct DeviceError {
  std::uint32_t code;      // 0: no error; 1: timeout
  std::uint32_t wait;      // WaitKind
  std::uint32_t rank;      // the rank that waited (0 in a world of 1 and in loopback)
  std::uint32_t peer;      // the rank it waited for (flags, a real world's group counters)
  std::uint32_t cta;       // the waiting CTA (its slice, for the TMA collective)
  std::uint32_t group;     // the tile group waited for (counters, gathered rows, group flags)
  std::uint32_t observed;  // value seen last
  std::uint32_t expected;  // value waited for
};
// One sentence naming what waited, for what, and what was seen; "no error" when code is 0.
std::string describe(const DeviceError& error);

#if defined(__CUDACC__)
__device__ __forceinline__ std::uint32_t error_code(const DeviceError* e) {
  return *reinterpret_cast<const volatile std::uint32_t*>(&e->code);
}

// The first timed-out wait records itself; later ones leave the record as it is.
__device__ inline void record_timeout(DeviceError* e, WaitKind wait, std::uint32_t rank, std::uint32_t peer,
                                      std::uint32_t cta, std::uint32_t group, std::uint32_t observed,
                                      std::uint32_t expected) {
  if (atomicCAS_system(&e->code, 0u, 1u) == 0u) {
    e->wait = std::uint32_t(wait);
    e->rank = rank;
    e->peer = peer;
    e->cta = cta;
    e->group = group;
    e->observed = observed;
    e->expected = expected;
    __threadfence_system();
  }
}

// The timed wait of every kernel, the collectives' and the GEMM's: one thread spins (ld.acquire.sys) until *word >=
// target, `seen` the last value read, sleeping sleep_ns between polls when given. False after timeout_ns, or, with
// `watch` set, as soon as a timeout is recorded there by another waiter; the clock and `watch` are read every 64
// polls. The caller records its own timeout (record_timeout keeps the first).
template <typename Word>
__device__ inline bool spin_at_least(const Word* word, Word target, std::uint64_t timeout_ns, const DeviceError* watch,
                                     Word& seen, unsigned sleep_ns = 0) {
  const std::uint64_t start = ptx::global_timer_ns();
  for (unsigned spins = 0;; ++spins) {
    seen = ptx::ld_acquire_sys(word);
    if (seen >= target) return true;
    if ((spins & 63u) == 0u) {
      if (watch != nullptr && error_code(watch) != 0u) return false;
      if (ptx::global_timer_ns() - start > timeout_ns) return false;
    }
    if (sleep_ns != 0) __nanosleep(sleep_ns);
  }
}

// One thread: spin until *counter >= expected, tile group `group`'s counter; false after timeout_ns (recorded as
// `what` by CTA `cta`) or as soon as a timeout is recorded in `e` elsewhere. sleep_ns: spin_at_least's.
__device__ inline bool wait_counter_at_least(const std::uint32_t* counter, std::uint32_t expected,
                                             std::uint64_t timeout_ns, DeviceError* e, WaitKind what,
                                             std::uint32_t group, std::uint32_t cta, unsigned sleep_ns = 0) {
  std::uint32_t seen = 0;
  if (spin_at_least(counter, expected, timeout_ns, e, seen, sleep_ns)) return true;
  record_timeout(e, what, 0u, 0u, cta, group, seen, expected);  // a no-op when a timeout is recorded already
  return false;
}
#endif

}  // namespace ovl::kernels
