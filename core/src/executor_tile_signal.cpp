// Modes tile-signal (FlashOverlap) and green-context (GCOverlap).
//
// Our GEMM adds 1 (release, system scope) to its tile group's counter after each tile; a high-priority
// communication stream runs, per group, a one-thread counter wait kernel (device side, no host round trip) and then
// the group's collective on its rows: NCCL in a real world, the loopback collective in loopback. Groups are whole
// row bands, so a group is a contiguous block of rows; with tile-major output a reorder pass on the communication
// stream turns the group's tiles into those rows first.
//
// tile-signal: GEMM on the caller's stream with gemm_sms CTAs, at most sm_count - 1 (the wait kernel spins on an
// SM of its own, so every GEMM CTA can be resident whatever the launch order: no deadlock). green-context: GEMM
// and communication on the two streams of an SmPartition (disjoint SMs), GEMM grid = the partition's SMs.
// Counters are reset by a one-CTA kernel on the caller's stream before the GEMM (after the previous call's
// communication, which the caller's stream joined), never by a host memset.
//
// AG+GEMM runs the other way round (run_gather_signaled): the communication stream gathers group by group (NCCL
// broadcasts from each owner in a real world, the loopback collective in loopback), releasing each group's counter
// (red.release.sys) after its rows; the GEMM, launched once, reads the gathered A, and its load thread waits
// (acquire) for a tile's group counter before loading the tile. Groups gather in row order, the order in which the
// GEMM (row-band or swizzle order, groups of whole bands either way) takes them. The GEMM's CTAs wait in place, so
// the gather must have SMs of its own: tile-signal gives the GEMM at most sm_count - comm CTAs, green-context gives
// it its partition.
#include <fmt/format.h>

#include <algorithm>

#include "context_impl.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/reorder.hpp"
#include "ovl/kernels/wait.hpp"

namespace ovl {

void Context::Impl::run_tile_signal(const detail::Call& c) {
  const Plan& plan = c.plan;
  const detail::PlanState& ps = *c.ps;
  const auto [gemm_st, comm_st, grid, ctas] = signaled_launch(c);
  if (c.op == Op::kAllGatherGemm) {
    run_gather_signaled(c, grid, ctas, gemm_st, comm_st);
    return;
  }
  const int groups = int(plan.tile_groups.size());
  start_signaled(c, groups, gemm_st, comm_st);

  const bool gemm = part != testing::Part::kComm, coll = part != testing::Part::kGemm;
  if (gemm) signaled_gemm(c, grid, gemm_st);

  for (int g = 0; coll && g < groups; ++g) {
    unsigned expected = ps.expected_host[size_t(g)];
    if (fault == testing::Fault::kCounterTooHigh && g == groups - 1) ++expected;
    const int span = new_span("comm", fmt::format("{} group {}", record.comm_name, g), "comm");
    if (gemm) {
      kernels::launch_wait_counter(counter_ptr() + g, expected, g, timeout_ns, error_ptr(), start_ptr(span), comm_st);
    } else if (span >= 0) {
      kernels::launch_stamp(start_ptr(span), comm_st);
    }
    if (plan.output == OutputLayout::kTileMajor) {
      kernels::ReorderArguments r;
      r.src = c.shape->tile_major.get();
      r.dst = c.partial;
      r.m = c.problem.m;
      r.n = c.problem.n;
      r.tile_m = plan.tile.m;
      r.tile_n = plan.tile.n;
      r.tile_row_begin = ps.tile_rows_begin[size_t(g)];
      r.tile_row_end = ps.tile_rows_end[size_t(g)];
      r.ctas = ctas;
      kernels::reorder_tile_major_to_row_major(r, comm_st);
    }
    collective_unit(c, g, ctas, comm_st);
    end_span(span, comm_st);
  }

  join_streams(c.stream, gemm_st, comm_st);
}

void Context::Impl::run_gather_signaled(const detail::Call& c, int grid, int ctas, cudaStream_t gemm_st,
                                        cudaStream_t comm_st) {
  const int groups = int(c.plan.tile_groups.size());
  start_signaled(c, groups, gemm_st, comm_st);
  const bool gemm = part != testing::Part::kComm, coll = part != testing::Part::kGemm;
  auto gather = [&](int g) {
    const int span = stamp_span("comm", fmt::format("{} group {}", record.comm_name, g), "comm", comm_st);
    collective_unit(c, g, ctas, comm_st);
    end_span(span, comm_st);
    // Test-only fault: the last group is never released, so the GEMM's wait for it times out.
    if (fault == testing::Fault::kCounterTooHigh && g == groups - 1) return;
    kernels::launch_add_counters(counter_ptr() + g, 1, 1u, comm_st);
  };
  // Host order: the first group's gather, then the GEMM, then the other groups. Queued behind every group's
  // launches (128-256 with a group per row band), the GEMM started after the GPU had run most of the gather
  // (measured in loopback on the H200; the operator took as long, the gather being the bottleneck).
  // Either order is safe: the GEMM leaves the gather its SMs (tile-signal) or its partition (green-context), and
  // waits on device counters.
  if (coll && groups > 0) gather(0);
  // Measured alone (Part::kGemm), the GEMM does not wait: nothing would release its groups.
  if (gemm) signaled_gemm(c, grid, gemm_st, nullptr, /*wait_for_gather=*/coll);
  for (int g = 1; coll && g < groups; ++g) gather(g);
  join_streams(c.stream, gemm_st, comm_st);
}

}  // namespace ovl
