// The loopback collective's TMA movers, private to kernels/ (loopback.cu launches them after its checks;
// loopback_tma.cu defines them).
#pragma once

#include <cuda_runtime_api.h>

#include "ovl/kernels/loopback.hpp"

namespace ovl::kernels {

// tma-push first zeroes the destinations of the reduced pieces on the same stream (a small SIMT kernel), then adds
// every source; tma-pull and the copies load and store through the ring.
void launch_tma_mover(const LoopbackArguments& args, cudaStream_t stream);
// Loads the TMA movers' kernels (no lazy module load while a mover spins on a GEMM counter).
void preload_tma_movers();

}  // namespace ovl::kernels
