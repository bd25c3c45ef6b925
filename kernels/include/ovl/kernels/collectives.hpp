// TMA and SIMT collectives on symmetric buffers: ReduceScatter, AllGather, AllReduce (= reduce-scatter, then
// all-gather), plus plain local copies for the "bandwidth per CTA" question.
//
// The kernels move data between buffers whose every rank's copy is addressable from the launching process (peer
// mapped, or all on one device in loopback). Nothing here allocates, knows about NCCL or chooses policy: core/
// builds the arguments (core/include/ovl/core/collectives.hpp) and owns the memory.
//
// Model: every op is described by byte ranges, each owned by one rank. Owner r's result lives at its ranges:
//   ReduceScatter  dst_r[range.dst_offset]  = sum over ranks p of src_p[range.src_offset]     (ranges of owner r)
//   AllGather      dst_p[range.dst_offset]  = src_r[range.src_offset]           for every p   (ranges of owner r)
//   AllReduce      reduce-scatter as above, then dst_p[range.dst_offset] = dst_r[range.dst_offset] for every p
//                  (tma-push: tile group by tile group, each group's gather one group behind its reduce-scatter;
//                  tma-pull and SIMT: the gather after every group's reduce-scatter)
// src == dst (in place) is allowed; NCCL-shaped calls are one range per owner (uniform layout), tile-addressed
// calls pass a table of ranges grouped by GEMM tile group (RangeTable), optionally gated by GEMM group counters.
// A tma-push or tma-pull AllGather may also raise per-group counters of each played rank as its rows arrive
// (CollectiveArguments::gathered), for a GEMM that reads the gathered rows group by group.
//
// One launch plays `num_played_ranks` consecutive ranks starting at `first_rank`: all N ranks in loopback (one
// CTA plays every rank's part of its slice in turn, so the traffic is real and no CTA waits on another CTA), one
// rank per launch otherwise. CTA c of every rank handles slice c of every owner's ranges, so cross-rank flags are
// per slice and no CTA ever waits for a different slice.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ovl/kernels/device_error.hpp"
#include "ovl/types.hpp"

namespace ovl::kernels {

inline constexpr int kMaxRanks = 8;
inline constexpr int kMaxCollectiveCtas = 256;  // slices, hence flag slots per (kind, peer)
inline constexpr std::uint64_t kDefaultTimeoutNs = 5'000'000'000ull;

// The kernels run CommAlgo (ovl/types.hpp) kTmaPush, kTmaPull and kSimt.
inline constexpr bool is_kernel_algo(CommAlgo algo) {
  return algo == CommAlgo::kTmaPush || algo == CommAlgo::kTmaPull || algo == CommAlgo::kSimt;
}

// One contiguous piece of an op: bytes at src_offset in the source buffer, bytes at dst_offset in the
// destination. Offsets must be multiples of 16 bytes (TMA); bytes a multiple of the element size (a final
// remainder below 16 bytes is moved with plain loads/stores).
struct ByteRange {
  std::uint64_t src_offset = 0;
  std::uint64_t dst_offset = 0;
  std::uint64_t bytes = 0;
};

// Device form of a range table entry: stream_begin is the 16-byte-padded prefix of the bytes of the ranges before
// it in the same (group, owner) list, which lets each CTA find its slice without scanning.
struct DeviceRange {
  std::uint64_t src_offset;
  std::uint64_t dst_offset;
  std::uint64_t bytes;
  std::uint64_t stream_begin;
};

// A rank's flags (a symmetric buffer of collective_flag_bytes(), zeroed once; epochs grow per call, so nothing resets
// them between calls), written by its peers with st.release.sys and polled by the rank with ld.acquire.sys:
//   phase flags: kCollectiveFlagWords u32 words [kind][source rank][slice] (collective_flag_index), the epoch of the
//     source's latest call that finished that phase of that slice;
//   group flags, after them: kCollectiveGroupFlagWords u64 words [source rank][slice] (collective_group_flags,
//     collective_group_flag_index), (epoch << 32) | the number of tile groups the source's call of that epoch has
//     reduce-scattered in that slice (the tma-push AllReduce, which gathers group by group behind them) or pushed to
//     every peer in that slice (the tma-push AllGather with gathered counters).
enum class CollectiveFlag : std::uint32_t { kStart = 0, kReduceScatter = 1, kAllGather = 2 };
inline constexpr std::size_t kCollectiveFlagWords = 3ull * kMaxRanks * kMaxCollectiveCtas;
inline constexpr std::size_t kCollectiveGroupFlagWords = std::size_t(kMaxRanks) * kMaxCollectiveCtas;
inline constexpr std::size_t collective_flag_bytes() {
  return kCollectiveFlagWords * sizeof(std::uint32_t) + kCollectiveGroupFlagWords * sizeof(std::uint64_t);
}
inline constexpr std::size_t collective_flag_index(CollectiveFlag kind, int source, int slice) {
  return (std::size_t(kind) * kMaxRanks + std::size_t(source)) * kMaxCollectiveCtas + std::size_t(slice);
}
inline constexpr std::size_t collective_group_flag_index(int source, int slice) {
  return std::size_t(source) * kMaxCollectiveCtas + std::size_t(slice);
}
// The group flags of a rank's flags (8-byte aligned when the flags are: can_implement checks).
__host__ __device__ inline std::uint64_t* collective_group_flags(std::uint32_t* flags) {
  return reinterpret_cast<std::uint64_t*>(flags + kCollectiveFlagWords);
}
// The value of a group flag: `groups` tile groups of the call of `epoch` done.
inline constexpr std::uint64_t collective_group_flag(std::uint32_t epoch, std::uint32_t groups) {
  return std::uint64_t(epoch) << 32 | groups;
}

// Everything one launch needs. Pointers are addresses valid on the launching device (peer-mapped or local).
struct CollectiveArguments {
  Collective op = Collective::kAllReduce;
  CommAlgo algo = CommAlgo::kTmaPush;
  DType dtype = DType::kBF16;
  int world_size = 1;
  int first_rank = 0;        // first rank this launch plays
  int num_played_ranks = 1;  // world_size in loopback, 1 when each device/process launches for its own rank
  const void* src[kMaxRanks] = {};  // every rank's source buffer
  void* dst[kMaxRanks] = {};        // every rank's destination buffer (may equal src)
  std::uint32_t* flags[kMaxRanks] = {};  // every rank's flags (collective_flag_bytes(), zeroed once, 8-byte aligned)
  std::uint64_t src_bytes = 0;  // size of each rank's source buffer (bounds check in can_implement)
  std::uint64_t dst_bytes = 0;

  // Layout, uniform form (ranges == nullptr): owner r's one range is
  //   {src_offset = r * src_owner_stride, dst_offset = r * dst_owner_stride, bytes = chunk_bytes}.
  std::uint64_t chunk_bytes = 0;
  std::uint64_t src_owner_stride = 0;
  std::uint64_t dst_owner_stride = 0;
  // Layout, table form: num_groups * world_size lists (group-major, then owner), list k is
  // ranges[list_begin[k] .. list_begin[k + 1]). Device memory; see make_device_ranges().
  const DeviceRange* ranges = nullptr;
  const std::uint32_t* list_begin = nullptr;
  int num_groups = 1;

  // Optional gate (the persistent, counter-polling form): before moving group g of rank p's data the kernel
  // waits (ld.acquire.sys) until counters[p][g] >= expected[g]. The producer (the GEMM) adds to its counter
  // with a release at system scope after its tile stores. Counters are never reset here: the host resets them
  // (wait.hpp) after the collective has completed on every rank, or uses monotonic expected values.
  const std::uint32_t* counters[kMaxRanks] = {};
  const std::uint32_t* expected = nullptr;  // device, num_groups entries; null: no gate
  // kTmaPush ReduceScatter / AllReduce, out of place: every rank zeroed its destination ranges before this launch
  // (same stream). The push then adds our own piece too (cp.reduce.async.bulk into our own dst) instead of copying it
  // first, so nothing of a gated call waits for the GEMM before the start flags: each group moves as soon as its
  // counter is ready, group after group (otherwise the own-piece copy of every group comes first).
  bool dst_zeroed = false;
  // Optional per-group arrival (AllGather, tma-push or tma-pull only): gathered[r] for every played rank r (others
  // unused), num_groups uint32 in the launching device's memory. CTA c adds 1 (red.release.sys) to gathered[r][g] once
  // r's dst holds slice c of every owner's ranges of group g (tma-pull: its own writes of them performed; tma-push:
  // every peer's group flag of slice c says that peer's pushes of group g are performed; r's own ranges of group g:
  // copied, out of place, in the phase before group g's push or pull), in group order and also for a group it has no bytes of. So gathered[r][g] grows by exactly
  // num_ctas, and has when r's dst holds all of group g. Never reset here. Every rank's launch must have the same
  // num_ctas and ranges (slice c is the same bytes on every rank). A GEMM reading the rows waits with ld.acquire.sys,
  // then fence.proxy.async.global before its TMA loads. A call that times out leaves the counters of the groups it
  // did not finish short, so a GEMM waiting for them times out too.
  std::uint32_t* gathered[kMaxRanks] = {};

  int num_ctas = 1;            // slices; 1 .. kMaxCollectiveCtas and at most the SMs given
  int simt_threads = 512;      // block size of kSimt (32..512)
  int pull_warps = 4;          // kTmaPull: warps sharing the fp32 adds (1..8), after warp 0 (whose thread 0
                               // issues the loads); the first of them issues the stores
  std::uint32_t epoch = 1;     // strictly increasing per call on a flag buffer, same on every rank
  std::uint64_t timeout_ns = kDefaultTimeoutNs;
  DeviceError* error = nullptr;  // device memory, zeroed; required
};

// The launcher (CUTLASS-style): can_implement() returns "" or a message naming the bad value.
class CollectiveKernel {
 public:
  static std::string can_implement(const CollectiveArguments& args);
  // No scratch is needed beyond the flags and the error record the caller passes in.
  static std::size_t workspace_bytes(const CollectiveArguments&) { return 0; }
  // Dynamic shared memory of one CTA for these arguments.
  static std::size_t shared_bytes(const CollectiveArguments& args);
  // Enqueues the collective on `stream` (device = the current device). Throws ovl::Error on bad arguments.
  static void run(const CollectiveArguments& args, void* workspace, cudaStream_t stream);
};

// Loads every kernel of this file and of wait.hpp into the current context. With lazy module loading (the CUDA
// default) the first launch of a kernel loads its module, which waits for running kernels: a consumer spinning on
// a counter that a not-yet-loaded producer kernel would set then never sees it. Call before running kernels that
// wait on each other (the overlap executor: before launching the GEMM and the communication kernel together).
void preload_collective_kernels();

// Plain local copies (bytes read + written = 2 * bytes) for "bandwidth per CTA": the TMA ring below with its
// default shape (kDefaultTmaRing) and `schedule`, or a SIMT block of `threads` threads with 16-byte accesses, 4 in
// flight per thread. dst, src 16-byte aligned; SIMT: bytes % 16 == 0.
enum class CopyImpl : std::uint8_t { kTma, kSimt };
// How a local copy deals the buffer to its CTAs. kInterleaved: pieces dealt round-robin (TMA: stage-sized pieces,
// CTA c of G moves pieces c, c + G, ...; SIMT: a grid-stride loop), so all CTAs stream through one window of the
// buffer at a time, as cudaMemcpy does. kSlices: CTA c moves the c-th contiguous slice.
enum class RingSchedule : std::uint8_t { kInterleaved, kSlices };
void launch_local_copy(CopyImpl impl, void* dst, const void* src, std::size_t bytes, int num_ctas, int threads,
                       cudaStream_t stream, RingSchedule schedule = RingSchedule::kInterleaved);
// kCopy: dst = src; kReduceAddBf16: dst += src (cp.reduce.async.bulk .add.noftz.bf16; bytes read + written =
// 3 * bytes, bytes % 16 == 0).
enum class RingOp : std::uint8_t { kCopy, kReduceAddBf16 };

// The environment's TMA ring shape, OVL_TMA_RING="<stages>x<KiB>" (e.g. 6x32), read once; {0, 0} when unset. It
// overrides the default ring of every TMA phase here (tma-push, tma-pull, the copies) and of the overlap executor's
// TMA movers, for sweeps without a rebuild. A malformed value throws ovl::Error naming it.
struct TmaRingShape {
  int stages = 0;
  std::uint32_t stage_bytes = 0;
};
TmaRingShape tma_ring_from_env();
// The ring every TMA phase and mover runs: tma_ring_from_env(), else kDefaultTmaRing.
TmaRingShape tma_ring_shape();

// The TMA rings' default shape, 4 x 48 KiB: the bare ring's best for copies and bulk adds alike on the H200 up to
// ~24 CTAs (docs/kernels.md); the collectives' TMA phases and the overlap movers use it.
inline constexpr TmaRingShape kDefaultTmaRing{4, 48u * 1024u};
// Shared memory a block may opt in to on sm_90.
inline constexpr std::size_t kMaxSharedBytesPerBlock = 227 * 1024;
// Of that, what a ring leaves for the kernels' static __shared__ variables (the collective kernel's abort flags):
// dynamic + static must fit the opt-in limit.
inline constexpr std::size_t kStaticSharedReserveBytes = 1024;
// "" when a ring of `stages` x `stage_bytes` after a `header_bytes` header can run (2..8 stages: bulk-group waits
// take 0..7; whole KiB stages; within kMaxSharedBytesPerBlock less kStaticSharedReserveBytes), else what is wrong,
// naming the value.
std::string tma_ring_problem(int stages, std::uint64_t stage_bytes, std::size_t header_bytes);
// The bare TMA ring on a local buffer, to size rings and to measure bandwidth per CTA: thread 0 loads and thread 32
// writes (64 threads), as the collectives' copy phases do. The shape must pass tma_ring_problem.
struct LocalRingArguments {
  RingOp op = RingOp::kCopy;
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  int num_ctas = 1;
  TmaRingShape shape = kDefaultTmaRing;
  RingSchedule schedule = RingSchedule::kInterleaved;
};
void launch_local_ring(const LocalRingArguments& args, cudaStream_t stream);

}  // namespace ovl::kernels
