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
// AG+GEMM runs the other way round (run_gather): the communication stream gathers group by group (NCCL
// broadcasts from each owner in a real world, the loopback collective in loopback), releasing each group's counter
// (red.release.sys) after its rows; the GEMM, launched once, reads the gathered A, and its load thread waits
// (acquire) for a tile's group counter before loading the tile. Groups gather in row order, the order in which the
// GEMM (row-band or swizzle order, groups of whole bands either way) takes them. The GEMM's CTAs wait in place, so
// the gather must have SMs of its own: tile-signal gives the GEMM at most sm_count - comm CTAs, green-context gives
// it its partition.
#include <fmt/format.h>

#include "executors.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/reorder.hpp"
#include "ovl/kernels/wait.hpp"

namespace ovl::detail {

void SignaledExecutor::run(const Call& c) {
  Resources& r = res_;
  const Plan& plan = c.plan;
  const PlanState& ps = *c.ps;
  const Resources::SignaledLaunch launch = r.signaled_launch(c);
  if (c.op == Op::kAllGatherGemm) {
    run_gather(c, launch);
    return;
  }
  const auto [gemm_st, comm_st, grid, ctas] = launch;
  const int groups = int(plan.tile_groups.size());
  r.start_signaled(c, groups, gemm_st, comm_st);

  // A tile-major output goes to the shape's staging, which the reorder below turns into rows.
  DeviceBuffer* tile_major = plan.output == OutputLayout::kTileMajor ? &tile_major_[c.problem.name()] : nullptr;
  const bool gemm = c.runs_gemm();
  if (gemm) r.signaled_gemm(c, grid, gemm_st, /*gathered_at=*/0, tile_major);

  for (int g = 0; c.runs_comm() && g < groups; ++g) {
    unsigned expected = ps.expected_host[size_t(g)];
    if (c.fault == testing::Fault::kCounterTooHigh && g == groups - 1) ++expected;
    const int span = r.new_span("comm", fmt::format("{} group {}", r.record.comm_name, g), "comm");
    if (gemm) {
      kernels::launch_wait_counter(r.counter_ptr() + g, expected, g, r.id.timeout_ns, r.error_ptr(), r.start_ptr(span),
                                   comm_st);
    } else if (span >= 0) {
      kernels::launch_stamp(r.start_ptr(span), comm_st);
    }
    if (tile_major != nullptr) {
      kernels::ReorderArguments ro;
      ro.src = tile_major->get();
      ro.dst = c.partial;
      ro.m = c.problem.m;
      ro.n = c.problem.n;
      ro.tile_m = plan.tile.m;
      ro.tile_n = plan.tile.n;
      ro.tile_row_begin = ps.tile_rows_begin[size_t(g)];
      ro.tile_row_end = ps.tile_rows_end[size_t(g)];
      ro.ctas = ctas;
      kernels::reorder_tile_major_to_row_major(ro, comm_st);
    }
    r.collective_unit(c, g, ctas, comm_st);
    r.end_span(span, comm_st);
  }

  r.join_streams(c.stream, gemm_st, comm_st);
}

void SignaledExecutor::run_gather(const Call& c, const Resources::SignaledLaunch& launch) {
  Resources& r = res_;
  cudaStream_t gemm_st = launch.gemm_stream, comm_st = launch.comm_stream;
  const int groups = int(c.plan.tile_groups.size());
  r.start_signaled(c, groups, gemm_st, comm_st);
  const bool coll = c.runs_comm();
  auto gather = [&](int g) {
    const int span = r.stamp_span("comm", fmt::format("{} group {}", r.record.comm_name, g), "comm", comm_st);
    r.collective_unit(c, g, launch.ctas, comm_st);
    r.end_span(span, comm_st);
    // Test-only fault: the last group is never released, so the GEMM's wait for it times out.
    if (c.fault == testing::Fault::kCounterTooHigh && g == groups - 1) return;
    kernels::launch_add_counters(r.counter_ptr() + g, 1, 1u, comm_st);
  };
  // Host order: the first group's gather, then the GEMM, then the other groups. Queued behind every group's
  // launches (128-256 with a group per row band), the GEMM started after the GPU had run most of the gather
  // (measured in loopback on the H200; the operator took as long, the gather being the bottleneck).
  // Either order is safe: the GEMM leaves the gather its SMs (tile-signal) or its partition (green-context), and
  // waits on device counters.
  if (coll && groups > 0) gather(0);
  // Measured alone (Part::kGemm), the GEMM does not wait: nothing would release its groups.
  if (c.runs_gemm()) r.signaled_gemm(c, launch.grid, gemm_st, /*gathered_at=*/coll ? 1u : 0u);
  for (int g = 1; coll && g < groups; ++g) gather(g);
  r.join_streams(c.stream, gemm_st, comm_st);
}

}  // namespace ovl::detail
