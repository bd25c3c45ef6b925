// plan(): chooses the Plan for a Problem on a Hardware profile.
//
// Search space: mode x communication SMs (multiples of hw.spec.sm_granularity) x tile grouping x tile order x
// collective algorithm (NCCL ring and NCCL's symmetric kernels for the NCCL modes, ce for tile-signal, TMA push/pull
// for tma) x partitioning (tma) x chunks (decomposed). Tile groupings are bounded: whole row bands times {1, 2, 4,
// ...}, and FlashOverlap's predictive grouping (each group's collective about as long as the GEMM of the next group).
// Every candidate is priced by the closed-form model (estimate()); the best few overall, the best of each mode and
// every sequential candidate are then simulated, and the simulator's time ranks them. Deterministic: same inputs, same
// PlanResult.
//
// The baseline is part of the search: the sequential candidates are the ways the executor runs without overlap
// (sequential_candidates()), and plan() never returns a plan predicted slower than the best of them. Any other plan
// (overlapped, or sequential on NCCL's symmetric kernels) must be predicted faster than that by
// PlannerOptions::min_gain, else the answer is the baseline.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ovl/model/hardware.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/problem.hpp"
#include "ovl/sim/simulate.hpp"

namespace ovl::sim {

struct PlannerOptions {
  // The modes `best` may come from; empty = all. The sequential candidates are priced as the baseline whatever this
  // says; with kSequential among the modes (the default) `best` is never predicted slower than them.
  std::vector<Mode> modes;
  int min_comm_sms = 8;  // communication SMs searched: multiples of hw.spec.sm_granularity in [min, max]
  int max_comm_sms = 64;
  int simulate_top = 8;       // candidates (best by the model) the simulator ranks, plus the best of each mode
  int max_groups = 64;        // upper bound on tile groups per plan
  bool use_simulator = true;  // false: rank by the closed-form model only (predicted_us = model_us)
  // Only plans ovl's executor runs well: the modes planned for the op (kModeTraits: planned_ops). AllGather+GEMM:
  // the signaling modes run when asked for, but tile-signal and green-context were measured in loopback only, slower
  // than decomposed, and predicted up to 32% too fast with a group per row band (docs/performance.md), and tma is
  // simulated too fast with many groups in paced loopback, so they are left out unless false.
  bool runnable_only = true;
  // The executor's verdict on a plan: "" when it runs it, else why not (Context::can_run). Unset: every plan the
  // model prices is a candidate. Candidates it refuses are left out before pricing; a refused sequential candidate
  // is an error (every executor runs the baseline).
  std::function<std::string(const Plan&)> can_run;
  // A plan other than the sequential candidates (overlapped, or sequential on NCCL's symmetric kernels) is chosen only
  // when its predicted time is below the best sequential candidate's by more than this fraction (0.02: at least 2%
  // faster); a margin for the predictors' error. 0: strictly faster.
  double min_gain = 0.0;
};

struct PlanAlternative {
  Plan plan;
  double predicted_us = 0;  // simulator (or model when use_simulator is false)
  double model_us = 0;      // closed-form estimate()
  double speedup = 0;       // sequential_us / predicted_us
};

struct PlanResult {
  Problem problem;
  std::string hardware;  // Hardware::name
  Plan best;
  double predicted_us = 0;  // of best
  // The best sequential candidate (the baseline as the executor runs it) and its predicted time. best is this plan
  // when sequential_best; otherwise best is predicted faster by more than PlannerOptions::min_gain.
  Plan sequential;
  double sequential_us = 0;
  bool sequential_best = false;
  // sequential_us / predicted_us: >= 1, unless PlannerOptions::modes leaves kSequential out.
  double speedup = 0;
  // Ranked by predicted time, fastest first: best is alternatives[0] unless the min_gain margin kept the sequential
  // plan over a faster one.
  std::vector<PlanAlternative> alternatives;
  int candidates = 0;                         // plans priced by the model
  int simulated = 0;                          // plans run through the simulator
};

// Validates the problem and the hardware (ovl::Error naming the bad field), then searches. Throws ovl::Error when
// no candidate plan is valid.
PlanResult plan(const Problem& problem, const Hardware& hw, const PlannerOptions& options = {});

// The candidate plans plan() prices, in its deterministic order (for tests and tools).
std::vector<Plan> candidate_plans(const Problem& problem, const Hardware& hw, const PlannerOptions& options = {});

// The ways of not overlapping that the executor runs, in the order plan() lists them: cuBLAS on the whole device,
// then the collective on NCCL's own CTA count (nccl_default_ctas: kDefaultNcclCtas, or a link profile's); in an
// unpaced loopback (Emulation::loopback, not paced) also the collective on every SM, since nothing else
// runs beside it there. A paced loopback's link behaves like a node's: NCCL's CTA count only.
std::vector<Plan> sequential_candidates(const Problem& problem, const Hardware& hw);

// Tile groups whose collectives roughly match the GEMM time of the next group (FlashOverlap's predictive
// grouping), in units of `unit` tiles (a row band, or a swizzle block of bands); sums to the tile count.
std::vector<int> predictive_groups(const Problem& problem, const Plan& plan, const Hardware& hw, int64_t unit,
                                   int max_groups);

// {"problem", "hardware", "plan", "predicted_us", "sequential", "sequential_us", "sequential_best", "speedup",
//  "candidates", "simulated",
//  "alternatives": [{"mode", "gemm_sms", "comm_sms", "groups", "comm_algo", "predicted_us", "model_us",
//  "speedup", "plan"}]}
void to_json(nlohmann::json& j, const PlanResult& r);
// The text `ovl plan` prints: the chosen plan, then a table of the alternatives (mode, GEMM SMs, comm SMs,
// groups, algorithm, predicted time, model time, speedup over sequential).
std::string format_plan_result(const PlanResult& r);

}  // namespace ovl::sim
