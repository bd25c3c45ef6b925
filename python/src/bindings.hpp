// Shared by the extension's translation units (module.cpp, context.cpp).
#pragma once

#include <nanobind/nanobind.h>

#include <nlohmann/json.hpp>

namespace ovl::python {

// JSON values to Python objects and back (through the json module: results are small, and this keeps one
// definition of every field, the library's to_json/from_json).
nanobind::object to_python(const nlohmann::json& j);
nlohmann::json from_python(nanobind::handle obj);  // a JSON string, or a dict / list

// context.cpp (CUDA builds): ovl.Context's native half, World, and the tensor readers' test hooks (tensors.cpp).
void bind_context(nanobind::module_& m);

}  // namespace ovl::python
