# Install rules for a plain (non-pip) install: the runtime library and headers,
# ukdpack-validate, the packer's Python package with its built extension, and a
# package config so `find_package(ukdpack CONFIG)` gives ukdpack::runtime and the
# CMake API of UkdPackaging.cmake.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(UKDPACK_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ukdpack" CACHE STRING
    "Where ukdpack's package config is installed")
set(UKDPACK_INSTALL_PYTHONDIR "${CMAKE_INSTALL_LIBDIR}/ukdpack/python" CACHE STRING
    "Where ukdpack's Python package is installed")

install(TARGETS ukdpack_runtime EXPORT ukdpackTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(DIRECTORY cpp/include/ukdpack DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
if(UKDPACK_BUILD_TOOLS)
  set_target_properties(ukdpack-validate PROPERTIES EXPORT_NAME validate)
  install(TARGETS ukdpack-validate EXPORT ukdpackTargets
          RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
endif()
if(UKDPACK_BUILD_PYTHON)
  install(DIRECTORY python/ukdpack DESTINATION "${UKDPACK_INSTALL_PYTHONDIR}"
          PATTERN "__pycache__" EXCLUDE)
  install(TARGETS ukdpack_python_runtime LIBRARY DESTINATION "${UKDPACK_INSTALL_PYTHONDIR}/ukdpack")
endif()
install(EXPORT ukdpackTargets NAMESPACE ukdpack:: DESTINATION "${UKDPACK_INSTALL_CMAKEDIR}")

set(UKDPACK_CONFIG_PYTHON "${Python3_EXECUTABLE}")
configure_package_config_file(cmake/ukdpackConfig.cmake.in
  "${PROJECT_BINARY_DIR}/ukdpackConfig.cmake"
  INSTALL_DESTINATION "${UKDPACK_INSTALL_CMAKEDIR}"
  PATH_VARS UKDPACK_INSTALL_PYTHONDIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/ukdpackConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/ukdpackConfig.cmake"
              "${PROJECT_BINARY_DIR}/ukdpackConfigVersion.cmake"
              cmake/UkdpackDependencies.cmake cmake/UkdPackaging.cmake
              cmake/UkdShardTest.cmake cmake/UkdRequireShards.cmake
              cmake/UkdDvcStamp.cmake cmake/UkdPackStamp.cmake cmake/UkdCheckPython.py
              "${UKDPACK_PYTHON_REQUIREMENTS_FILE}"
        DESTINATION "${UKDPACK_INSTALL_CMAKEDIR}")
