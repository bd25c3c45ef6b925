// Framework tensors read at the binding's boundary, each kind through its framework's cheapest route, with no
// description built in Python and nothing allocated: per call, this is most of the host time spent outside the
// library (python/bench/call_overhead.py).
//   torch                     data_ptr(), shape, is_contiguous() (stride() only for the message of a strided
//                             one), dtype (compared with torch's dtype objects), get_device() (device.type when
//                             it is negative: not a CUDA tensor)
//   CuPy                      data.ptr, data.device_id, shape, strides (bytes), dtype (compared with NumPy's
//                             float16; dtype.str for any other)
//   __cuda_array_interface__  the dict's data, shape, strides (bytes; None: contiguous) and typestr; it names no
//                             device, so the Context's own pointer check decides (check_tensor, core/src/context.cpp)
//   __dlpack__                nb::ndarray (one DLPack export per call)
#include "tensors.hpp"

#include <cuda_runtime_api.h>
#include <nanobind/ndarray.h>

#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "ovl/error.hpp"

namespace nb = nanobind;

namespace ovl::python {
namespace {

// Attribute names, interned once (the interpreter keeps them).
struct Names {
  PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
  PyObject* shape = PyUnicode_InternFromString("shape");
  PyObject* stride = PyUnicode_InternFromString("stride");
  PyObject* strides = PyUnicode_InternFromString("strides");
  PyObject* dtype = PyUnicode_InternFromString("dtype");
  PyObject* is_contiguous = PyUnicode_InternFromString("is_contiguous");
  PyObject* get_device = PyUnicode_InternFromString("get_device");
  PyObject* device = PyUnicode_InternFromString("device");
  PyObject* type = PyUnicode_InternFromString("type");
  PyObject* data = PyUnicode_InternFromString("data");
  PyObject* ptr = PyUnicode_InternFromString("ptr");
  PyObject* device_id = PyUnicode_InternFromString("device_id");
  PyObject* str = PyUnicode_InternFromString("str");
  PyObject* cuda_array_interface = PyUnicode_InternFromString("__cuda_array_interface__");
  PyObject* dlpack = PyUnicode_InternFromString("__dlpack__");
};

const Names& names() {
  static const Names n;
  return n;
}

// torch's dtype objects the binding accepts (and fp32, named as the other frameworks name it), taken when the first
// torch tensor is met; references held for the interpreter's life.
struct TorchDTypes {
  PyObject *bf16 = nullptr, *fp16 = nullptr, *fp32 = nullptr;
};
TorchDTypes torch_dtypes;
// NumPy's float16 dtype object (CuPy arrays' dtype), taken when the first CuPy array is met.
PyObject* numpy_fp16 = nullptr;

nb::object attr(nb::handle o, PyObject* name) {
  PyObject* r = PyObject_GetAttr(o.ptr(), name);
  if (r == nullptr) nb::raise_python_error();
  return nb::steal(r);
}

nb::object call_method(nb::handle o, PyObject* name) {
  PyObject* self = o.ptr();
  PyObject* r = PyObject_VectorcallMethod(name, &self, 1, nullptr);
  if (r == nullptr) nb::raise_python_error();
  return nb::steal(r);
}

int64_t as_int(nb::handle o) {
  const long long v = PyLong_AsLongLong(o.ptr());
  if (v == -1 && PyErr_Occurred()) nb::raise_python_error();
  return v;
}

uintptr_t as_address(nb::handle o) {
  nb::object index;
  if (!PyLong_Check(o.ptr())) {  // an integer of another type (NumPy's): its __index__
    index = nb::steal(PyNumber_Index(o.ptr()));
    if (!index.is_valid()) nb::raise_python_error();
    o = index;
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(o.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) nb::raise_python_error();
  return uintptr_t(v);
}

constexpr int kMaxDims = 8;  // extents kept (for messages); a tensor of more dimensions is refused all the same

// What the checks need of one tensor, as its framework states it.
struct TensorDesc {
  uintptr_t ptr = 0;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};  // the first min(ndim, kMaxDims) extents
  bool strided = true;                    // false: the framework states it is contiguous
  std::array<int64_t, 2> strides{};       // in elements; read for 2-D tensors only
  std::optional<DType> dtype;             // bf16 or fp16, else dtype_name says what it is
  std::string dtype_name;
  std::string device_type = "cuda";
  std::optional<int> device;  // unknown for __cuda_array_interface__
};

// The integers of a tuple, list or other sequence into out[0, max); returns how many there are.
int read_ints(nb::handle seq, int64_t* out, int max) {
  nb::object fast;
  PyObject* items = seq.ptr();
  if (!PyTuple_Check(items) && !PyList_Check(items)) {
    fast = nb::steal(PySequence_Fast(items, "ovl: a shape or strides must be a sequence of integers"));
    if (!fast.is_valid()) nb::raise_python_error();
    items = fast.ptr();
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
  for (Py_ssize_t i = 0; i < n && i < max; ++i) out[i] = as_int(PySequence_Fast_GET_ITEM(items, i));
  return int(n);
}

std::string dims_text(const int64_t* v, int n, int stored) {
  std::string s = "(";
  for (int i = 0; i < stored; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (n > stored) s += ", ...";
  return s + (n == 1 ? ",)" : ")");
}

std::string shape_text(const TensorDesc& d) { return dims_text(d.shape.data(), d.ndim, std::min(d.ndim, kMaxDims)); }

// 2-D strides in units of `itemsize` bytes (1: already in elements), rounded down as Python's // does.
void read_strides(const char* name, nb::handle seq, int64_t itemsize, TensorDesc& d) {
  std::array<int64_t, kMaxDims> s{};
  const int n = read_ints(seq, s.data(), kMaxDims);
  OVL_CHECK(n == 2, "{} has {} strides {} for its 2 dimensions (shape {})", name, n,
            dims_text(s.data(), n, std::min(n, kMaxDims)), shape_text(d));
  for (int i = 0; i < 2; ++i) {
    d.strides[size_t(i)] = s[size_t(i)] / itemsize - (s[size_t(i)] % itemsize != 0 && s[size_t(i)] < 0 ? 1 : 0);
  }
}

// A __cuda_array_interface__ type string ("<f2"): the dtype; returns the item size it states (the digits after the
// kind), which turns byte strides into element strides.
int64_t read_typestr(const char* name, nb::handle typestr, TensorDesc& d) {
  Py_ssize_t size = 0;
  const char* s = PyUnicode_AsUTF8AndSize(typestr.ptr(), &size);
  if (s == nullptr) nb::raise_python_error();
  const std::string_view text(s, size_t(size));
  if (text == "<f2") {
    d.dtype = DType::kFP16;
  } else {
    d.dtype_name = text == "<f4" ? "fp32" : text == "<f8" ? "fp64" : std::string(text);
  }
  int64_t itemsize = 0;
  if (text.size() > 2) std::from_chars(text.data() + 2, text.data() + text.size(), itemsize);
  OVL_CHECK(itemsize > 0, "{} has type string \"{}\", which states no item size", name, text);
  return itemsize;
}

void read_torch(const char* name, nb::handle t, TensorDesc& d) {
  const Names& s = names();
  d.ptr = as_address(call_method(t, s.data_ptr));
  d.ndim = read_ints(attr(t, s.shape), d.shape.data(), kMaxDims);
  // torch's contiguity ignores the stride of an extent-1 dimension, as the check in tensor_ref does.
  d.strided = call_method(t, s.is_contiguous).ptr() != Py_True;
  if (d.strided && d.ndim == 2) read_strides(name, call_method(t, s.stride), 1, d);
  const nb::object dtype = attr(t, s.dtype);
  if (dtype.ptr() == torch_dtypes.bf16) {
    d.dtype = DType::kBF16;
  } else if (dtype.ptr() == torch_dtypes.fp16) {
    d.dtype = DType::kFP16;
  } else {
    d.dtype_name = dtype.ptr() == torch_dtypes.fp32 ? "fp32" : nb::str(dtype).c_str();
  }
  const int64_t device = as_int(call_method(t, s.get_device));  // -1: not a CUDA tensor
  if (device >= 0) {
    d.device = int(device);
  } else {
    d.device_type = nb::str(attr(attr(t, s.device), s.type)).c_str();
  }
}

void read_cupy(const char* name, nb::handle t, TensorDesc& d) {
  const Names& s = names();
  const nb::object memory = attr(t, s.data);
  d.ptr = as_address(attr(memory, s.ptr));
  d.device = int(as_int(attr(memory, s.device_id)));
  d.ndim = read_ints(attr(t, s.shape), d.shape.data(), kMaxDims);
  const nb::object dtype = attr(t, s.dtype);
  int64_t itemsize = 2;
  if (dtype.ptr() == numpy_fp16) {
    d.dtype = DType::kFP16;
  } else {
    itemsize = read_typestr(name, attr(dtype, s.str), d);
  }
  if (d.ndim == 2) read_strides(name, attr(t, s.strides), itemsize, d);
}

void read_cuda_array_interface(const char* name, nb::handle t, TensorDesc& d) {
  const nb::object cai = attr(t, names().cuda_array_interface);
  OVL_CHECK(PyDict_Check(cai.ptr()), "{}'s __cuda_array_interface__ is a {}, not a dict", name,
            Py_TYPE(cai.ptr())->tp_name);
  const auto item = [&](const char* key, bool required) -> nb::handle {
    PyObject* v = PyDict_GetItemString(cai.ptr(), key);  // borrowed
    OVL_CHECK(v != nullptr || !required, "{}'s __cuda_array_interface__ has no \"{}\"", name, key);
    return v;
  };
  const nb::handle data = item("data", true);
  OVL_CHECK(PyTuple_Check(data.ptr()) && PyTuple_GET_SIZE(data.ptr()) >= 1,
            "{}'s __cuda_array_interface__ \"data\" is no (pointer, read-only) tuple", name);
  d.ptr = as_address(PyTuple_GET_ITEM(data.ptr(), 0));
  d.ndim = read_ints(item("shape", true), d.shape.data(), kMaxDims);
  const int64_t itemsize = read_typestr(name, item("typestr", true), d);
  const nb::handle strides = item("strides", false);
  d.strided = strides.is_valid() && !strides.is_none();
  if (d.strided && d.ndim == 2) read_strides(name, strides, itemsize, d);
}

void read_dlpack(nb::handle t, TensorDesc& d) {
  const nb::ndarray<> a = nb::cast<nb::ndarray<>>(t);
  d.ptr = uintptr_t(a.data());
  d.ndim = int(a.ndim());
  for (int i = 0; i < d.ndim && i < kMaxDims; ++i) d.shape[size_t(i)] = int64_t(a.shape(size_t(i)));
  if (d.ndim == 2) d.strides = {int64_t(a.stride(0)), int64_t(a.stride(1))};
  const nb::dlpack::dtype dt = a.dtype();
  if (dt.code == uint8_t(nb::dlpack::dtype_code::Bfloat) && dt.bits == 16) {
    d.dtype = DType::kBF16;
  } else if (dt.code == uint8_t(nb::dlpack::dtype_code::Float) && dt.bits == 16) {
    d.dtype = DType::kFP16;
  } else if (dt.code == uint8_t(nb::dlpack::dtype_code::Float) && dt.bits == 32) {
    d.dtype_name = "fp32";
  } else {
    d.dtype_name = fmt::format("dlpack code {} bits {}", dt.code, dt.bits);
  }
  const int type = a.device_type();
  if (type != nb::device::cuda::value && type != nb::device::cuda_managed::value) {
    d.device_type = type == nb::device::cpu::value ? "cpu" : "other";
  }
  d.device = int(a.device_id());
}

// Whether `t`, of a type defined in the package `t_package`, is a package.<type_name> of that package (when it is
// loaded: never imported here).
bool instance_of(nb::handle t, const std::string& t_package, const char* package, const char* type_name) {
  if (t_package != package) return false;
  PyObject* m = PyImport_GetModule(nb::str(package).ptr());
  if (m == nullptr) {
    if (PyErr_Occurred()) nb::raise_python_error();
    return false;
  }
  const nb::object cls = nb::steal(m).attr(type_name);
  const int r = PyObject_IsInstance(t.ptr(), cls.ptr());
  if (r < 0) nb::raise_python_error();
  return r == 1;
}

TensorKind classify(nb::handle t) {
  const nb::handle type = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(t.ptr())));
  const std::string module = nb::cast<std::string>(nb::str(nb::getattr(type, "__module__", nb::str(""))));
  const std::string package = module.substr(0, module.find('.'));
  if (instance_of(t, package, "torch", "Tensor")) {
    if (torch_dtypes.bf16 == nullptr) {
      const nb::object torch = nb::module_::import_("torch");
      torch_dtypes.bf16 = nb::object(torch.attr("bfloat16")).release().ptr();
      torch_dtypes.fp16 = nb::object(torch.attr("float16")).release().ptr();
      torch_dtypes.fp32 = nb::object(torch.attr("float32")).release().ptr();
    }
    return TensorKind::kTorch;
  }
  if (instance_of(t, package, "cupy", "ndarray")) {
    if (numpy_fp16 == nullptr) {
      try {  // CuPy needs NumPy; without it (a stand-in array) every dtype is read through dtype.str
        numpy_fp16 = nb::module_::import_("numpy").attr("dtype")("float16").release().ptr();
      } catch (const nb::python_error&) {
      }
    }
    return TensorKind::kCupy;
  }
  if (nb::hasattr(t, nb::handle(names().cuda_array_interface))) return TensorKind::kCudaArrayInterface;
  if (nb::hasattr(t, nb::handle(names().dlpack))) return TensorKind::kDLPack;
  throw nb::type_error(fmt::format("ovl: a {}.{} is no tensor (no __cuda_array_interface__ or __dlpack__; torch, "
                                   "CuPy and DLPack tensors are accepted)",
                                   module, nb::cast<std::string>(nb::str(type.attr("__name__"))))
                           .c_str());
}

}  // namespace

TensorKind tensor_kind(nb::handle t) {
  // A few types at most: a linear scan. Each type is held, so its address cannot be reused by another.
  struct Known {
    PyTypeObject* type;
    TensorKind kind;
  };
  static std::vector<Known> known;
  PyTypeObject* type = Py_TYPE(t.ptr());
  for (const Known& k : known) {
    if (k.type == type) return k.kind;
  }
  const TensorKind kind = classify(t);
  Py_INCREF(type);
  known.push_back({type, kind});
  return kind;
}

TensorRef tensor_ref(std::string_view api, const char* name, nb::handle t, int device, BLayout layout) {
  TensorDesc d;
  switch (tensor_kind(t)) {
    case TensorKind::kTorch:
      read_torch(name, t, d);
      break;
    case TensorKind::kCupy:
      read_cupy(name, t, d);
      break;
    case TensorKind::kCudaArrayInterface:
      read_cuda_array_interface(name, t, d);
      break;
    case TensorKind::kDLPack:
      read_dlpack(t, d);
      break;
  }
  OVL_CHECK(d.ndim == 2, "{}: {} has {} dimensions (shape {}); it must be a 2-D matrix", api, name, d.ndim,
            shape_text(d));
  const int64_t rows = d.shape[0], cols = d.shape[1];
  if (d.strided) {
    // Row-major and dense; a dimension of extent 1 may carry any stride (frameworks differ there).
    const bool ok = (cols == 1 || d.strides[1] == 1) && (rows == 1 || d.strides[0] == cols);
    OVL_CHECK(ok,
              "{}: {} has strides {} for shape {}: it must be contiguous row-major (strides ({}, 1)); call "
              ".contiguous() on it",
              api, name, dims_text(d.strides.data(), 2, 2), shape_text(d), cols);
  }
  OVL_CHECK(d.device_type == "cuda", "{}: {} is on device {} (a CUDA tensor on device {} is needed)", api, name,
            d.device_type, device);
  OVL_CHECK(!d.device || *d.device == device, "{}: {} is on cuda:{}, the context's device is cuda:{}", api, name,
            d.device.value_or(-1), device);
  OVL_CHECK(d.dtype.has_value(), "{}: {} has dtype {}; ovl takes bfloat16 or float16", api, name, d.dtype_name);
  return TensorRef{reinterpret_cast<void*>(d.ptr), rows, cols, *d.dtype, layout};
}

PyObject* python_attr(PyObject*& slot, const char* module, std::initializer_list<const char*> path) {
  if (slot == nullptr) {
    nb::object o = nb::module_::import_(module);
    for (const char* name : path) o = o.attr(name);
    slot = o.release().ptr();
  }
  return slot;
}

uintptr_t current_stream(TensorKind kind, int device) {
  switch (kind) {
    case TensorKind::kTorch: {
      // torch._C._cuda_getCurrentRawStream(device): the current stream of `device`, whichever device is current.
      static PyObject* raw = nullptr;
      return as_address(nb::handle(python_attr(raw, "torch", {"_C", "_cuda_getCurrentRawStream"}))(device));
    }
    case TensorKind::kCupy: {
      // cupy.cuda.get_current_stream() answers for the current device; for another one, ovl.context's helper asks
      // inside cupy.cuda.Device(device).
      int current = -1;
      if (cudaGetDevice(&current) == cudaSuccess && current == device) {
        static PyObject* get = nullptr;
        return as_address(attr(nb::handle(python_attr(get, "cupy", {"cuda", "get_current_stream"}))(), names().ptr));
      }
      static PyObject* on_device = nullptr;
      return as_address(nb::handle(python_attr(on_device, "ovl.context", {"_cupy_current_stream"}))(device));
    }
    case TensorKind::kCudaArrayInterface:
    case TensorKind::kDLPack:
      break;
  }
  return 0;
}

}  // namespace ovl::python
