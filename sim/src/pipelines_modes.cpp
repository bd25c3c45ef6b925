// One pipeline per overlap mode, built from the pieces in pipelines.cpp.
#include <algorithm>
#include <memory>
#include <numeric>
#include <utility>

#include "pipelines_internal.hpp"

namespace ovl::sim::detail {

namespace {

double tile_bytes(const Problem& p, const std::vector<Tile>& tiles, size_t begin, size_t end) {
  double bytes = 0;
  for (size_t i = begin; i < end; ++i) bytes += static_cast<double>(tiles[i].rows * tiles[i].cols);
  return bytes * dtype_bytes(p.output_dtype());  // output tiles: bf16 or fp16 for FP8 inputs
}

// A separate collective call: NCCL's per-call overhead, or a TMA kernel's launch; none for a call a real world's
// measured link prices (its table's time holds it).
TimeNs call_overhead(const Context& ctx, const CallAdjust& adj) {
  if (ctx.problem.nodes() == 1 && measured_link_call(ctx.hw, ctx.plan.comm_algo, adj.call_bytes)) return 0;
  return us_to_ns(is_nccl(ctx.plan.comm_algo) ? ctx.hw.fit.nccl_launch_us : ctx.hw.fit.tma_launch_us);
}

std::string call_name(Collective c, const char* what, int index) {
  return fmt::format("{} {} {}", to_string(c), what, index);
}

// For each group whose last tile is among the first `done` (from `next` on, in order): its interval on the "groups"
// lane (from the previous group's readiness to `now`), then fn(group, its first tile).
template <typename Fn>
void each_ready_group(Context& ctx, const std::vector<int64_t>& group_end, size_t& next, TimeNs& prev_ready,
                      int64_t done, TimeNs now, Fn fn) {
  for (; next < group_end.size() && group_end[next] <= done; ++next) {
    ctx.add_interval("groups", fmt::format("group {}", next), "gemm", prev_ready, now);
    prev_ready = now;
    fn(next, next == 0 ? size_t(0) : static_cast<size_t>(group_end[next - 1]));
  }
}

// A persistent kernel's call: its steps' link latencies, taken out of the steps (paid once the bytes are sent).
TimeNs stream_latency(std::vector<Step>& steps) {
  TimeNs latency = 0;
  for (Step& st : steps) latency += std::exchange(st.latency, TimeNs(0));
  return latency;
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
  // One call over every row, at its mover's link load (as the model: its factor is 1, no per-piece time).
  const CallAdjust adj = call_adjustments(p, ctx.plan, ctx.hw).front();
  call.overhead = call_overhead(ctx, adj);
  call.steps = collective_steps(ctx, c, static_cast<double>(p.comm_bytes()), adj);
  const TimeNs launch = us_to_ns(ctx.hw.fit.launch_us);
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
    bytes.push_back(static_cast<double>((r1 - r0) * cols) * dtype_bytes(p.comm_dtype()));
  }
  // As the model: each call's bytes and extra time (the loopback rank-0 play; else factor 1, no extra time).
  const std::vector<CallAdjust> adj = call_adjustments(p, ctx.plan, ctx.hw);
  for (int i = 0; i < chunks; ++i) bytes[static_cast<size_t>(i)] *= adj[static_cast<size_t>(i)].factor;
  ctx.groups = chunks;
  const TimeNs launch = us_to_ns(ctx.hw.fit.launch_us);
  auto make_call = [&](int i) {
    CommQueue::Call call;
    call.name = call_name(c, "chunk", i);
    call.overhead = call_overhead(ctx, adj[static_cast<size_t>(i)]) + us_to_ns(adj[static_cast<size_t>(i)].extra_us);
    call.steps = collective_steps(ctx, c, bytes[static_cast<size_t>(i)], adj[static_cast<size_t>(i)]);
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
    // A call launched at its chunk's end while no call runs finds the next chunk's persistent cuBLAS grid on the SMs
    // its CTAs need: it starts once that chunk has done cublas_tiles_before_comm tiles, as the model
    // (recurrence_chunks_gemm_then_comm). A call queued behind a running one takes that call's SMs.
    // A chunk's tiles done before a call launched at its start gets SMs (chunks are equal: chunks divides M).
    const int64_t before =
        cublas_tiles_before_comm(std::max<int64_t>(1, static_cast<int64_t>(gemms.front()->tile_count())), ctx.gemm_sms,
                                 ctx.comm_ctas, ctx.hw.spec.sm_count);
    int deferred = -1;  // the call waiting for SMs from the running chunk
    for (int i = 0; i < chunks; ++i) {
      const auto chunk = static_cast<size_t>(i);
      gemms[chunk]->on_wave_done = [&](int64_t done, TimeNs) {
        if (deferred >= 0 && done >= before) comm.post(make_call(std::exchange(deferred, -1)));
      };
      gemms[chunk]->on_finished = [&, i, chunk](TimeNs) {
        if (i + 1 < chunks && comm.idle() && before > 0)
          deferred = i;
        else
          comm.post(make_call(i));
        if (i + 1 < chunks) gemms[chunk + 1]->start(launch);
      };
    }
    gemms[0]->start(launch);
    return ctx.engine.run();  // the callbacks hold references to this block's locals
  }
}

// comm_algo ce (tile-signal; core/src/executor_ce.cpp): the GEMM on its whole grid; each group's copies take no CTA
// (stream memory waits, copy engines): f = (W-1)/W of the group's bytes cross to the peers at the copy engines'
// rate (copy_engine_GBps), after a flag's latency, reading and writing HBM. GEMM+AR / GEMM+RS: the owner's sum on
// comm_ctas CTAs (a kernel launch; S/W out, W + 1 HBM bytes per byte out), and for AllReduce then the copies of the
// sums: per group after its copies when the GEMM's grid leaves the sum its CTAs (ce_sums_per_group), else once
// after the last group's copies. In loopback (W > 1) the copies are same-device copies on SMs: GEMM+AR /
// GEMM+RS's wait for the GEMM's end. AllGather+GEMM: every group's copies from the start; a wave starts once its
// rows have arrived. As the model prices it (estimate_signaled).
TimeNs run_copy_engine(Context& ctx) {
  const Problem& p = ctx.problem;
  const Plan& plan = ctx.plan;
  const Collective c = collective_of(p.op);
  const double w = p.world, f = (w - 1) / w;
  CommQueue comm(ctx, false);  // the copies hold no SM; the sum runs after the GEMM
  std::vector<Tile> tiles = visit_tiles(p, plan, 0, p.m);
  const TimeNs launch = us_to_ns(ctx.hw.fit.launch_us);
  GemmRun gemm(ctx, tiles, "");
  std::vector<int64_t> group_end;
  int64_t sum = 0;
  for (int g : plan.tile_groups) group_end.push_back(sum += g);
  ctx.groups = static_cast<int>(group_end.size());
  // The copies of `bytes` buffer bytes (none in a world of 1).
  auto copies = [&](double bytes, const std::string& name) {
    std::vector<Step> steps;
    if (p.world <= 1 || bytes <= 0) return steps;
    Step st;
    st.amount = f * bytes;
    st.rx_weight = 1;
    st.hbm_weight = 2;
    st.bound = copy_engine_GBps(ctx.comm_hw);
    st.latency = us_to_ns(ctx.comm_hw.fit.link_latency_us);
    st.name = name;
    steps.push_back(st);
    return steps;
  };
  if (c == Collective::kAllGather) {
    const double total = static_cast<double>(p.comm_bytes());
    double arrived = 0;
    gemm.rows_available = [&arrived] { return arrived; };
    const std::vector<double> rows_done =
        rows_up_to(tiles, std::vector<size_t>(group_end.begin(), group_end.end()), plan.tile.m, p.m);
    for (size_t g = 0; g < group_end.size(); ++g) {
      CommQueue::Call call;
      call.name = call_name(c, "group", static_cast<int>(g));
      call.steps = copies(total * (rows_done[g] - (g == 0 ? 0.0 : rows_done[g - 1])), "copies");
      call.on_done = [&gemm, &arrived, &rows_done, g](TimeNs) {
        arrived = rows_done[g];
        gemm.data_arrived();
      };
      comm.post(std::move(call));
    }
    gemm.start(launch);
    return ctx.engine.run();
  }
  const bool defer = ctx.hw.emulation.loopback && p.world > 1;
  bool gemm_done = false;
  std::vector<CommQueue::Call> deferred;
  auto post = [&](CommQueue::Call call) {
    if (defer && !gemm_done) {
      deferred.push_back(std::move(call));
    } else {
      comm.post(std::move(call));
    }
  };
  gemm.on_finished = [&](TimeNs) {
    gemm_done = true;
    for (CommQueue::Call& call : deferred) comm.post(std::move(call));
    deferred.clear();
  };
  const double total = static_cast<double>(p.comm_bytes());
  // The owner's sum of `bytes` buffer bytes (bytes / W out, W + 1 HBM bytes per byte out) on comm_ctas CTAs, after
  // its launch.
  auto sum_step = [&](double bytes) {
    Step st;
    st.amount = bytes / w;
    st.local = true;
    st.rx_weight = 0;
    st.hbm_weight = w + 1;
    st.cta_rate = ctx.comm_hw.fit.per_cta_copy_GBps / (w + 1);
    st.cta_rate_beside = ctx.comm_hw_beside.fit.per_cta_copy_GBps / (w + 1);
    st.latency = launch;
    st.name = "sum";
    return st;
  };
  const bool per_group = ce_sums_per_group(plan, ctx.hw.spec.sm_count);
  size_t next_group = 0;
  TimeNs prev_ready = 0;
  gemm.on_wave_done = [&](int64_t done, TimeNs now) {
    each_ready_group(ctx, group_end, next_group, prev_ready, done, now, [&](size_t g, size_t begin) {
      const double bytes = tile_bytes(p, tiles, begin, static_cast<size_t>(group_end[g]));
      CommQueue::Call call;
      call.name = call_name(c, "group", static_cast<int>(g));
      call.steps = copies(bytes, "copies");
      if (per_group) {  // the group's sum beside the GEMM (a launch), and AllReduce's copies of it
        call.steps.push_back(sum_step(bytes));
        if (c == Collective::kAllReduce) for (const Step& st : copies(bytes, "gather")) call.steps.push_back(st);
      }
      post(std::move(call));
      if (per_group || g + 1 < group_end.size()) return;
      // The owner's sum after the last group's copies (FIFO), then AllReduce's copies of the sums.
      CommQueue::Call sum_call;
      sum_call.name = fmt::format("{} sum", to_string(c));
      sum_call.steps.push_back(sum_step(total));
      post(std::move(sum_call));
      if (c == Collective::kAllReduce) {
        CommQueue::Call gather;
        gather.name = "all-gather of the sums";
        gather.steps = copies(total, "copies");
        post(std::move(gather));
      }
    });
  };
  gemm.start(launch);
  return ctx.engine.run();
}

// Tile-signal (FlashOverlap), green-context (GCOverlap) and tma (Oh Overlap): one persistent GEMM signals tile
// groups; each group's collective starts when the group's last tile is stored and the previous group's call is
// done. tile-signal: an NCCL call per group on shared SMs (its CTAs take SMs while it runs); green-context: the
// same calls on their own partition; tma: one persistent TMA kernel launched with the GEMM polls the group
// counters (its own work per group, no per-call launch, the link latencies once after the last group) and holds its
// SMs from launch to the end.
// AllGather+GEMM: a gather call per tile group from the start; a wave starts once the rows it reads have arrived.
TimeNs run_signaled(Context& ctx) {
  if (ctx.plan.comm_algo == CommAlgo::kCopyEngine) return run_copy_engine(ctx);
  const Problem& p = ctx.problem;
  const Plan& plan = ctx.plan;
  const Collective c = collective_of(p.op);
  const bool tma_kernel = mode_traits(plan.mode).persistent_comm;
  const bool nccl = is_nccl(plan.comm_algo);
  CommQueue comm(ctx, !ctx.partitioned && !tma_kernel);
  std::vector<Tile> tiles = visit_tiles(p, plan, 0, p.m);
  const TimeNs launch = us_to_ns(ctx.hw.fit.launch_us);
  // Per group: an NCCL call's launch plus the group's counter kernel and gap (signaled_group_us); the persistent TMA
  // kernel its own per-group work (tma_group_us), as the model's per-group cost.
  const auto overhead = [&](const CallAdjust& a) {
    return tma_kernel ? us_to_ns(ctx.hw.fit.tma_group_us)
                      : call_overhead(ctx, a) + (nccl ? us_to_ns(signaled_group_us(ctx.hw)) : TimeNs(0));
  };
  // The persistent TMA kernel starts with the GEMM; calls cannot begin before it is up.
  const TimeNs comm_ready = tma_kernel ? us_to_ns(ctx.hw.fit.tma_launch_us) : 0;
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
      call.overhead = overhead(adj[g]) + us_to_ns(adj[g].extra_us);
      call.steps =
          collective_steps(ctx, c, adj[g].factor * total * (rows_done[g] - (g == 0 ? 0.0 : rows_done[g - 1])), adj[g]);
      // The persistent kernel streams the groups: a group's rows arrive its link latencies after its bytes are sent,
      // while the next group's bytes move (the model's GroupComm::end_us).
      const TimeNs latency = tma_kernel ? stream_latency(call.steps) : TimeNs(0);
      call.on_done = [&ctx, &gemm, &arrived, &rows_done, g, last = g + 1 == group_end.size(), release,
                      latency](TimeNs) {
        ctx.engine.after(latency, [&ctx, &gemm, &arrived, &rows_done, g, last, release] {
          arrived = std::max(arrived, rows_done[g]);
          gemm.data_arrived();
          if (last) release(ctx.engine.now());
        });
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
    each_ready_group(ctx, group_end, next_group, prev_ready, done, now, [&](size_t g, size_t begin) {
      const double bytes = tile_bytes(p, tiles, begin, static_cast<size_t>(group_end[g]));
      CommQueue::Call call;
      call.name = call_name(c, "group", static_cast<int>(g));
      call.overhead = overhead(adj[g]) + us_to_ns(adj[g].extra_us);
      // NCCL needs each group contiguous: a tile-major output is reordered into rows first, by a kernel of its own
      // (its launch, as the model's reorder term).
      if (nccl && plan.output == OutputLayout::kTileMajor) {
        call.reorder_bytes = bytes;
        call.overhead += us_to_ns(ctx.hw.fit.launch_us);
      }
      call.steps = collective_steps(ctx, c, adj[g].factor * bytes, adj[g]);
      const bool last = g + 1 == group_end.size();
      if (tma_kernel) {
        // The persistent kernel streams the groups: each group's link latencies hide behind the next group's bytes,
        // and the kernel ends (and frees its SMs) the last group's latencies after its bytes (the model's
        // GroupComm::end_us).
        const TimeNs latency = stream_latency(call.steps);
        if (last) {
          call.on_done = [&ctx, latency, release](TimeNs) {
            ctx.engine.after(latency, [&ctx, release] { release(ctx.engine.now()); });
          };
        }
      } else if (last) {
        call.on_done = release;
      }
      const TimeNs at = std::max(now, comm_ready);
      ctx.engine.at(at, [&comm, call = std::move(call)]() mutable { comm.post(std::move(call)); });
    });
  };
  gemm.start(launch);
  return ctx.engine.run();
}

}  // namespace ovl::sim::detail
