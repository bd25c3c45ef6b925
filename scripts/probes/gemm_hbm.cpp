// The model's HBM traffic (GemmEstimate::hbm_bytes) for the shapes ncu measured at 124 SMs
// (docs/results/gemm-h200-l2/), our GEMM in swizzled and row-band order and cuBLAS.
// Build and run from the repository root after building the model (no CUDA needed):
//   g++ -std=c++20 -O1 -Imodel/include -Ibase/include scripts/probes/gemm_hbm.cpp build/model/libovl_model.a \
//     -lfmt -o /tmp/gemm_hbm && /tmp/gemm_hbm [PROFILE.json]
#include <cstdio>

#include "ovl/model/estimate.hpp"
#include "ovl/model/hardware.hpp"

using namespace ovl;

int main(int argc, char** argv) {
  const Hardware hw = argc > 1 ? load_hardware(argv[1]) : builtin_hardware("h200");
  const int shapes[][3] = {{8192, 8192, 2048}, {8192, 8192, 8192}};
  for (const auto& s : shapes) {
    const GemmShape g{s[0], s[1], s[2]};
    const double c_bytes = 2.0 * s[0] * s[1];
    const auto row = [&](const char* what, const GemmEstimate& e) {
      std::printf("%5dx%5dx%5d %-14s hbm %5.0f MB = operand reads %5.0f MB + C %4.0f MB  (%s)\n", s[0], s[1], s[2],
                  what, e.hbm_bytes / 1e6, (e.hbm_bytes - c_bytes) / 1e6, c_bytes / 1e6,
                  e.memory_bound ? "memory-bound" : "the matrix rate sets the time");
    };
    row("ovl swizzle", estimate_gemm(g, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, hw));
    row("ovl row-band", estimate_gemm(g, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kRowBand, hw));
    row("cublas", estimate_gemm(g, GemmImpl::kCublas, 124, TileShape{}, TileOrder::kSwizzle, hw));
  }
}
