// Internal pieces of the pipelines (not installed): the simulation context, the GEMM runner and the
// collective queue. Shared by pipelines.cpp (the pieces) and pipelines_modes.cpp (one pipeline per mode).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/problem.hpp"
#include "ovl/model/timeline.hpp"
#include "ovl/sim/engine.hpp"
#include "ovl/sim/simulate.hpp"

namespace ovl::sim::detail {

// Microseconds (a Hardware field) to engine nanoseconds; a value past ~30 years of simulated time is an error, not
// an overflow.
inline TimeNs us_to_ns(double us) {
  OVL_CHECK(us >= 0 && us * 1000.0 < 1e18, "a duration of {} us is out of the simulator's range", us);
  return static_cast<TimeNs>(us * 1000.0 + 0.5);
}

// One tile of the GEMM as the kernel visits it (clipped at the matrix edges).
struct Tile {
  int64_t row = 0, col = 0;    // tile coordinates
  int64_t rows = 0, cols = 0;  // element extents after clipping
};

// For runs of `tiles` ending at each of `ends` (exclusive indices, ascending): the fraction of the problem's M rows
// that the tiles up to that end read (the running maximum of their last row). AllGather readiness: a wave, or a
// group's gather, covers that prefix of A.
std::vector<double> rows_up_to(const std::vector<Tile>& tiles, const std::vector<size_t>& ends, int64_t tile_m,
                               int64_t m);

class Context {
 public:
  Context(const Problem& p, const Plan& plan, const Hardware& hw, const SimOptions& opt);

  const Problem& problem;
  const Plan& plan;
  const Hardware& hw;
  const SimOptions& options;
  // The collective's rates: hw for sequential (after the GEMM), hw.overlapped_comm() in the overlapped modes, and
  // comm_hw_beside until the operator's GEMM is over (comm_hardware(hw, mode, true)).
  const Hardware comm_hw;
  const Hardware comm_hw_beside;
  Engine engine;
  Timeline timeline;

  ResourceId sm = -1, hbm = -1, tx = -1, rx = -1, net = -1;
  int gemm_sms = 0;   // CTAs of the persistent GEMM (its grid: signaled_gemm_grid), or cuBLAS's SMs
  int comm_ctas = 0;  // CTAs of the collective kernel
  bool partitioned = false;
  double per_sm_flops_per_ns = 0;  // at the efficiency and clock of the GEMM this mode runs
  double tile_epilogue_us = 0;     // ours or cuBLAS's, by mode
  int comm_sms_active = 0;         // shared-SM comm kernels running now (their CTAs)
  bool cublas = false;             // sequential / decomposed: cuBLAS balances its tail over the whole grid
  double gemm_hbm_util = 0;        // the GEMM's HBM demand alone over hbm_GBps (as the model's u_gemm), <= 1
  int64_t cublas_tiles = 1;        // cuBLAS's tiles per kernel (one decomposed chunk's): cublas_lost_sms_slowdown
  double cublas_sms = 0;           // the SMs cuBLAS's kernel runs its tiles on at full rate: its tiles over the
                                   // waves estimate_gemm counts (the grid; less on fewer tiles than the grid)
  double comm_hbm_util = 0;        // HBM demand of the communication flows running now over hbm_GBps
  int64_t wave_tiles = 0;          // tiles of the GEMM wave running now (0: none)
  // Whether the operator's GEMM is over: every GemmRun (decomposed: one per chunk) finished. Until then collective
  // steps move at their per-CTA rate beside the GEMM (the model's busy rates: a group that starts before the GEMM's
  // end), after it at their rate after it.
  int gemm_runs = 0;
  int gemm_runs_done = 0;
  bool gemm_over() const { return gemm_runs > 0 && gemm_runs_done == gemm_runs; }
  // CTAs of our persistent GEMM resident now: its grid while it has waves left (from its first wave on; AG+GEMM's
  // wait for the first rows counts as before it), the last wave's tiles in its last wave (CTAs without a tile have
  // exited), 0 before and after it. cuBLAS (sequential, decomposed): 0; a decomposed call that would start beside a
  // chunk whose grid holds the SMs it needs waits for them before it starts (cublas_tiles_before_comm). The model
  // gives the collective the same SMs (estimate_signaled's last-wave phase).
  int gemm_resident = 0;
  void set_gemm_resident(int ctas);  // sets it and, when it changed, calls comm_rates_changed()
  // The collective's CTAs that get an SM now: comm_ctas, but a shared-SM kernel after the GEMM's grid (tile-signal
  // GEMM+AR / GEMM+RS, `shared`) gets only the SMs the resident CTAs leave (at least 1).
  int comm_ctas_now(bool shared) const;
  // Called when the GEMM ends or its resident CTAs change: each CommQueue sets its running step's cap again.
  std::vector<std::function<void()>> on_comm_rate_changed;
  void comm_rates_changed();  // calls every on_comm_rate_changed listener

  // Shared SMs: a running comm kernel's CTAs take SMs the GEMM's grid would otherwise use.
  void comm_kernel_started(int ctas);
  void comm_kernel_ended(int ctas);
  // A communication flow with standalone HBM demand `util` (fraction of hbm_GBps) starts (+) or ends (-).
  void comm_hbm_changed(double util);
  // The SM pool's capacity: the running wave's SMs, slowed by the model's contention terms (see pipelines.cpp).
  void update_pool();

  void add_interval(const std::string& lane, std::string name, const std::string& category, TimeNs start, TimeNs end);
  void sample_counters(TimeNs t);

  int64_t waves = 0;
  double mma_flops = 0;  // the GemmRuns' matrix work: every tile a whole tile, as the model counts it
  TimeNs gemm_end = 0;
  std::vector<std::pair<TimeNs, TimeNs>> comm_calls;  // rank 0's collective calls, for comm_us
  int groups = 0;
  double required_link_bytes = 0;  // bytes rank 0 must send over NVLink (sum over posted calls)
  double required_net_bytes = 0;   // and over the network link

 private:
  std::map<std::string, std::pair<TimeNs, double>> last_sample_;
};

// The persistent GEMM: tiles in waves of `grid` on the SM pool. Each wave is one flow whose progress unit is an
// HBM byte (A/B panels read + C tiles written); its FLOPs are charged to the SM pool through the weight
// FLOPs/byte, and its cap is (tiles in the wave) x (per-SM rate), so a tail wave runs on as many SMs as it has
// tiles. After the flow, the tiles' epilogues take tile_epilogue_us.
class GemmRun {
 public:
  // tiles in visiting order; `m_rows` the row count these tiles cover (for AllGather readiness).
  GemmRun(Context& ctx, std::vector<Tile> tiles, std::string label);

  // Called when tile `index` (visiting order) and all before it are done.
  std::function<void(int64_t tiles_done, TimeNs t)> on_wave_done;
  std::function<void(TimeNs t)> on_finished;
  // AllGather: wave w may start only when rows up to its last row have arrived (fraction of M).
  std::function<double()> rows_available;  // fraction of M present now; empty = all present

  void start(TimeNs launch_delay);
  void data_arrived();  // re-check a wave waiting for rows
  int64_t wave_count() const { return static_cast<int64_t>(wave_end_.size()); }
  size_t tile_count() const { return tiles_.size(); }

 private:
  void start_wave(size_t w);
  Context& ctx_;
  std::vector<Tile> tiles_;
  std::string label_;
  std::vector<size_t> wave_end_;  // exclusive tile index where each wave ends
  std::vector<double> wave_rows_needed_;
  size_t next_wave_ = 0;
  bool waiting_ = false;
  TimeNs wait_start_ = 0;
};

// One step of a collective: a flow over the link directions (or the network link) and HBM.
struct Step {
  double amount = 0;           // bytes sent by this rank (progress unit)
  double rx_weight = 1;        // bytes received per byte sent
  double hbm_weight = 2;       // HBM bytes per byte sent (reads + writes of the reduction or copy)
  bool network = false;        // inter-node step (network link) instead of NVLink
  bool local = false;          // HBM only: world 1's local copy, or a rank-0 loopback NCCL-algorithm call
  double cta_rate = 0;         // bytes/ns per CTA once the operator's GEMM is over (the cap is CTAs x this)
  double cta_rate_beside = 0;  // the same until the GEMM is over (Context::comm_hw_beside, gemm_over())
  double bound = 0;            // bytes/ns the CTAs cannot exceed however many (NCCL's link efficiency); 0 = none
  TimeNs latency = 0;          // before the bytes move (handshake / signal)
  std::string name;
};

// The steps of one collective call over `bytes` (the call's full buffer, times adj.factor) for this problem and plan;
// a paced TMA mover's rate at adj.link_load, so that its busiest CTA sets the call's time; a paced loopback's call's
// rate by adj.call_bytes where the profile measured its transport (LinkProfile::measured_table).
std::vector<Step> collective_steps(const Context& ctx, Collective c, double bytes, const CallAdjust& adj);

// A FIFO of collective calls on one stream (NCCL) or one persistent kernel (TMA): a call starts when it has been
// posted and the previous one is done; its steps run back to back.
class CommQueue {
 public:
  CommQueue(Context& ctx, bool holds_sms_per_call);  // registers itself with ctx: not copied or moved
  ~CommQueue();                                      // and unregisters
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;
  struct Call {
    std::string name;
    TimeNs overhead = 0;       // per-call launch (NCCL) or signal latency (TMA)
    double reorder_bytes = 0;  // tile-major to row-major reorder before the call (HBM read + write)
    std::vector<Step> steps;
    std::function<void(TimeNs)> on_done;
  };
  void post(Call call);
  bool idle() const { return !busy_ && head_ >= pending_.size(); }

 private:
  void start_next();
  void run_step(size_t i);
  // The running step's flow at the cap of now (beside the GEMM or after it), and its HBM demand for the contention.
  void set_step_rate();
  // The running reorder's flow at the cap of now (its CTAs that have an SM), and its HBM demand.
  double reorder_cap() const;
  void set_reorder_rate();
  Context& ctx_;
  bool holds_sms_per_call_;
  bool busy_ = false;
  size_t listener_ = 0;       // its entry in ctx_.on_comm_rate_changed
  FlowId step_flow_ = -1;     // the running step's flow (-1: none)
  size_t step_ = 0;           // its index in current_.steps
  double step_util_ = 0;      // its HBM demand now, as passed to Context::comm_hbm_changed
  FlowId reorder_flow_ = -1;  // the running reorder's flow (-1: none)
  double reorder_util_ = 0;   // its HBM demand now, as passed to Context::comm_hbm_changed
  std::vector<Call> pending_;
  size_t head_ = 0;
  Call current_;
  TimeNs call_start_ = 0;
};

// Tiles of rows [row_begin, row_end) of the output in the plan's visiting order (a chunk, or all rows).
std::vector<Tile> visit_tiles(const Problem& p, const Plan& plan, int64_t row_begin, int64_t row_end);

// Per-mode pipelines (pipelines_modes.cpp): set up, run the engine, return the time of the last event.
TimeNs run_sequential(Context& ctx);
TimeNs run_decomposed(Context& ctx);
TimeNs run_signaled(Context& ctx);  // tile-signal, green-context, tma
TimeNs run_copy_engine(Context& ctx);  // tile-signal with comm_algo ce (run_signaled calls it)

}  // namespace ovl::sim::detail
