// Would a clock-aware stream-K policy choose other plans than ovl::choose_stream_k? For the 42 bench_gemm rows
// (6 shapes x 132/128/124/116/100/64/32 SMs): choose_stream_k's plan, and the plan with the lowest estimate_gemm
// time over the same candidates (q = 0..2 extra rounds, s = 2..16 splits) if it saves kStreamKMinGain.
// Build and run from the repository root after building the model (no CUDA needed):
//   g++ -std=c++20 -O1 -Imodel/include -Ibase/include scripts/probes/stream_k_policy.cpp build/model/libovl_model.a \
//     -lfmt -o /tmp/stream_k_policy && /tmp/stream_k_policy [PROFILE.json]
// docs/results/model-probes/ has its output for the built-in and the calibrated H200 profiles (docs/model.md).
#include <algorithm>
#include <cstdio>

#include "ovl/model/estimate.hpp"
#include "ovl/model/hardware.hpp"

using namespace ovl;

int main(int argc, char** argv) {
  const Hardware hw = argc > 1 ? load_hardware(argv[1]) : builtin_hardware("h200");
  const int shapes[][3] = {{8192, 8192, 8192}, {4096, 8192, 8192}, {8192, 8192, 2048},
                           {2048, 8192, 4096}, {8192, 4096, 1024}, {16384, 8192, 1024}};
  const TileShape t{128, 256, 64};
  int differ = 0;
  for (const auto& s : shapes) {
    for (int sms : {132, 128, 124, 116, 100, 64, 32}) {
      const GemmShape g{s[0], s[1], s[2]};
      const int64_t tiles = ((s[0] + t.m - 1) / t.m) * ((s[1] + t.n - 1) / t.n), kb = (s[2] + t.k - 1) / t.k;
      const auto us = [&](TailPlan c) {
        return estimate_gemm(g, GemmImpl::kOvl, sms, t, TileOrder::kSwizzle, hw, GemmRegime::kSustained, c).us;
      };
      const double whole = us({});
      const TailPlan current = choose_stream_k(tiles, kb, sms);
      double best = whole * (1 - kStreamKMinGain);
      TailPlan aware{};
      for (int q = 0; q <= 2; ++q) {
        const int64_t n = tiles % sms + int64_t(q) * sms;
        if (n == 0 || n > tiles) continue;
        for (int sp = 2; sp <= std::min<int64_t>(kb, 16); ++sp) {
          if (const double u = us({int(n), sp}); u < best) {
            best = u;
            aware = {int(n), sp};
          }
        }
      }
      const bool same = current.tiles == aware.tiles && current.splits == aware.splits;
      differ += !same;
      std::printf("%5dx%5dx%5d sms %3d  choose_stream_k %3d x %2d (model gain %.3f)  clock-aware %3d x %2d (%.3f)%s\n",
                  s[0], s[1], s[2], sms, current.tiles, current.splits, current.tiles ? whole / us(current) : 1.0,
                  aware.tiles, aware.splits, aware.tiles ? whole / best : 1.0, same ? "" : "  DIFFERENT");
    }
  }
  std::printf("%d of 42 rows differ\n", differ);
}
