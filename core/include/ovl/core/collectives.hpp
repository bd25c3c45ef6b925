// Collectives on a World: NCCL baselines and our TMA (and SIMT comparison) kernels behind one call.
//
// Every call is made once per World object: in loopback it plays all ranks, in a threads/MPI world each rank's
// caller makes the same call for its own rank (collective, same order everywhere). Buffers are symmetric; counts
// are per rank as in NCCL:
//   all_reduce     (send, recv, count)       recv = sum of every rank's send            (count elements)
//   reduce_scatter (send, recv, recv_count)  send has world*recv_count elements; recv gets this rank's chunk
//   all_gather     (send, recv, send_count)  recv has world*send_count elements
// Passing the same buffer as send and recv is in place (NCCL's convention: reduce-scatter leaves rank r's result at
// element r*recv_count, all-gather takes rank r's input from there).
//
// TMA/SIMT calls are asynchronous on `stream`; a wait that times out records an error that check() turns into an
// ovl::Error naming the wait and the ranks. NCCL calls need distinct GPUs (not a loopback world of > 1 rank).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "ovl/core/world.hpp"
#include "ovl/device_buffer.hpp"
#include "ovl/kernels/collectives.hpp"
#include "ovl/model/problem.hpp"

namespace ovl {

// Each call takes a CommAlgo (ovl/types.hpp): kNcclRing (NCCL), kTmaPush, kTmaPull or kSimt; another is refused.

struct CollectiveOptions {
  int num_ctas = 8;                // TMA/SIMT: CTAs (slices) per launch, 1..256 and at most the SMs given
  int simt_threads = 512;          // kSimt block size
  int pull_warps = 4;              // kTmaPull: warps sharing the fp32 adds (thread 0 loads, the first adder stores)
  std::uint64_t timeout_ns = kernels::kDefaultTimeoutNs;  // every cross-rank wait
  int nccl_cta_bound = 0;          // which of the World's NCCL communicators (WorldOptions::nccl_cta_bounds)
  // tma-push ReduceScatter / AllReduce out of place: every rank zeroed its destination ranges on the stream before the
  // call, so the push adds its own piece too and streams group by group (kernels::CollectiveArguments::dst_zeroed).
  bool dst_zeroed = false;
};

// One range of a tile-addressed call: `bytes` at src_offset of the source buffer and dst_offset of the
// destination, owned by `owner`, moved as part of GEMM tile group `group`. Offsets are multiples of 16 bytes.
struct TileRange {
  int owner = 0;
  int group = 0;
  std::uint64_t src_offset = 0;
  std::uint64_t dst_offset = 0;
  std::uint64_t bytes = 0;
};

// A device copy of a list of tile ranges (made once, reused by every call), on the World's device.
class RangeTable {
 public:
  RangeTable(const World& world, std::span<const TileRange> ranges, int num_groups);

  int num_groups() const { return num_groups_; }
  int world_size() const { return world_size_; }
  std::uint64_t src_end() const { return src_end_; }  // highest src byte + 1 over all ranges
  std::uint64_t dst_end() const { return dst_end_; }
  std::uint64_t bytes_gcd_check(std::size_t element_bytes) const;  // first range bytes not a multiple, or 0
  const kernels::DeviceRange* device_ranges() const { return ranges_.as<const kernels::DeviceRange>(); }
  const std::uint32_t* device_list_begin() const { return list_begin_.as<const std::uint32_t>(); }

 private:
  int num_groups_ = 0, world_size_ = 0, device_ = 0;
  std::uint64_t src_end_ = 0, dst_end_ = 0;
  std::vector<std::uint64_t> range_bytes_;
  DeviceBuffer ranges_, list_begin_;
};

// The persistent, counter-polling form: group g of rank p's data moves once counters.peer(p)[g] >= expected[g].
// counters: a symmetric buffer of num_groups uint32 per rank, release-added (system scope) by the GEMM;
// expected: device array of num_groups values. Push algorithms read only the local counters, pull algorithms
// every rank's. Counters are not reset by the collective (launch_reset_counters after it, on the same stream).
struct GroupGate {
  const SymmetricBuffer* counters = nullptr;
  const std::uint32_t* expected = nullptr;
};

// AllGather into a GEMM that waits per tile group (mode tma's AllGather+GEMM). counters: the World's device memory,
// num_groups uint32 per rank the caller plays (a real World: its own rank, counters[g]; loopback: rank r's at
// counters[r * num_groups + g]). Each of the call's CollectiveOptions::num_ctas CTAs adds 1 to counters[g] once this
// rank's dst holds its slice of group g, so from zero a GEMM waits until counters[g] >= num_ctas (the order of the
// adds, the GEMM's acquire and proxy fence, and what a timeout leaves: kernels::CollectiveArguments::gathered). The
// collective never resets them (reset after the GEMM is done with them, e.g. launch_reset_counters on its stream).
// AllGather with tma-push or tma-pull only; every rank passes the same table and num_ctas (CTA c of every rank moves
// slice c).
struct GroupRelease {
  std::uint32_t* counters = nullptr;
};

class Collectives {
 public:
  explicit Collectives(const World& world);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  void all_reduce(const SymmetricBuffer& send, const SymmetricBuffer& recv, std::size_t count, DType dtype,
                  CommAlgo algo, const CollectiveOptions& options, cudaStream_t stream);
  void reduce_scatter(const SymmetricBuffer& send, const SymmetricBuffer& recv, std::size_t recv_count, DType dtype,
                      CommAlgo algo, const CollectiveOptions& options, cudaStream_t stream);
  void all_gather(const SymmetricBuffer& send, const SymmetricBuffer& recv, std::size_t send_count, DType dtype,
                  CommAlgo algo, const CollectiveOptions& options, cudaStream_t stream);
  // Tile-addressed (TMA/SIMT only), optionally gated by GEMM group counters and (an AllGather) raising per-group
  // counters as the gathered rows arrive (GroupRelease; another op or algo with a release throws ovl::Error).
  void run_ranges(Collective op, const SymmetricBuffer& src, const SymmetricBuffer& dst, const RangeTable& table,
                  DType dtype, CommAlgo algo, const CollectiveOptions& options, cudaStream_t stream,
                  const GroupGate* gate = nullptr, const GroupRelease* release = nullptr);

  // Synchronizes `stream` and throws ovl::Error if a wait of an earlier call timed out (then clears the record).
  void check(cudaStream_t stream);
  const World& world() const { return world_; }
  std::uint32_t epoch() const { return epoch_; }

 private:
  kernels::CollectiveArguments base_args(Collective op, const SymmetricBuffer& src, const SymmetricBuffer& dst,
                                         DType dtype, CommAlgo algo, const CollectiveOptions& options) const;
  void launch(kernels::CollectiveArguments& args, cudaStream_t stream);
  void nccl(Collective op, const void* send, void* recv, std::size_t count, DType dtype, const CollectiveOptions& options,
            cudaStream_t stream) const;

  World world_;
  SymmetricBuffer flags_;
  DeviceBuffer error_;  // one kernels::DeviceError
  std::uint32_t epoch_ = 0;
};

}  // namespace ovl
