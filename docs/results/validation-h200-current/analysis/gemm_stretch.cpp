// The model's GEMM stretch beside the collective against the measured gemm_slowdown, per mode, on the loopback
// overlap cases (CPU). From the repository root, after building the model and tools libraries:
//   A=docs/results/validation-h200-current
//   g++ -std=c++20 -I tools/include -I model/include -I base/include -I .deps/include $A/analysis/gemm_stretch.cpp \
//     build/tools/libovl_tools.a build/model/libovl_model.a -lfmt -o gemm_stretch
//   ./gemm_stretch $A/overlap/profile.json docs/results/current-h200/bench_overlap.json > $A/analysis/gemm_stretch.txt
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "ovl/tools/bench_names.hpp"
#include "ovl/model/estimate.hpp"
using namespace ovl;
int main(int argc, char** argv) {
  std::ifstream f(argv[1]);
  nlohmann::json j;
  f >> j;
  Hardware base = j.get<Hardware>();
  Hardware hw = loopback_hardware(base, 8, LoopbackShare::kRank0);
  std::ifstream g(argv[2]);
  nlohmann::json m;
  g >> m;
  std::map<std::string, std::vector<double>> r;
  for (auto& b : m["benchmarks"]) {
    std::string n = b["name"];
    if (b.contains("run_type") && b["run_type"] != "iteration") continue;
    if (!b.contains("gemm_slowdown")) continue;
    auto bc = parse_bench_name(n);
    if (!bc || bc->kind != BenchKind::kOverlap || bc->mode == Mode::kSequential) continue;
    Problem p = bc->problem();
    Plan plan = bc->plan(hw);
    ModeEstimate e = estimate(p, plan, hw);
    double ms = b["gemm_slowdown"].get<double>(), pr = e.gemm_us / e.gemm_alone_us;
    r[std::string(to_string(bc->mode))].push_back(pr / ms);
  }
  for (auto& [k, v] : r) {
    double s = 0;
    for (double x : v) s += x;
    std::printf("%s: %zu cases, model GEMM stretch / measured gemm_slowdown mean %.2f\n", k.c_str(), v.size(),
                s / v.size());
  }
}
