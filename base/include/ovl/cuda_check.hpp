// CUDA check macros. Include only from code built with the CUDA Toolkit (kernels/, core/, CUDA tests/bench).
//
// OVL_CUDA_CHECK(runtime call)   throws ovl::Error("cuda", ...) unless the call returns cudaSuccess.
// OVL_CU_CHECK(driver call)      throws ovl::Error("cu", ...) unless the call returns CUDA_SUCCESS.
// OVL_CUDA_CHECK_LAST()          checks cudaGetLastError() (after every kernel launch).
// copy_now / fill_now            set-up copies and fills, landed on return, never on the legacy default stream.
// Driver entry points are loaded at run time (ovl never links libcuda), so the driver's error strings are
// looked up through the same mechanism.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "ovl/error.hpp"

namespace ovl::detail {

inline std::string cu_error_string(CUresult result) {
  using GetErrorString = CUresult (*)(CUresult, const char**);
  static GetErrorString fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuGetErrorString", &ptr, 12000, cudaEnableDefault, &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      ptr = nullptr;
    }
    return reinterpret_cast<GetErrorString>(ptr);
  }();
  const char* text = nullptr;
  if (fn != nullptr && fn(result, &text) == CUDA_SUCCESS && text != nullptr) return fmt::format("{} ({})", text, int(result));
  return fmt::format("CUresult {}", int(result));
}

[[noreturn]] inline void throw_cuda(const char* file, int line, const char* call, cudaError_t err) {
  throw Error("cuda", call, std::string(basename(file)), line,
              fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err)));
}

[[noreturn]] inline void throw_cu(const char* file, int line, const char* call, CUresult result) {
  throw Error("cu", call, std::string(basename(file)), line, cu_error_string(result));
}

}  // namespace ovl::detail

#define OVL_CUDA_CHECK(call)                                                    \
  do {                                                                          \
    const cudaError_t ovl_err_ = (call);                                        \
    if (ovl_err_ != cudaSuccess) ::ovl::detail::throw_cuda(__FILE__, __LINE__, #call, ovl_err_); \
  } while (0)

#define OVL_CU_CHECK(call)                                                      \
  do {                                                                          \
    const CUresult ovl_res_ = (call);                                           \
    if (ovl_res_ != CUDA_SUCCESS) ::ovl::detail::throw_cu(__FILE__, __LINE__, #call, ovl_res_); \
  } while (0)

#define OVL_CUDA_CHECK_LAST() OVL_CUDA_CHECK(cudaGetLastError())

namespace ovl {
// Set-up transfers that have landed when they return. The plain cudaMemcpy and cudaMemset run on the legacy default
// stream, which ovl's streams (all non-blocking) do not wait for and which every host thread of the process shares:
// an upload from pageable memory may return before its bytes land, and a memset may run after a kernel enqueued
// later on another stream (clearing what that kernel wrote). ovl's library code never uses the legacy stream; these
// enqueue on `stream` (a non-blocking stream of their own when it is null) and wait for it.
namespace detail {
template <typename Enqueue>
void enqueue_and_wait(cudaStream_t stream, Enqueue enqueue) {
  struct Own {
    cudaStream_t s = nullptr;
    ~Own() {
      if (s != nullptr) (void)cudaStreamDestroy(s);
    }
  } own;
  if (stream == nullptr) {
    OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&own.s, cudaStreamNonBlocking));
    stream = own.s;
  }
  enqueue(stream);
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
}
}  // namespace detail

inline void copy_now(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = nullptr) {
  detail::enqueue_and_wait(stream, [&](cudaStream_t s) { OVL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s)); });
}
inline void fill_now(void* dst, int byte, size_t bytes, cudaStream_t stream = nullptr) {
  detail::enqueue_and_wait(stream, [&](cudaStream_t s) { OVL_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, s)); });
}

// Loads each kernel's module now (cudaFuncGetAttributes). With lazy loading, CUDA's default, a kernel's module is
// loaded at its first launch, which waits for the kernels already running: a consumer spinning on a counter that a
// not-yet-loaded producer would set then times out. Call before launching kernels that wait on each other.
template <typename... Kernels>
void preload_kernels(Kernels*... kernels) {
  const auto load = [](const void* kernel) {
    cudaFuncAttributes attr{};
    OVL_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  };
  (load(reinterpret_cast<const void*>(kernels)), ...);
}

// Sets `kernel`'s cudaFuncAttributeMaxDynamicSharedMemorySize to `bytes` once per host thread, current context and
// kernel, not on every launch (each set is a driver call). Per context because the attribute belongs to the function
// as a context loaded it (a green context may hold its own copy). Pass one value per kernel everywhere, its opt-in
// limit rather than one launch's size, so that host threads sharing a context never lower it under each other's
// launch. A context destroyed and another created at the same address would keep the old entry: a launch over 48
// KB then fails with a CUDA error, it does not run wrong.
inline void opt_in_dynamic_shared_memory(const void* kernel, int bytes) {
  using GetCurrent = CUresult (*)(CUcontext*);
  static const GetCurrent get_current = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
    OVL_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &ptr, 4000, cudaEnableDefault, &status));
    OVL_CHECK(status == cudaDriverEntryPointSuccess && ptr != nullptr, "cuCtxGetCurrent not found in the driver");
    return reinterpret_cast<GetCurrent>(ptr);
  }();
  struct Done {
    const void* kernel;
    CUcontext context;
    int bytes;
  };
  thread_local std::vector<Done> done;
  CUcontext ctx = nullptr;
  OVL_CU_CHECK(get_current(&ctx));
  for (const Done& d : done)
    if (ctx != nullptr && d.kernel == kernel && d.context == ctx && d.bytes == bytes) return;
  OVL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (ctx == nullptr) OVL_CU_CHECK(get_current(&ctx));  // the runtime made the primary context current
  for (Done& d : done)
    if (d.kernel == kernel && d.context == ctx) {
      d.bytes = bytes;
      return;
    }
  done.push_back(Done{kernel, ctx, bytes});
}
template <typename... Params>
void opt_in_dynamic_shared_memory(void (*kernel)(Params...), int bytes) {
  opt_in_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
}
}  // namespace ovl
