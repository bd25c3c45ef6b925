// ovl::DeviceBuffer: one cudaMalloc'ed block, owned (move-only). Include only from code built with the CUDA Toolkit.
//
// DeviceBuffer(bytes, hint)  allocates `bytes` (none for 0: get() is null); on failure throws ovl::Error("cuda")
//                            naming the size and the CUDA error, then `hint` (what the caller can do about it)
// ~DeviceBuffer()            frees it; never throws (a failed cudaFree is written to stderr)
// get(), as<T>(), bytes()    the block, typed, and its size
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdio>
#include <string_view>
#include <utility>

#include "ovl/error.hpp"

namespace ovl {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes, std::string_view hint = {}) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err == cudaSuccess) return;
    (void)cudaGetLastError();  // not sticky: a later check of the last error does not see this one
    ptr_ = nullptr;
    throw Error("cuda", "cudaMalloc", "device_buffer.hpp", __LINE__,
                fmt::format("could not allocate {} bytes ({:.2f} GiB) of device memory: {}{}{}", bytes,
                            double(bytes) / double(std::size_t(1) << 30), cudaGetErrorString(err),
                            hint.empty() ? "" : "; ", hint));
  }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, std::size_t(0))) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, std::size_t(0));
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept {
    if (ptr_ != nullptr && cudaFree(ptr_) != cudaSuccess)
      std::fprintf(stderr, "ovl: cudaFree failed in ~DeviceBuffer: %s\n", cudaGetErrorString(cudaGetLastError()));
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ovl
