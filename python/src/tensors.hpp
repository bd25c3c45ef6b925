// Framework tensors read and checked at the binding's boundary (CUDA builds; tensors.cpp).
#pragma once

#include <nanobind/nanobind.h>

#include <string_view>

#include "ovl/core/context.hpp"
#include "ovl/names.hpp"

namespace ovl::python {

// How a tensor of one Python type is read; found once per type and kept.
enum class TensorKind { kTorch, kCupy, kCudaArrayInterface, kDLPack };
inline constexpr Named<TensorKind> kTensorKindNames[] = {{TensorKind::kTorch, "torch"},
                                                         {TensorKind::kCupy, "cupy"},
                                                         {TensorKind::kCudaArrayInterface, "cuda-array-interface"},
                                                         {TensorKind::kDLPack, "dlpack"}};

// The kind of `t`'s type; a TypeError naming the type for an object that is no tensor.
TensorKind tensor_kind(nanobind::handle t);

// `t` as the library's TensorRef, after the checks the Context cannot make: 2-D, contiguous row-major, on the
// CUDA device `device` (when the framework says which), bf16 or fp16. Errors (ovl::Error) name the API, the tensor
// (`name`: "A", "B", "C") and the value.
TensorRef tensor_ref(std::string_view api, const char* name, nanobind::handle t, int device, BLayout layout);

// The current stream of the framework of a tensor of kind `kind` on CUDA device `device`: torch's, CuPy's; 0, the
// legacy default stream, for other tensors, whose framework's current stream is unknown.
uintptr_t current_stream(TensorKind kind, int device);

// `module`.path[0].path[1]... imported and kept in `slot` (a static of the caller, null at first) for the
// interpreter's life. Filled under the GIL without a C++ static-initialization guard: an import may let another
// thread run Python, and a guard held across it could deadlock against that thread; two threads that both fill
// `slot` leave one reference behind.
PyObject* python_attr(PyObject*& slot, const char* module, std::initializer_list<const char*> path);

}  // namespace ovl::python
