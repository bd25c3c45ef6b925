// Mode tma (Oh Overlap): ONE persistent collective kernel on comm_ctas CTAs polls the GEMM's group counters and
// moves each group as soon as it is ready; no NCCL and no host in the loop. With `partitioned`, the GEMM and the
// collective run on the two green-context streams of an SmPartition; without, the collective runs on the
// context's high-priority stream and the GEMM's grid is capped at sm_count - comm_ctas, so every GEMM CTA and
// every spinning collective CTA are resident at once whatever order the hardware starts them in.
//
// The mover is the one plan.comm_algo names (Plan::validate allows only tma-push / tma-pull in this mode): the
// loopback collective's TMA movers (kernels/src/loopback_tma.cu: cp.async.bulk loads into a shared-memory ring on
// mbarriers, bulk stores / cp.reduce.async.bulk adds), group-major over the played share (loopback: rank 0's or
// the whole world's, ContextOptions::loopback_share; a real world of 1: a copy).
//
// A real world of more than one rank (run_real): the GEMM writes its row-major output into a symmetric buffer
// (the shape's `partial`) and release-adds the group counters, which live in a symmetric buffer too; ONE launch of the
// World's TMA collective (Collectives::run_ranges, tma-push: cp.reduce.async.bulk adds into the owner's copy of the
// shape's `out`, for AllReduce then bulk stores to every peer) moves each (group, owner) range once this rank's counter
// of the group has its tile count, and the rank's result is copied from `out` to C on the same stream (no copy when C
// is `out` itself: Context::symmetric_output). `out` is zeroed first and every rank adds its own piece as well
// (CollectiveOptions::dst_zeroed), so the collective streams group by group behind the GEMM. Why push only: it reads
// nothing of a peer's, so the next call's counter reset and GEMM cannot race a peer still reading this call's data;
// a peer's adds into this rank's `out` of the next call wait for this rank at the collective's start barrier,
// which it reaches after its copy of this call's result (stream order).
//
// AG+GEMM turns the direction around: the collective starts at once (A is the caller's input) and releases a counter
// per tile group once its rows are in place, and the GEMM waits per tile for its group's counter to reach the
// collective's CTA count (loopback: the TMA mover's `released` counters; a real world, gather_real: the World's
// tma-push AllGather with a GroupRelease).
//
// Mode sequential with tma-push in a real world runs here too (run_real_sequential), since its collective needs the
// same symmetric buffers: cuBLAS (on the plan's gemm_sms, the whole device by default), then the same collective,
// ungated, on the call's stream.
#include "executors.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl::detail {
namespace {

// AG+GEMM: the value the GEMM waits for per group, the gather's CTA count (each CTA releases a group once;
// Fault::kCounterTooHigh: one more, which never comes, so the first wait times out); 0 (no wait) unless the call
// runs both parts (alone, the GEMM reads whatever the gathered A holds).
unsigned gather_wait(const Call& c, int ctas) {
  if (!c.runs_gemm() || !c.runs_comm()) return 0;
  return unsigned(ctas) + (c.fault == testing::Fault::kCounterTooHigh ? 1u : 0u);
}

}  // namespace

void TmaExecutor::bind(Call& c) {
  if (!res_.id.real_world()) return Executor::bind(c);
  // First use (every rank makes the same calls in the same order, so these collective constructions line up).
  if (!coll_) coll_ = std::make_unique<Collectives>(res_.id.world_ref);
  res_.make_symmetric_counters();  // zero-filled
  RealShape& rs = real_shape(c.problem);
  if (c.op == Op::kAllGatherGemm) {  // gather_real copies this rank's rows into `partial`
    c.gathered = rs.out.local_ptr();
    return;
  }
  c.partial = rs.partial.local_ptr();
  c.out = rs.out.local_ptr();
}

void TmaExecutor::run(const Call& c) {
  if (c.plan.mode == Mode::kSequential) return run_real_sequential(c);  // only in a real world (executor_for)
  Resources& r = res_;
  const Plan& plan = c.plan;
  const PlanState& ps = *c.ps;
  const Resources::SignaledLaunch launch = r.signaled_launch(c);
  if (r.id.real_world()) return run_real(c, launch);
  const auto [gemm_st, comm_st, grid, ctas] = launch;
  const int groups = int(plan.tile_groups.size());
  // Stamp slots are reserved before anything is enqueued: running out throws with nothing half-launched.
  if (r.record.valid) {
    r.record.cta_base = r.alloc_slots(groups * ctas * 2);
    r.record.cta_count = ctas;
    r.record.cta_groups = groups;
  }
  r.start_signaled(c, groups, gemm_st, comm_st);

  const bool gemm = c.runs_gemm();
  kernels::LoopbackArguments a = r.loopback_args(c, ctas);
  a.first_group = 0;
  a.num_groups = groups;
  if (r.record.valid) a.stamps = r.slot_ptr(r.record.cta_base);
  if (c.op == Op::kAllGatherGemm) {
    // The gather starts at once and each of its CTAs releases a group's counter after its rows of the group; the
    // GEMM, beside it on the other SMs, waits per tile until the counter reaches the CTA count (Fault::kCounterTooHigh:
    // one more, which never comes, so its first wait times out). Alone, neither waits for the other.
    const bool both = gemm && c.runs_comm();
    if (both) a.released = r.counter_ptr();
    if (c.runs_comm()) kernels::launch_loopback_collective(a, comm_st);
    if (gemm) r.signaled_gemm(c, grid, gemm_st, gather_wait(c, a.ctas));
    r.join_streams(c.stream, gemm_st, comm_st);
    return;
  }
  // The GEMM is enqueued first so its CTAs are dispatched before the spinning collective's.
  if (gemm) r.signaled_gemm(c, grid, gemm_st);
  if (gemm) {  // gated on the GEMM's counters; alone (kComm) the collective runs ungated
    a.counters = r.counter_ptr();
    a.expected =
        c.fault == testing::Fault::kCounterTooHigh ? ps.expected_fault.as<unsigned>() : ps.expected.as<unsigned>();
  }
  if (c.runs_comm()) kernels::launch_loopback_collective(a, comm_st);

  r.join_streams(c.stream, gemm_st, comm_st);
}

TmaExecutor::RealShape& TmaExecutor::real_shape(const Problem& p) {
  RealShape& rs = shapes_[p.name()];
  // Each made on its own, so a call after a failed first one (a peer gone, no memory) makes what is missing.
  const World& world = res_.id.world_ref;
  if (rs.partial.empty()) rs.partial = SymmetricBuffer(world, real_bytes(p, false));
  if (rs.out.empty()) rs.out = SymmetricBuffer(world, real_bytes(p, true));
  return rs;
}

size_t TmaExecutor::real_bytes(const Problem& p, bool out) const {
  const int w = res_.id.world;
  if (p.op == Op::kAllGatherGemm)  // this rank's rows of A, the gathered A
    return size_t((out ? p.m : p.m / w) * p.k * dtype_bytes(p.dtype));
  const int64_t out_rows = p.op == Op::kGemmReduceScatter ? p.m / w : p.m;
  return size_t((out ? out_rows : p.m) * p.n * dtype_bytes(p.output_dtype()));
}

void* TmaExecutor::symmetric_output(const Problem& p) { return real_shape(p).out.local_ptr(); }

std::string TmaExecutor::collective_failure(cudaStream_t stream) {
  if (!coll_) return "";
  try {
    coll_->check(stream);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

const RangeTable& TmaExecutor::range_table(const Call& c, RealShape& rs) {
  const Problem& p = c.problem;
  const PlanState& ps = *c.ps;
  const int w = res_.id.world;
  const int groups = ps.units;  // the tile groups (mode sequential: one unit, every row)
  const bool ag = p.op == Op::kAllGatherGemm;
  auto table = rs.ranges.find(ps.row_end);
  if (table == rs.ranges.end()) {
    // Group g's rows [r0, r1), owner by owner (ovl::owner_rows): ReduceScatter cuts them at the owners' row blocks;
    // AllReduce deals them out in W near-equal row runs (each owner reduces one, then stores it to every peer);
    // AllGather cuts the gathered A's rows at the owners' blocks (from row block_row of the owner's rows).
    std::vector<TileRange> ranges;
    const int64_t row_bytes = ag ? p.k * dtype_bytes(p.dtype) : p.n * dtype_bytes(p.output_dtype());
    for (int g = 0; g < groups; ++g) {
      const int64_t r0 = ps.row_begin[size_t(g)], r1 = ps.row_end[size_t(g)];
      for (int owner = 0; owner < w; ++owner) {
        const OwnerRows o = owner_rows(p, r0, r1, owner);
        if (o.rows() == 0) continue;
        const uint64_t at = uint64_t(o.begin * row_bytes), block = uint64_t(o.block_row * row_bytes);
        ranges.push_back(TileRange{owner, g, ag ? block : at, ag ? at : block, uint64_t(o.rows() * row_bytes)});
      }
    }
    table = rs.ranges.emplace(ps.row_end, RangeTable(res_.id.world_ref, ranges, groups)).first;
  }
  return table->second;
}

void TmaExecutor::run_real(const Call& c, const Resources::SignaledLaunch& launch) {
  Resources& r = res_;
  const PlanState& ps = *c.ps;
  RealShape& rs = real_shape(c.problem);
  const RangeTable& table = range_table(c, rs);
  cudaStream_t gemm_st = launch.gemm_stream, comm_st = launch.comm_stream;
  r.start_signaled(c, ps.units, gemm_st, comm_st);
  const bool gemm = c.runs_gemm();
  CollectiveOptions o;
  o.num_ctas = launch.ctas;
  o.timeout_ns = r.id.timeout_ns;
  if (c.problem.op == Op::kAllGatherGemm) {
    // The gather starts at once and releases each group's counter once its rows are everywhere; the GEMM waits per
    // tile for its group's.
    GroupRelease release;
    release.counters = r.counter_ptr();
    if (c.runs_comm()) gather_real(c, rs, table, o, comm_st, gemm ? &release : nullptr);
    if (gemm) r.signaled_gemm(c, launch.grid, gemm_st, gather_wait(c, o.num_ctas));
  } else {
    if (gemm) r.signaled_gemm(c, launch.grid, gemm_st);
    GroupGate gate;
    gate.counters = &r.sym_counters;
    gate.expected =
        c.fault == testing::Fault::kCounterTooHigh ? ps.expected_fault.as<unsigned>() : ps.expected.as<unsigned>();
    // Alone (kComm) the collective runs ungated, on whatever `partial` holds.
    if (c.runs_comm()) reduce_real(c, rs, table, o, comm_st, gemm ? &gate : nullptr);
  }
  r.join_streams(c.stream, gemm_st, comm_st);
}

void TmaExecutor::run_real_sequential(const Call& c) {
  RealShape& rs = real_shape(c.problem);
  const RangeTable& table = range_table(c, rs);
  CollectiveOptions o;
  o.num_ctas = c.plan.comm_ctas;
  o.timeout_ns = res_.id.timeout_ns;
  run_sequential(res_, c, [&](cudaStream_t stream) {
    if (c.problem.op == Op::kAllGatherGemm) {
      gather_real(c, rs, table, o, stream, nullptr);
    } else {
      reduce_real(c, rs, table, o, stream, nullptr);
    }
  });
}

void TmaExecutor::reduce_real(const Call& c, RealShape& rs, const RangeTable& table, CollectiveOptions o,
                              cudaStream_t stream, const GroupGate* gate) {
  Resources& r = res_;
  const int span = r.stamp_span("comm", r.record.comm_name, "comm", stream);
  // The destination starts at zero and every rank adds its piece (dst_zeroed): each group streams out as soon as its
  // counter is ready. The peers add into it only after this rank's start flag, raised by the kernel below, which
  // this stream runs after the memset.
  const size_t out_bytes = real_bytes(c.problem, true);
  OVL_CUDA_CHECK(cudaMemsetAsync(c.out, 0, out_bytes, stream));
  o.dst_zeroed = true;
  coll_->run_ranges(collective_of(c.problem.op), rs.partial, rs.out, table, c.problem.output_dtype(),
                    CommAlgo::kTmaPush, o, stream, gate);
  // C is the symmetric output itself (Context::symmetric_output): no copy.
  if (c.c.ptr != c.out) OVL_CUDA_CHECK(cudaMemcpyAsync(c.c.ptr, c.out, out_bytes, cudaMemcpyDeviceToDevice, stream));
  r.end_span(span, stream);
}

void TmaExecutor::gather_real(const Call& c, RealShape& rs, const RangeTable& table, const CollectiveOptions& o,
                              cudaStream_t stream, const GroupRelease* release) {
  Resources& r = res_;
  const Problem& p = c.problem;
  const int span = r.stamp_span("comm", r.record.comm_name, "comm", stream);
  // This rank's rows into its symmetric buffer, which the collective pushes to every rank's gathered A (its own too)
  // group by group. The peers push into this rank's gathered A only after its start flag, which the kernel below
  // raises after this stream joined the previous call's GEMM (the caller's stream order).
  OVL_CUDA_CHECK(
      cudaMemcpyAsync(rs.partial.local_ptr(), c.a.ptr, real_bytes(p, false), cudaMemcpyDeviceToDevice, stream));
  // An AllGather copies bytes: FP8 rows move as 16-bit elements (the collective sums bf16, fp16 or fp32 only).
  const DType moved = is_fp8(p.dtype) ? DType::kBF16 : p.dtype;
  coll_->run_ranges(Collective::kAllGather, rs.partial, rs.out, table, moved, CommAlgo::kTmaPush, o, stream, nullptr,
                    release);
  r.end_span(span, stream);
}

}  // namespace ovl::detail
