// CPU benchmark of the planner: one plan() call (model pruning + simulator ranking) per iteration. The budget is
// 100 ms for one problem on the 2-core CI machine; the first case is the README's main job.
//   bench_planner --benchmark_out=planner.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include "ovl/sim/planner.hpp"
#include "ovl/sim/simulate.hpp"

namespace {

void plan_case(benchmark::State& state, ovl::Problem p, const char* gpu) {
  const ovl::Hardware hw = ovl::builtin_hardware(gpu);
  ovl::sim::PlanResult r;
  for (auto _ : state) {
    r = ovl::sim::plan(p, hw);
    double us = r.predicted_us;
    benchmark::DoNotOptimize(us);
  }
  state.counters["candidates"] = r.candidates;
  state.counters["simulated"] = r.simulated;
  state.counters["predicted_us"] = r.predicted_us;
  state.counters["speedup"] = r.speedup;
  state.SetLabel(r.best.summary());
}

void simulate_case(benchmark::State& state, ovl::Problem p, ovl::Mode mode) {
  const ovl::Hardware hw = ovl::builtin_hardware("h200");
  const ovl::Plan plan = ovl::default_plan(mode, p, hw, 16);
  ovl::sim::SimOptions fast;
  fast.record_timeline = false;
  fast.record_counters = false;
  int64_t events = 0;
  for (auto _ : state) {
    const ovl::sim::SimResult r = ovl::sim::simulate(p, plan, hw, fast);
    events = r.events;
    double us = r.total_us;
    benchmark::DoNotOptimize(us);
  }
  state.counters["events"] = static_cast<double>(events);
}

using ovl::Op;
BENCHMARK_CAPTURE(plan_case, ar_8192x8192x8192_w8_h200, make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8), "h200")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(plan_case, rs_8192x8192x8192_w8_h200, make_problem(Op::kGemmReduceScatter, 8192, 8192, 8192, 8), "h200")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(plan_case, ag_16384x8192x8192_w8_h200, make_problem(Op::kAllGatherGemm, 16384, 8192, 8192, 8), "h200")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(plan_case, ar_4096x4096x4096_w2_h100, make_problem(Op::kGemmAllReduce, 4096, 4096, 4096, 2), "h100")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(plan_case, ar_16384x16384x8192_w64_h200, make_problem(Op::kGemmAllReduce, 16384, 16384, 8192, 64), "h200")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(simulate_case, tile_signal_ar_8192_w8, make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8),
                  ovl::Mode::kTileSignal)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
