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

// The TMA movers' shared memory: a kTmaHeaderBytes header (tma_ring.cuh), then the ring (OVL_TMA_RING, else
// kDefaultTmaRing, 4 x 48 KiB; checked by tma_ring_problem), then the played groups' pieces (32 bytes per (group,
// owner)) when they fit under kMaxSharedBytesPerBlock.
inline constexpr int kTmaMaxPullWarps = 8;

}  // namespace ovl::kernels
