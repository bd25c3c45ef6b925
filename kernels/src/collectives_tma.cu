// TMA (and SIMT comparison) collectives: kernel and launcher. See ovl/kernels/collectives.hpp for the model.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "collectives_device.cuh"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/collectives.hpp"
#include "ovl/kernels/wait.hpp"
#include "tma_ring.cuh"

namespace ovl::kernels {

namespace {

using detail::GroupRange;
using detail::Layout;
using detail::Piece;
using detail::SliceCursor;

constexpr CollectiveFlag kFlagStart = CollectiveFlag::kStart, kFlagRs = CollectiveFlag::kReduceScatter,
                         kFlagAg = CollectiveFlag::kAllGather;
// A TMA launch's block: warp 0, then the consumer warps (one; tma-pull with a reduce phase: pull_warps). Thread 0
// waits and signals the flags and produces every phase; thread 32 (kLead, warp 1's first) consumes the copy and push
// phases and stores pull-reduce's sums (see the TMA phases below).
constexpr unsigned kWarp = 32;
constexpr unsigned kLead = 32;
// Every TMA phase runs on one ring (PhaseRing): OVL_TMA_RING, else kDefaultTmaRing (4 x 48 KiB), stages 1 KiB aligned.
static_assert(kDefaultTmaRing.stages >= 2 && kDefaultTmaRing.stages <= kTmaMaxStages);
static_assert((1 + kTmaMaxStages) * sizeof(std::uint32_t) <= kTmaHeaderWordBytes, "PhaseRing's words fit the header");

enum class MoveKind { kOwnCopy, kPushReduce, kPullSum, kPushBcast, kPullCopy };

// Per-CTA state shared by the phases.
struct Cta {
  const CollectiveArguments* a;
  int slice;
  int* abort_flag;  // shared memory: set by the thread whose wait timed out
};

// Thread 0: wait until the flag word_of(p) of every peer p of `me` (all ranks except me) is >= target, then
// fence.proxy.async.global (the data these flags publish may be read by TMA next). On a timeout: report(p, seen),
// the abort flag set. Waits for nothing after an abort.
template <typename Word, typename WordOf, typename Report>
__device__ void wait_peer_words(const Cta& cta, int me, WordOf word_of, Word target, Report report) {
  const CollectiveArguments& a = *cta.a;
  if (*cta.abort_flag) return;
  const int n = a.world_size;
  for (int i = 1; i < n; ++i) {
    const int p = (me + i) % n;
    Word seen = 0;
    if (!spin_at_least(word_of(p), target, a.timeout_ns, nullptr, seen)) {  // each wait to its own timeout
      report(p, seen);
      *cta.abort_flag = 1;
      return;
    }
  }
  ptx::fence_proxy_async_global();
}

// Thread 0: wait for phase flag `kind` from every peer of `me`.
__device__ void wait_peers(const Cta& cta, CollectiveFlag kind, int me) {
  const CollectiveArguments& a = *cta.a;
  const WaitKind wk = kind == kFlagStart ? WaitKind::kStart
                      : kind == kFlagRs  ? WaitKind::kReduceScatterDone
                                         : WaitKind::kAllGatherDone;
  wait_peer_words(
      cta, me, [&](int p) { return a.flags[me] + collective_flag_index(kind, p, cta.slice); }, a.epoch,
      [&](int p, std::uint32_t seen) { record_timeout(a.error, wk, me, p, cta.slice, 0, seen, a.epoch); });
}

// The group flag of peer p in rank me's flags, this CTA's slice.
__device__ inline const std::uint64_t* peer_group_flag(const Cta& cta, int me, int p) {
  return collective_group_flags(cta.a->flags[me]) + collective_group_flag_index(p, cta.slice);
}

// Thread 0, the tma-push AllReduce (wk: kGroupReduceScatterDone) and AllGather with gathered counters (kGroupGathered):
// wait until every peer of `me` has done groups 0..g of this slice (its group flag >= (epoch << 32) | (g + 1)). A
// timeout records `wk`, group g and the groups of this call seen done.
__device__ void wait_peers_group(const Cta& cta, int g, int me, WaitKind wk) {
  const CollectiveArguments& a = *cta.a;
  const std::uint64_t target = collective_group_flag(a.epoch, std::uint32_t(g) + 1);
  wait_peer_words(
      cta, me, [&](int p) { return peer_group_flag(cta, me, p); }, target,
      [&](int p, std::uint64_t seen) {
        const std::uint32_t done = seen >> 32 == a.epoch ? std::uint32_t(seen) : 0u;  // an older call's: none
        record_timeout(a.error, wk, me, p, cta.slice, g, done, g + 1);
      });
}

// Thread 0: whether every peer of `me` has done groups 0..g of this slice already (one acquire load per peer, no wait).
__device__ bool peers_group_done(const Cta& cta, int g, int me) {
  const CollectiveArguments& a = *cta.a;
  const std::uint64_t target = collective_group_flag(a.epoch, std::uint32_t(g) + 1);
  for (int i = 1; i < a.world_size; ++i)
    if (ptx::ld_acquire_sys(peer_group_flag(cta, me, (me + i) % a.world_size)) < target) return false;
  return true;
}

// Thread 0: release `value` into the flag word_of(q) of every peer q of `me` (after all our writes completed).
template <typename Word, typename WordOf>
__device__ void signal_peer_words(const Cta& cta, int me, WordOf word_of, Word value) {
  const int n = cta.a->world_size;
  for (int i = 1; i < n; ++i) ptx::st_release_sys(word_of((me + i) % n), value);
}

// Thread 0: tell every peer of `me` that phase `kind` is done for this slice.
__device__ void signal_peers(const Cta& cta, CollectiveFlag kind, int me) {
  const CollectiveArguments& a = *cta.a;
  signal_peer_words(
      cta, me, [&](int q) { return a.flags[q] + collective_flag_index(kind, me, cta.slice); }, a.epoch);
}

// Thread 0: tell every peer of `me` that groups 0..g of this slice are done (the tma-push AllReduce: reduce-scattered;
// the AllGather with gathered counters: pushed to every peer).
__device__ void signal_peers_group(const Cta& cta, int g, int me) {
  const CollectiveArguments& a = *cta.a;
  signal_peer_words(
      cta, me, [&](int q) { return collective_group_flags(a.flags[q]) + collective_group_flag_index(me, cta.slice); },
      collective_group_flag(a.epoch, std::uint32_t(g) + 1));
}

// The issuing thread: the counter gate of group g for the ranks in `mask`. Returns false on timeout (abort flag set).
__device__ bool gate_group(const Cta& cta, int g, unsigned mask, int me) {
  const CollectiveArguments& a = *cta.a;
  if (a.expected == nullptr) return true;
  const std::uint32_t target = a.expected[g];
  for (int p = 0; p < a.world_size; ++p) {
    if (!(mask & (1u << p))) continue;
    std::uint32_t seen = 0;
    if (!spin_at_least(a.counters[p] + g, target, a.timeout_ns, nullptr, seen)) {
      record_timeout(a.error, WaitKind::kGroupCounter, me, p, cta.slice, g, seen, target);
      *cta.abort_flag = 1;
      return false;
    }
  }
  ptx::fence_proxy_async_global();
  return true;
}

// Everything a move needs to resolve a piece into addresses.
struct Move {
  MoveKind kind;
  int me;
  int owners[kMaxRanks];
  int num_owners;
  const unsigned char* gather_base[kMaxRanks];  // AG source per owner (src for AllGather, dst for AllReduce)
  bool gather_from_dst;
};

// Where a piece of a one-source move (every kind but pull-reduce) is loaded from.
__device__ inline const unsigned char* piece_src(const CollectiveArguments& a, const Move& m, const Piece& p) {
  if (m.kind == MoveKind::kPushBcast || m.kind == MoveKind::kPullCopy)
    return m.gather_base[m.kind == MoveKind::kPullCopy ? p.owner : m.me] +
           (m.gather_from_dst ? p.dst_offset : p.src_offset);
  return static_cast<const unsigned char*>(a.src[m.me]) + p.src_offset;
}

template <typename T>
__device__ void tail_op(const CollectiveArguments& a, const Move& m, const Piece& p) {
  const int n = a.world_size;
  const int elems = int(p.bytes / sizeof(T));
  auto src = [&](int r) { return reinterpret_cast<const T*>(static_cast<const unsigned char*>(a.src[r]) + p.src_offset); };
  auto dst = [&](int r) { return reinterpret_cast<T*>(static_cast<unsigned char*>(a.dst[r]) + p.dst_offset); };
  for (int i = 0; i < elems; ++i) {
    switch (m.kind) {
      case MoveKind::kOwnCopy: dst(m.me)[i] = src(m.me)[i]; break;
      case MoveKind::kPushReduce: ptx::red_add_sys(dst(p.owner) + i, src(m.me)[i]); break;
      case MoveKind::kPullSum: {
        float acc = 0.f;
        for (int r = 0; r < n; ++r) {
          const volatile T* s = src(r);
          acc += ptx::to_f32(const_cast<const T&>(s[i]));
        }
        dst(m.me)[i] = ptx::from_f32<T>(acc);
        break;
      }
      case MoveKind::kPushBcast: {
        const T v = reinterpret_cast<const T*>(piece_src(a, m, p))[i];
        for (int q = 0; q < n; ++q)
          if (q != m.me) dst(q)[i] = v;
        break;
      }
      case MoveKind::kPullCopy: {
        const volatile T* s = reinterpret_cast<const T*>(piece_src(a, m, p));
        dst(m.me)[i] = const_cast<const T&>(s[i]);
        break;
      }
    }
  }
}

__device__ inline unsigned counter_mask(const CollectiveArguments& a, const Move& m, int owner) {
  switch (m.kind) {
    case MoveKind::kPullSum: return (1u << a.world_size) - 1u;  // every rank's data of this group
    case MoveKind::kPullCopy: return 1u << owner;
    default: return 1u << m.me;  // our own data
  }
}

__device__ Move make_move(const CollectiveArguments& a, MoveKind kind, int me) {
  Move m{};
  m.kind = kind;
  m.me = me;
  const int n = a.world_size;
  const bool ar = a.op == Collective::kAllReduce;
  m.gather_from_dst = ar;
  for (int r = 0; r < n; ++r)
    m.gather_base[r] = ar ? static_cast<const unsigned char*>(a.dst[r]) : static_cast<const unsigned char*>(a.src[r]);
  switch (kind) {
    case MoveKind::kOwnCopy:
    case MoveKind::kPullSum:
    case MoveKind::kPushBcast:
      m.owners[0] = me;
      m.num_owners = 1;
      break;
    case MoveKind::kPushReduce:
    case MoveKind::kPullCopy:
      m.num_owners = 0;
      // dst_zeroed: our own piece is added like the peers' (no step-0 copy), after them in each group.
      for (int i = 1; i < n + (kind == MoveKind::kPushReduce && a.dst_zeroed ? 1 : 0); ++i)
        m.owners[m.num_owners++] = (me + i) % n;
      break;
  }
  return m;
}

// ---- the TMA phases ----
// A phase (step 0, 1 or 2 of collective_kernel, or one tile group of the push AllReduce's steps 1 and 2) runs the
// moves of every played rank back to back on one ring, so the pipeline drains only where the flags need it: at the
// phase's end. Roles:
//   copy and push phases: warp-specialized. Thread 0 is the producer: per piece, the counter gate of its group (when
//     gated; blocking, the consumer drains what is in flight meanwhile), a tail (< 16 bytes) with plain loads/stores,
//     else wait empty[s] (the stage's previous use), arrive.expect_tx on full[s], the bulk load. Thread 32 is the
//     consumer: per unit, wait full[s], the unit's bulk stores / reduce-adds, commit, then, once wait_group.read 1 says
//     the previous unit's group has read its stage, hand that stage back on empty[] (one group of lag, so it never
//     waits on the group it just issued; the producer runs up to S - 1 units ahead). Neither touches a stage with
//     ordinary loads or stores. Why two threads: one thread driving both the loads and the stores/adds runs a long
//     dependent instruction chain per unit (tma-push moved 68-71 GB/s per CTA that way, the bare ring 96-120).
//   pull-reduce: the same split, with summing warps between. A unit is one stage of W slots of stage/W bytes, slot r
//     loaded from rank r. Thread 0 produces as above (gates, tails, wait empty[s], arm full[s] with W x slot bytes,
//     the W bulk loads); warp 0's other lanes wait for it at __syncwarp. Per unit every consumer (warps
//     1..pull_warps) waits full[s] and sums its 16-byte vectors in fp32 in rank order 0..W-1 into slot 0
//     (deterministic, whatever the warp and CTA counts), then fence.proxy.async.shared::cta and named barrier 1 (the
//     consumers only); the consumers' first thread (the leader, thread 32) bulk-stores slot 0 and commits. Every
//     consumer hands the stage back itself: the others arrive on empty[s] right after the barrier (their reads and
//     writes of it are done), the leader once wait_group.read 1 says the previous unit's store has read its stage.
//     So the refill is ordered after each reader's own arrival. (compute-sanitizer racecheck follows an mbarrier
//     arrival only for the thread that arrives, not one passed on through __syncwarp, as a probe kernel showed on
//     the H200; one arrival per reader costs nothing measurable there.) The leader's warp waits for it at __syncwarp: no lane
//     of a warp spins on an mbarrier while another lane of that warp must make progress (lanes parked at a hardware
//     barrier such as __syncthreads or __syncwarp are fine). Why the split: a leader that also gated and issued every
//     load ran a serial chain per unit that held the summing warps at the barrier (12-19 GB/s per CTA for 2-8 warps).
// A gate that times out sets the abort flag, marks the first unissued unit's stage aborted (stage_aborted) and
// completes that unit's full[] phase without a load (abort_at); the consumers stop there (all at the same unit: a
// unit either is issued, and its loads complete, or never is), so no bulk load into shared memory is outstanding at
// the kernel's end. At the phase's end thread 32, which issued every bulk write, waits for them all (wait_group 0),
// hands the last stage back, fences and publishes the ring's unit count; the barrier after it hands all that to
// thread 0, which releases the phase's flags. The flags thread 0 acquired before a phase reach its own TMA loads
// through its fence.proxy.async.global, and thread 32's TMA ops through the barrier and thread 32's own
// fence.proxy.async.global.

// The phases' ring (TmaRing, tma_ring.cuh): its readers are the consumer threads (every thread after warp 0; thread
// 32, which issued a unit's stores, arrives for all of them in the copy and push phases, each consumer for itself in
// pull-reduce); each phase continues the unit count of the phases before it. Its words: consumed (the units of the
// phases so far, published by thread 32 at a phase's end), then stage_aborted[num_stages] (1 once a gate timed out
// before the unit that uses the stage next: abort_at; 0 until then).
struct PhaseRing : TmaRing {
  __device__ std::uint32_t* consumed() const { return words(); }
  __device__ std::uint32_t* stage_aborted() const { return words() + 1; }
  // One thread, before the block's first barrier: the ring's barriers, no unit consumed, no stage aborted.
  __device__ void init() const {
    TmaRing::init();
    for (std::uint32_t w = 0; w <= num_stages; ++w) words()[w] = 0;
  }
  // Consumer: wait for unit i's loads; false when unit i was never issued (a gate timed out: the producer then
  // completes unit i's phase of full[s] without loads after marking stage s aborted). The mark is read only after
  // the wait, and written only after unit i - S, the stage's previous use, was handed back by every reader, so no
  // consumer reads it while the producer may write it, and none polls it.
  __device__ bool wait_issued(std::uint32_t i) const {
    TmaRing::wait_full(i);
    return stage_aborted()[i % num_stages] == 0;
  }
  // Producer, when a gate timed out before unit i: wait until unit i's stage is free (unit i - S consumed, so full[s]
  // holds no phase a consumer still waits for), mark it aborted, then complete its phase for unit i without a load.
  __device__ void abort_at(std::uint32_t i) const {
    acquire(i);
    stage_aborted()[i % num_stages] = 1;
    ptx::mbar_arrive(full_bar(i));
  }
};

// The pieces of one phase for this CTA: the moves of the played ranks r0..r1 in turn, each over the tile groups
// `groups`, cut into pieces of at most piece_bytes. Every role walks its own copy, so all see the same pieces in the
// same order. Not copyable: the cursor points into `move`.
struct PhaseWalk {
  const CollectiveArguments& a;
  MoveKind kind;
  int slice, me, end;
  GroupRange groups;
  std::uint32_t piece_bytes;
  Move move;  // the move of the piece next() returned last
  SliceCursor cur;

  __device__ PhaseWalk(const CollectiveArguments& args, MoveKind k, int r0, int r1, GroupRange g, int s,
                       std::uint32_t bytes)
      : a(args), kind(k), slice(s), me(r0), end(r1), groups(g), piece_bytes(bytes) {
    open();
  }
  PhaseWalk(const PhaseWalk&) = delete;
  PhaseWalk& operator=(const PhaseWalk&) = delete;

  __device__ bool next(Piece& p) {
    while (!cur.next(p)) {
      if (++me >= end) return false;
      open();
    }
    return true;
  }

 private:
  __device__ void open() {
    move = make_move(a, kind, me);
    const Layout layout{a.ranges,      a.list_begin,       a.num_groups,      a.world_size,
                        a.chunk_bytes, a.src_owner_stride, a.dst_owner_stride};
    cur = SliceCursor{layout, move.owners, move.num_owners, slice, a.num_ctas, piece_bytes, groups};
  }
};

// The issuer's counter gates (a.expected != null): before the first piece of each group of each move (pull-copy: of
// each owner too). pass() is false when a gate timed out (abort flag set, error recorded).
struct Gate {
  int me = -1, group = -1, owner = -1;
  __device__ bool pass(const Cta& cta, const Move& m, const Piece& p) {
    const CollectiveArguments& a = *cta.a;
    if (a.expected == nullptr ||
        (m.me == me && p.group == group && (m.kind != MoveKind::kPullCopy || p.owner == owner)))
      return true;
    me = m.me;
    group = p.group;
    owner = p.owner;
    return gate_group(cta, p.group, counter_mask(a, m, p.owner), m.me);
  }
};

// Consumer: the bulk stores / reduce-adds of one unit from `stage` (the caller commits them as one group).
template <typename T>
__device__ void store_unit(const CollectiveArguments& a, const Move& m, const Piece& p, const unsigned char* stage) {
  const int n = a.world_size;
  switch (m.kind) {
    case MoveKind::kOwnCopy:
    case MoveKind::kPullCopy:
      ptx::bulk_store(static_cast<unsigned char*>(a.dst[m.me]) + p.dst_offset, stage, p.bytes);
      break;
    case MoveKind::kPushReduce:
      ptx::bulk_reduce_add<T>(static_cast<unsigned char*>(a.dst[p.owner]) + p.dst_offset, stage, p.bytes);
      break;
    case MoveKind::kPushBcast:
      for (int i = 1; i < n; ++i)
        ptx::bulk_store(static_cast<unsigned char*>(a.dst[(m.me + i) % n]) + p.dst_offset, stage, p.bytes);
      break;
    case MoveKind::kPullSum:
      break;  // pull_sum_phase stores its sums
  }
}

// Thread 32 at a phase's end, units first..end - 1 consumed: every bulk write performed and fenced for the generic
// release (publish_bulk_writes), the last stage handed back, this thread's writes ordered before thread 0's release
// after the barrier (as the SIMT mover's stores; thread 0's own tails are ordered by its release), then the ring's
// unit count for the next phase.
__device__ void end_phase(const PhaseRing& ring, std::uint32_t first, std::uint32_t end, std::uint32_t count) {
  publish_bulk_writes();
  if (end > first) ring.release(end - 1, count);
  __threadfence_system();
  *ring.consumed() = end;
}

// Thread 0, every phase's producer: per piece of `walk` (units first.. of the ring), the counter gate of its group
// (when gated), a tail with plain loads/stores, else wait empty[s], arm full[s] with the unit's bytes and issue its
// bulk loads (pull-reduce: W, slot r from rank r; else one). A gate that times out ends the production at the next
// unit (abort_at).
template <typename T>
__device__ void produce_phase(const Cta& cta, const PhaseRing& ring, PhaseWalk& walk, std::uint32_t first) {
  const CollectiveArguments& a = *cta.a;
  const int n = a.world_size;
  const std::uint32_t slot = pull_slot_bytes(ring.stage_bytes, n);  // pull-reduce only
  Gate gate;
  Piece p{};
  std::uint32_t i = first;
  while (walk.next(p)) {
    if (!gate.pass(cta, walk.move, p)) {
      ring.abort_at(i);
      return;
    }
    if (p.tail) {
      tail_op<T>(a, walk.move, p);
      continue;
    }
    ring.acquire(i);
    // The ring's loads written out here (not TmaRing::arm / load / issue): with them the phase lambda of
    // collective_kernel<bf16 / f16> is no longer inlined and the kernel takes 154 registers instead of 89.
    std::uint64_t* full = ring.full_bar(i);
    unsigned char* stage = ring.stage(i);
    if (walk.kind == MoveKind::kPullSum) {
      ptx::mbar_arrive_expect_tx(full, std::uint32_t(n) * p.bytes);
      for (int r = 0; r < n; ++r)
        ptx::bulk_load(stage + std::uint32_t(r) * slot, static_cast<const unsigned char*>(a.src[r]) + p.src_offset,
                       p.bytes, full);
    } else {
      ptx::mbar_arrive_expect_tx(full, p.bytes);
      ptx::bulk_load(stage, piece_src(a, walk.move, p), p.bytes, full);
    }
    ++i;
  }
}

// A copy or push phase (see above): thread 0 produces, thread 32 consumes; units first.. of the ring.
template <typename T>
__device__ void split_phase(const Cta& cta, const PhaseRing& ring, MoveKind kind, int r0, int r1, GroupRange groups,
                            std::uint32_t first) {
  const unsigned tid = threadIdx.x;
  if (tid != 0 && tid != kLead) return;  // the other lanes wait at the phase's end
  const CollectiveArguments& a = *cta.a;
  PhaseWalk walk(a, kind, r0, r1, groups, cta.slice, ring.stage_bytes);
  if (tid == 0) {
    produce_phase<T>(cta, ring, walk, first);
    return;
  }
  // ---- consumer ----
  ptx::fence_proxy_async_global();  // our bulk stores / adds come after the flags thread 0 acquired
  Piece p{};
  std::uint32_t i = first;
  while (walk.next(p)) {
    if (p.tail) continue;           // the producer's
    if (!ring.wait_issued(i)) break;  // never issued: a gate timed out
    store_unit<T>(a, walk.move, p, ring.stage(i));
    ptx::bulk_commit();
    ring.retire_previous(i, first, ring.readers);
    ++i;
  }
  end_phase(ring, first, i, ring.readers);
}

// A pull-reduce phase (see above): thread 0 produces, warps 1.. sum, thread 32 stores; units first.. of the ring.
template <typename T>
__device__ void pull_sum_phase(const Cta& cta, const PhaseRing& ring, int r0, int r1, GroupRange groups,
                               std::uint32_t first) {
  const unsigned tid = threadIdx.x;
  const CollectiveArguments& a = *cta.a;
  const int n = a.world_size;
  const std::uint32_t slot = pull_slot_bytes(ring.stage_bytes, n);
  if (tid < kWarp) {  // ---- producer ----
    if (tid == 0) {
      PhaseWalk feed(a, MoveKind::kPullSum, r0, r1, groups, cta.slice, slot);
      produce_phase<T>(cta, ring, feed, first);
    }
    __syncwarp();  // warp 0's other lanes wait for thread 0 here, not at the phase's end beside it
    return;
  }
  // ---- consumers; the leader stores ----
  const bool leader = tid == kLead;
  const unsigned consumers = blockDim.x - kWarp;
  PhaseWalk walk(a, MoveKind::kPullSum, r0, r1, groups, cta.slice, slot);
  if (leader) ptx::fence_proxy_async_global();  // our bulk stores come after the flags thread 0 acquired
  Piece p{};
  std::uint32_t i = first;
  while (walk.next(p)) {
    if (p.tail) continue;           // the producer's
    if (!ring.wait_issued(i)) break;  // never issued: a gate timed out (every consumer stops at the same unit)
    unsigned char* stage = ring.stage(i);
    sum_slots<T>(stage, slot, n, int(p.bytes / 16), int(tid - kWarp), int(consumers));  // into slot 0, fenced
    consumer_sync(consumers);  // every consumer is done with stage i (and waited on its phase)
    if (leader) {
      ptx::bulk_store(static_cast<unsigned char*>(a.dst[walk.move.me]) + p.dst_offset, stage, p.bytes);
      ptx::bulk_commit();
      ring.retire_previous(i, first, 1);  // to the producer, which refills it with unit i + S - 1
    } else {
      ring.release(i, 1);  // this thread's reads and writes of stage i are done
    }
    __syncwarp();
    ++i;
  }
  if (leader) end_phase(ring, first, i, 1);
  __syncwarp();
}

template <typename T>
__device__ void tma_phase(const Cta& cta, const PhaseRing& ring, MoveKind kind, int r0, int r1, GroupRange groups,
                          std::uint32_t first) {
  if (kind == MoveKind::kPullSum) {
    pull_sum_phase<T>(cta, ring, r0, r1, groups, first);
  } else {
    split_phase<T>(cta, ring, kind, r0, r1, groups, first);
  }
}

// ---- the SIMT mover: the whole block, 16-byte loads/stores through L2 (peer data is never cached in L1) ----
template <typename T>
__device__ void simt_move(const Cta& cta, const Move& m, GroupRange groups) {
  const CollectiveArguments& a = *cta.a;
  const int n = a.world_size;
  const Layout layout{a.ranges, a.list_begin, a.num_groups, n, a.chunk_bytes, a.src_owner_stride, a.dst_owner_stride};
  SliceCursor cur{layout, m.owners, m.num_owners, cta.slice, a.num_ctas, 1u << 30, groups};
  int gated_group = -1, gated_owner = -1;
  Piece p{};
  constexpr int kE = ptx::Vec16<T>::kElems;
  while (cur.next(p)) {
    if (a.expected != nullptr && (p.group != gated_group || (m.kind == MoveKind::kPullCopy && p.owner != gated_owner))) {
      // After an abort (an earlier move's gate) no gate waits again. Thread 0 hands its answer to every thread
      // through the barrier itself, so no thread reads the abort flag while thread 0 may set it at the next gate.
      const bool passed =
          threadIdx.x != 0 || (!*cta.abort_flag && gate_group(cta, p.group, counter_mask(a, m, p.owner), m.me));
      if (__syncthreads_or(!passed)) return;
      gated_group = p.group;
      gated_owner = p.owner;
    }
    if (p.tail) {
      if (threadIdx.x == 0) tail_op<T>(a, m, p);
      continue;
    }
    const int nvec = int(p.bytes / 16);
    auto src_vec = [&](int r) {
      return reinterpret_cast<const uint4*>(static_cast<const unsigned char*>(a.src[r]) + p.src_offset);
    };
    auto dst_vec = [&](int r) { return reinterpret_cast<uint4*>(static_cast<unsigned char*>(a.dst[r]) + p.dst_offset); };
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
      switch (m.kind) {
        case MoveKind::kOwnCopy: dst_vec(m.me)[v] = __ldcg(src_vec(m.me) + v); break;
        case MoveKind::kPullSum: {
          float acc[kE];
          ptx::Vec16<T>::set(acc, uint4{});  // from +0.0, as every sum (sum_slots)
          for (int r = 0; r < n; ++r) ptx::Vec16<T>::add(acc, __ldcg(src_vec(r) + v));
          dst_vec(m.me)[v] = ptx::Vec16<T>::pack(acc);
          break;
        }
        case MoveKind::kPushBcast: {
          const uint4 x = __ldcg(reinterpret_cast<const uint4*>(piece_src(a, m, p)) + v);
          for (int i = 1; i < n; ++i) dst_vec((m.me + i) % n)[v] = x;
          break;
        }
        case MoveKind::kPullCopy:
          dst_vec(m.me)[v] = __ldcg(reinterpret_cast<const uint4*>(piece_src(a, m, p)) + v);
          break;
        case MoveKind::kPushReduce: break;  // not a SIMT move (can_implement refuses)
      }
    }
  }
  __threadfence_system();  // our stores before thread 0's release
}

// grid: num_ctas CTAs, CTA c = slice c (of every owner's ranges, for every played rank).
// block: TMA: warp 0 and one consumer warp (64 threads), or warp 0 and pull_warps consumer warps for tma-pull with a
//        reduce phase (roles: the TMA phases above); SIMT: simt_threads.
// shared: kTmaHeaderBytes + stages * stage_bytes (TMA), none (SIMT).
// arch: sm_90 (cp.async.bulk, cp.reduce.async.bulk, mbarrier expect_tx).
// Ordering: each phase ends with cp.async.bulk.wait_group 0 by the thread that issued its bulk writes (writes
// performed) and a fence, a barrier, then thread 0's st.release.sys into every peer's flags (collectives.hpp): the
// epoch into the phase flag [kind][me][slice], or (epoch << 32) | (g + 1) into the group flag [me][slice] once
// group g is reduce-scattered; a waiter (thread 0) does ld.acquire.sys until >= the value it needs, then
// fence.proxy.async.global, and so does every other thread that issues TMA ops, after the barrier, before its first.
// Steps (per slice; a phase runs the played ranks' moves back to back):
//   step 0: out-of-place push reduce: copy our own chunk to dst (not for a push onto zeroed destinations,
//           dst_zeroed: step 1 adds it); signal START (our buffers are ready). An out-of-place AllGather copies its
//           own chunk in step 2, group by group, so that a gate (a.expected) of a later group never holds back START.
//   step 1 (RS, push; ReduceScatter): wait START of every owner; cp.reduce.async.bulk our src[R_r] into dst_r[R_r];
//                      signal RS.
//   step 1 (RS, pull): wait START of every rank; load src_p[R_me] for p = 0..N-1, add in fp32 in that order,
//                      store dst_me[R_me]; signal RS (we are done reading your src). Wait RS from every peer.
//   step 2 (AG, push; AllGather): wait START of every peer; (out of place) copy our own R_me; store our R_me to
//                      every peer; signal AG.
//   step 2 (AG, pull): (AllGather: wait START of every owner; out of place, copy our own R_me) load R_r of every
//                      owner into dst_me; signal AG.
//   steps 1 and 2 (push AllReduce), tile group by tile group: wait START of every peer; then for g = 0..G: (g < G)
//                      push-reduce group g as step 1 does and signal its group flag; (g > 0) wait until every peer's
//                      group flag says group g - 1 is done (its adds into our R_me(g - 1) performed, its reads of
//                      its src there done) and store our R_me(g - 1) to every peer. The gather runs one group behind
//                      the reduce-scatter, so its wait is usually met by then. Then signal AG.
//   step 2 with gathered counters (AllGather), tile group by tile group (our own R_me(g) copied first, out of
//                      place): push: store our R_me(g) to every peer and
//                      signal its group flag; then raise gathered[me][h] for each group h not raised yet whose flag
//                      every peer has signalled: waiting (timeout: kGroupGathered) for h <= g - 1, one group behind
//                      as above (the last group: for every group), only looking for h = g. pull: load R_r(g) of
//                      every owner into dst_me; then raise gathered[me][g]. Thread 0 raises (red.release.sys) after
//                      the phase's boundary, so after thread 32's wait_group 0 and fence as a flag is; our own rows
//                      of group g were copied in the phase before. Then signal AG.
//   exit: wait the last phase's flag from every peer (no peer still touches our buffers).
template <typename T>
__global__ void collective_kernel(const __grid_constant__ CollectiveArguments a, int num_stages,
                                  std::uint32_t stage_bytes) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ int abort_flag;
  // abort_flag as thread 0 saw it at the last phase boundary: written only between a boundary's two barriers and read
  // only after them, so no thread reads it while thread 0 may write it (abort_flag itself is written during phases).
  __shared__ int abort_seen;
  const bool tma = a.algo != CommAlgo::kSimt;
  const bool push = a.algo == CommAlgo::kTmaPush;
  const bool gathered = a.gathered[a.first_rank] != nullptr;  // AllGather, tma-push or tma-pull (can_implement)
  if (threadIdx.x == 0) abort_flag = abort_seen = 0;
  Cta cta{&a, int(blockIdx.x), &abort_flag};
  const PhaseRing ring{{smem, std::uint32_t(num_stages), stage_bytes, blockDim.x - kWarp}};
  if (tma && threadIdx.x == 0) ring.init();
  __syncthreads();

  const bool in_place = a.src[a.first_rank] == a.dst[a.first_rank];
  const bool has_rs = a.op != Collective::kAllGather;
  const bool has_ag = a.op != Collective::kReduceScatter;
  const int r0 = a.first_rank, r1 = a.first_rank + a.num_played_ranks;
  const int num_groups = a.num_groups;
  const GroupRange all_groups{0, num_groups};

  std::uint32_t units = 0;  // ring units of the phases so far: every thread's copy of *ring.consumed()
  // One phase over the tile groups `groups`: every played rank's move. Called right after a phase boundary (see
  // abort_seen).
  auto run_phase = [&](MoveKind kind, GroupRange groups) {
    if (abort_seen) return;
    if (tma) {
      tma_phase<T>(cta, ring, kind, r0, r1, groups, units);
    } else {
      for (int me = r0; me < r1; ++me) simt_move<T>(cta, make_move(a, kind, me), groups);
    }
  };
  // A phase boundary: every thread's part of the phase done (SIMT: stored and fenced; TMA: end_phase), then thread
  // 0's signals and waits (`flags`) and its note of the abort flag for the next phase.
  auto boundary = [&](auto&& flags) {
    __syncthreads();
    if (tma) units = *ring.consumed();
    if (threadIdx.x == 0) {
      flags();
      abort_seen = abort_flag;
    }
    __syncthreads();
  };
  // End of a phase: all writes performed, then release to the peers; then (optionally) wait for theirs.
  auto finish_phase = [&](CollectiveFlag kind, bool wait) {
    boundary([&] {
      if (!abort_flag)
        for (int me = r0; me < r1; ++me) signal_peers(cta, kind, me);
      if (wait)
        for (int me = r0; me < r1; ++me) wait_peers(cta, kind, me);
    });
  };
  auto wait_all = [&](CollectiveFlag kind) {
    boundary([&] {
      for (int me = r0; me < r1; ++me) wait_peers(cta, kind, me);
    });
  };
  // Thread 0 in the boundary after group g's phase, with gathered counters: raise gathered[me][h] of every played
  // rank for the groups h <= g not raised yet, in order, once their rows are in every played rank's dst: pull, our
  // own writes (the phases before the boundary); push, every peer's group flag of h, waited for when h < g (one group
  // behind; after the last group, every group), only looked at for h = g (stopping there when it is not done yet).
  // Nothing after an abort: the GEMM's wait then times out.
  int raised = 0;  // thread 0's: groups raised so far
  auto raise_gathered = [&](int g) {
    const int upto = g + 1, wait_below = upto < num_groups ? g : num_groups;
    for (; raised < upto && !abort_flag; ++raised) {
      bool here = true;
      for (int me = r0; push && here && me < r1; ++me) {
        if (raised < wait_below)
          wait_peers_group(cta, raised, me, WaitKind::kGroupGathered);
        else
          here = peers_group_done(cta, raised, me);
      }
      if (!here || abort_flag) return;
      for (int me = r0; me < r1; ++me) ptx::red_release_sys_add(a.gathered[me] + raised, 1u);
    }
  };

  // step 0 (dst_zeroed: a push adds our own piece in step 1 instead)
  if (!in_place && push && has_rs && !a.dst_zeroed) run_phase(MoveKind::kOwnCopy, all_groups);
  finish_phase(kFlagStart, false);

  // steps 1 and 2 of the push AllReduce, group by group
  if (push && a.op == Collective::kAllReduce) {
    wait_all(kFlagStart);
    for (int g = 0; g <= num_groups; ++g) {
      if (g < num_groups) run_phase(MoveKind::kPushReduce, GroupRange{g, g + 1});
      boundary([&] {
        if (g < num_groups && !abort_flag)
          for (int me = r0; me < r1; ++me) signal_peers_group(cta, g, me);
        if (g > 0)
          for (int me = r0; me < r1; ++me) wait_peers_group(cta, g - 1, me, WaitKind::kGroupReduceScatterDone);
      });
      if (g == 0) continue;
      run_phase(MoveKind::kPushBcast, GroupRange{g - 1, g});
      if (g < num_groups) boundary([] {});  // the last gather's is finish_phase's
    }
    finish_phase(kFlagAg, true);
    return;
  }
  // step 1
  if (has_rs) {
    wait_all(kFlagStart);
    run_phase(push ? MoveKind::kPushReduce : MoveKind::kPullSum, all_groups);
    finish_phase(kFlagRs, true);
  }
  // step 2
  if (has_ag) {
    if (!has_rs) wait_all(kFlagStart);
    // With gathered counters one phase per group (a boundary after each, to raise its counters), else one phase; an
    // out-of-place AllGather's own copy of those groups in the phase before.
    const bool own_copy = !in_place && a.op == Collective::kAllGather;
    for (int g = 0; g < (gathered ? num_groups : 1); ++g) {
      const GroupRange groups = gathered ? GroupRange{g, g + 1} : all_groups;
      if (own_copy) {
        run_phase(MoveKind::kOwnCopy, groups);
        boundary([] {});
      }
      run_phase(push ? MoveKind::kPushBcast : MoveKind::kPullCopy, groups);
      if (gathered)
        boundary([&] {
          if (push && !abort_flag)
            for (int me = r0; me < r1; ++me) signal_peers_group(cta, g, me);
          raise_gathered(g);
        });
    }
    finish_phase(kFlagAg, true);
  }
}

// The ring of every TMA phase (a pull-reduce unit splits a stage into W slots); {0, 0} for SIMT.
TmaRingShape ring_shape(const CollectiveArguments& a) {
  return a.algo == CommAlgo::kSimt ? TmaRingShape{0, 0} : tma_ring_shape();
}

// Threads per CTA (collective_kernel's block): warp 0 and the consumer warps for TMA.
int block_threads(const CollectiveArguments& a) {
  if (a.algo == CommAlgo::kSimt) return a.simt_threads;
  const bool sums = a.algo == CommAlgo::kTmaPull && a.op != Collective::kAllGather;
  return int(kWarp) * (1 + (sums ? a.pull_warps : 1));
}

template <typename T>
void launch_typed(const CollectiveArguments& a, cudaStream_t stream) {
  const TmaRingShape shape = ring_shape(a);
  const std::size_t smem = CollectiveKernel::shared_bytes(a);
  // The ring shape is fixed for the process (tma_ring_shape), so every launch passes the same size.
  if (smem > 48 * 1024) opt_in_dynamic_shared_memory(collective_kernel<T>, int(smem));
  collective_kernel<T><<<a.num_ctas, block_threads(a), smem, stream>>>(a, shape.stages, shape.stage_bytes);
  OVL_CUDA_CHECK_LAST();
}

}  // namespace

std::size_t CollectiveKernel::shared_bytes(const CollectiveArguments& args) {
  if (args.algo == CommAlgo::kSimt) return 0;
  const TmaRingShape shape = ring_shape(args);
  return kTmaHeaderBytes + std::size_t(shape.stages) * shape.stage_bytes;
}

std::string CollectiveKernel::can_implement(const CollectiveArguments& a) {
  if (!is_kernel_algo(a.algo)) return fmt::format("algo = {}: the kernels run tma-push, tma-pull or simt", to_string(a.algo));
  if (a.dtype != DType::kBF16 && a.dtype != DType::kFP16 && a.dtype != DType::kFP32)
    return fmt::format("dtype = {}: the collectives move bf16, fp16 or fp32", to_string(a.dtype));
  const std::size_t es = dtype_bytes(a.dtype);
  if (a.world_size < 1 || a.world_size > kMaxRanks) return fmt::format("world_size = {} is not in 1..{}", a.world_size, kMaxRanks);
  if (a.num_played_ranks < 1 || a.first_rank < 0 || a.first_rank + a.num_played_ranks > a.world_size)
    return fmt::format("played ranks [{}, {}) are not within the world of {}", a.first_rank,
                       a.first_rank + a.num_played_ranks, a.world_size);
  if (a.num_ctas < 1 || a.num_ctas > kMaxCollectiveCtas) return fmt::format("num_ctas = {} is not in 1..{}", a.num_ctas, kMaxCollectiveCtas);
  // 512: the collective kernel needs about 100 registers per thread.
  if (a.algo == CommAlgo::kSimt && (a.simt_threads < 32 || a.simt_threads > 512 || a.simt_threads % 32 != 0))
    return fmt::format("simt_threads = {} is not a multiple of 32 in 32..512", a.simt_threads);
  if (a.algo == CommAlgo::kTmaPull && (a.pull_warps < 1 || a.pull_warps > 8))
    return fmt::format("pull_warps = {} is not in 1..8", a.pull_warps);
  if (a.error == nullptr) return "error = null: the collective needs a device-visible error record";
  if (a.timeout_ns == 0) return "timeout_ns = 0";
  if (a.epoch == 0) return "epoch = 0: epochs start at 1 (flags are zeroed)";
  if (a.num_groups < 1) return fmt::format("num_groups = {} < 1", a.num_groups);
  if (a.ranges == nullptr && a.num_groups != 1) return fmt::format("num_groups = {} needs a range table", a.num_groups);
  if (a.ranges != nullptr && a.list_begin == nullptr) return "ranges given without list_begin";
  if (a.dst_zeroed && (a.algo != CommAlgo::kTmaPush || a.op == Collective::kAllGather || a.src[0] == a.dst[0]))
    return fmt::format("dst_zeroed = true needs tma-push ReduceScatter or AllReduce out of place (got {} {}{})",
                       to_string(a.algo), to_string(a.op), a.src[0] == a.dst[0] ? " in place" : "");
  for (int r = 0; r < a.world_size; ++r) {
    if (a.src[r] == nullptr || a.dst[r] == nullptr || a.flags[r] == nullptr)
      return fmt::format("src, dst or flags pointer of rank {} is null", r);
    if (reinterpret_cast<std::uintptr_t>(a.flags[r]) % alignof(std::uint64_t) != 0)
      return fmt::format("flags of rank {} ({}) are not 8-byte aligned (the group flags are 64-bit words)", r,
                         fmt::ptr(a.flags[r]));
    if (reinterpret_cast<std::uintptr_t>(a.src[r]) % 16 != 0 || reinterpret_cast<std::uintptr_t>(a.dst[r]) % 16 != 0)
      return fmt::format("src or dst of rank {} is not 16-byte aligned (TMA)", r);
    if ((a.src[r] == a.dst[r]) != (a.src[0] == a.dst[0])) return fmt::format("rank {} is in place but rank 0 is not (or the reverse)", r);
    if (a.expected != nullptr && a.counters[r] == nullptr) return fmt::format("expected given but counters[{}] is null", r);
  }
  if (std::any_of(a.gathered, a.gathered + kMaxRanks, [](const std::uint32_t* c) { return c != nullptr; })) {
    if (a.op != Collective::kAllGather || (a.algo != CommAlgo::kTmaPush && a.algo != CommAlgo::kTmaPull))
      return fmt::format("gathered counters need an AllGather with tma-push or tma-pull (got {} {})", to_string(a.op),
                         to_string(a.algo));
    for (int r = a.first_rank; r < a.first_rank + a.num_played_ranks; ++r) {
      if (a.gathered[r] == nullptr)
        return fmt::format("gathered counters given but gathered[{}] (a played rank's) is null", r);
      if (reinterpret_cast<std::uintptr_t>(a.gathered[r]) % alignof(std::uint32_t) != 0)
        return fmt::format("gathered[{}] ({}) is not 4-byte aligned", r, fmt::ptr(a.gathered[r]));
    }
  }
  if (a.ranges == nullptr) {
    if (a.chunk_bytes % es != 0) return fmt::format("chunk_bytes = {} is not a multiple of the {}-byte element", a.chunk_bytes, es);
    if (a.src_owner_stride % 16 != 0 || a.dst_owner_stride % 16 != 0)
      return fmt::format("owner strides {} / {} are not multiples of 16 bytes", a.src_owner_stride, a.dst_owner_stride);
    const std::uint64_t last = std::uint64_t(a.world_size - 1);
    if (a.src_bytes < last * a.src_owner_stride + a.chunk_bytes)
      return fmt::format("src_bytes = {} < {} needed", a.src_bytes, last * a.src_owner_stride + a.chunk_bytes);
    if (a.dst_bytes < last * a.dst_owner_stride + a.chunk_bytes)
      return fmt::format("dst_bytes = {} < {} needed", a.dst_bytes, last * a.dst_owner_stride + a.chunk_bytes);
  }
  return {};
}

void CollectiveKernel::run(const CollectiveArguments& args, void* /*workspace*/, cudaStream_t stream) {
  const std::string why = can_implement(args);
  OVL_CHECK(why.empty(), "collective {} {} {}: {}", to_string(args.op), to_string(args.algo), to_string(args.dtype), why);
  switch (args.dtype) {
    case DType::kBF16: launch_typed<__nv_bfloat16>(args, stream); break;
    case DType::kFP16: launch_typed<__half>(args, stream); break;
    case DType::kFP32: launch_typed<float>(args, stream); break;
    case DType::kE4M3:
    case DType::kE5M2: break;  // refused by can_implement above
  }
}

// ---- local copies for the bandwidth-per-CTA measurement ----
namespace {

// The pieces of a local copy one CTA moves: the first `body` bytes (a multiple of 16) in pieces of at most
// `piece_bytes`. kInterleaved: CTA c of G moves pieces c, c + G, c + 2G, ... of the whole body, so the CTAs stream
// through one window of G pieces at a time (as cudaMemcpy's grid-stride kernel does); kSlices: CTA c moves the c-th
// contiguous slice (16-byte units split evenly, 4 KB aligned: slice_bound) piece by piece.
struct LocalPieces {
  std::uint64_t begin, end, stride, count;  // piece k: [begin + k * stride, + piece_bytes) clipped at end
  std::uint32_t piece_bytes;

  __device__ LocalPieces(std::uint64_t body, std::uint32_t piece, bool interleaved) : piece_bytes(piece) {
    const auto c = std::uint64_t(blockIdx.x), g = std::uint64_t(gridDim.x);
    if (interleaved) {
      const std::uint64_t total = (body + piece - 1) / piece;
      begin = c * piece;
      end = body;
      stride = g * piece;
      count = total > c ? (total - c + g - 1) / g : 0;
    } else {
      begin = detail::slice_bound(body / 16, int(c), int(g)) * 16;
      end = detail::slice_bound(body / 16, int(c) + 1, int(g)) * 16;
      stride = piece;
      count = (end - begin + piece - 1) / piece;
    }
  }
  __device__ std::uint32_t at(std::uint64_t k, std::uint64_t& off) const {
    off = begin + k * stride;
    return std::uint32_t(std::min<std::uint64_t>(piece_bytes, end - off));
  }
};

// grid: num_ctas, each CTA moves its LocalPieces; block: 64. reduce: dst += src (bf16, cp.reduce.async.bulk
// .add.noftz) instead of dst = src. shared: kTmaHeaderBytes + stages * stage_bytes. sm_90. No cross-CTA ordering.
// As the collectives' copy phases, on a TmaRing (no gates: no abort marks): thread 0 loads (wait empty[s], arm
// full[s], bulk load), thread 32 stores or reduce-adds (wait full[s], the bulk write, commit; once wait_group.read 1
// says the previous piece's write has read its stage, hand that stage back on empty[]). The last CTA copies a tail of
// < 16 bytes (copies only: a reduce needs bytes % 16 == 0) with plain loads/stores.
__global__ void tma_ring_kernel(unsigned char* dst, const unsigned char* src, std::uint64_t bytes, int stages,
                                std::uint32_t stage_bytes, bool reduce, bool interleaved) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned tid = threadIdx.x;
  const std::uint64_t body = bytes / 16 * 16;
  const LocalPieces pieces(body, stage_bytes, interleaved);
  if (tid == 0 && !reduce && blockIdx.x == gridDim.x - 1)
    for (std::uint64_t i = body; i < bytes; ++i) dst[i] = src[i];
  const TmaRing ring{smem, std::uint32_t(stages), stage_bytes, 1};  // one reader: thread 32
  if (tid == 0) ring.init();
  __syncthreads();
  if (tid == 0) {  // producer
    for (std::uint32_t k = 0; k < pieces.count; ++k) {
      ring.acquire(k);
      std::uint64_t off;
      const std::uint32_t b = pieces.at(k, off);
      ring.issue(k, src + off, b);
    }
  } else if (tid == kLead) {  // consumer
    for (std::uint32_t k = 0; k < pieces.count; ++k) {
      ring.wait_full(k);
      std::uint64_t off;
      const std::uint32_t b = pieces.at(k, off);
      if (reduce) {
        ptx::bulk_reduce_add<__nv_bfloat16>(dst + off, ring.stage(k), b);
      } else {
        ptx::bulk_store(dst + off, ring.stage(k), b);
      }
      ptx::bulk_commit();
      ring.retire_previous(k, 0, 1);
    }
    ptx::bulk_wait_all();
  }
}

// grid: num_ctas; block: threads; 16-byte loads/stores, 4 in flight per thread. kInterleaved: a grid-stride loop
// over the whole buffer (the CTAs' accesses interleave at 16 bytes x threads); kSlices: CTA c copies the c-th slice.
__global__ void simt_copy_kernel(uint4* dst, const uint4* src, std::uint64_t vecs, bool interleaved) {
  std::uint64_t i, end, step;
  if (interleaved) {
    i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    end = vecs;
    step = std::uint64_t(gridDim.x) * blockDim.x;
  } else {
    i = vecs * blockIdx.x / gridDim.x + threadIdx.x;
    end = vecs * (blockIdx.x + 1) / gridDim.x;
    step = blockDim.x;
  }
  for (; i + 3 * step < end; i += 4 * step) {
    const uint4 a = __ldcs(src + i), b = __ldcs(src + i + step), c = __ldcs(src + i + 2 * step), d = __ldcs(src + i + 3 * step);
    __stcs(dst + i, a);
    __stcs(dst + i + step, b);
    __stcs(dst + i + 2 * step, c);
    __stcs(dst + i + 3 * step, d);
  }
  for (; i < end; i += step) __stcs(dst + i, __ldcs(src + i));
}

}  // namespace

void preload_collective_kernels() {
  preload_kernels(collective_kernel<__nv_bfloat16>, collective_kernel<__half>, collective_kernel<float>,
                  tma_ring_kernel, simt_copy_kernel);
  preload_wait_kernels();
}

std::string tma_ring_problem(int stages, std::uint64_t stage_bytes, std::size_t header_bytes) {
  if (stages < 2 || stages > kTmaMaxStages) return fmt::format("{} stages is not in 2..{}", stages, kTmaMaxStages);
  if (stage_bytes < 1024 || stage_bytes % 1024 != 0)
    return fmt::format("stage_bytes = {} is not a positive multiple of 1 KiB", stage_bytes);
  const std::uint64_t smem = header_bytes + std::uint64_t(stages) * stage_bytes;
  if (smem + kStaticSharedReserveBytes > kMaxSharedBytesPerBlock)
    return fmt::format("{} x {} bytes + a {}-byte header need {} bytes of shared memory (at most {}: {} of the {} "
                       "are kept for the kernels' own __shared__ variables)",
                       stages, stage_bytes, header_bytes, smem, kMaxSharedBytesPerBlock - kStaticSharedReserveBytes,
                       kStaticSharedReserveBytes, kMaxSharedBytesPerBlock);
  return {};
}

TmaRingShape tma_ring_from_env() {
  static const TmaRingShape shape = [] {
    TmaRingShape r;
    const char* s = std::getenv("OVL_TMA_RING");
    if (s == nullptr || *s == 0) return r;
    int stages = 0, kib = 0;
    char tail = 0;
    OVL_CHECK(std::sscanf(s, "%dx%d%c", &stages, &kib, &tail) == 2 && kib > 0,
              "OVL_TMA_RING = '{}' is not <stages>x<KiB> (e.g. 6x32)", s);
    const std::string why = tma_ring_problem(stages, std::uint64_t(kib) * 1024u, kTmaHeaderBytes);
    OVL_CHECK(why.empty(), "OVL_TMA_RING = '{}': {}", s, why);
    r.stages = stages;
    r.stage_bytes = std::uint32_t(kib) * 1024u;
    return r;
  }();
  return shape;
}

TmaRingShape tma_ring_shape() {
  const TmaRingShape env = tma_ring_from_env();
  return env.stages > 0 ? env : kDefaultTmaRing;
}

namespace {
// "" when dst and src can take a local copy of `bytes`: both non-null, 16-byte aligned, not overlapping.
std::string local_buffers_problem(const void* dst, const void* src, std::size_t bytes) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  if (d == 0 || s == 0) return fmt::format("dst ({:#x}) or src ({:#x}) is null", d, s);
  if (d % 16 != 0 || s % 16 != 0) return fmt::format("dst ({:#x}) or src ({:#x}) is not 16-byte aligned", d, s);
  if (d < s + bytes && s < d + bytes) return fmt::format("dst ({:#x}) and src ({:#x}) overlap in {} bytes", d, s, bytes);
  return {};
}
}  // namespace

void launch_local_ring(const LocalRingArguments& a, cudaStream_t stream) {
  OVL_CHECK(a.num_ctas >= 1, "local ring: num_ctas = {} < 1", a.num_ctas);
  const std::string why = tma_ring_problem(a.shape.stages, a.shape.stage_bytes, kTmaHeaderBytes);
  OVL_CHECK(why.empty(), "local ring: {}", why);
  const std::size_t smem = kTmaHeaderBytes + std::size_t(a.shape.stages) * a.shape.stage_bytes;
  const std::string buffers = local_buffers_problem(a.dst, a.src, a.bytes);
  OVL_CHECK(buffers.empty(), "local ring: {}", buffers);
  OVL_CHECK(a.op == RingOp::kCopy || a.bytes % 16 == 0, "local reduce: bytes = {} is not a multiple of 16", a.bytes);
  const bool reduce = a.op == RingOp::kReduceAddBf16, interleaved = a.schedule == RingSchedule::kInterleaved;
  opt_in_dynamic_shared_memory(tma_ring_kernel, int(kMaxSharedBytesPerBlock));  // one value for every shape
  tma_ring_kernel<<<a.num_ctas, 2 * kWarp, smem, stream>>>(static_cast<unsigned char*>(a.dst),
                                                          static_cast<const unsigned char*>(a.src), a.bytes,
                                                          a.shape.stages, a.shape.stage_bytes, reduce, interleaved);
  OVL_CUDA_CHECK_LAST();
}

void launch_local_copy(CopyImpl impl, void* dst, const void* src, std::size_t bytes, int num_ctas, int threads,
                       cudaStream_t stream, RingSchedule schedule) {
  if (impl == CopyImpl::kTma) {
    LocalRingArguments a;
    a.dst = dst;
    a.src = src;
    a.bytes = bytes;
    a.num_ctas = num_ctas;
    a.schedule = schedule;
    launch_local_ring(a, stream);
    return;
  }
  OVL_CHECK(num_ctas >= 1, "num_ctas = {} < 1", num_ctas);
  const std::string buffers = local_buffers_problem(dst, src, bytes);
  OVL_CHECK(buffers.empty(), "local copy: {}", buffers);
  OVL_CHECK(threads >= 32 && threads <= 1024 && threads % 32 == 0, "threads = {} is not a multiple of 32 in 32..1024", threads);
  OVL_CHECK(bytes % 16 == 0, "simt copy: bytes = {} is not a multiple of 16", bytes);
  simt_copy_kernel<<<num_ctas, threads, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                                     bytes / 16, schedule == RingSchedule::kInterleaved);
  OVL_CUDA_CHECK_LAST();
}

}  // namespace ovl::kernels
