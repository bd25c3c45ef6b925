// Mode tma (Oh Overlap): ONE persistent collective kernel on comm_ctas CTAs polls the GEMM's group counters and
// moves each group as soon as it is ready; no NCCL and no host in the loop. With `partitioned`, the GEMM and the
// collective run on the two green-context streams of an SmPartition; without, the collective runs on the
// context's high-priority stream and the GEMM's grid is capped at sm_count - comm_ctas, so every GEMM CTA and
// every spinning collective CTA are resident at once whatever order the hardware starts them in.
//
// The mover is the one plan.comm_algo names (Plan::validate allows only tma-push / tma-pull in this mode): the
// core-private one-warp TMA movers (executor_tma_kernels.cu: cp.async.bulk loads into a shared-memory ring on
// mbarriers, bulk stores / cp.reduce.async.bulk adds), group-major over the played share (loopback: rank 0's or
// the whole world's, ContextOptions::loopback_share; a real world of 1: a copy). A real world of more than one rank
// needs peer-mapped symmetric buffers: not implemented (Context::can_run refuses it).
#include <algorithm>

#include "context_impl.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl {

void Context::Impl::run_tma(const detail::Call& c) {
  const Plan& plan = c.plan;
  const detail::PlanState& ps = *c.ps;
  cudaStream_t gemm_st = c.stream, comm_st = comm_stream;
  int ctas = plan.comm_ctas > 0 ? plan.comm_ctas : hw.sm_granularity;
  int grid = 0;
  if (plan.partitioned) {
    SmPartition& pt = partition(plan.comm_sms);
    gemm_st = pt.gemm_stream();
    comm_st = pt.comm_stream();
    ctas = std::min(ctas, pt.comm_sms());
    grid = std::min(plan.gemm_sms, pt.gemm_sms());
  } else {
    ctas = std::min(ctas, sms - 1);
    grid = std::min(plan.gemm_sms, sms - ctas);
  }
  const int groups = int(plan.tile_groups.size());
  // Stamp slots are reserved before anything is enqueued: running out throws with nothing half-launched.
  if (record.valid) {
    record.cta_base = alloc_slots(groups * ctas * 2);
    record.cta_count = ctas;
    record.cta_groups = groups;
  }
  start_signaled(c, groups, gemm_st, comm_st);

  // The GEMM is enqueued first so its CTAs are dispatched before the spinning collective's.
  const bool gemm = part != Context::Part::kComm, coll = part != Context::Part::kGemm;
  if (gemm) signaled_gemm(c, grid, gemm_st);

  detail::LoopbackArguments a = loopback_args(c, ctas);
  a.first_group = 0;
  a.num_groups = groups;
  if (gemm) {  // gated on the GEMM's counters; alone (kComm) the collective runs ungated
    a.counters = counter_ptr();
    a.expected =
        options.fault == Fault::kCounterTooHigh ? ps.expected_fault.as<unsigned>() : ps.expected.as<unsigned>();
  }
  if (record.valid) a.stamps = slot_ptr(record.cta_base);
  if (coll) detail::launch_loopback_collective(a, comm_st);

  join_streams(c.stream, gemm_st, comm_st);
}

}  // namespace ovl
