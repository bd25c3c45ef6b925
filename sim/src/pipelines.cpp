// The pieces every pipeline is built from: the simulation context (resources of the representative GPU), the
// persistent GEMM in waves, the steps of each collective and the FIFO of collective calls; and simulate().
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "ovl/error.hpp"
#include "ovl/tile_order.hpp"
#include "pipelines_internal.hpp"

namespace ovl::sim {

namespace detail {

Context::Context(const Problem& p, const Plan& pl, const Hardware& h, const SimOptions& opt)
    : problem(p),
      plan(pl),
      hw(h),
      options(opt),
      comm_hw(comm_hardware(h, pl.mode)),
      comm_hw_beside(comm_hardware(h, pl.mode, true)) {
  partitioned = runs_partitioned(plan);
  if (mode_signals(plan.mode))
    gemm_sms = signaled_gemm_grid(plan, problem, hw);
  else if (plan.gemm_sms > 0)
    gemm_sms = std::min(plan.gemm_sms, hw.spec.sm_count);
  else
    gemm_sms = partitioned ? std::max(hw.spec.sm_granularity, hw.spec.sm_count - plan.comm_sms) : hw.spec.sm_count;
  // At least 1 in a valid plan, but 0 on the copy engines (nccl-symmetric's AllGather under CTA policy zero).
  comm_ctas = collective_ctas(plan, collective_of(problem.op));
  cublas = !mode_signals(plan.mode) && unsignaled_gemm_impl(problem.dtype) == GemmImpl::kCublas;
  const double efficiency = cublas ? hw.fit.cublas_efficiency : hw.fit.gemm_efficiency;
  // The GEMM as the closed-form model estimates it (one decomposed chunk, or the whole GEMM): its HBM demand alone
  // (for the HBM contention term: its HBM bytes over its body time, over the device's bandwidth), its L2 misses and
  // the SMs its kernel keeps busy.
  GemmShape shape{problem.m, problem.n, problem.k, problem.dtype};
  if (mode_traits(plan.mode).units == ModeUnits::kChunks && plan.chunks > 1)
    shape.m = std::max<int64_t>(1, problem.m / plan.chunks);
  const GemmEstimate g =
      estimate_gemm(shape, cublas ? GemmImpl::kCublas : GemmImpl::kOvl, std::clamp(gemm_sms, 1, hw.spec.sm_count),
                    plan.tile, plan.tile_order, hw, GemmRegime::kOperator);
  gemm_hbm_util = std::min(1.0, g.hbm_bytes / std::max(g.us - hw.fit.launch_us, 1e-9) / 1e3 / hw.spec.hbm_GBps);
  cublas_tiles = std::max<int64_t>(1, g.tiles);
  cublas_sms = std::min(double(gemm_sms), double(cublas_tiles) / g.waves_used);
  // TFLOP/s per SM -> FLOPs per ns: x 1e12 / 1e9. The per-SM rate also depends on how many SMs run matrix work
  // (the H200's clock under its power limit), the same busy-SM measure as the model's: ours, tiles over waves of the
  // whole GEMM; cuBLAS, the SMs its kernel keeps busy (one chunk's, split-K pieces included). Our GEMM's main loop
  // waits on its operand loads that miss the L2, as the model prices it (gemm_l2_miss_cost). Inside an operator the
  // GEMM's compute (matrix work and epilogues) takes operator_gemm_factor times its time in a sustained stream of
  // GEMMs (the power state, as the closed-form model's GemmRegime::kOperator).
  const int64_t tiles = std::max<int64_t>(1, plan.tile_count(problem));
  const int64_t waves = (tiles + gemm_sms - 1) / gemm_sms;
  const double busy = cublas ? g.busy_sms : double(tiles) / double(waves);
  const double regime = gemm_regime_factor(hw, GemmRegime::kOperator);
  per_sm_flops_per_ns = hw.spec.matrix_tflops_per_sm * 1e3 * matrix_rate_scale(problem.dtype) * efficiency /
                        (matrix_clock_factor(hw, busy) * g.l2_miss_factor * regime);
  tile_epilogue_us = (cublas ? hw.fit.cublas_tile_epilogue_us : hw.fit.tile_epilogue_us) * regime;

  // GB/s = bytes per ns.
  sm = engine.add_resource("gpu0 sm pool", ResourceKind::kSmPool, 0, gemm_sms * per_sm_flops_per_ns);
  hbm = engine.add_resource("gpu0 hbm", ResourceKind::kHbm, 0, hw.spec.hbm_GBps);
  if (problem.world > 1) {
    tx = engine.add_resource("gpu0 nvlink tx", ResourceKind::kLinkTx, 0, hw.effective_link_GBps());
    rx = engine.add_resource("gpu0 nvlink rx", ResourceKind::kLinkRx, 0, hw.effective_link_GBps());
  }
  // The node's network link, as the representative GPU's share of it (net_GBps per GPU per direction).
  if (problem.nodes() > 1) net = engine.add_resource("node0 net (gpu0 share)", ResourceKind::kNet, 0, hw.spec.net_GBps);
  if (options.record_counters) engine.set_rate_observer([this](TimeNs t) { sample_counters(t); });
}

// The GEMM's slowdown while communication runs beside it, with the closed-form model's two terms and the same
// Hardware parameters (so one calibrated profile serves both):
//   time factor = 1 + shared_sm_penalty x cublas_lost_sms_slowdown(tiles, gemm_sms, lost) + hbm_contention x u_gemm
//                 x u_comm
// lost = SMs a shared-SM communication kernel takes from cuBLAS's grid (gemm_sms + its CTAs - sm_count; none on
// partitions, none from our persistent GEMM, whose CTAs hold their SMs: the collective waits for SMs instead,
// comm_ctas_now), cublas_lost_sms_slowdown the grid's tiles (one chunk's) in whole waves on the SMs left; u_gemm the
// GEMM's HBM demand alone, u_comm that of the communication flows running now (both over hbm_GBps). The terms
// apply only while the communication runs, which is how the model's overlap fraction f enters.
// The pool runs the current wave's tiles (a tail wave on as many SMs as it has tiles); cuBLAS (sequential,
// decomposed) balances its tail over the whole grid, as the model's tiles / sms waves, and on fewer tiles than SMs
// runs at the rate of the waves the model counts (cublas_sms: one whole wave, or split-K's pieces).
void Context::update_pool() {
  const double grid = gemm_sms;
  double sms = grid;
  if (cublas)
    sms = cublas_sms;
  else if (wave_tiles > 0)
    sms = std::min(grid, static_cast<double>(wave_tiles));
  double factor = 1.0;
  if (cublas && !partitioned && comm_sms_active > 0) {
    const double lost = std::clamp(grid + comm_sms_active - hw.spec.sm_count, 0.0, grid - 1.0);
    factor += hw.fit.shared_sm_penalty * cublas_lost_sms_slowdown(cublas_tiles, gemm_sms, int(lost));
  }
  factor += hw.fit.hbm_contention * gemm_hbm_util * std::clamp(comm_hbm_util, 0.0, 1.0);
  engine.set_capacity(sm, sms * per_sm_flops_per_ns / factor);
}

void Context::set_gemm_resident(int ctas) {
  if (cublas || ctas == gemm_resident) return;
  gemm_resident = ctas;
  comm_rates_changed();
}

void Context::comm_rates_changed() {
  for (const auto& fn : on_comm_rate_changed)
    if (fn) fn();
}

int Context::comm_ctas_now(bool shared) const {
  if (!shared || partitioned || cublas || comm_ctas == 0) return comm_ctas;
  return std::clamp(hw.spec.sm_count - gemm_resident, 1, comm_ctas);
}

void Context::comm_hbm_changed(double util) {
  comm_hbm_util += util;
  if (std::abs(comm_hbm_util) < 1e-12) comm_hbm_util = 0;
  update_pool();
}

void Context::comm_kernel_started(int ctas) {
  if (partitioned) return;
  comm_sms_active += ctas;
  update_pool();
}

void Context::comm_kernel_ended(int ctas) {
  if (partitioned) return;
  comm_sms_active -= ctas;
  update_pool();
}

void Context::add_interval(const std::string& lane, std::string name, const std::string& category, TimeNs start,
                           TimeNs end) {
  if (!options.record_timeline) return;
  timeline.intervals.push_back(Interval{0, lane, std::move(name), category, start, end});
}

void Context::sample_counters(TimeNs t) {
  auto sample = [&](ResourceId id, const char* track) {
    if (id < 0) return;
    const Resource& r = engine.resource(id);
    const double value = r.capacity > 0 ? std::min(1.0, r.load / r.capacity) : 0.0;
    auto it = last_sample_.find(track);
    if (it != last_sample_.end()) {
      if (std::abs(it->second.second - value) < 1e-9) return;
      if (it->second.first == t) {  // several recomputations in one instant: keep the last value
        for (auto c = timeline.counters.rbegin(); c != timeline.counters.rend(); ++c)
          if (c->track == track) {
            c->value = value;
            break;
          }
        it->second.second = value;
        return;
      }
    }
    last_sample_[track] = {t, value};
    timeline.counters.push_back(CounterSample{0, track, t, value});
  };
  sample(tx, "nvlink util");
  sample(hbm, "hbm util");
  sample(sm, "sm util");
  sample(net, "net util");
}

// ---------------------------------------------------------------------------------------------------------------
GemmRun::GemmRun(Context& ctx, std::vector<Tile> tiles, std::string label)
    : ctx_(ctx), tiles_(std::move(tiles)), label_(std::move(label)) {
  ++ctx_.gemm_runs;
  ctx_.mma_flops += static_cast<double>(tiles_.size()) * 2.0 * ctx_.plan.tile.m * ctx_.plan.tile.n *
                    static_cast<double>(ctx_.problem.k);
  const auto grid = static_cast<size_t>(std::max(1, ctx_.gemm_sms));
  for (size_t end = std::min(grid, tiles_.size()); !tiles_.empty(); end = std::min(end + grid, tiles_.size())) {
    wave_end_.push_back(end);
    if (end == tiles_.size()) break;
  }
  wave_rows_needed_ = rows_up_to(tiles_, wave_end_, ctx_.plan.tile.m, ctx_.problem.m);
}

std::vector<double> rows_up_to(const std::vector<Tile>& tiles, const std::vector<size_t>& ends, int64_t tile_m,
                               int64_t m) {
  std::vector<double> out;
  double needed = 0;
  size_t i = 0;
  for (size_t end : ends) {
    for (; i < end; ++i) {
      needed = std::max(needed, static_cast<double>(tiles[i].row * tile_m + tiles[i].rows) / static_cast<double>(m));
    }
    out.push_back(needed);
  }
  return out;
}

void GemmRun::start(TimeNs launch_delay) {
  ctx_.engine.after(launch_delay, [this] { start_wave(0); });
}

void GemmRun::data_arrived() {
  if (waiting_) start_wave(next_wave_);
}

void GemmRun::start_wave(size_t w) {
  if (w >= wave_end_.size()) {
    ctx_.gemm_end = std::max(ctx_.gemm_end, ctx_.engine.now());
    ++ctx_.gemm_runs_done;  // the GEMM may be over, and its CTAs are gone: one notification for both
    if (!ctx_.cublas) ctx_.gemm_resident = 0;
    ctx_.comm_rates_changed();
    if (on_finished) on_finished(ctx_.engine.now());
    return;
  }
  next_wave_ = w;
  // AllGather: wait until the rows this wave reads have arrived (1e-9: rounding of summed fractions).
  if (rows_available && rows_available() + 1e-9 < wave_rows_needed_[w]) {
    if (!waiting_) wait_start_ = ctx_.engine.now();
    waiting_ = true;
    return;
  }
  if (waiting_) {
    ctx_.add_interval("gemm", "wait for rows", "wait", wait_start_, ctx_.engine.now());
    waiting_ = false;
  }
  const size_t begin = w == 0 ? 0 : wave_end_[w - 1];
  const size_t end = wave_end_[w];
  const Problem& p = ctx_.problem;
  const double elem = dtype_bytes(p.dtype);                // A and B
  const double out_elem = dtype_bytes(p.output_dtype());  // C (bf16 or fp16 for FP8 inputs)
  double flops = 0, out_bytes = 0;
  std::vector<std::pair<int64_t, int64_t>> rows, cols;  // (tile row or column, its extent)
  for (size_t i = begin; i < end; ++i) {
    const Tile& t = tiles_[i];
    // wgmma pads an edge tile: its matrix work is a whole tile's (the model's every tile costs a full tile).
    flops +=
        2.0 * static_cast<double>(ctx_.plan.tile.m) * static_cast<double>(ctx_.plan.tile.n) * static_cast<double>(p.k);
    out_bytes += static_cast<double>(t.rows * t.cols) * out_elem;
    rows.emplace_back(t.row, t.rows);
    cols.emplace_back(t.col, t.cols);
  }
  // Distinct panels (sort + unique: a wave may hold many tiles on a large device profile).
  auto distinct_extent = [](std::vector<std::pair<int64_t, int64_t>>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    int64_t sum = 0;
    for (const auto& e : v) sum += e.second;
    return sum;
  };
  const int64_t a_rows = distinct_extent(rows);
  const int64_t b_cols = distinct_extent(cols);
  // HBM traffic of a wave: every A row panel and B column panel the wave touches is read once (L2 serves the
  // reuse among the wave's tiles), and each C tile is written once.
  const double bytes = static_cast<double>(a_rows + b_cols) * static_cast<double>(p.k) * elem + out_bytes;
  const double flops_per_byte = flops / bytes;
  const auto n_tiles = static_cast<double>(end - begin);
  const TimeNs wave_start = ctx_.engine.now();
  ++ctx_.waves;
  FlowSpec spec;
  spec.name = fmt::format("{}wave {}", label_, w);
  spec.amount = bytes;
  spec.uses = {{ctx_.sm, flops_per_byte}, {ctx_.hbm, 1.0}};
  // The wave's SMs (its tile count, or cuBLAS's whole grid) and the contention are the SM pool's capacity.
  ctx_.wave_tiles = static_cast<int64_t>(n_tiles);
  ctx_.set_gemm_resident(w + 1 == wave_end_.size() ? static_cast<int>(n_tiles) : ctx_.gemm_sms);
  ctx_.update_pool();
  spec.on_done = [this, w, wave_start, end] {
    ctx_.engine.after(us_to_ns(ctx_.tile_epilogue_us), [this, w, wave_start, end] {
      const TimeNs now = ctx_.engine.now();
      ctx_.add_interval("gemm", fmt::format("{}wave {}", label_, w), "gemm", wave_start, now);
      if (on_wave_done) on_wave_done(static_cast<int64_t>(end), now);
      start_wave(w + 1);
    });
  };
  ctx_.engine.start_flow(std::move(spec));
}

// ---------------------------------------------------------------------------------------------------------------
namespace {

// HBM bytes per buffer byte of each half of a collective among `w` ranks of one node: the closed-form model's
// coefficients (coll_coeffs' hbm_bytes), split into the reduce half and the gather half. `both`: the halves of one
// AllReduce (the reduce half's output is the gather half's input: neither written nor read on its own).
//   NCCL ring   RS 1 + 1/w + f, AG 1 + 1/w, AR 2 + 2f (1 + f each half)
//   TMA push    RS 3 - 1/w, AG 1 + 2/w, AR 4 - 1/w (3 - 1/w + 1)
//   TMA pull    RS 1 + 1/w, AG 2, AR 1 + 1/w + 2f
//   NCCL's symmetric kernels   RS 1 + 1/w, AG 1 + 1/w, AR 2 (1 each half)
// `rank0`: the loopback emulation of rank 0's share (Emulation::loopback_rank0; model/src/comm_model.cpp says what
// its push mover moves): the reduction zeroes rank 0's pieces and adds all W sources (3 + 1/W), the gather copies
// the W-1 other pieces in (2 f), an AllGather copies every owner's rows (2).
double reduce_hbm(CommAlgo algo, int w, bool both, bool rank0) {
  const double f = double(w - 1) / w;
  switch (algo) {
    case CommAlgo::kTmaPush:
      return rank0 ? 3.0 + 1.0 / w : 3.0 - 1.0 / w;
    case CommAlgo::kTmaPull:
      return 1.0 + 1.0 / w;
    case CommAlgo::kNcclSymmetric:
      return both ? 1.0 : 1.0 + 1.0 / w;
    default:
      return both ? 1.0 + f : 1.0 + 1.0 / w + f;
  }
}
double gather_hbm(CommAlgo algo, int w, bool both, bool rank0) {
  const double f = double(w - 1) / w;
  switch (algo) {
    case CommAlgo::kTmaPush:
      if (rank0) return both ? 2.0 * f : 2.0;
      return both ? 1.0 : 1.0 + 2.0 / w;
    case CommAlgo::kTmaPull:
      return both ? 2.0 * f : 2.0;
    case CommAlgo::kNcclSymmetric:
      return both ? 1.0 : 1.0 + 1.0 / w;
    default:
      return both ? 1.0 + f : 1.0 + 1.0 / w;
  }
}

// Reduction half of a collective among `w` ranks of one node over D bytes (each rank ends with D / w summed).
// `hbm`: the half's HBM bytes per buffer byte, spread over its steps.
void reduce_phase(std::vector<Step>& out, CommAlgo algo, double d, int w, const Step& base, double hbm) {
  if (w <= 1) return;
  const double f = double(w - 1) / w;
  if (algo == CommAlgo::kNcclRing) {
    // step s: send chunk (r - s) to the next rank, receive from the previous one, add it to the local chunk.
    for (int s = 0; s < w - 1; ++s) {
      Step st = base;
      st.amount = d / w;
      st.hbm_weight = hbm / f;
      st.name = fmt::format("reduce-scatter step {}", s);
      out.push_back(st);
    }
  } else if (algo == CommAlgo::kNcclNvls) {
    // The switch reduces: each rank sends its (w-1) foreign shards and receives one summed shard.
    Step st = base;
    st.amount = d * (w - 1) / w;
    st.rx_weight = 1.0 / (w - 1);
    st.hbm_weight = 1.0 + 1.0 / (w - 1);
    st.name = "nvls reduce";
    out.push_back(st);
  } else {
    // One shot: push (or pull) every foreign shard to (from) its owner at once; the owner adds them. NCCL's
    // symmetric kernels pull (LD).
    Step st = base;
    st.amount = d * (w - 1) / w;
    st.hbm_weight = hbm / f;  // pull reduces in flight: no staging write
    st.name = algo == CommAlgo::kTmaPush   ? "push-reduce"
              : algo == CommAlgo::kTmaPull ? "pull-reduce"
                                           : "symmetric reduce";
    out.push_back(st);
  }
}

// Gather half among `w` ranks of one node: each rank holds D / w and ends with all D.
void gather_phase(std::vector<Step>& out, CommAlgo algo, double d, int w, const Step& base, double hbm) {
  if (w <= 1) return;
  const double f = double(w - 1) / w;
  if (algo == CommAlgo::kNcclRing) {
    for (int s = 0; s < w - 1; ++s) {
      Step st = base;
      st.amount = d / w;
      st.hbm_weight = hbm / f;
      st.name = fmt::format("all-gather step {}", s);
      out.push_back(st);
    }
  } else if (algo == CommAlgo::kNcclNvls) {
    // Multicast: send one shard, receive (w-1).
    Step st = base;
    st.amount = d / w;
    st.rx_weight = w - 1;
    st.hbm_weight = w;
    st.name = "nvls multicast";
    out.push_back(st);
  } else {
    // NCCL's symmetric kernels push (ST).
    Step st = base;
    st.amount = d * (w - 1) / w;
    st.hbm_weight = hbm / f;
    st.name = algo == CommAlgo::kTmaPush   ? "push-gather"
              : algo == CommAlgo::kTmaPull ? "pull-gather"
                                           : "symmetric gather";
    out.push_back(st);
  }
}

void net_ring(std::vector<Step>& out, int steps, double chunk, const Step& base, double hbm_weight, const char* what) {
  for (int s = 0; s < steps; ++s) {
    Step st = base;
    st.amount = chunk;
    st.hbm_weight = hbm_weight;
    st.name = fmt::format("net {} step {}", what, s);
    out.push_back(st);
  }
}
}  // namespace

std::vector<Step> collective_steps(const Context& ctx, Collective c, double bytes, const CallAdjust& adj) {
  const double link_load = adj.link_load, call_bytes = adj.call_bytes;
  const Hardware& hw = ctx.comm_hw;
  const Problem& p = ctx.problem;
  const CommAlgo algo = ctx.plan.comm_algo;
  std::vector<Step> out;
  if (p.world <= 1) {
    Step st;
    st.amount = bytes;
    st.local = true;
    st.rx_weight = 0;
    st.hbm_weight = 2;
    // As the model: NCCL's one-rank call is a device copy at HBM speed whatever the CTAs; our kernels copy at
    // per_cta_copy_GBps per CTA, which counts the bytes read and written (two per byte copied).
    st.cta_rate = st.cta_rate_beside = is_nccl(algo) ? 0.0 : hw.fit.per_cta_copy_GBps / 2;
    st.name = "local copy";
    out.push_back(st);
    return out;
  }
  const int nodes = p.nodes();
  if (hw.emulation.paced && is_nccl(algo) && nodes == 1) {
    // The paced loopback play of an NCCL-algorithm call (comm_model.cpp, coll_coeffs' paced case): one SIMT kernel
    // over rank 0's pieces whose peers' bytes (the ring's link bytes) are paced to the link profile, after the
    // ring's steps' latencies. Progress is counted in link bytes: per CTA at most the profile's paced rate for a call
    // of these bytes (LinkProfile::paced_cta_GBps) and the SIMT kernel's HBM rate over its HBM bytes per link byte,
    // together at most that rate on the plan's CTAs. A unit paced as a real world's Reduce or Broadcast per owner
    // (CallAdjust::link_load) has link_load times the bytes.
    const double moved = loopback_rank0_nccl_bytes(c, p.world);
    const double link_f = (c == Collective::kAllReduce ? 2.0 : 1.0) * (p.world - 1) / p.world * link_load;
    const double steps = link_steps(c, algo, p.world);
    const LinkProfile& lp = *hw.link;
    const int ctas = std::max(1, ctx.comm_ctas);
    const double paced = lp.paced_cta_GBps(algo, ctas, c, call_bytes);
    Step st;
    st.amount = bytes * link_f;
    st.local = true;
    st.rx_weight = 0;
    st.hbm_weight = moved / link_f;
    st.cta_rate = std::min(paced, hw.fit.nccl_per_cta_GBps * link_f / moved);
    st.cta_rate_beside = std::min(paced, ctx.comm_hw_beside.fit.nccl_per_cta_GBps * link_f / moved);
    st.bound = paced * ctas;
    st.latency = lp.latency_measured(algo, call_bytes) ? TimeNs(0) : us_to_ns(steps * hw.fit.link_latency_us);
    st.name = "paced loopback call";
    out.push_back(st);
    return out;
  }
  if (hw.emulation.loopback_rank0 && is_nccl(algo) && nodes == 1) {
    // The loopback emulation of rank 0's share of an NCCL-algorithm call: one SIMT kernel, no ring, all in rank 0's
    // HBM (loopback_rank0_nccl_bytes), at min(ctas x the SIMT per-CTA rate, HBM) (loopback_hardware), as the model.
    Step st;
    st.amount = bytes * loopback_rank0_nccl_bytes(c, p.world);
    st.local = true;
    st.rx_weight = 0;
    st.hbm_weight = 1;
    st.cta_rate = hw.fit.nccl_per_cta_GBps;
    st.cta_rate_beside = ctx.comm_hw_beside.fit.nccl_per_cta_GBps;
    st.bound = hw.effective_link_GBps();
    st.name = "loopback call";
    out.push_back(st);
    return out;
  }
  if (ctx.comm_ctas == 0) {
    // nccl-symmetric's AllGather under CTA policy zero: NCCL's copy engines copy the own rows to every peer (f link
    // bytes, the own rows' local copy too: ce's copies, comm_model.cpp) between a ready and a completion flag; no CTA.
    const double f = double(p.world - 1) / p.world;
    Step st;
    st.amount = bytes * f;
    st.hbm_weight = (2 * f + 2.0 / p.world) / f;
    st.bound = copy_engine_GBps(hw);
    st.latency = us_to_ns(2 * hw.fit.link_latency_us);
    st.name = "copy-engine gather";
    out.push_back(st);
    return out;
  }
  const int local = nodes > 1 ? p.gpus_per_node : p.world;
  // A real world over a measured link: the call's link bytes at the table's busbw for its size and the kernel's CTAs
  // (comm_model.cpp; comm_hw's table after the GEMM, comm_hw_beside's beside it), spread over the ring's steps; the
  // table's time holds the steps' latencies (and the launch: call_overhead).
  const bool measured = nodes == 1 && measured_link_call(hw, algo, call_bytes);
  // Per CTA after the GEMM (comm_hw) and beside it (comm_hw_beside); NCCL is also bound by its link efficiency.
  auto link_rate = [&](const Hardware& h) {
    if (measured) return h.link->paced_cta_GBps(algo, std::max(1, ctx.comm_ctas), c, call_bytes);
    const double r =
        is_nccl(algo) ? per_cta_GBps(algo, h)
                      : per_cta_GBps(algo, h) / cta_bytes_per_link_byte(c, algo, p.world, h.emulation.loopback_rank0);
    // A paced loopback: each CTA paces its own link bytes to the profile's rate per CTA for the kernel's CTAs, so the
    // call's busiest CTA, link_load times an even share, sets the rate of them all.
    return h.emulation.paced
               ? std::min(r, h.link->paced_cta_GBps(algo, std::max(1, ctx.comm_ctas), c, call_bytes) / link_load)
               : r;
  };
  Step link;
  link.cta_rate = link_rate(hw);
  link.cta_rate_beside = link_rate(ctx.comm_hw_beside);
  if (is_nccl(algo) && !measured) link.bound = hw.fit.nccl_efficiency * hw.effective_link_GBps();
  link.latency = measured ? TimeNs(0) : us_to_ns(hw.fit.link_latency_us);
  Step netw;
  netw.network = true;
  netw.cta_rate = hw.fit.nccl_per_cta_GBps;
  netw.cta_rate_beside = ctx.comm_hw_beside.fit.nccl_per_cta_GBps;
  netw.bound = hw.fit.nccl_efficiency * hw.spec.net_GBps;
  netw.latency = us_to_ns(hw.fit.net_latency_us);
  // Several nodes: hierarchical (intra-node NVLink phase, ring over the nodes on the network, intra-node phase),
  // as NCCL's tree/ring hybrids move data; the network part is always NCCL's ring.
  switch (c) {
    case Collective::kAllReduce:
      reduce_phase(out, algo, bytes, local, link, reduce_hbm(algo, local, true, hw.emulation.loopback_rank0));
      if (nodes > 1) {
        const double d = bytes / local;  // each GPU holds the node's sum of its 1/local share
        net_ring(out, nodes - 1, d / nodes, netw, 3, "reduce-scatter");
        net_ring(out, nodes - 1, d / nodes, netw, 2, "all-gather");
      }
      gather_phase(out, algo, bytes, local, link, gather_hbm(algo, local, true, hw.emulation.loopback_rank0));
      break;
    case Collective::kReduceScatter:
      reduce_phase(out, algo, bytes, local, link, reduce_hbm(algo, local, false, hw.emulation.loopback_rank0));
      if (nodes > 1) net_ring(out, nodes - 1, bytes / local / nodes, netw, 3, "reduce-scatter");
      break;
    case Collective::kAllGather:
      if (nodes > 1) net_ring(out, nodes - 1, bytes / p.world, netw, 2, "all-gather");
      gather_phase(out, algo, bytes, local, link, gather_hbm(algo, local, false, hw.emulation.loopback_rank0));
      break;
  }
  // The HBM weights are the traffic the collective moves; hbm_contention is not a traffic multiplier but the
  // model's GEMM-slowdown weight, applied to the SM pool while the steps run (Context::update_pool).
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
CommQueue::CommQueue(Context& ctx, bool holds_sms_per_call) : ctx_(ctx), holds_sms_per_call_(holds_sms_per_call) {
  // The GEMM's end, or its CTAs leaving SMs, changes the running step's cap (later steps start at the new one).
  listener_ = ctx_.on_comm_rate_changed.size();
  ctx_.on_comm_rate_changed.push_back([this] {
    set_step_rate();
    set_reorder_rate();
  });
}

CommQueue::~CommQueue() { ctx_.on_comm_rate_changed[listener_] = nullptr; }

void CommQueue::post(Call call) {
  for (const Step& s : call.steps) {
    if (s.network)
      ctx_.required_net_bytes += s.amount;
    else if (!s.local)
      ctx_.required_link_bytes += s.amount;
  }
  pending_.push_back(std::move(call));
  if (!busy_) start_next();
}

void CommQueue::start_next() {
  if (head_ >= pending_.size()) {
    busy_ = false;
    return;
  }
  busy_ = true;
  current_ = std::move(pending_[head_++]);
  call_start_ = ctx_.engine.now();
  if (holds_sms_per_call_) ctx_.comm_kernel_started(ctx_.comm_ctas);
  auto after_reorder = [this] { ctx_.engine.after(current_.overhead, [this] { run_step(0); }); };
  if (current_.reorder_bytes > 0) {
    // Tile-major output to row-major rows for NCCL: read + write every byte of the group.
    FlowSpec spec;
    spec.name = current_.name + " reorder";
    spec.amount = current_.reorder_bytes;
    spec.uses = {{ctx_.hbm, 2.0}};
    spec.cap = reorder_cap();
    spec.on_done = [this, after_reorder] {
      ctx_.comm_hbm_changed(-reorder_util_);
      reorder_util_ = 0;
      reorder_flow_ = -1;
      after_reorder();
    };
    reorder_flow_ = ctx_.engine.start_flow(std::move(spec));
    set_reorder_rate();
  } else {
    after_reorder();
  }
}

void CommQueue::run_step(size_t i) {
  if (i >= current_.steps.size()) {
    const TimeNs now = ctx_.engine.now();
    if (holds_sms_per_call_) ctx_.comm_kernel_ended(ctx_.comm_ctas);
    ctx_.add_interval("comm", current_.name, "comm", call_start_, now);
    ctx_.comm_calls.emplace_back(call_start_, now);
    auto done = std::move(current_.on_done);
    start_next();  // the next call may start in this instant
    if (done) done(now);
    return;
  }
  const Step& st = current_.steps[i];
  ctx_.engine.after(st.latency, [this, i] {
    const Step& s = current_.steps[i];
    const TimeNs start = ctx_.engine.now();
    FlowSpec spec;
    spec.name = current_.name + " " + s.name;
    spec.amount = s.amount;
    if (s.local) {
      spec.uses = {{ctx_.hbm, s.hbm_weight}};
    } else if (s.network) {
      spec.uses = {{ctx_.net, 1.0}, {ctx_.hbm, s.hbm_weight}};
    } else {
      spec.uses = {{ctx_.tx, 1.0}, {ctx_.rx, s.rx_weight}, {ctx_.hbm, s.hbm_weight}};
    }
    spec.on_done = [this, i, start] {
      ctx_.comm_hbm_changed(-step_util_);
      step_util_ = 0;
      step_flow_ = -1;
      const Step& done = current_.steps[i];
      if (ctx_.options.record_steps)
        ctx_.add_interval("comm/steps", current_.name + " " + done.name, "comm", start, ctx_.engine.now());
      run_step(i + 1);
    };
    step_ = i;
    step_flow_ = ctx_.engine.start_flow(std::move(spec));
    set_step_rate();
  });
}

// per_cta_copy_GBps counts the bytes read and written: a CTA reorders half as many (the model's reorder term).
double CommQueue::reorder_cap() const {
  return ctx_.comm_ctas_now(holds_sms_per_call_) * ctx_.hw.fit.per_cta_copy_GBps / 2;
}

void CommQueue::set_reorder_rate() {
  if (reorder_flow_ < 0) return;
  const double cap = reorder_cap();
  ctx_.engine.set_flow_cap(reorder_flow_, cap);
  const double util = std::min(cap, ctx_.hw.spec.hbm_GBps / 2.0) * 2.0 / ctx_.hw.spec.hbm_GBps;
  ctx_.comm_hbm_changed(util - reorder_util_);
  reorder_util_ = util;
}

void CommQueue::set_step_rate() {
  if (step_flow_ < 0) return;
  const Step& s = current_.steps[step_];
  const double ctas = ctx_.comm_ctas_now(holds_sms_per_call_);
  double cap = ctas * (ctx_.gemm_over() ? s.cta_rate : s.cta_rate_beside);
  // A step without a per-CTA rate (comm_algo ce's copies: no CTA moves them) is capped by its bound alone.
  if (s.bound > 0) cap = cap > 0 ? std::min(cap, s.bound) : s.bound;
  ctx_.engine.set_flow_cap(step_flow_, cap);
  // The step's HBM demand alone (its own rate: cap, link or network, HBM), for the GEMM's contention term.
  double rate = cap > 0 ? cap : std::numeric_limits<double>::infinity();
  if (s.hbm_weight > 0) rate = std::min(rate, ctx_.hw.spec.hbm_GBps / s.hbm_weight);
  if (s.network) {
    rate = std::min(rate, ctx_.hw.spec.net_GBps);
  } else if (!s.local) {
    rate = std::min(rate, ctx_.hw.effective_link_GBps());
    if (s.rx_weight > 0) rate = std::min(rate, ctx_.hw.effective_link_GBps() / s.rx_weight);
  }
  const double util = std::isfinite(rate) ? rate * s.hbm_weight / ctx_.hw.spec.hbm_GBps : 0.0;
  ctx_.comm_hbm_changed(util - step_util_);
  step_util_ = util;
}

// ---------------------------------------------------------------------------------------------------------------
std::vector<Tile> visit_tiles(const Problem& p, const Plan& plan, int64_t row_begin, int64_t row_end) {
  Problem sub = p;
  sub.m = row_end - row_begin;
  const std::vector<int64_t> order = tile_visit_order(sub, plan);
  const int64_t tn = plan.tiles_n(sub);
  std::vector<Tile> tiles;
  tiles.reserve(order.size());
  for (int64_t id : order) {
    Tile t;
    t.row = id / tn;
    t.col = id % tn;
    t.rows = std::min<int64_t>(plan.tile.m, sub.m - t.row * plan.tile.m);
    t.cols = std::min<int64_t>(plan.tile.n, p.n - t.col * plan.tile.n);
    // Rows are counted from the start of the whole output (AllGather readiness reads them).
    t.row += row_begin / plan.tile.m;
    tiles.push_back(t);
  }
  return tiles;
}

}  // namespace detail

std::vector<int64_t> tile_visit_order(const Problem& problem, const Plan& plan) {
  const int64_t tm = plan.tiles_m(problem);
  const int64_t tn = plan.tiles_n(problem);
  const int64_t count = tm * tn;
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(count));
  switch (plan.tile_order) {
    case TileOrder::kRowBand:
      for (int64_t i = 0; i < count; ++i) order.push_back(i);
      break;
    case TileOrder::kSwizzle:
      // The kernel's own order (ovl/tile_order.hpp), bands of kSwizzleRows tile rows.
      for (int64_t i = 0; i < count; ++i)
        order.push_back(swizzled_tile(int(i), kSwizzleRows, int(tm), int(tn)));
      break;
    case TileOrder::kExplicit: {
      OVL_CHECK(static_cast<int64_t>(plan.explicit_order.size()) == count,
                "explicit_order has {} entries, the problem has {} tiles", plan.explicit_order.size(), count);
      std::vector<char> seen(static_cast<size_t>(count), 0);
      for (int id : plan.explicit_order) {
        OVL_CHECK(id >= 0 && id < count && !seen[static_cast<size_t>(id)],
                  "explicit_order is not a permutation of the tile ids (entry {})", id);
        seen[static_cast<size_t>(id)] = 1;
        order.push_back(id);
      }
      break;
    }
  }
  return order;
}

void check_simulatable(const Problem& problem) {
  OVL_CHECK(problem.m <= kMaxSimDim && problem.n <= kMaxSimDim && problem.k <= kMaxSimDim,
            "problem {}x{}x{} exceeds the simulator's limit of {} per dimension", problem.m, problem.n, problem.k,
            kMaxSimDim);
  OVL_CHECK(problem.world <= kMaxSimWorld, "world = {} exceeds the simulator's limit of {}", problem.world,
            kMaxSimWorld);
}

SimResult simulate(const Problem& problem, const Plan& plan, const Hardware& hw, const SimOptions& options) {
  check_simulatable(problem);
  problem.validate();
  hw.validate();
  OVL_CHECK(options.trace_ranks >= 1, "trace_ranks = {} must be >= 1", options.trace_ranks);
  OVL_CHECK(plan.tile.m > 0 && plan.tile.n > 0, "plan field \"tile\" = {}x{} must be positive", plan.tile.m,
            plan.tile.n);
  OVL_CHECK(plan.tile_count(problem) >= 1 && plan.tile_count(problem) <= kMaxSimTiles,
            "{} tiles of {}x{} exceed the simulator's limit of {}", plan.tile_count(problem), plan.tile.m, plan.tile.n,
            kMaxSimTiles);

  OVL_CHECK(static_cast<int64_t>(plan.tile_groups.size()) <= kMaxSimGroups && plan.chunks <= kMaxSimGroups,
            "{} tile groups / {} chunks exceed the simulator's limit of {} collective calls", plan.tile_groups.size(),
            plan.chunks, kMaxSimGroups);
  plan.validate(problem, hw);

  detail::Context ctx(problem, plan, hw, options);
  TimeNs end = 0;
  switch (mode_traits(plan.mode).units) {
    case ModeUnits::kWhole:
      end = detail::run_sequential(ctx);
      break;
    case ModeUnits::kChunks:
      end = detail::run_decomposed(ctx);
      break;
    case ModeUnits::kTileGroups:
      end = detail::run_signaled(ctx);
      break;
  }

  // Every run ends with its GEMM over and no collective holding SMs or HBM demand (the bookkeeping balanced).
  OVL_CHECK(ctx.gemm_over() && ctx.comm_sms_active == 0 && std::abs(ctx.comm_hbm_util) < 1e-9,
            "simulator bookkeeping: GEMM runs {} of {} done, {} comm SMs and HBM demand {} left at the end",
            ctx.gemm_runs_done, ctx.gemm_runs, ctx.comm_sms_active, ctx.comm_hbm_util);
  SimResult r;
  r.total_us = static_cast<double>(end) / 1000.0;
  r.gemm_us = static_cast<double>(ctx.gemm_end) / 1000.0;
  r.exposed_comm_us = std::max(0.0, r.total_us - r.gemm_us);
  // Union of rank 0's collective calls.
  auto calls = ctx.comm_calls;
  std::sort(calls.begin(), calls.end());
  TimeNs covered = 0, cur_s = -1, cur_e = -1;
  for (auto [s, e] : calls) {
    if (s > cur_e) {
      covered += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  covered += cur_e - cur_s;
  r.comm_us = static_cast<double>(covered) / 1000.0;
  r.tiles = plan.tile_count(problem);
  r.waves = ctx.waves;
  r.groups = ctx.groups;
  r.events = ctx.engine.events_processed();
  r.required_flops = ctx.mma_flops;
  for (const Resource& res : ctx.engine.resources()) {
    ResourceUsage u;
    u.name = res.name;
    u.kind = res.kind;
    u.gpu = res.gpu;
    u.capacity = res.capacity;
    u.work_done = res.work_done;
    u.utilization = end > 0 ? res.busy_ns / static_cast<double>(end) : 0.0;
    r.resources.push_back(std::move(u));
  }
  // What the links must carry: the per-rank bytes of every posted call's steps.
  r.required_link_bytes = ctx.required_link_bytes;
  r.required_net_bytes = ctx.required_net_bytes;

  if (options.record_timeline || options.record_counters) {
    ctx.timeline.source = "simulated";
    const size_t n_iv = ctx.timeline.intervals.size();
    const size_t n_c = ctx.timeline.counters.size();
    const int ranks = std::min(options.trace_ranks, problem.world);
    for (int g = 1; g < ranks; ++g) {
      for (size_t i = 0; i < n_iv; ++i) {
        Interval iv = ctx.timeline.intervals[i];
        iv.gpu = g;
        ctx.timeline.intervals.push_back(std::move(iv));
      }
      for (size_t i = 0; i < n_c; ++i) {
        CounterSample c = ctx.timeline.counters[i];
        c.gpu = g;
        ctx.timeline.counters.push_back(std::move(c));
      }
    }
    r.timeline = std::move(ctx.timeline);
  }
  return r;
}

void to_json(nlohmann::json& j, const SimResult& r) {
  j = nlohmann::json{
      {"total_us", r.total_us}, {"gemm_us", r.gemm_us}, {"comm_us", r.comm_us}, {"exposed_comm_us", r.exposed_comm_us},
      {"tiles", r.tiles},       {"waves", r.waves},     {"groups", r.groups},   {"events", r.events}};
  nlohmann::json res = nlohmann::json::array();
  for (const ResourceUsage& u : r.resources)
    res.push_back({{"name", u.name},
                   {"kind", std::string(to_string(u.kind))},
                   {"capacity_per_ns", u.capacity},
                   {"work_done", u.work_done},
                   {"utilization", u.utilization}});
  j["resources"] = std::move(res);
}

}  // namespace ovl::sim
