# Host-side dependencies, found through the packages' own CMake configs (Debian ships all of them).
find_package(fmt REQUIRED CONFIG)
find_package(Eigen3 REQUIRED CONFIG)  # ovl::tools only (calibration), at build time
find_package(nlohmann_json 3.9 QUIET CONFIG)
if(NOT nlohmann_json_FOUND)
  # The GPU machine has no package manager: its build can point OVL_NLOHMANN_INCLUDE_DIR at a copied header tree.
  find_path(OVL_NLOHMANN_INCLUDE_DIR nlohmann/json.hpp HINTS ${OVL_NLOHMANN_INCLUDE_DIR} ${PROJECT_SOURCE_DIR}/.deps/include)
  if(NOT OVL_NLOHMANN_INCLUDE_DIR)
    message(FATAL_ERROR "nlohmann_json not found: install nlohmann-json3-dev or set OVL_NLOHMANN_INCLUDE_DIR")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED GLOBAL)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE ${OVL_NLOHMANN_INCLUDE_DIR})
endif()
if(OVL_BUILD_TESTS)
  find_package(GTest REQUIRED CONFIG)
endif()
if(OVL_BUILD_BENCH)
  find_package(benchmark REQUIRED CONFIG)
endif()
