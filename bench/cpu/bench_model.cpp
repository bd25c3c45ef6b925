// The closed-form model's speed: every SM split (multiples of the granularity) for every mode of one problem
// (8192x8192x8192 gemm-allreduce, world 8, H200). The planner's fast pass does this; it must stay under 1 ms.
#include <benchmark/benchmark.h>

#include "ovl/model/estimate.hpp"
#include "ovl/model/plan.hpp"

namespace {

ovl::Problem problem() {
  ovl::Problem p;
  p.op = ovl::Op::kGemmAllReduce;
  p.m = p.n = p.k = 8192;
  p.world = 8;
  return p;
}

// Every mode at communication SM counts 8, 16, ..., 128: 16 splits x 5 modes = 80 estimates.
void BM_AllSplitsAllModes(benchmark::State& state) {
  const ovl::Hardware hw = ovl::builtin_hardware("h200");
  const ovl::Problem p = problem();
  std::vector<ovl::Plan> plans;
  for (ovl::Mode mode : ovl::all_modes()) {
    for (int comm = hw.spec.sm_granularity; comm < hw.spec.sm_count; comm += hw.spec.sm_granularity) {
      plans.push_back(ovl::default_plan(mode, p, hw, comm));
    }
  }
  double best = 0;
  for (auto _ : state) {
    best = 1e300;
    for (const auto& plan : plans) best = std::min(best, ovl::estimate(p, plan, hw).total_us);
    benchmark::DoNotOptimize(best);
  }
  state.counters["estimates"] = double(plans.size());
  state.counters["best_us"] = best;
  state.counters["us_per_estimate"] = benchmark::Counter(
      double(plans.size()), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AllSplitsAllModes)->Unit(benchmark::kMicrosecond);

// Including the plans' construction (what a planner that builds each candidate pays).
void BM_AllSplitsAllModesWithPlans(benchmark::State& state) {
  const ovl::Hardware hw = ovl::builtin_hardware("h200");
  const ovl::Problem p = problem();
  for (auto _ : state) {
    double best = 1e300;
    for (ovl::Mode mode : ovl::all_modes()) {
      for (int comm = hw.spec.sm_granularity; comm < hw.spec.sm_count; comm += hw.spec.sm_granularity) {
        best = std::min(best, ovl::estimate(p, ovl::default_plan(mode, p, hw, comm), hw).total_us);
      }
    }
    benchmark::DoNotOptimize(best);
  }
}
BENCHMARK(BM_AllSplitsAllModesWithPlans)->Unit(benchmark::kMicrosecond);

void BM_OneGemmEstimate(benchmark::State& state) {
  const ovl::Hardware hw = ovl::builtin_hardware("h200");
  const ovl::GemmShape s{8192, 8192, 8192};
  int sms = 8;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ovl::estimate_gemm(s, ovl::GemmImpl::kOvl, sms, ovl::TileShape{}, hw));
    sms = sms == 128 ? 8 : sms + 8;
  }
}
BENCHMARK(BM_OneGemmEstimate);

}  // namespace

BENCHMARK_MAIN();
