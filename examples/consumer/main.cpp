// Asks ovl's planner how to run one tensor-parallel layer, the way a training system would before launching it.
#include <fmt/format.h>

#include "ovl/sim/planner.hpp"
#ifdef OVL_CONSUMER_WITH_CORE
#include "ovl/core/device_info.hpp"
#endif

int main() {
  ovl::Problem problem;
  problem.op = ovl::Op::kGemmReduceScatter;
  problem.m = 4096;
  problem.n = 8192;
  problem.k = 4096;
  problem.world = 8;
  const ovl::Hardware hw = ovl::builtin_hardware("h200");
  const ovl::sim::PlanResult result = ovl::sim::plan(problem, hw);
  fmt::print("{}: {} in {:.1f} us (sequential {:.1f} us)\n", problem.name(), result.best.summary(),
             result.predicted_us, result.sequential_us);
#ifdef OVL_CONSUMER_WITH_CORE
  const ovl::SystemInfo info = ovl::query_system();
  fmt::print("GPUs visible: {}{}\n", info.gpus.size(), info.ok ? "" : fmt::format(" ({})", info.status));
#endif
  return 0;
}
