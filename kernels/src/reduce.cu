// Sum of a few sources (see ovl/kernels/reduce.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "ovl/cuda_check.hpp"
#include "ovl/kernels/reduce.hpp"
#include "ovl/kernels/tma_ptx.cuh"

namespace ovl::kernels {
namespace {

struct Sources {
  const void* p[kMaxSumSources];
};

// grid-stride; vectorized: one thread sums one 16-byte vector (8 elements) of every source.
template <typename T, bool kVector>
__global__ void sum_kernel(Sources src, int sources, T* __restrict__ dst, std::int64_t elements) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  if constexpr (kVector) {
    const std::int64_t vecs = elements / 8;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vecs; i += stride) {
      float acc[8] = {};
      for (int s = 0; s < sources; ++s) ptx::Vec16<T>::add(acc, __ldcs(static_cast<const uint4*>(src.p[s]) + i));
      reinterpret_cast<uint4*>(dst)[i] = ptx::Vec16<T>::pack(acc);
    }
  } else {
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += stride) {
      float acc = 0.f;
      for (int s = 0; s < sources; ++s) acc += ptx::to_f32(static_cast<const T*>(src.p[s])[i]);
      dst[i] = ptx::from_f32<T>(acc);
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <typename T>
void launch_typed(const SumArguments& a, cudaStream_t stream) {
  Sources s{};
  bool vector = a.elements % 8 == 0 && aligned16(a.dst);
  for (int i = 0; i < a.sources; ++i) {
    s.p[i] = a.src[i];
    vector = vector && aligned16(a.src[i]);
  }
  constexpr int kThreads = 512;
  const std::int64_t work = vector ? a.elements / 8 : a.elements;
  const int grid = int(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, a.ctas));
  if (vector) {
    sum_kernel<T, true><<<grid, kThreads, 0, stream>>>(s, a.sources, static_cast<T*>(a.dst), a.elements);
  } else {
    sum_kernel<T, false><<<grid, kThreads, 0, stream>>>(s, a.sources, static_cast<T*>(a.dst), a.elements);
  }
  OVL_CUDA_CHECK_LAST();
}

}  // namespace

const char* sum_can_implement(const SumArguments& a) {
  if (a.sources < 1 || a.sources > kMaxSumSources) return "sources must be in [1, 8]";
  if (a.elements < 0) return "elements must not be negative";
  if (a.ctas < 1) return "ctas must be at least 1";
  if (a.dst == nullptr) return "dst is a null pointer";
  for (int i = 0; i < a.sources; ++i) {
    if (a.src[i] == nullptr) return "a source is a null pointer";
    if (a.src[i] == a.dst) return "a source is the destination";
  }
  return "";
}

void launch_sum(const SumArguments& a, cudaStream_t stream) {
  const char* why = sum_can_implement(a);
  OVL_CHECK(why[0] == '\0', "sum of {} sources x {} elements on {} CTAs: {}", a.sources, a.elements, a.ctas, why);
  if (a.elements == 0) return;
  if (a.bf16) {
    launch_typed<__nv_bfloat16>(a, stream);
  } else {
    launch_typed<__half>(a, stream);
  }
}

void preload_sum_kernels() {
  preload_kernels(sum_kernel<__nv_bfloat16, true>, sum_kernel<__nv_bfloat16, false>, sum_kernel<__half, true>,
                  sum_kernel<__half, false>);
}

}  // namespace ovl::kernels
