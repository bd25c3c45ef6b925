include(CMakePackageConfigHelpers)
set(_ovl_targets ovl_base ovl_model ovl_sim)
if(OVL_ENABLE_CUDA)
  list(APPEND _ovl_targets ovl_kernels ovl_core)
endif()
install(TARGETS ${_ovl_targets} EXPORT ovlTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET ovl)
  install(TARGETS ovl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(_dir base model sim kernels core)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${_dir}/include/ovl AND (OVL_ENABLE_CUDA OR NOT _dir MATCHES "kernels|core"))
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_dir}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endforeach()
set(_ovl_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ovl)
install(EXPORT ovlTargets NAMESPACE ovl:: DESTINATION ${_ovl_cmake_dir})
set(OVL_CONFIG_ENABLE_CUDA ${OVL_ENABLE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ovlConfig.cmake.in ${PROJECT_BINARY_DIR}/ovlConfig.cmake
                              INSTALL_DESTINATION ${_ovl_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ovlConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ovlConfig.cmake ${PROJECT_BINARY_DIR}/ovlConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake DESTINATION ${_ovl_cmake_dir})
