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
// A real world of more than one rank (run_tma_real): the GEMM writes its row-major output into a symmetric buffer
// (sym_partial) and release-adds the group counters, which live in a symmetric buffer too; ONE launch of the World's
// TMA collective (Collectives::run_ranges, tma-push: cp.reduce.async.bulk adds into the owner's copy of sym_out, for
// AllReduce then bulk stores to every peer) moves each (group, owner) range once this rank's counter of the group
// has its tile count, and the rank's result is copied from sym_out to C on the same stream (no copy when C is
// sym_out itself: Context::symmetric_output). sym_out is zeroed first and every rank adds its own piece as well
// (CollectiveOptions::dst_zeroed), so the collective streams group by group behind the GEMM. Why push only: it reads
// nothing of a peer's, so the next call's counter reset and GEMM cannot race a peer still reading this call's data;
// a peer's adds into this rank's sym_out of the next call wait for this rank at the collective's start barrier,
// which it reaches after its copy of this call's result (stream order).
#include <fmt/format.h>

#include <algorithm>

#include "context_impl.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl {

void Context::Impl::run_tma(const detail::Call& c) {
  const Plan& plan = c.plan;
  const detail::PlanState& ps = *c.ps;
  const auto [gemm_st, comm_st, grid, ctas] = signaled_launch(c);
  if (!loopback && world > 1) return run_tma_real(c, grid, ctas, gemm_st, comm_st);
  const int groups = int(plan.tile_groups.size());
  // Stamp slots are reserved before anything is enqueued: running out throws with nothing half-launched.
  if (record.valid) {
    record.cta_base = alloc_slots(groups * ctas * 2);
    record.cta_count = ctas;
    record.cta_groups = groups;
  }
  start_signaled(c, groups, gemm_st, comm_st);

  // The GEMM is enqueued first so its CTAs are dispatched before the spinning collective's.
  const bool gemm = part != testing::Part::kComm, coll = part != testing::Part::kGemm;
  if (gemm) signaled_gemm(c, grid, gemm_st);

  kernels::LoopbackArguments a = loopback_args(c, ctas);
  a.first_group = 0;
  a.num_groups = groups;
  if (gemm) {  // gated on the GEMM's counters; alone (kComm) the collective runs ungated
    a.counters = counter_ptr();
    a.expected =
        fault == testing::Fault::kCounterTooHigh ? ps.expected_fault.as<unsigned>() : ps.expected.as<unsigned>();
  }
  if (record.valid) a.stamps = slot_ptr(record.cta_base);
  if (coll) kernels::launch_loopback_collective(a, comm_st);

  join_streams(c.stream, gemm_st, comm_st);
}

void Context::Impl::make_symmetric_buffers(const Problem& p, detail::ShapeState& st) {
  // Each made on its own, so a call after a failed first one (a peer gone, no memory) makes what is missing.
  const int64_t eb = dtype_bytes(p.output_dtype());
  const int64_t out_rows = p.op == Op::kGemmReduceScatter ? p.m / world : p.m;
  if (st.sym_partial.empty()) st.sym_partial = SymmetricBuffer(world_ref, size_t(p.m * p.n * eb));
  if (st.sym_out.empty()) st.sym_out = SymmetricBuffer(world_ref, size_t(out_rows * p.n * eb));
}

void Context::Impl::run_tma_real(const detail::Call& c, int grid, int ctas, cudaStream_t gemm_st,
                                 cudaStream_t comm_st) {
  const Plan& plan = c.plan;
  const Problem& p = c.problem;
  detail::PlanState& ps = *c.ps;
  detail::ShapeState& st = *c.shape;
  const int groups = int(plan.tile_groups.size());
  const int64_t eb = dtype_bytes(p.output_dtype());
  const int64_t mb = p.m / world;
  const int64_t out_rows = p.op == Op::kGemmReduceScatter ? mb : p.m;
  // First use (every rank makes the same calls in the same order, so these collective constructions line up).
  if (!real_coll) real_coll = std::make_unique<Collectives>(world_ref);
  if (sym_counters.empty()) sym_counters = SymmetricBuffer(world_ref, sizeof(unsigned) * kMaxGroups);  // zero-filled
  make_symmetric_buffers(p, st);
  if (!ps.real_ranges) {
    // Group g's rows [r0, r1), owner by owner (ovl::owner_rows): ReduceScatter cuts them at the owners' row blocks;
    // AllReduce deals them out in W near-equal row runs (each owner reduces one, then stores it to every peer).
    std::vector<TileRange> ranges;
    const int64_t row_bytes = p.n * eb;
    for (int g = 0; g < groups; ++g) {
      const int64_t r0 = ps.row_begin[size_t(g)], r1 = ps.row_end[size_t(g)];
      for (int owner = 0; owner < world; ++owner) {
        const OwnerRows o = owner_rows(p, r0, r1, owner);
        if (o.rows() == 0) continue;
        ranges.push_back(TileRange{owner, g, uint64_t(o.begin * row_bytes), uint64_t(o.block_row * row_bytes),
                                   uint64_t(o.rows() * row_bytes)});
      }
    }
    ps.real_ranges = std::make_unique<RangeTable>(world_ref, ranges, groups);
  }
  start_signaled(c, groups, gemm_st, comm_st);
  const bool gemm = part != testing::Part::kComm, coll = part != testing::Part::kGemm;
  if (gemm) signaled_gemm(c, grid, gemm_st, st.sym_partial.local_ptr());
  if (coll) {
    CollectiveOptions o;
    o.num_ctas = ctas;
    o.timeout_ns = timeout_ns;
    GroupGate gate;
    gate.counters = &sym_counters;
    gate.expected =
        fault == testing::Fault::kCounterTooHigh ? ps.expected_fault.as<unsigned>() : ps.expected.as<unsigned>();
    const int span = stamp_span("comm", record.comm_name, "comm", comm_st);
    const Collective op = collective_of(p.op);
    // The destination starts at zero and every rank adds its piece (dst_zeroed): each group streams out as soon as
    // its counter is ready. The peers add into it only after this rank's start flag, raised by the kernel below,
    // which this stream runs after the memset.
    const size_t out_bytes = size_t(out_rows * p.n * eb);
    OVL_CUDA_CHECK(cudaMemsetAsync(st.sym_out.local_ptr(), 0, out_bytes, comm_st));
    o.dst_zeroed = true;
    // Alone (kComm) the collective runs ungated, on whatever sym_partial holds.
    real_coll->run_ranges(op, st.sym_partial, st.sym_out, *ps.real_ranges, p.output_dtype(), CollectiveImpl::kTmaPush,
                          o, comm_st, gemm ? &gate : nullptr);
    // C is the symmetric output itself (Context::symmetric_output): no copy.
    if (c.c.ptr != st.sym_out.local_ptr())
      OVL_CUDA_CHECK(cudaMemcpyAsync(c.c.ptr, st.sym_out.local_ptr(), out_bytes, cudaMemcpyDeviceToDevice, comm_st));
    end_span(span, comm_st);
  }
  join_streams(c.stream, gemm_st, comm_st);
}

}  // namespace ovl
