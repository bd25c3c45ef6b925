// One pipeline per overlap mode, built from the pieces in pipelines.cpp.
#include <algorithm>
#include <memory>
#include <numeric>

#include "pipelines_internal.hpp"

namespace ovl::sim::detail {

namespace {

double tile_bytes(const Problem& p, const std::vector<Tile>& tiles, size_t begin, size_t end) {
  double bytes = 0;
  for (size_t i = begin; i < end; ++i) bytes += static_cast<double>(tiles[i].rows * tiles[i].cols);
  return bytes * dtype_bytes(output_dtype(p.dtype));  // output tiles: bf16 for FP8 inputs
}

// A separate collective call: NCCL's per-call overhead, or a TMA kernel's launch.
TimeNs call_overhead(const Context& ctx) {
  return us_to_ns(is_nccl(ctx.plan.comm_algo) ? ctx.hw.nccl_launch_us : ctx.hw.tma_launch_us);
}

std::string call_name(Collective c, const char* what, int index) {
  return fmt::format("{} {} {}", to_string(c), what, index);
}

}  // namespace

// Sequential: the whole GEMM, then one collective (AllGather+GEMM: the gather first).
TimeNs run_sequential(Context& ctx) {
  const Problem& p = ctx.problem;
  const Collective c = collective_of(p.op);
  CommQueue comm(ctx, true);
  GemmRun gemm(ctx, visit_tiles(p, ctx.plan, 0, p.m), "");
  ctx.groups = 1;
  CommQueue::Call call;
  call.name = std::string(to_string(c));
  call.overhead = call_overhead(ctx);
  call.steps = collective_steps(ctx, c, static_cast<double>(p.comm_bytes()));
  const TimeNs launch = us_to_ns(ctx.hw.launch_us);
  if (c == Collective::kAllGather) {
    call.on_done = [&](TimeNs) { gemm.start(launch); };
    comm.post(std::move(call));
  } else {
    gemm.on_finished = [&](TimeNs) { comm.post(std::move(call)); };
    gemm.start(launch);
  }
  return ctx.engine.run();
}

// Decomposed: the GEMM in row chunks, one kernel each, back to back on the compute stream; chunk c's collective
// on the communication stream once chunk c is done (AllGather+GEMM: gather chunk c, then its GEMM). The NCCL
// kernel shares the SMs with the GEMM chunks while it runs.
TimeNs run_decomposed(Context& ctx) {
  const Problem& p = ctx.problem;
  const Collective c = collective_of(p.op);
  const int chunks = static_cast<int>(std::clamp<int64_t>(ctx.plan.chunks, 1, p.m));
  CommQueue comm(ctx, true);
  std::vector<std::unique_ptr<GemmRun>> gemms;
  std::vector<double> bytes;
  for (int i = 0; i < chunks; ++i) {
    const int64_t r0 = p.m * i / chunks;
    const int64_t r1 = p.m * (i + 1) / chunks;
    gemms.push_back(std::make_unique<GemmRun>(ctx, visit_tiles(p, ctx.plan, r0, r1), fmt::format("chunk {} ", i)));
    const int64_t cols = c == Collective::kAllGather ? p.k : p.n;
    bytes.push_back(static_cast<double>((r1 - r0) * cols) *
                    dtype_bytes(c == Collective::kAllGather ? p.dtype : output_dtype(p.dtype)));
  }
  // As the model: each call's bytes and extra time (the loopback rank-0 play; else factor 1, no extra time).
  const std::vector<CallAdjust> adj = call_adjustments(p, ctx.plan, ctx.hw);
  for (int i = 0; i < chunks; ++i) bytes[static_cast<size_t>(i)] *= adj[static_cast<size_t>(i)].factor;
  ctx.groups = chunks;
  const TimeNs launch = us_to_ns(ctx.hw.launch_us);
  auto make_call = [&](int i) {
    CommQueue::Call call;
    call.name = call_name(c, "chunk", i);
    call.overhead = call_overhead(ctx) + us_to_ns(adj[static_cast<size_t>(i)].extra_us);
    call.steps = collective_steps(ctx, c, bytes[static_cast<size_t>(i)]);
    return call;
  };
  if (c == Collective::kAllGather) {
    // Chunk i's GEMM needs its rows gathered and the previous chunk's GEMM done (one compute stream).
    std::vector<int> ready(static_cast<size_t>(chunks), 0);
    auto maybe_start = [&](int i) {
      if (i < chunks && ++ready[static_cast<size_t>(i)] == 2) gemms[static_cast<size_t>(i)]->start(launch);
    };
    for (int i = 0; i < chunks; ++i) {
      gemms[static_cast<size_t>(i)]->on_finished = [&maybe_start, i](TimeNs) { maybe_start(i + 1); };
      CommQueue::Call call = make_call(i);
      call.on_done = [&maybe_start, i](TimeNs) { maybe_start(i); };
      comm.post(std::move(call));
    }
    maybe_start(0);           // chunk 0 has no previous GEMM
    return ctx.engine.run();  // the callbacks hold references to this block's locals
  } else {
    for (int i = 0; i < chunks; ++i) {
      gemms[static_cast<size_t>(i)]->on_finished = [&, i](TimeNs) {
        comm.post(make_call(i));
        if (i + 1 < chunks) gemms[static_cast<size_t>(i) + 1]->start(launch);
      };
    }
    gemms[0]->start(launch);
  }
  return ctx.engine.run();
}

// Tile-signal (FlashOverlap), green-context (GCOverlap) and tma (Oh Overlap): one persistent GEMM signals tile
// groups; each group's collective starts when the group's last tile is stored and the previous group's call is
// done. tile-signal: an NCCL call per group on shared SMs (its CTAs take SMs while it runs); green-context: the
// same calls on their own partition; tma: one persistent TMA kernel launched with the GEMM polls the group
// counters (a signal latency per group, no per-call launch) and holds its SMs from launch to the last group.
// AllGather+GEMM: a gather call per tile group from the start; a wave starts once the rows it reads have arrived.
TimeNs run_signaled(Context& ctx) {
  const Problem& p = ctx.problem;
  const Plan& plan = ctx.plan;
  const Collective c = collective_of(p.op);
  const bool tma_kernel = plan.mode == Mode::kTma;
  const bool nccl = is_nccl(plan.comm_algo);
  CommQueue comm(ctx, !ctx.partitioned && !tma_kernel);
  std::vector<Tile> tiles = visit_tiles(p, plan, 0, p.m);
  const TimeNs launch = us_to_ns(ctx.hw.launch_us);
  // Per group: an NCCL call's launch plus the per-group gap (nccl_group_us: the counter-wait kernel, the gap between
  // calls); the persistent TMA kernel pays its steps' link latencies (the counter poll is one of them) and its own
  // per-group work (tma_group_us), as the model's per-group cost.
  const TimeNs overhead = tma_kernel ? us_to_ns(ctx.hw.tma_group_us)
                                     : call_overhead(ctx) + (nccl ? us_to_ns(ctx.hw.nccl_group_us) : TimeNs(0));
  // The persistent TMA kernel starts with the GEMM; calls cannot begin before it is up.
  const TimeNs comm_ready = tma_kernel ? us_to_ns(ctx.hw.tma_launch_us) : 0;
  const bool holds_sms = tma_kernel && !ctx.partitioned;
  if (holds_sms) ctx.comm_kernel_started(ctx.comm_ctas);
  auto release = [&ctx, holds_sms](TimeNs) {
    if (holds_sms) ctx.comm_kernel_ended(ctx.comm_ctas);
  };

  GemmRun gemm(ctx, tiles, "");
  std::vector<int64_t> group_end;
  if (plan.tile_groups.empty()) {
    group_end.push_back(static_cast<int64_t>(tiles.size()));
  } else {
    int64_t sum = 0;
    for (int g : plan.tile_groups) group_end.push_back(sum += g);
  }
  ctx.groups = static_cast<int>(group_end.size());
  const std::vector<CallAdjust> adj = call_adjustments(p, plan, ctx.hw);  // per group, as the model
  if (c == Collective::kAllGather) {
    // As the executor runs it (core/src/executor_tile_signal.cpp): from the start, one call per tile group in
    // order, each gathering the rows its tiles read (its overhead, then its steps); a wave of the GEMM starts once
    // the rows it reads have arrived. Groups of whole row bands make the arrived rows a prefix of A.
    const double total = static_cast<double>(p.comm_bytes());
    double arrived = 0;  // fraction of A's rows gathered
    gemm.rows_available = [&arrived] { return arrived; };
    // Per group: the rows gathered once it is done.
    const std::vector<double> rows_done =
        rows_up_to(tiles, std::vector<size_t>(group_end.begin(), group_end.end()), plan.tile.m, p.m);
    std::vector<CommQueue::Call> calls(group_end.size());
    for (size_t g = 0; g < group_end.size(); ++g) {
      CommQueue::Call& call = calls[g];
      call.name = call_name(c, "group", static_cast<int>(g));
      call.overhead = overhead + us_to_ns(adj[g].extra_us);
      call.steps = collective_steps(ctx, c, total * (rows_done[g] - (g == 0 ? 0.0 : rows_done[g - 1])));
      call.on_done = [&gemm, &arrived, &rows_done, g, last = g + 1 == group_end.size(), release](TimeNs t) {
        arrived = rows_done[g];
        gemm.data_arrived();
        if (last) release(t);
      };
    }
    // Every call is queued at once, in group order, when the communication can begin.
    ctx.engine.at(comm_ready, [&comm, calls = std::move(calls)]() mutable {
      for (CommQueue::Call& call : calls) comm.post(std::move(call));
    });
    gemm.start(launch);
    return ctx.engine.run();
  }

  size_t next_group = 0;
  TimeNs prev_ready = 0;
  gemm.on_wave_done = [&](int64_t done, TimeNs now) {
    for (; next_group < group_end.size() && group_end[next_group] <= done; ++next_group) {
      const size_t g = next_group;
      const size_t begin = g == 0 ? 0 : static_cast<size_t>(group_end[g - 1]);
      const double bytes = tile_bytes(p, tiles, begin, static_cast<size_t>(group_end[g]));
      ctx.add_interval("groups", fmt::format("group {}", g), "gemm", prev_ready, now);
      prev_ready = now;
      CommQueue::Call call;
      call.name = call_name(c, "group", static_cast<int>(g));
      call.overhead = overhead + us_to_ns(adj[g].extra_us);
      // NCCL needs each group contiguous: a tile-major output is reordered into rows first, by a kernel of its own
      // (its launch, as the model's reorder term).
      if (nccl && plan.output == OutputLayout::kTileMajor) {
        call.reorder_bytes = bytes;
        call.overhead += us_to_ns(ctx.hw.launch_us);
      }
      call.steps = collective_steps(ctx, c, adj[g].factor * bytes);
      if (g + 1 == group_end.size()) call.on_done = release;
      const TimeNs at = std::max(now, comm_ready);
      ctx.engine.at(at, [&comm, call = std::move(call)]() mutable { comm.post(std::move(call)); });
    }
  };
  gemm.start(launch);
  return ctx.engine.run();
}

}  // namespace ovl::sim::detail
