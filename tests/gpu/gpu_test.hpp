// Fixtures for GPU tests: they skip (GTEST_SKIP, reason printed) when the machine cannot run them, so a CPU-only
// CI machine reports them as skipped, never as passed. Also the bf16 matrices the Context tests share: device
// buffers with their host copy, and the float64 reference they are compared with; and FP8 codes, decoded exactly.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ovl/core/context.hpp"
#include "ovl/device_buffer.hpp"

namespace ovl::test {

inline int gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: clear the sticky error
    return 0;
  }
  return count;
}

inline int compute_capability(int device = 0) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

// 0, 1, ..., the visible GPUs (at most `max`): the devices of a threads World over every GPU.
inline std::vector<int> every_gpu(int max = 8) {
  std::vector<int> devices;
  for (int i = 0; i < gpu_count() && i < max; ++i) devices.push_back(i);
  return devices;
}

// Host-side set-up (cudaMemcpy from pageable memory, cudaMemset) runs on the legacy default stream, and a pageable
// copy may return before its DMA has landed; a stream created with cudaStreamNonBlocking waits for neither. Call
// this between the set-up and the first launch on such a stream. Returns the synchronization's status.
inline cudaError_t finish_setup() { return cudaDeviceSynchronize(); }

// A non-blocking stream of the current device, owned for a scope: an early return from a failed ASSERT (or an
// exception) destroys it. The constructor throws std::runtime_error naming the CUDA error when creation fails.
class Stream {
 public:
  Stream() {
    const cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw std::runtime_error(std::string("cudaStreamCreateWithFlags: ") + cudaGetErrorString(e));
    }
  }
  ~Stream() { (void)cudaStreamDestroy(stream_); }  // queued work still completes
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// float -> bf16 bits, round to nearest even (finite inputs); bf16 bits -> value.
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
inline double from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// An FP8 code's value: e4m3 (bias 7, 3 mantissa bits, no infinities, S.1111.111 is NaN) or e5m2 (bias 15, 2 bits).
inline double fp8_value(uint8_t code, DType type) {
  const int sign = code >> 7;
  const bool e4m3 = type == DType::kE4M3;
  const int mant_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int exp = (code & 0x7F) >> mant_bits, mant = code & ((1 << mant_bits) - 1);
  const double v = exp == 0 ? std::ldexp(double(mant), 1 - bias - mant_bits)
                            : std::ldexp(double(mant | (1 << mant_bits)), exp - bias - mant_bits);
  return sign ? -v : v;
}

// Random FP8 codes with random signs, never zero: exponent fields in [lo, hi] (normal numbers), any mantissa. With
// full = true, every finite code but the zeros (subnormals and the largest values, 448 / 57344, included).
inline std::vector<uint8_t> random_fp8(size_t count, DType type, uint32_t seed, bool full) {
  std::mt19937 rng(seed);
  const bool e4m3 = type == DType::kE4M3;
  const int mant_bits = e4m3 ? 3 : 2;
  // Moderate: magnitudes 2^-3 .. 2^4 (a spread like activations after scaling).
  const int lo = e4m3 ? 4 : 12, hi = e4m3 ? 10 : 18;
  std::vector<uint8_t> out(count);
  for (auto& c : out) {
    for (;;) {
      uint8_t code;
      if (full) {
        code = uint8_t(rng());
      } else {
        const int exp = lo + int(rng() % unsigned(hi - lo + 1));
        code = uint8_t((exp << mant_bits) | int(rng() % (1u << mant_bits)) | (rng() & 1 ? 0x80 : 0));
      }
      const int magnitude = code & 0x7F;
      const bool finite = e4m3 ? magnitude != 0x7F : (magnitude >> 2) != 31;
      if (finite && magnitude != 0) {
        c = code;
        break;
      }
    }
  }
  return out;
}

// bf16 or fp16 bits -> value.
inline double half_value(uint16_t h, DType type) {
  if (type == DType::kBF16) return from_bf16(h);
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  const double v = exp == 0    ? std::ldexp(double(mant), -24)
                   : exp == 31 ? (mant ? NAN : INFINITY)
                               : std::ldexp(double(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

// `count` bf16 values uniform in [-1, 1), the same for the same seed.
inline std::vector<uint16_t> random_bf16(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> values(count);
  for (auto& v : values) v = to_bf16(dist(rng));
  return values;
}

// `elems` bf16 values copied back from device memory at `p`.
inline std::vector<uint16_t> read_device(const void* p, int64_t elems) {
  std::vector<uint16_t> out(static_cast<size_t>(elems));
  cudaMemcpy(out.data(), p, out.size() * 2, cudaMemcpyDeviceToHost);
  return out;
}

// `count` values of T in device memory (an ovl::DeviceBuffer), owned for a scope (an early return from a failed ASSERT
// frees them), with 64 bytes of slack past the end; no memory when count is 0 (get() is null). The constructor throws
// ovl::Error naming the size and the CUDA error when the allocation fails.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count), buffer_(count == 0 ? 0 : count * sizeof(T) + 64) {}
  T* get() const { return buffer_.as<T>(); }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  size_t count_;
  DeviceBuffer buffer_;
};

// A row-major bf16 matrix on the device (a DeviceArray) and its host copy. Uploaded and synchronized before the
// constructor returns.
struct DeviceMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<uint16_t> host;
  DeviceArray<uint16_t> device;
  void* ptr = nullptr;  // device.get()
  DeviceMatrix(int64_t r, int64_t c, std::vector<uint16_t> values)
      : rows(r), cols(c), host(std::move(values)), device(host.size()), ptr(device.get()) {
    if (host.size() != size_t(r * c)) throw std::invalid_argument("DeviceMatrix: values are not rows x cols");
    cudaMemcpy(ptr, host.data(), host.size() * 2, cudaMemcpyHostToDevice);
    if (finish_setup() != cudaSuccess) throw std::runtime_error("upload");
  }
  // Random values (random_bf16).
  DeviceMatrix(int64_t r, int64_t c, uint64_t seed) : DeviceMatrix(r, c, random_bf16(size_t(r * c), seed)) {}
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;
  // bf16 NaN, in stream order with the run that follows (the test streams do not sync with the legacy stream).
  void poison(cudaStream_t stream) { cudaMemsetAsync(ptr, 0xFF, size_t(rows * cols) * 2, stream); }
  std::vector<uint16_t> read() const { return read_device(ptr, rows * cols); }
  TensorRef ref(BLayout layout = BLayout::kNxK) const { return TensorRef{ptr, rows, cols, DType::kBF16, layout}; }
};

// ||x - ref|| / ||ref||; NaN counts as a failure (returns +inf).
inline double rel_error(const std::vector<uint16_t>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double v = from_bf16(x[i]);
    if (!std::isfinite(v)) return INFINITY;
    num += (v - ref[i]) * (v - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}
inline double rel_error(const std::vector<uint16_t>& x, const std::vector<uint16_t>& y) {
  std::vector<double> ref(y.size());
  for (size_t i = 0; i < y.size(); ++i) ref[i] = from_bf16(y[i]);
  return rel_error(x, ref);
}

// rows [r0, r1) of A (rows x K) times B (N x K, "nt") in float64.
inline std::vector<double> cpu_gemm(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int64_t r0,
                                    int64_t r1, int64_t n, int64_t k) {
  std::vector<double> out(size_t((r1 - r0) * n), 0.0);
  std::vector<double> brow(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t x = 0; x < k; ++x) brow[size_t(x)] = from_bf16(b[size_t(j * k + x)]);
    for (int64_t i = r0; i < r1; ++i) {
      double acc = 0;
      for (int64_t x = 0; x < k; ++x) acc += from_bf16(a[size_t(i * k + x)]) * brow[size_t(x)];
      out[size_t((i - r0) * n + j)] = acc;
    }
  }
  return out;
}

// The Context entry point of `op`.
inline void run_op(Context& ctx, Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c,
                   const std::optional<Plan>& plan, cudaStream_t stream) {
  switch (op) {
    case Op::kGemmAllReduce:
      ctx.gemm_all_reduce(a, b, c, plan, stream);
      break;
    case Op::kGemmReduceScatter:
      ctx.gemm_reduce_scatter(a, b, c, plan, stream);
      break;
    case Op::kAllGatherGemm:
      ctx.all_gather_gemm(a, b, c, plan, stream);
      break;
  }
}

// Any CUDA GPU.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "no CUDA GPU found";
  }
};

// What `call` throws while `stream` captures (thread-local mode; "" when nothing): the capture is ended, its graph
// discarded and the CUDA error it left cleared either way.
inline std::string error_while_capturing(cudaStream_t stream, const std::function<void()>& call) {
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
    return "cudaStreamBeginCapture failed";
  std::string message;
  try {
    call();
  } catch (const std::exception& e) {
    message = e.what();
  }
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(stream, &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  return message;
}

// A Hopper GPU (sm_90): wgmma and TMA kernels.
class HopperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "no CUDA GPU found";
    if (compute_capability(0) != 90) GTEST_SKIP() << "needs compute capability 9.0, found " << compute_capability(0);
  }
};

// At least kGpus distinct GPUs with peer access between all of them.
template <int kGpus>
class MultiGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int count = gpu_count();
    if (count < kGpus) GTEST_SKIP() << "needs " << kGpus << " GPUs, found " << count;
  }
};

}  // namespace ovl::test
