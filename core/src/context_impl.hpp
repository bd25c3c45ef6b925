// Context internals: the identity, the plan choices and tuning, the caches of shapes and plans, the executors and the
// call ordering. context.cpp (API, validation, caches, dispatch), tuning.cpp and capture.cpp define them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "executors.hpp"
#include "ovl/core/context.hpp"
#include "ovl/sim/planner.hpp"

namespace ovl {

struct Context::Impl : detail::ContextIdentity {
  explicit Impl(const ContextOptions& options);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  ContextOptions options;
  bool fixed_inputs = false;  // ContextOptions::loopback_fixed_inputs
  // Calls in progress on this thread's stack: a public call (run, measure) is depth 1 and gets a new call_epoch;
  // measured tuning's candidate runs are nested in it and have its inputs (and its epoch).
  int call_depth = 0;
  uint64_t call_epoch = 0;
  bool trace = false;
  testing::Part part = testing::Part::kAll;      // of the call being enqueued (testing::run_part)
  testing::Fault fault = testing::Fault::kNone;  // testing::set_fault

  // Plan choices of calls without a plan, by problem name (tuning.cpp), and the plan cache file behind them.
  std::map<std::string, PlanChoice> choices;
  Tuning tuning = Tuning::kMeasured;
  PlanCache cache;
  std::string cache_path;  // empty: no file

  detail::Resources res;
  // One executor per way of running a call (executor_for picks it from the plan).
  detail::SequentialExecutor sequential{res};
  detail::DecomposedExecutor decomposed{res};
  detail::SignaledExecutor signaled{res};
  detail::TmaExecutor tma{res};
  detail::CopyEngineExecutor copy_engine{res};

  // Buffers per problem and device tables per (problem, plan); the executors keep their own per shape.
  std::map<std::string, std::unique_ptr<detail::ShapeState>> shapes;
  std::map<std::string, std::unique_ptr<detail::PlanState>> plans;
  // One call at a time: the calls, release_caches() and synchronize() take it, so another thread's release waits for
  // an enqueue to finish instead of freeing buffers under it (recursive: a call takes it again in plan_for() and measure()).
  std::recursive_mutex mutex;
  // Recorded on the caller's stream at the end of every call; the next call's stream waits for it, since calls
  // share the context's counters and per-shape buffers (calls on two streams would otherwise race on them).
  cudaEvent_t call_done = nullptr;
  bool call_done_recorded = false;

  // context.cpp
  detail::Executor& executor_for(const Plan& plan);
  // The plan runs the World's TMA collective (a TMA algorithm in a real world of more than one rank: mode tma, and
  // sequential with tma-push): TmaExecutor's symmetric buffers, tma-push only, no graph capture (its epoch).
  bool world_tma(const Plan& plan) const { return is_tma_mover(plan.comm_algo) && !loopback && world > 1; }
  void release_caches();  // the shapes and plans, and what each executor keeps per shape
  detail::ShapeState& shape(const Problem& p);
  // shape(p) for the loopback accessors: checks the context is loopback and p's world, selects the device.
  detail::ShapeState& loopback_shape(const Problem& p, const char* api);
  detail::PlanState& plan_state(const Problem& p, const Plan& plan);
  // kRank0 GEMM+AR in loopback: (re)computes the peers' reduced pieces when missing or when A / B changed pointer.
  void prepare_loopback_peers(const detail::Call& call);

  // tuning.cpp
  // Reads the plan cache file and the tuning policy (ContextOptions, else the environment); warns once about
  // entries of another GPU or version.
  void init_tuning(const ContextOptions& options);
  PlanCacheKey cache_key(const Problem& p) const;
  // The planner's result for `p` on plan_hw, restricted to the plans this context runs.
  sim::PlanResult plan_problem(const Problem& p, const Context& ctx) const;
  // The maximum over the ranks of each value (a real world: every rank passes as many; elsewhere the values).
  std::vector<double> max_over_ranks(std::vector<double> values) const;

  // capture.cpp: CUDA Graph capture. Whether `stream` is capturing; when it is, throws ovl::Error unless an eager
  // call of this problem (and plan, or the planner's cached plan when `plan` is empty) has run: a call during capture
  // may only enqueue work, never allocate, plan, tune or synchronize.
  bool check_capture(const Problem& p, const std::optional<Plan>& plan, cudaStream_t stream) const;
  // After an eager call has enqueued: its PlanState is warm.
  void note_warm(detail::PlanState& ps) const;
};

namespace detail {

// One public call's scope (Context::run, Context::measure): the outermost one on the stack starts a new call_epoch;
// the candidate runs of measured tuning, nested in it, keep it (and so share the kRank0 AR peers' pieces).
class CallScope {
 public:
  explicit CallScope(Context::Impl& s) : s_(s) {
    if (s_.call_depth++ == 0) ++s_.call_epoch;
  }
  ~CallScope() { --s_.call_depth; }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  Context::Impl& s_;
};

}  // namespace detail

}  // namespace ovl
