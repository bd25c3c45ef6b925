// Checks of a call's tensors that need no device: their element types and scales, sizes within the kernels' 32-bit
// limits, the byte range a tensor spans, outputs that overlap inputs, tensors that run past their allocation.
// ovl::Context runs them on every call (core/src/context.cpp) after asking CUDA where each pointer lives;
// tests/base/test_tensor_checks.cpp covers them.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "ovl/error.hpp"
#include "ovl/types.hpp"

namespace ovl {

// The largest rows or cols of a tensor: cuBLAS and the GEMM kernels take M, N, K and leading dimensions as int.
inline constexpr int64_t kMaxTensorDim = std::numeric_limits<int32_t>::max();

// The bytes [begin, begin + bytes) a row-major rows x cols tensor covers.
struct TensorSpan {
  std::string_view name;  // "A", "B", "C"
  uintptr_t begin = 0;
  uint64_t bytes = 0;
  uintptr_t end() const { return begin + uintptr_t(bytes); }
};

// An operator's tensor as the type check sees it: its name ("A", "B", "C"), element type and per-tensor scale (a device
// pointer to one float, or null).
struct OperandType {
  std::string_view name;
  DType dtype;
  const float* scale;
};

// The element types of an operator's A, B and C: bf16 or fp16, one type for all three, and no scales; or FP8 inputs:
// A e4m3 and B e4m3 or e5m2 (the pairs the GEMM runs), each with its scale (non-null, 4-byte aligned), B stored
// N x K (BLayout::kNxK: FP8 wgmma reads B K-major only), C bf16 or fp16 without a scale. Throws ovl::Error naming the
// tensor and the value. Where a scale lives is the caller's to check (that needs the device).
inline void check_operand_types(std::string_view api, const OperandType& a, const OperandType& b, BLayout b_layout,
                                const OperandType& c) {
  const auto half = [](DType d) { return d == DType::kBF16 || d == DType::kFP16; };
  if (!is_fp8(a.dtype)) {
    OVL_CHECK(half(a.dtype), "{}: A dtype {} is not supported (bf16 or fp16; or e4m3 with an FP8 B)", api,
              to_string(a.dtype));
    for (const OperandType* t : {&a, &b, &c}) {
      OVL_CHECK(t->dtype == a.dtype, "{}: {} dtype {} differs from A's dtype {}", api, t->name, to_string(t->dtype),
                to_string(a.dtype));
      OVL_CHECK(t->scale == nullptr, "{}: {} has a scale, but its dtype {} is not FP8 (scales are for e4m3 / e5m2)",
                api, t->name, to_string(t->dtype));
    }
    return;
  }
  OVL_CHECK(a.dtype == DType::kE4M3, "{}: A dtype {}: FP8 A must be e4m3 (the GEMM runs e4m3 x e4m3 and e4m3 x e5m2)",
            api, to_string(a.dtype));
  OVL_CHECK(is_fp8(b.dtype), "{}: B dtype {} with e4m3 A: FP8 A takes an e4m3 or e5m2 B", api, to_string(b.dtype));
  OVL_CHECK(half(c.dtype), "{}: C dtype {}: the output of FP8 inputs is bf16 or fp16", api, to_string(c.dtype));
  OVL_CHECK(b_layout == BLayout::kNxK,
            "{}: B stored K x N (BLayout::kKxN) with FP8 inputs: FP8 wgmma reads B K-major only; pass B as N x K "
            "(kNxK)",
            api);
  for (const OperandType* t : {&a, &b}) {
    OVL_CHECK(t->scale != nullptr,
              "{}: {} (dtype {}) has no scale: FP8 tensors need their per-tensor scale (TensorRef::scale, a device "
              "pointer to one float)",
              api, t->name, to_string(t->dtype));
    OVL_CHECK(reinterpret_cast<uintptr_t>(t->scale) % 4 == 0, "{}: {} scale {} is not 4-byte aligned", api, t->name,
              static_cast<const void*>(t->scale));
  }
  OVL_CHECK(c.scale == nullptr, "{}: C has a scale, but C is the {} output (only the FP8 inputs take one)", api,
            to_string(c.dtype));
}

// The span of `name` = rows x cols elements of elem_bytes bytes at ptr. Throws ovl::Error naming the tensor and the
// value when a size is not positive, exceeds kMaxTensorDim, or the range wraps the address space.
inline TensorSpan tensor_span(std::string_view api, std::string_view name, const void* ptr, int64_t rows, int64_t cols,
                              int elem_bytes) {
  OVL_CHECK(rows > 0 && cols > 0, "{}: {} has shape {} x {} (must be positive)", api, name, rows, cols);
  OVL_CHECK(rows <= kMaxTensorDim && cols <= kMaxTensorDim,
            "{}: {} has shape {} x {}: a size over {} does not fit the kernels' 32-bit dimensions", api, name, rows,
            cols, kMaxTensorDim);
  OVL_CHECK(elem_bytes > 0 && elem_bytes <= 8, "{}: {} element size {} bytes", api, name, elem_bytes);
  // rows, cols < 2^31: the element count is below 2^62, and times at most 8 bytes below 2^65, so check before
  // multiplying.
  const uint64_t elems = uint64_t(rows) * uint64_t(cols);
  OVL_CHECK(elems <= std::numeric_limits<uint64_t>::max() / uint64_t(elem_bytes),
            "{}: {} has {} x {} elements: its byte size overflows 64 bits", api, name, rows, cols);
  const uint64_t bytes = elems * uint64_t(elem_bytes);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr);
  OVL_CHECK(bytes <= uint64_t(std::numeric_limits<uintptr_t>::max() - begin),
            "{}: {} at {} with {} bytes runs past the end of the address space", api, name, ptr, bytes);
  return TensorSpan{name, begin, bytes};
}

// Whether two byte ranges share at least one byte.
inline bool spans_overlap(const TensorSpan& x, const TensorSpan& y) {
  return x.bytes > 0 && y.bytes > 0 && x.begin < y.end() && y.begin < x.end();
}

// An output must not share a byte with an input: the GEMM reads A and B while the output (and, in loopback, the
// collective) writes, so an overlap gives a wrong answer, not an error, unless refused here. Inputs may overlap
// each other (both are only read).
inline void check_no_overlap(std::string_view api, const TensorSpan& out, const TensorSpan& in) {
  if (!spans_overlap(out, in)) return;
  const uintptr_t lo = out.begin > in.begin ? out.begin : in.begin;
  const uintptr_t hi = out.end() < in.end() ? out.end() : in.end();
  OVL_FAIL("{}: {} [{:#x}, {:#x}) overlaps {} [{:#x}, {:#x}) in {} bytes: the output must not alias an input", api,
           out.name, out.begin, out.end(), in.name, in.begin, in.end(), uint64_t(hi - lo));
}

// A tensor must lie inside the allocation that holds its first byte, [alloc_begin, alloc_begin + alloc_bytes) (as
// the driver reports it): one that runs past it would read or write another allocation's memory.
inline void check_inside_allocation(std::string_view api, const TensorSpan& t, uintptr_t alloc_begin,
                                    uint64_t alloc_bytes) {
  OVL_CHECK(t.begin >= alloc_begin && t.begin - alloc_begin <= alloc_bytes,
            "{}: {} at {:#x} is not inside the allocation [{:#x}, +{}) the driver reports for it", api, t.name, t.begin,
            alloc_begin, alloc_bytes);
  const uint64_t left = alloc_bytes - uint64_t(t.begin - alloc_begin);
  OVL_CHECK(t.bytes <= left,
            "{}: {} needs {} bytes from {:#x}, but its allocation has {} bytes left there (the tensor's shape is "
            "larger than its buffer)",
            api, t.name, t.bytes, t.begin, left);
}

}  // namespace ovl
