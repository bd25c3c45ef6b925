// The TMA movers of the loopback collective (the tma mode's; see ovl/kernels/loopback.hpp for what is moved).
//
// grid: args.ctas CTAs, persistent over the groups; block: warp 0 plus one warp (tma-push, copies: thread 0 is the
// producer, thread 32 the consumer, the other lanes exit) or `pull_warps` warps (tma-pull: warp 0 exits, the warps
// after it share the fp32 adds and their first thread issues);
// dynamic shared memory: a kTmaHeaderBytes header (the ring's mbarriers, an abort word), then `stages` stages of
// `stage_bytes`, then, when it fits under the device's opt-in limit, the pieces table: num_groups x W PieceInfo
// (32 bytes: range, chunk count, kind), written by every thread once, before the block's barrier; otherwise the
// cursors read the range table in global memory and compute the same values. Why a table: from global memory every
// cursor's entry into every group read W ranges in a row (L2 round trips: the gates' acquires invalidate the L1),
// on the group's critical path. arch: sm_90 (cp.async.bulk, cp.reduce.async.bulk, mbarrier expect_tx). Element type
// T: bf16 or fp16, or std::uint8_t (FP8 moved as bytes: copies only).
//
// Work: each (group, owner) piece of the played share is cut into chunks, and each chunk into units:
//   pull reduce  1 unit per chunk of stage/W bytes: the W sources land in W slots of one stage; the consumers sum
//                them in fp32 in rank order into slot 0 (deterministic), fence.proxy.async.shared::cta, barrier, one
//                bulk store per destination
//   push reduce  W units per chunk of `stage` bytes, one per source p: a bulk load of src_p, then one
//                cp.reduce.async.bulk .add per destination. The destinations were zeroed by zero_pieces_kernel
//                (same stream, before this kernel), so the W adds of a chunk are independent of each other: no
//                unit ever waits for another unit's writes, and they may run on different CTAs (the adds are
//                atomic at the destination; bf16/f16 adds in arrival order, each rounded: not deterministic)
//   copy         1 unit per chunk of `stage` bytes: bulk load, one bulk store per destination
// In each group the U units are split into equal contiguous runs, one per CTA (see Units), so every CTA gets an
// equal share whatever the piece sizes, its loads stream through contiguous memory, and every bulk op is a whole
// stage (except a piece's last chunk).
// Why two roles (tma-push, copies): one thread driving both the loads and the stores/adds runs a long dependent
// instruction chain per unit (the standalone collectives measured about half the bare ring's rate that way,
// docs/kernels.md); a producer and a consumer thread overlap theirs. Every group is gated (ld.acquire.sys on
// its counter, timeout -> DeviceError, WaitKind::kGroupCounter; fence.proxy.async.global after the acquire, before the
// group's first bulk load), also one with no unit for this CTA. The producer enters a group (finds its run of units)
// before its gate: the ranges are the host's input, not the GEMM's, so only the data's bulk loads must follow the
// acquire. Before exit the consumer waits for every bulk group (cp.async.bulk.wait_group 0: every write performed).
// Stamps (optional): per group and CTA, start = when its counter was acquired, end = when its last unit's stores were
// issued (start = end for a group with no unit for this CTA).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "loopback_device.cuh"
#include "loopback_tma.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/collectives.hpp"
#include "ovl/kernels/loopback.hpp"
#include "ovl/kernels/tma_ptx.cuh"
#include "tma_ring.cuh"

namespace ovl::kernels {
namespace {

constexpr int kTmaMaxPullWarps = 8;  // LoopbackArguments::pull_warps' bound

enum Kind : int { kPull = 0, kPushAdd = 1, kCopy = 2 };

// What one owner's piece of a group asks of this mover (the shared-memory table's entry).
struct PieceInfo {
  LoopbackRange range;
  std::uint32_t chunks;  // chunks of chunk_cap bytes (push: W units each); 0: not part of the played share
  int kind;
};
static_assert(sizeof(PieceInfo) == 32, "a piece in shared memory is 32 bytes (the table stays 16-byte aligned)");

// Bytes per chunk: a whole stage, or (tma-pull) one of the stage's W slots, a multiple of 16 bytes.
__host__ __device__ __forceinline__ std::uint32_t chunk_cap(int kind, std::uint32_t stage_bytes, int world) {
  return kind == kPull ? pull_slot_bytes(stage_bytes, world) : stage_bytes;
}

// Owner r's piece `rg` as this mover plays it.
template <typename T>
__device__ __forceinline__ PieceInfo piece_info(const LoopbackArguments& a, int r, const LoopbackRange& rg, bool push,
                                                std::uint32_t stage_bytes) {
  PieceInfo p{rg, 0, kCopy};
  dev::Piece pc;
  if (!dev::plan_piece<T>(a, r, rg, pc)) return p;
  p.kind = !pc.reduce ? kCopy : push ? kPushAdd : kPull;
  // ceil(bytes / cap) in double: exact below 2^53 bytes, and far cheaper on the GPU than a 64-bit division.
  const double bytes = double(rg.count) * double(sizeof(T));
  p.chunks = std::uint32_t(ceil(bytes / double(chunk_cap(p.kind, stage_bytes, a.world))));
  return p;
}

// Piece (g, r) from the range table in global memory (no table in shared memory). Out of line: the cursors' unrolled
// reads would otherwise inline W copies of it (and its division) per cursor.
template <typename T>
__device__ __noinline__ PieceInfo global_piece_info(const LoopbackArguments& a, int g, int r, bool push,
                                                    std::uint32_t stage_bytes) {
  return piece_info<T>(a, r, a.ranges[std::int64_t(g) * a.world + r], push, stage_bytes);
}

// One unit of work (see the file comment): piece (group, owner), its kind, the push source, the byte range.
struct Unit {
  int group, kind, source;
  LoopbackRange range;
  dev::Piece piece;
  std::int64_t pos;  // bytes from the piece's start
  std::uint32_t bytes;
  int owner;
  bool last_in_group;  // the last unit of this group for this CTA
};

// Walks this CTA's units in order: in group g, the CTA's run is units [U c / ctas, U (c + 1) / ctas) of the
// group's U units (owner by owner; push: chunk-major inside a piece, the W sources of a chunk in a row, so one CTA
// adds every source into the chunks of its run; only a run's first and last chunk can be shared with the
// neighbouring CTA, since runs split at unit, not chunk, boundaries. On the H200 no slower than source-major runs,
// up to 15% faster at 32 CTAs). Group entry is explicit (enter(), every group in sequence); any() is false when the
// current group has no (more) unit here. Taking a unit is an increment. Owners' pieces come from the table in shared
// memory, else from the range table; only the current owner's piece is kept, the next one is read when the run
// reaches it.
template <typename T>
struct Units {
  const LoopbackArguments* a;
  const PieceInfo* pieces;  // shared memory: groups [first_group, + num_groups) x W; null: read a->ranges
  int cta, ctas;
  bool push;
  std::uint32_t stage_bytes;
  int group = -1;
  std::int64_t left = 0;  // units of the current group still to take here
  int owner = 0, source = 0;
  std::uint32_t chunk = 0;
  PieceInfo pi{};      // the current owner's piece
  dev::Piece piece{};  // its sources and destinations

  __device__ std::uint32_t cap(int kind) const { return chunk_cap(kind, stage_bytes, a->world); }
  __device__ std::int64_t units(const PieceInfo& p) const {
    return p.kind == kPushAdd ? std::int64_t(p.chunks) * a->world : std::int64_t(p.chunks);
  }
  // Owner r's piece of the current group.
  __device__ PieceInfo info(int r) const {
    if (pieces != nullptr) return pieces[(group - a->first_group) * a->world + r];
    return global_piece_info<T>(*a, group, r, push, stage_bytes);
  }
  __device__ void enter(int g) {
    group = g;
    // Every owner's unit count, in registers (the loops unroll over the rank bound): the W reads are independent.
    std::int64_t per_owner[kMaxLoopbackRanks];
    std::int64_t total = 0;
#pragma unroll
    for (int r = 0; r < kMaxLoopbackRanks; ++r) {
      per_owner[r] = r < a->world ? units(info(r)) : 0;
      total += per_owner[r];
    }
    const std::int64_t lo = total * cta / ctas, hi = total * (cta + 1) / ctas;
    left = hi - lo;
    if (left == 0) return;
    std::int64_t skip = lo;  // < total: the run starts in an owner with units
    owner = 0;
#pragma unroll
    for (int r = 0; r + 1 < kMaxLoopbackRanks; ++r) {
      if (owner == r && skip >= per_owner[r]) {
        skip -= per_owner[r];
        owner = r + 1;
      }
    }
    pi = info(owner);
    dev::plan_piece<T>(*a, owner, pi.range, piece);
    const int per_chunk = pi.kind == kPushAdd ? a->world : 1;
    chunk = std::uint32_t(skip / per_chunk);
    source = int(skip - std::int64_t(chunk) * per_chunk);
  }
  __device__ bool any() const { return left > 0; }
  // The next unit (requires any()); advances.
  __device__ Unit take() {
    Unit u;
    u.group = group;
    u.kind = pi.kind;
    u.source = source;
    u.range = pi.range;
    u.piece = piece;
    u.owner = owner;
    const std::int64_t bytes = pi.range.count * std::int64_t(sizeof(T));
    u.pos = std::int64_t(chunk) * cap(pi.kind);
    u.bytes = std::uint32_t(bytes - u.pos < std::int64_t(cap(pi.kind)) ? bytes - u.pos : cap(pi.kind));
    u.last_in_group = --left == 0;
    if (left > 0 && (pi.kind != kPushAdd || ++source == a->world)) {  // next chunk: W sources done (push), or 1
      source = 0;
      if (++chunk == pi.chunks) {  // the next owner with units (one exists: left > 0)
        chunk = 0;
        do pi = info(++owner);
        while (pi.chunks == 0);
        dev::plan_piece<T>(*a, owner, pi.range, piece);
      }
    }
    return u;
  }
};

template <typename T>
__device__ __forceinline__ const unsigned char* src_bytes(const LoopbackArguments& a, const Unit& u, int p) {
  return reinterpret_cast<const unsigned char*>(static_cast<const T*>(a.src[p]) + u.range.src_offset) + u.pos;
}
template <typename T>
__device__ __forceinline__ unsigned char* dst_bytes(const LoopbackArguments& a, const Unit& u, int d) {
  return reinterpret_cast<unsigned char*>(static_cast<T*>(a.dst[d]) + u.range.dst_offset) + u.pos;
}

// The unit's link bytes (dev::link_bytes_per_byte): a pull's W sources, a push add's source, a copy's owner.
__device__ __forceinline__ double link_bytes(const Unit& u, int world) {
  return double(u.bytes) * link_bytes_per_byte(u.kind == kPull, u.kind == kPushAdd ? u.source : u.owner, world);
}

// Issues unit u as the ring's unit i: arms its full barrier with the unit's bytes, then the bulk loads.
template <typename T>
__device__ __forceinline__ void issue_unit(const LoopbackArguments& a, const Units<T>& cur, const Unit& u,
                                           const TmaRing& ring, std::uint32_t i) {
  if (u.kind == kPull) {
    const std::uint32_t slot = cur.cap(kPull);
    ring.arm(i, std::uint32_t(a.world) * u.bytes);
    for (int p = 0; p < a.world; ++p) ring.load(i, std::uint32_t(p) * slot, src_bytes<T>(a, u, p), u.bytes);
  } else {
    ring.issue(
        i, u.kind == kCopy ? static_cast<const unsigned char*>(u.piece.copy_src) + u.pos : src_bytes<T>(a, u, u.source),
        u.bytes);
  }
}

// The leader's group releases (LoopbackArguments::released): once the CTA's writes of group g are performed (all
// its bulk groups waited for, the proxy fenced), released[g] gets its add `latency` later (paced: the rows arrive a
// link latency after they are sent; unpaced: at once). The due times only grow, so the groups in flight wait in a
// FIFO; a full one waits for its oldest. The leader calls due_now() while it waits on a full barrier and after each
// unit's stores, so each add comes about when it is due, while the CTA moves the next groups (tma-pull: up to one
// unit's paced wait late, which produce() spends without calling it).
struct Releases {
  static constexpr int kCap = 8;
  unsigned int* counters;  // null: this thread releases nothing
  std::uint32_t latency;
  int group[kCap] = {};
  unsigned long long due[kCap] = {};
  int head = 0, count = 0;

  __device__ bool on() const { return counters != nullptr; }
  __device__ void add(int g) const { ptx::red_release_sys_add(counters + g, 1u); }
  __device__ void pop() {
    dev::pace_until(due[head]);
    add(group[head]);
    head = (head + 1) % kCap;
    --count;
  }
  __device__ void due_now() {
    while (count > 0 && dev::global_timer_ns() >= due[head]) pop();
  }
  __device__ void written(int g) {
    if (!on()) return;
    publish_bulk_writes();
    const unsigned long long t = dev::global_timer_ns();
    if (count == kCap) pop();
    const int tail = (head + count) % kCap;
    group[tail] = g;
    due[tail] = t + latency;
    ++count;
  }
  __device__ void drain() {
    while (count > 0) pop();
  }
};

// tma-push and copies: warp-specialized. Thread 0 (warp 0) is the producer, thread 32 (warp 1) the consumer; the other
// lanes exit. On the ring (TmaRing, tma_ring.cuh; one reader), the consumer hands stage s back on empty[s] once it
// knows the bulk group that read stage s has read it (wait_group.read 1 after the next unit's commit: one group of lag,
// so it never waits on the group it just issued). Producer: per group, gate (blocking: the consumer drains what is in
// flight meanwhile), then per unit: wait empty[s] (the stage's previous use), issue. Consumer: per unit, wait full[s],
// the unit's bulk stores / reduce-adds, commit, release the previous unit's stage. Neither touches a stage with
// ordinary loads or stores.
// tma-pull: the consumer warps (warps 1..pull_warps) feed themselves; warp 0 exits. Their first thread (the leader)
// gates and issues; per unit all consumers wait full[s], sum, fence.proxy.async.shared::cta, barrier (named barrier
// 1, the consumers only); the leader stores, commits, waits until the previous unit's store has read its stage
// (wait_group.read 1) and refills that stage with the unit S - 1 ahead. The barrier orders every consumer's reads of
// a stage before the leader's next bulk load into it, which is what a block-level race checker can see.
// A thread that times out at a gate publishes how many units were issued (`issued_on_abort`); consumers stop there.
// Paced (LoopbackArguments::pace_ns_per_byte > 0): the issuing thread starts each group at max(its gate, the previous
// group's end) (dev::pace_group_start) and, after issuing a unit, waits until t0 + the group's link bytes so far
// (link_bytes()) x pace_ns_per_byte; the consumers follow it through the full barriers. After the last group the
// issuing thread and the leader (after its last store) wait the call's link latency (as dev::pace_finish), the
// leader releasing the groups still in flight (Releases) meanwhile.
template <typename T>
__global__ void __launch_bounds__(32 + 32 * kTmaMaxPullWarps, 1)
    tma_mover_kernel(const __grid_constant__ LoopbackArguments a, int stages, std::uint32_t stage_bytes,
                     bool smem_pieces) {
  extern __shared__ __align__(128) unsigned char smem[];
  const TmaRing ring{smem, std::uint32_t(stages), stage_bytes, 1};  // one reader: the consumer
  volatile std::uint32_t* issued_on_abort = ring.words();
  const unsigned tid = threadIdx.x;
  const int w = a.world;
  const bool pull = a.mover == CommAlgo::kTmaPull;
  PieceInfo* pieces =
      smem_pieces ? reinterpret_cast<PieceInfo*>(smem + kTmaHeaderBytes + ring.num_stages * stage_bytes) : nullptr;

  if (pieces != nullptr) {  // every thread, once: the played groups' pieces (the ranges copied, then completed)
    const LoopbackRange* ranges = a.ranges + std::int64_t(a.first_group) * w;
    const int n = a.num_groups * w;
    for (int i = int(tid); i < n; i += int(blockDim.x)) pieces[i].range = ranges[i];
    for (int i = int(tid); i < n; i += int(blockDim.x))
      pieces[i] = piece_info<T>(a, i % w, pieces[i].range, !pull, stage_bytes);
  }
  if (tid == 0) {
    ring.init();
    *issued_on_abort = 0xffffffffu;
  }
  __syncthreads();

  const bool leader = tid == 32;
  if (tid < 32 ? tid != 0 || pull : !pull && !leader) return;
  Units<T> cur{&a, pieces, int(blockIdx.x), int(gridDim.x), !pull, stage_bytes};
  Units<T> prod = cur;  // the issuing cursor (producer; tma-pull: the leader's)
  std::uint32_t head = 0;
  int prod_group = -1;
  // Pacing (the issuing thread): the current group's start and link bytes issued, the previous group's end.
  const bool paced = a.pace_ns_per_byte > 0;
  unsigned long long pace_t0 = 0, pace_end = 0;
  double paced_bytes = 0;
  // The next unit into stage head % S, entering and gating groups in turn; false when there is none (or a gate timed
  // out: then issued_on_abort is set). A group is entered before its gate: its pieces come from the range table (the
  // host's), not from the GEMM, so only the bulk loads need the acquire.
  auto produce = [&]() -> bool {
    while (!prod.any()) {
      if (++prod_group >= a.num_groups) return false;
      const int g = a.first_group + prod_group;
      prod.enter(g);
      if (!dev::gate(a, g)) {
        *issued_on_abort = head;
        return false;
      }
      dev::stamp(a, g, 0);
      if (!prod.any()) dev::stamp(a, g, 1);  // no unit of group g for this CTA
      if (paced) {
        pace_t0 = pace_end = dev::pace_group_start(pace_end);
        paced_bytes = 0;
      }
    }
    if (!pull) ring.acquire(head);
    const Unit u = prod.take();
    issue_unit<T>(a, prod, u, ring, head);
    ++head;
    if (paced) {  // after issuing b link bytes since the group's start: wait until t0 + b / rate
      paced_bytes += link_bytes(u, a.world);
      pace_end = pace_t0 + static_cast<unsigned long long>(paced_bytes * a.pace_ns_per_byte);
      dev::pace_until(pace_end);
    }
    return true;
  };

  // The last group's latency, once every group is issued (none timed out): after the issuing thread's last paced
  // wait (here), and after the leader's last store (below; the CTA ends when both have).
  const auto latency_after_last = [&] { return paced && *issued_on_abort == 0xffffffffu ? a.pace_latency_ns : 0u; };
  if (tid == 0) {  // ---- producer (tma-push, copies) ----
    while (produce()) {
    }
    if (latency_after_last() > 0) dev::pace_finish(a);
    return;
  }

  // ---- consumers ----
  const unsigned consumers = blockDim.x - 32;
  bool producing = true;
  if (pull && leader)
    for (std::uint32_t i = 0; i + 1 < ring.num_stages && producing; ++i) producing = produce();
  // The leader's warp waits for it here and below rather than spinning beside it on a full barrier while it spins on
  // a GEMM counter: no lane of a warp spins while another lane of the same warp must make progress.
  if (pull) __syncwarp();
  // Group releases (LoopbackArguments::released), the leader's.
  Releases rel{leader ? a.released : nullptr, paced ? a.pace_latency_ns : 0u};
  std::uint32_t tail = 0;
  for (int gi = -1;;) {
    while (!cur.any()) {
      if (++gi >= a.num_groups) break;
      cur.enter(a.first_group + gi);
      if (rel.on() && !cur.any()) rel.add(a.first_group + gi);  // nothing here: released as it is passed
    }
    if (!cur.any()) break;
    const Unit u = cur.take();
    unsigned char* stage = ring.stage(tail);
    bool ready = false;
    while (!(ready = ring.try_full(tail))) {
      if (*issued_on_abort <= tail) break;
      rel.due_now();
    }
    if (!ready) break;  // the unit was never issued: a gate timed out
    if constexpr (sizeof(T) == 1) {
      // T = std::uint8_t, FP8 moved as bytes: copies only (launch_loopback_collective allows it for AllGather only).
    } else if (u.kind == kPull) {
      sum_slots<T>(stage, cur.cap(kPull), w, int(u.bytes / 16), int(tid - 32), int(consumers));
    }
    // Every consumer has read stage s and waited on its phase before the leader stores from it and, below, refills
    // the previous stage (tma-pull; for push and copies the consumer is one thread).
    if (pull) consumer_sync(consumers);
    if (leader) {
      const int d0 = u.piece.dst_first, d1 = u.piece.dst_first + u.piece.dst_count;
      for (int d = d0; d < d1; ++d) {
        if (u.kind == kPushAdd) {
          if constexpr (sizeof(T) == 2) ptx::bulk_reduce_add<T>(dst_bytes<T>(a, u, d), stage, u.bytes);
        } else {
          ptx::bulk_store(dst_bytes<T>(a, u, d), stage, u.bytes);
        }
      }
      ptx::bulk_commit();
      ring.retire_previous(tail, 0, pull ? 0 : 1);  // tma-push, copies: to the producer; tma-pull refills below
      if (u.last_in_group) {  // before tma-pull's next unit, whose paced wait would delay the group's end
        dev::stamp(a, u.group, 1);
        rel.written(u.group);
      }
      rel.due_now();
      if (pull && producing) producing = produce();  // into the previous unit's stage ((tail + S - 1) % S)
    }
    if (pull) __syncwarp();
    ++tail;
  }
  if (leader) {
    ptx::bulk_wait_all();  // writes performed before the kernel ends (the stream's next op reads them)
    const unsigned long long end = dev::global_timer_ns() + latency_after_last();
    rel.drain();
    dev::pace_until(end);
  }
}

// grid-stride over every reduce piece of the played share: its destinations become zero (tma-push adds onto them).
template <typename T>
__global__ void zero_pieces_kernel(const __grid_constant__ LoopbackArguments a) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (int g = a.first_group; g < a.first_group + a.num_groups; ++g) {
    for (int r = 0; r < a.world; ++r) {
      const LoopbackRange rg = a.ranges[std::int64_t(g) * a.world + r];
      dev::Piece pc;
      if (!dev::plan_piece<T>(a, r, rg, pc) || !pc.reduce) continue;
      const std::int64_t nvec = rg.count * std::int64_t(sizeof(T)) / 16;
      for (int d = pc.dst_first; d < pc.dst_first + pc.dst_count; ++d) {
        uint4* out = reinterpret_cast<uint4*>(static_cast<T*>(a.dst[d]) + rg.dst_offset);
        for (std::int64_t v = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += stride)
          out[v] = make_uint4(0, 0, 0, 0);
      }
    }
  }
}

// The ring: OVL_TMA_RING, else kDefaultTmaRing, checked against the header and the shared-memory limit.
TmaRingShape mover_ring() {
  const TmaRingShape r = tma_ring_shape();
  const std::string why = tma_ring_problem(r.stages, r.stage_bytes, kTmaHeaderBytes);
  OVL_CHECK(why.empty(), "TMA mover: {}", why);
  return r;
}

template <typename T>
void launch_typed(const LoopbackArguments& a, const TmaRingShape& ring, int threads, cudaStream_t stream) {
  // Header and ring, then the pieces table when it fits (else the cursors read the range table in global memory).
  const std::size_t ring_end = kTmaHeaderBytes + std::size_t(ring.stages) * ring.stage_bytes;
  const std::size_t table = std::size_t(a.num_groups) * std::size_t(a.world) * sizeof(PieceInfo);
  const bool smem_pieces = ring_end + table <= kMaxSharedBytesPerBlock;  // the mover has no static smem
  const std::size_t smem = smem_pieces ? ring_end + table : ring_end;
  // The opt-in limit, not this launch's size (see opt_in_dynamic_shared_memory).
  opt_in_dynamic_shared_memory(tma_mover_kernel<T>, int(kMaxSharedBytesPerBlock));
  if (a.mover == CommAlgo::kTmaPush && a.op != Collective::kAllGather) {
    zero_pieces_kernel<T><<<a.ctas, 512, 0, stream>>>(a);
    OVL_CUDA_CHECK_LAST();
  }
  tma_mover_kernel<T><<<a.ctas, threads, smem, stream>>>(a, ring.stages, ring.stage_bytes, smem_pieces);
}

}  // namespace

void launch_tma_mover(const LoopbackArguments& a, cudaStream_t stream) {
  OVL_CHECK(a.mover == CommAlgo::kTmaPull || a.mover == CommAlgo::kTmaPush,
            "launch_tma_mover: mover {} is not a TMA mover", int(a.mover));
  OVL_CHECK(a.pull_warps >= 1 && a.pull_warps <= kTmaMaxPullWarps, "TMA mover: pull_warps = {} is not in 1..{}",
            a.pull_warps, kTmaMaxPullWarps);
  if (a.num_groups <= 0) return;
  if (a.mover == CommAlgo::kTmaPush) {
    // The push mover zeroes its destinations first; a destination that is also a source would lose its data. Only
    // whole buffers are compared: overlapping ranges inside one allocation are the caller's to avoid (the executor
    // never makes them).
    for (int d = 0; d < a.world; ++d)
      for (int p = 0; p < a.world; ++p)
        OVL_CHECK(a.dst[d] == nullptr || a.dst[d] != a.src[p],
                  "TMA push mover: destination of rank {} is the source of rank {} (in place is not supported)", d, p);
  }
  const TmaRingShape ring = mover_ring();
  const int threads = 32 + (a.mover == CommAlgo::kTmaPull ? 32 * a.pull_warps : 32);  // producer + consumers
  if (is_fp8(a.dtype)) {
    launch_typed<std::uint8_t>(a, ring, threads, stream);
  } else if (a.dtype == DType::kBF16) {
    launch_typed<__nv_bfloat16>(a, ring, threads, stream);
  } else {
    launch_typed<__half>(a, ring, threads, stream);
  }
  OVL_CUDA_CHECK_LAST();
}

void preload_tma_movers() {
  preload_kernels(tma_mover_kernel<__nv_bfloat16>, tma_mover_kernel<__half>, tma_mover_kernel<std::uint8_t>,
                  zero_pieces_kernel<__nv_bfloat16>, zero_pieces_kernel<__half>);
}

}  // namespace ovl::kernels
