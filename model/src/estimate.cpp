// The public estimates: GEMM, collective, copy, and each overlap mode's pipeline.
#include "ovl/model/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model_detail.hpp"
#include "ovl/error.hpp"

namespace ovl {

using detail::CollCost;
using detail::GemmTiming;
using detail::kBytesPerUsPerGBps;

Collective collective_of(Op op) {
  switch (op) {
    case Op::kGemmAllReduce:
      return Collective::kAllReduce;
    case Op::kGemmReduceScatter:
      return Collective::kReduceScatter;
    case Op::kAllGatherGemm:
      return Collective::kAllGather;
  }
  OVL_FAIL("unknown op");
}

std::string_view to_string(GemmImpl impl) { return impl == GemmImpl::kOvl ? "ovl" : "cublas"; }

GemmImpl unsignaled_gemm_impl(DType dtype) { return is_fp8(dtype) ? GemmImpl::kOvl : GemmImpl::kCublas; }

int64_t cublas_tiles_before_comm(int64_t tiles, int gemm_sms, int ctas, int sm_count) {
  OVL_CHECK(tiles >= 1 && gemm_sms >= 1 && ctas >= 0 && sm_count >= 1,
            "cublas_tiles_before_comm: tiles = {}, gemm_sms = {}, ctas = {}, sm_count = {} out of range", tiles,
            gemm_sms, ctas, sm_count);
  if (ctas == 0 || std::min<int64_t>(tiles, gemm_sms) + ctas <= sm_count) return 0;
  const int64_t last = tiles % gemm_sms;
  return last > 0 && tiles > gemm_sms && sm_count - last >= ctas ? tiles - last : tiles;
}

double cublas_lost_sms_slowdown(int64_t tiles, int gemm_sms, int lost) {
  OVL_CHECK(tiles >= 1 && gemm_sms >= 1 && lost >= 0, "cublas_lost_sms_slowdown: tiles = {}, gemm_sms = {}, lost = {}",
            tiles, gemm_sms, lost);
  if (lost == 0) return 0.0;
  const double balanced = std::max(1.0, double(tiles) / gemm_sms);
  const double whole = double((tiles + std::max(1, gemm_sms - lost) - 1) / std::max(1, gemm_sms - lost));
  return std::max(0.0, whole / balanced - 1.0);
}

double bus_factor(Collective c, int world) {
  const double w = world;
  return c == Collective::kAllReduce ? 2.0 * (w - 1) / w : (w - 1) / w;
}

GemmEstimate estimate_gemm(const GemmShape& shape, GemmImpl impl, int sms, const TileShape& tile, TileOrder order,
                           const Hardware& hw, GemmRegime regime, TailPlan stream_k) {
  OVL_CHECK(shape.m > 0 && shape.n > 0 && shape.k > 0, "estimate_gemm: shape {}x{}x{} must be positive", shape.m,
            shape.n, shape.k);
  OVL_CHECK(tile.m > 0 && tile.n > 0 && tile.k > 0, "estimate_gemm: tile {}x{}x{} must be positive", tile.m, tile.n,
            tile.k);
  OVL_CHECK(sms >= 1, "estimate_gemm: sms = {} must be at least 1", sms);
  const GemmTiming g = detail::gemm_timing(shape, impl, sms, tile, order, hw, regime, true, stream_k);
  GemmEstimate e;
  e.us = g.total_us();
  e.tiles = g.tiles;
  e.waves = g.waves;
  e.tail_fraction = double(g.tiles - (g.waves - 1) * int64_t(sms)) / sms;
  e.memory_bound = g.memory_us > g.compute_us;
  e.hbm_bytes = g.hbm_bytes;
  e.wave_us = g.wave_us();
  e.waves_used = g.waves_used;
  e.busy_sms = g.busy_sms;
  e.l2_miss_factor = g.l2_miss_factor;
  return e;
}

GemmEstimate estimate_gemm(const GemmShape& shape, GemmImpl impl, int sms, const TileShape& tile, const Hardware& hw) {
  return estimate_gemm(shape, impl, sms, tile, TileOrder::kSwizzle, hw);
}

namespace {
CommEstimate comm_estimate_from(double us, int64_t bytes, Collective c, int world) {
  CommEstimate e;
  e.us = us;
  e.algbw_GBps = double(bytes) / us / kBytesPerUsPerGBps;
  e.busbw_GBps = e.algbw_GBps * bus_factor(c, world);
  return e;
}
}  // namespace

CommEstimate estimate_collective(Collective c, int64_t bytes, int world, CommAlgo algo, int ctas, const Hardware& hw,
                                 int nodes) {
  OVL_CHECK(bytes >= 0, "collective bytes = {} must not be negative", bytes);
  const CollCost cost =
      detail::coll_cost(c, algo, world, nodes, ctas, {std::max(1.0, double(bytes)), ctas}, hw, hw.spec.hbm_GBps);
  return comm_estimate_from(cost.time_us(double(bytes)), bytes, c, world);
}

CommEstimate estimate_copy(int64_t bytes, int ctas, const Hardware& hw) {
  OVL_CHECK(bytes >= 0, "copy bytes = {} must not be negative", bytes);
  const CollCost cost = detail::coll_cost(Collective::kAllGather, CommAlgo::kTmaPush, 1, 1, ctas, {double(bytes), ctas},
                                          hw, hw.spec.hbm_GBps);
  CommEstimate e = comm_estimate_from(cost.time_us(double(bytes)), bytes, Collective::kAllGather, 1);
  e.busbw_GBps = 2.0 * e.algbw_GBps;  // a copy's "bus" bandwidth: bytes read plus written
  return e;
}

// ---------------------------------------------------------------------------------------------------------------
// Overlap modes. Every overlapped mode is a pipeline of GEMM work (groups of tiles, or row chunks) and
// communication of the matching bytes, solved by a recurrence in O(groups). Contention enters through two
// numbers found by a short fixed-point iteration:
//   stretch: the GEMM body's slowdown while communication runs beside it,
//       stretch = 1 + hbm_contention x u_gemm x u_comm x f + shared_sm_penalty x f x
//                 cublas_lost_sms_slowdown(tiles, n, conflict)
//     with u_* each side's HBM demand over the device's bandwidth, f the fraction of the GEMM's run during which
//     communication is active, conflict = SMs the communication kernel holds beside cuBLAS (decomposed on plain
//     streams: gemm_sms + comm_ctas - sm_count; once a call has SMs, recurrence_chunks_gemm_then_comm, it keeps them,
//     and the next chunks' grid sized for n SMs runs in whole waves on the SMs left).
//     Our persistent GEMM is never slowed that way: its CTAs hold their SMs, and the collective gets what its grid
//     leaves (signaled_gemm_grid, comm_ctas_beside_gemm);
//   the communication's HBM share while the GEMM runs: max(HBM - GEMM demand, HBM / 2) (max-min fair share).
namespace {

struct PipelineResult {
  double total_us = 0;
  double gemm_end_us = 0;   // when the GEMM's last tile (chunk) is done
  double gemm_busy_us = 0;  // the GEMM's own time (launches + stretched bodies), waits excluded
  double comm_busy_us = 0;  // sum of the communication's durations
  double overlap_us = 0;    // communication time that fell inside the GEMM's run
};

// A call's time: `fixed_us` (launch, latencies), then `bytes` at `busy` us per byte until the GEMM ends at `gemm_end`
// and at `idle` after it (the simulator lifts a running step's rate at that instant, too).
double call_us(double start, double fixed_us, double bytes, double busy, double idle, double gemm_end) {
  const double t0 = start + fixed_us;
  const double beside = t0 < gemm_end ? std::min(bytes, (gemm_end - t0) / busy) : 0.0;  // busy 0: all beside
  return fixed_us + beside * busy + (bytes - beside) * idle;
}

// The same with a third rate: `busy` until `tail_start`, `tail` from there until gemm_end (the GEMM's last wave, when
// the collective has more SMs), `idle` after it.
double call_us(double start, double fixed_us, double bytes, double busy, double tail, double idle, double tail_start,
               double gemm_end) {
  if (tail_start >= gemm_end) return call_us(start, fixed_us, bytes, busy, idle, gemm_end);
  double t = start + fixed_us, left = bytes;
  const auto move = [&](double until, double per_byte) {
    if (left <= 0 || t >= until) return;
    const double n = per_byte > 0 ? std::min(left, (until - t) / per_byte) : left;
    left -= n;
    t += n * per_byte;
  };
  move(tail_start, busy);
  move(gemm_end, tail);
  return t + left * idle - start;
}

// How each group's communication costs: fixed + bytes x per-byte, the per-byte cost depending on whether the
// GEMM is still running (HBM shared, the rates beside the GEMM) while the bytes move. A group's collective moves
// CallAdjust::factor x its bytes at its CallAdjust::link_load; a tile-major output's reorder moves all of them.
struct GroupComm {
  double start_at_us = 0;  // earliest start: a persistent TMA kernel's own launch
  double fixed_us = 0;     // per group: an NCCL call (launch + latencies) or the TMA mover's work, + reorder launch
  // The persistent TMA kernel's link latencies: it streams the groups, each group's latency hidden behind the next
  // group's bytes, so a group's data arrive end_us after its bytes are sent and only the last group's shows.
  double end_us = 0;
  detail::PerByte per_byte_busy, per_byte_idle;                 // the collective
  double reorder_per_byte_busy = 0, reorder_per_byte_idle = 0;  // the reorder (tile-major output with NCCL)
  // The GEMM's last wave, from its first tile on (-1: none differs): the collective's rates then.
  int64_t tail_first_tile = -1;
  detail::PerByte per_byte_tail;
  double reorder_per_byte_tail = 0;
  // A group's call starting at `start` over `bytes` (its tiles' share of the buffer), the GEMM's last wave starting
  // at tail_start (gemm_end: no last-wave rate) and the GEMM ending at gemm_end.
  double duration(double start, double bytes, const CallAdjust& adj, double tail_start, double gemm_end) const {
    return call_us(start, fixed_us + adj.extra_us, bytes,
                   reorder_per_byte_busy + adj.factor * per_byte_busy.at(adj.link_load),
                   reorder_per_byte_tail + adj.factor * per_byte_tail.at(adj.link_load),
                   reorder_per_byte_idle + adj.factor * per_byte_idle.at(adj.link_load), tail_start, gemm_end);
  }
};

double clipped(double a, double b, double lo, double hi) { return std::max(0.0, std::min(b, hi) - std::max(a, lo)); }

// GemmAllReduce / GemmReduceScatter with tile groups: group g is ready when its last tile finishes (waves on the
// GEMM's SMs, stretched by contention); its communication starts at max(ready_g, end of group g-1) and moves
// its tiles' bytes as adj[g] says (call_adjustments).
PipelineResult recurrence_gemm_then_comm(const GemmTiming& gt, double stretch, const std::vector<int>& groups,
                                         double bytes_per_tile, const std::vector<CallAdjust>& adj,
                                         const GroupComm& gc) {
  PipelineResult r;
  const double gemm_start = gt.launch_us;
  r.gemm_end_us = gemm_start + gt.body_us * stretch;
  r.gemm_busy_us = r.gemm_end_us;
  const double tail_start = gc.tail_first_tile < 0
                                ? r.gemm_end_us
                                : std::min(r.gemm_end_us, gemm_start + stretch * gt.tile_start_us(gc.tail_first_tile));
  double comm_free = gc.start_at_us;
  int64_t done = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int tiles = groups[g];
    done += tiles;
    const double ready = gemm_start + stretch * gt.tile_end_us(done - 1);
    const double start = std::max(ready, comm_free);
    const double end = start + gc.duration(start, tiles * bytes_per_tile, adj[g], tail_start, r.gemm_end_us);
    r.comm_busy_us += end - start;
    r.overlap_us += clipped(start, end, gemm_start, r.gemm_end_us);
    comm_free = end;
  }
  r.total_us = std::max(r.gemm_end_us, comm_free + gc.end_us);
  return r;
}

// AllGatherGemm with tile groups: the gather of group g's rows runs back to back from the start; the GEMM's tiles
// of group g wait for it. A late chunk delays the rest of the GEMM by the same amount (lockstep waves).
PipelineResult recurrence_comm_then_gemm(const GemmTiming& gt, double stretch, const std::vector<int>& groups,
                                         double bytes_per_tile, const std::vector<CallAdjust>& adj,
                                         const GroupComm& gc) {
  PipelineResult r;
  const double gemm_start = gt.launch_us;
  const double nominal_end = gemm_start + gt.body_us * stretch;
  double comm_free = gc.start_at_us;
  double delay = 0;
  int64_t first = 0;
  std::vector<std::pair<double, double>> comm;  // intervals, for the overlap with the GEMM's run
  comm.reserve(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const int tiles = groups[g];
    const double start = comm_free;
    const double end =
        start + gc.duration(start, tiles * bytes_per_tile, adj[g], nominal_end + delay, nominal_end + delay);
    comm.emplace_back(start, end);
    r.comm_busy_us += end - start;
    comm_free = end;
    // The rows arrive end_us after the group's bytes are sent (a streamed gather's latency).
    delay = std::max(delay, end + gc.end_us - (gemm_start + stretch * gt.tile_start_us(first)));
    first += tiles;
  }
  r.gemm_end_us = nominal_end + delay;
  r.gemm_busy_us = nominal_end;
  for (const auto& [a, b] : comm) r.overlap_us += clipped(a, b, gemm_start, r.gemm_end_us);
  r.total_us = std::max(r.gemm_end_us, comm_free + gc.end_us);
  return r;
}

// Decomposed, GEMM first: chunk i's GEMM (back to back on one stream), then its collective on the other stream
// once both the chunk and the previous collective are done (adj as above). `grid_wait_us` >= 0: the collective's
// CTAs do not fit beside cuBLAS's grid, whose Hopper kernels are persistent (a CTA holds its SM until it runs out of
// tiles). The next chunk's grid takes the SMs the moment chunk i ends, before the call launched on chunk i's event,
// so that call gets its SMs `grid_wait_us` into the next chunk (decomposed_grid_wait_us); a call that follows the
// previous one on the communication stream takes that call's SMs as they free, without waiting.
PipelineResult recurrence_chunks_gemm_then_comm(const GemmTiming& chunk, double stretch, int chunks, double chunk_bytes,
                                                const std::vector<CallAdjust>& adj, const CollCost& busy,
                                                const CollCost& idle, double grid_wait_us) {
  PipelineResult r;
  const double gemm_us = chunk.launch_us + chunk.body_us * stretch;
  const double gemm_end = chunks * gemm_us;
  double comm_free = 0;
  for (int i = 0; i < chunks; ++i) {
    const double ready = (i + 1) * gemm_us;
    const bool waits = grid_wait_us >= 0 && ready >= comm_free && i + 1 < chunks;
    const double start = waits ? ready + grid_wait_us : std::max(ready, comm_free);
    const CallAdjust& a = adj[size_t(i)];
    const double end = start + call_us(start, busy.launch_us + busy.latency_us + a.extra_us, a.factor * chunk_bytes,
                                       busy.per_byte.at(a.link_load), idle.per_byte.at(a.link_load), gemm_end);
    r.comm_busy_us += end - start;
    r.overlap_us += clipped(start, end, 0, gemm_end);
    comm_free = end;
  }
  r.gemm_end_us = gemm_end;
  r.gemm_busy_us = gemm_end;
  r.total_us = std::max(gemm_end, comm_free);
  return r;
}

// Decomposed, gather first: chunk i's all-gather back to back, chunk i's GEMM once its rows arrived.
PipelineResult recurrence_chunks_comm_then_gemm(const GemmTiming& chunk, double stretch, int chunks, double chunk_bytes,
                                                const std::vector<CallAdjust>& adj, const CollCost& busy) {
  PipelineResult r;
  const double gemm_us = chunk.launch_us + chunk.body_us * stretch;
  double comm_free = 0, gemm_free = 0;
  std::vector<std::pair<double, double>> comm;
  comm.reserve(size_t(chunks));
  for (int i = 0; i < chunks; ++i) {
    // The GEMM runs until the last chunk arrives.
    const CallAdjust& a = adj[size_t(i)];
    const double end = comm_free + a.extra_us + busy.time_us(a.factor * chunk_bytes, a.link_load);
    comm.emplace_back(comm_free, end);
    r.comm_busy_us += end - comm_free;
    comm_free = end;
    gemm_free = std::max(gemm_free, end) + gemm_us;
  }
  r.gemm_end_us = gemm_free;
  r.gemm_busy_us = chunks * gemm_us;
  for (const auto& [a, b] : comm) r.overlap_us += clipped(a, b, gemm_free - r.gemm_busy_us, gemm_free);
  r.total_us = gemm_free;
  return r;
}

// The GEMM's slowdown from contention, given the overlap a previous pass found (see the block comment above).
struct Contention {
  double hbm_weight = 0;      // hbm_contention x u_gemm x u_comm (x f)
  double sm_extra = 0;        // shared_sm_penalty x cublas_lost_sms_slowdown (x f)
  double comm_hbm_bytes = 0;  // HBM bytes the whole communication moves (for u_comm)

  double stretch(const PipelineResult& r, const Hardware& hw) const {
    const double busy = std::max(r.gemm_busy_us, 1e-9);
    const double f = std::min(1.0, r.overlap_us / busy);
    const double u_comm = r.comm_busy_us > 0
                              ? std::min(1.0, comm_hbm_bytes / r.comm_busy_us / kBytesPerUsPerGBps / hw.spec.hbm_GBps)
                              : 0.0;
    return 1.0 + (hbm_weight * u_comm + sm_extra) * f;
  }
};

// Runs `pass(stretch)` to a fixed point of the stretch: three passes settle it to well under a percent.
template <typename Pass>
PipelineResult solve_contention(const Contention& c, const Hardware& hw, Pass pass, double* stretch_out) {
  double stretch = 1.0;
  PipelineResult r = pass(stretch);
  for (int it = 0; it < 2; ++it) {
    stretch = c.stretch(r, hw);
    r = pass(stretch);
  }
  *stretch_out = stretch;
  return r;
}

double gemm_hbm_GBps(const GemmTiming& g) { return g.hbm_bytes / g.body_us / kBytesPerUsPerGBps; }

// The HBM the communication gets while the GEMM runs: what the GEMM leaves, but at least a fair half.
double comm_hbm_share(const GemmTiming& g, const Hardware& hw) {
  return std::max(hw.spec.hbm_GBps - gemm_hbm_GBps(g), hw.spec.hbm_GBps / 2);
}

// `lost_sms_slowdown`: the GEMM's slowdown from SMs a concurrent kernel holds (cublas_lost_sms_slowdown), 0 for none.
Contention make_contention(const GemmTiming& gemm, double lost_sms_slowdown, double comm_hbm_bytes,
                           const Hardware& hw) {
  Contention c;
  const double u_gemm = std::min(1.0, gemm_hbm_GBps(gemm) / hw.spec.hbm_GBps);
  c.hbm_weight = hw.fit.hbm_contention * u_gemm;
  c.comm_hbm_bytes = comm_hbm_bytes;
  c.sm_extra = hw.fit.shared_sm_penalty * lost_sms_slowdown;
  return c;
}

GemmShape shape_of(const Problem& p) { return GemmShape{p.m, p.n, p.k, p.dtype}; }

// The per-byte coefficients of the plan's collective, priced as coll_cost prices it.
detail::CollCoeffs plan_coeffs(Collective coll, const Problem& problem, const Plan& plan, const Hardware& hw) {
  return detail::priced_coeffs(coll, plan.comm_algo, collective_ctas(plan, coll), problem.world,
                               hw.emulation.loopback_rank0 && problem.nodes() == 1, hw.emulation.paced);
}

// Every GEMM an overlap mode runs is timed in the operator regime (ModelParams::operator_gemm_factor), sequential's
// cuBLAS too, so that the modes are ranked on one footing.
constexpr GemmRegime kOp = GemmRegime::kOperator;

ModeEstimate estimate_sequential(const Problem& problem, const Plan& plan, const Hardware& hw) {
  const Collective coll = collective_of(problem.op);
  const GemmTiming g =
      detail::gemm_timing(shape_of(problem), unsignaled_gemm_impl(problem.dtype), plan.gemm_sms, plan.tile,
                          TileOrder::kSwizzle, hw, kOp);
  // One call over every row, at its mover's link load (its factor is 1; the loopback's per-piece time is priced in
  // the calls of decomposed and the signaling modes only).
  const int ctas = collective_ctas(plan, coll);
  const CollCost c = detail::coll_cost(coll, plan.comm_algo, problem.world, problem.nodes(), ctas,
                                       {double(problem.comm_bytes()), ctas}, hw, hw.spec.hbm_GBps);
  ModeEstimate e;
  e.gemm_alone_us = e.gemm_us = g.total_us();
  e.comm_alone_us = e.comm_us = e.exposed_comm_us =
      c.time_us(double(problem.comm_bytes()), call_adjustments(problem, plan, hw).front().link_load);
  e.total_us = e.gemm_us + e.comm_us;
  return e;
}

// An overlapped mode's collective, at its per-CTA rates (comm_hardware, the simulator's choice too): beside the GEMM
// (busy: the rates beside the GEMM, on the `busy_ctas` CTAs that get SMs then, and the HBM bandwidth the GEMM leaves
// it) and after the GEMM (idle: all its CTAs, all of HBM). A call's size-dependent rates (coll_cost's call_bytes) are
// those of the plan's mean call (`adj`, call_adjustments: an NCCL unit's bytes, a TMA mover's whole buffer; the
// simulator prices each call at its own), none where no call has them (units NCCL moves owner by owner).
struct CollCosts {
  CollCost busy, idle;
};
CollCosts overlapped_coll_costs(Collective coll, const Problem& problem, const Plan& plan, const Hardware& hw,
                                const std::vector<CallAdjust>& adj, double busy_hbm_GBps, int busy_ctas) {
  double bytes = 0;
  int calls = 0;
  for (const CallAdjust& a : adj) {
    bytes += a.call_bytes;
    calls += a.call_bytes > 0;
  }
  const int launched = collective_ctas(plan, coll);
  const detail::PacedCall call{calls > 0 ? bytes / calls : 0.0, launched};
  auto cost = [&](bool beside_gemm, int ctas, double hbm_GBps) {
    return detail::coll_cost(coll, plan.comm_algo, problem.world, problem.nodes(), ctas, call,
                             comm_hardware(hw, plan.mode, beside_gemm), hbm_GBps);
  };
  return {cost(true, busy_ctas, busy_hbm_GBps), cost(false, launched, hw.spec.hbm_GBps)};
}

// How long into a cuBLAS chunk (from its launch) a collective launched at the chunk's start waits for SMs
// (cublas_tiles_before_comm), at the chunk's fractional time per tile (estimate_gemm's cuBLAS); -1: no wait. The
// chunk runs with no collective beside it.
double decomposed_grid_wait_us(const GemmTiming& chunk, int ctas, const Hardware& hw) {
  const int64_t before = cublas_tiles_before_comm(chunk.tiles, chunk.sms, ctas, hw.spec.sm_count);
  return before == 0 ? -1.0 : chunk.launch_us + chunk.body_us * double(before) / double(chunk.tiles);
}

ModeEstimate estimate_decomposed(const Problem& problem, const Plan& plan, const Hardware& hw) {
  const Collective coll = collective_of(problem.op);
  const int chunks = plan.chunks;
  GemmShape chunk_shape = shape_of(problem);
  chunk_shape.m = problem.m / chunks;
  const GemmTiming chunk =
      detail::gemm_timing(chunk_shape, unsignaled_gemm_impl(problem.dtype), plan.gemm_sms, plan.tile,
                          TileOrder::kSwizzle, hw, kOp);
  // NCCL on a second plain stream takes its CTAs' SMs from cuBLAS while it runs (none on the copy engines).
  const int ctas = collective_ctas(plan, coll);
  const int conflict = std::max(0, plan.gemm_sms + ctas - hw.spec.sm_count);
  const double bytes = double(problem.comm_bytes());
  const double chunk_bytes = bytes / chunks;
  const std::vector<CallAdjust> adj = call_adjustments(problem, plan, hw);
  const auto [busy, idle] = overlapped_coll_costs(coll, problem, plan, hw, adj, comm_hbm_share(chunk, hw), ctas);
  const detail::CollCoeffs k = plan_coeffs(coll, problem, plan, hw);
  const Contention contention =
      make_contention(chunk, cublas_lost_sms_slowdown(chunk.tiles, plan.gemm_sms, conflict), k.hbm_bytes * bytes, hw);
  const double grid_wait = decomposed_grid_wait_us(chunk, ctas, hw);
  double stretch = 1;
  const PipelineResult r = solve_contention(
      contention, hw,
      [&](double s) {
        return problem.op == Op::kAllGatherGemm
                   ? recurrence_chunks_comm_then_gemm(chunk, s, chunks, chunk_bytes, adj, busy)
                   : recurrence_chunks_gemm_then_comm(chunk, s, chunks, chunk_bytes, adj, busy, idle, grid_wait);
      },
      &stretch);
  ModeEstimate e;
  e.total_us = r.total_us;
  e.gemm_alone_us = chunks * chunk.total_us();
  e.comm_alone_us =
      estimate_collective(coll, problem.comm_bytes(), problem.world, plan.comm_algo, ctas, hw, problem.nodes()).us;
  e.gemm_us = r.gemm_busy_us;
  e.comm_us = r.comm_busy_us;
  e.exposed_comm_us = std::max(0.0, e.total_us - e.gemm_us);
  return e;
}

// Tile-signal, green-context and tma: our GEMM signals tile groups; each group is communicated as it completes.
// The GEMM runs on its persistent grid (signaled_gemm_grid), whose CTAs hold their SMs to the end: the collective
// never takes SMs from it. Beside it the collective gets comm_ctas_beside_gemm CTAs (all of them, but one SM on
// tile-signal's default grid), in the GEMM's last wave also the SMs of the CTAs without a tile (up to comm_ctas);
// after it, all.
ModeEstimate estimate_signaled(const Problem& problem, const Plan& plan, const Hardware& hw) {
  const Collective coll = collective_of(problem.op);
  const GemmShape shape = shape_of(problem);
  const int grid = signaled_gemm_grid(plan, problem, hw);
  const GemmTiming gemm = detail::gemm_timing(shape, GemmImpl::kOvl, grid, plan.tile, plan.tile_order, hw, kOp);
  const bool nccl = is_nccl(plan.comm_algo);
  const int busy_ctas = comm_ctas_beside_gemm(plan, problem, hw);

  const double bytes = double(problem.comm_bytes());
  const double bytes_per_tile = bytes / double(gemm.tiles);
  const detail::CollCoeffs k = plan_coeffs(coll, problem, plan, hw);
  const double share = comm_hbm_share(gemm, hw);  // the HBM bandwidth the GEMM leaves the collective
  const std::vector<CallAdjust> adj = call_adjustments(problem, plan, hw);
  const auto [busy, idle] = overlapped_coll_costs(coll, problem, plan, hw, adj, share, busy_ctas);
  // Tile-major output with NCCL: a reorder kernel on `ctas` CTAs reads and writes each byte (per_cta_copy_GBps counts
  // both), within `hbm_GBps`.
  const auto reorder_per_byte = [&](double hbm_GBps, int ctas) {
    return 2.0 / std::min(hbm_GBps, ctas * hw.fit.per_cta_copy_GBps) / kBytesPerUsPerGBps;
  };
  GroupComm gc;
  double comm_hbm_bytes = k.hbm_bytes * bytes;
  // ce with the sum after the GEMM (which holds every SM): the owner's sum on comm_ctas CTAs, and for AllReduce the
  // copies of the sums to the peers.
  double after_us = 0;
  if (plan.comm_algo == CommAlgo::kCopyEngine) {
    // Per group: a flag's latency and the group's copies (f link bytes per buffer byte at the copy engines' rate,
    // 2 f HBM bytes); no CTA. In loopback the copies are same-device copies on SMs: GEMM+AR / GEMM+RS's start when
    // the GEMM ends.
    const double w = problem.world;
    const double f = (w - 1) / w;
    const double rate = copy_engine_GBps(hw);
    const auto copy_per_byte = [&](double hbm_GBps) {
      return std::max(2 * f / hbm_GBps, f / rate) / kBytesPerUsPerGBps;
    };
    // (AG+GEMM there leaves the copies comm_ctas SMs beside the GEMM, which waits for them.)
    gc.start_at_us =
        hw.emulation.loopback && problem.world > 1 && coll != Collective::kAllGather ? gemm.total_us() : 0.0;
    gc.fixed_us = problem.world > 1 ? hw.fit.link_latency_us : 0.0;
    gc.per_byte_busy.shared = copy_per_byte(share);
    gc.per_byte_idle.shared = copy_per_byte(hw.spec.hbm_GBps);
    if (coll != Collective::kAllGather) {
      const int ctas = std::max(1, plan.comm_ctas);
      const auto sum_per_byte = [&](double hbm_GBps) {
        return k.cta_bytes / std::min(hbm_GBps, ctas * hw.fit.per_cta_copy_GBps) / kBytesPerUsPerGBps;
      };
      const bool ar = coll == Collective::kAllReduce;
      if (ce_sums_per_group(plan, hw.spec.sm_count)) {
        // The grid leaves the sum its CTAs: each group's sum (a launch), and AllReduce's copies of it, follow the
        // group's copies, beside the GEMM.
        gc.fixed_us += hw.fit.launch_us + (ar ? gc.fixed_us : 0.0);
        gc.per_byte_busy.shared = (ar ? 2 : 1) * gc.per_byte_busy.shared + sum_per_byte(share);
        gc.per_byte_idle.shared = (ar ? 2 : 1) * gc.per_byte_idle.shared + sum_per_byte(hw.spec.hbm_GBps);
      } else {
        after_us = hw.fit.launch_us + bytes * sum_per_byte(hw.spec.hbm_GBps);
        if (ar) after_us += gc.fixed_us + bytes * gc.per_byte_idle.shared;
      }
    }
  } else if (nccl) {
    // One NCCL call per group: its launch and latencies, and the group's counter kernel and gap (signaled_group_us).
    gc.fixed_us = busy.launch_us + busy.latency_us + signaled_group_us(hw);
    gc.per_byte_busy = busy.per_byte;
    gc.per_byte_idle = idle.per_byte;
    if (plan.output == OutputLayout::kTileMajor && problem.op != Op::kAllGatherGemm) {
      // Tile-major output: a reorder kernel makes each group contiguous for NCCL (read + write on the comm CTAs).
      gc.fixed_us += hw.fit.launch_us;
      gc.reorder_per_byte_busy = reorder_per_byte(share, busy_ctas);
      gc.reorder_per_byte_idle = reorder_per_byte(hw.spec.hbm_GBps, plan.comm_ctas);
      comm_hbm_bytes += 2.0 * bytes;
    }
  } else {
    // A persistent TMA kernel launched beside the GEMM polls the counters: per group the mover's own work
    // (tma_group_us, paid by every CTA, so not divided among them); the link latencies once, after the last group.
    gc.start_at_us = busy.launch_us;
    gc.fixed_us = hw.fit.tma_group_us;
    gc.end_us = busy.latency_us;
    gc.per_byte_busy = busy.per_byte;
    gc.per_byte_idle = idle.per_byte;
  }
  // The GEMM's last wave: its CTAs without a tile have exited, so a collective starved of SMs beside the grid gets
  // theirs (up to comm_ctas), as the simulator's comm_ctas_now does.
  const int64_t last_wave_first = (gemm.waves - 1) * int64_t(grid);
  const int tail_ctas = std::clamp(hw.spec.sm_count - int(gemm.tiles - last_wave_first), busy_ctas,
                                   std::max(busy_ctas, collective_ctas(plan, coll)));
  if (tail_ctas > busy_ctas && plan.comm_algo != CommAlgo::kCopyEngine) {  // ce's copies take no CTA
    gc.tail_first_tile = last_wave_first;
    gc.per_byte_tail = overlapped_coll_costs(coll, problem, plan, hw, adj, share, tail_ctas).busy.per_byte;
    if (gc.reorder_per_byte_busy > 0) gc.reorder_per_byte_tail = reorder_per_byte(share, tail_ctas);
  }
  const Contention contention = make_contention(gemm, 0.0, comm_hbm_bytes, hw);
  double stretch = 1;
  const PipelineResult r = solve_contention(
      contention, hw,
      [&](double s) {
        return problem.op == Op::kAllGatherGemm
                   ? recurrence_comm_then_gemm(gemm, s, plan.tile_groups, bytes_per_tile, adj, gc)
                   : recurrence_gemm_then_comm(gemm, s, plan.tile_groups, bytes_per_tile, adj, gc);
      },
      &stretch);
  ModeEstimate e;
  e.total_us = r.total_us + after_us;
  e.gemm_alone_us = gemm.total_us();
  e.comm_alone_us = estimate_collective(coll, problem.comm_bytes(), problem.world, plan.comm_algo,
                                        collective_ctas(plan, coll), hw, problem.nodes())
                        .us;
  e.gemm_us = r.gemm_busy_us;
  e.comm_us = r.comm_busy_us + after_us;
  e.exposed_comm_us = std::max(0.0, e.total_us - e.gemm_us);
  return e;
}

}  // namespace

ModeEstimate estimate(const Problem& problem, const Plan& plan, const Hardware& hw) {
  plan.validate(problem, hw);
  switch (mode_traits(plan.mode).units) {
    case ModeUnits::kWhole:
      return estimate_sequential(problem, plan, hw);
    case ModeUnits::kChunks:
      return estimate_decomposed(problem, plan, hw);
    case ModeUnits::kTileGroups:
      return estimate_signaled(problem, plan, hw);
  }
  OVL_FAIL("unknown mode");
}

}  // namespace ovl
