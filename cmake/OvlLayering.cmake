# The layering rule: the runtime libraries (ovl::base, ovl::model, ovl::sim, ovl::kernels, ovl::core) use no Eigen
# and nothing of ovl::tools (calibration, validation, bench names); only ovl::tools and what sits above it do.
#
#   include(OvlLayering) at the end of the top-level CMakeLists: checks the link graph and the sources at configure
#                        time (a violation is a configure error);
#   cmake -DOVL_SOURCE_DIR=<dir> -P OvlLayering.cmake: checks the sources only (the ctest `layering`, which also
#                        catches an #include added after the last configure).
set(_ovl_runtime_dirs base model sim kernels core)

# The lines of the sources (.cpp .hpp .h .cu .cuh) of `dirs` under `root` that match `regex`, as "path: line".
function(ovl_source_lines_matching root dirs regex out)
  set(bad "")
  foreach(dir ${dirs})
    file(GLOB_RECURSE files ${root}/${dir}/*.cpp ${root}/${dir}/*.hpp ${root}/${dir}/*.h ${root}/${dir}/*.cu
         ${root}/${dir}/*.cuh)
    foreach(f ${files})
      file(STRINGS ${f} hits REGEX "${regex}")
      foreach(h ${hits})
        file(RELATIVE_PATH rel ${root} ${f})
        string(STRIP "${h}" h)
        list(APPEND bad "${rel}: ${h}")
      endforeach()
    endforeach()
  endforeach()
  set(${out} "${bad}" PARENT_SCOPE)
endfunction()

# Sources of the runtime folders under `root` that include a tools/ header or Eigen.
function(ovl_layering_source_violations root out)
  ovl_source_lines_matching(${root} "${_ovl_runtime_dirs}"
                            "^[ \t]*#[ \t]*include[ \t]*[<\"](ovl/tools/|Eigen/|unsupported/Eigen/)" bad)
  set(${out} "${bad}" PARENT_SCOPE)
endfunction()

# Library sources under `root` (everything but tests/ and bench/) that call cudaMemcpy / cudaMemset / cudaMemcpy2D:
# those run on the legacy default stream, which ovl's non-blocking streams do not wait for and which every host
# thread shares. Library code uses copy_now / fill_now (ovl/cuda_check.hpp) or the *Async forms on its own streams.
function(ovl_legacy_stream_violations root out)
  ovl_source_lines_matching(${root} "base;kernels;core;apps;python/src;tools"
                            "^[^/]*[^A-Za-z_](cudaMemcpy|cudaMemset|cudaMemcpy2D)[ \t]*\\(" bad)
  set(${out} "${bad}" PARENT_SCOPE)
endfunction()

# core/ sources that define a kernel: device code lives in kernels/ (core/ launches it through kernels/'s launchers).
function(ovl_core_kernel_violations root out)
  ovl_source_lines_matching(${root} "core" "__global__" bad)
  set(${out} "${bad}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  if(NOT OVL_SOURCE_DIR)
    message(FATAL_ERROR "usage: cmake -DOVL_SOURCE_DIR=<source dir> -P OvlLayering.cmake")
  endif()
  # Fails listing `lines` under `what`, or says `fine`.
  function(ovl_report lines what fine)
    if(lines)
      list(JOIN lines "\n  " msg)
      message(FATAL_ERROR "${what}:\n  ${msg}")
    endif()
    message(STATUS "layering: ${fine}")
  endfunction()
  ovl_layering_source_violations(${OVL_SOURCE_DIR} _bad)
  ovl_report("${_bad}" "runtime sources include ovl::tools or Eigen headers (they belong in tools/)"
             "no runtime source includes ovl::tools or Eigen")
  ovl_legacy_stream_violations(${OVL_SOURCE_DIR} _legacy)
  ovl_report("${_legacy}" "library sources use the legacy default stream (use copy_now / fill_now)"
             "no library source uses the legacy default stream")
  ovl_core_kernel_violations(${OVL_SOURCE_DIR} _kernels)
  ovl_report("${_kernels}" "core/ sources define kernels (they belong in kernels/)" "core/ defines no kernel")
  return()
endif()

# Every target `target` links, directly or through others (link items inside generator expressions included).
function(ovl_link_closure target out)
  set(seen "")
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue t)
    if(t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    if(NOT TARGET ${t})
      continue()
    endif()
    get_target_property(aliased ${t} ALIASED_TARGET)
    if(aliased)
      list(APPEND queue ${aliased})
      continue()
    endif()
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(items ${t} ${prop})
      if(NOT items)
        continue()
      endif()
      foreach(item ${items})
        string(REGEX MATCHALL "[A-Za-z0-9_.+-]+(::[A-Za-z0-9_.+-]+)*" names "${item}")
        list(APPEND queue ${names})
      endforeach()
    endforeach()
  endwhile()
  set(${out} "${seen}" PARENT_SCOPE)
endfunction()

function(ovl_check_layering)
  set(bad "")
  foreach(t ovl_base ovl_model ovl_sim ovl_kernels ovl_core)
    if(NOT TARGET ${t})
      continue()
    endif()
    ovl_link_closure(${t} closure)
    foreach(dep ${closure})
      if(dep MATCHES "^(Eigen3::|ovl_tools$|ovl::tools$)")
        list(APPEND bad "${t} links ${dep}")
      endif()
    endforeach()
  endforeach()
  ovl_layering_source_violations(${PROJECT_SOURCE_DIR} sources)
  list(APPEND bad ${sources})
  if(bad)
    list(JOIN bad "\n  " msg)
    message(FATAL_ERROR "layering: the runtime libraries must not use Eigen or ovl::tools (they belong in tools/):\n  ${msg}")
  endif()
endfunction()
ovl_check_layering()
