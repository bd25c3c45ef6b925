// Sum of a few equal-sized sources into one destination: the local reduction of a copy-engine ReduceScatter, which
// the copies cannot do (a copy engine moves bytes, it does not add).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ovl::kernels {

inline constexpr int kMaxSumSources = 8;

struct SumArguments {
  const void* src[kMaxSumSources] = {};  // `sources` device pointers of `elements` bf16 / fp16 each
  int sources = 0;                       // in [1, kMaxSumSources]
  void* dst = nullptr;                   // `elements` elements; may alias none of the sources
  std::int64_t elements = 0;
  bool bf16 = true;  // false: fp16
  int ctas = 8;      // the grid (the reduction is meant to run on few SMs)
};

// "" when the arguments can run, else a message naming the bad value.
const char* sum_can_implement(const SumArguments& args);
// dst[i] = sum over s of src[s][i], in fp32 in source order, rounded once (deterministic). 16-byte vectors when
// every pointer is 16-byte aligned and elements % 8 == 0, else element by element. Throws ovl::Error on bad
// arguments or a launch error.
void launch_sum(const SumArguments& args, cudaStream_t stream);
// Loads the kernel into the current context now (no lazy module load while a GEMM holds every SM).
void preload_sum_kernels();

}  // namespace ovl::kernels
