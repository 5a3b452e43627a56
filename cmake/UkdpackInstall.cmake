# Install rules, for two layouts:
#  * wheel (scikit-build-core, pip install): everything inside the Python package,
#    site-packages/ukdpack/{include,lib,bin,share/cmake/ukdpack}, so the package
#    config moves with site-packages and `python -m ukdpack --cmakedir` finds it;
#    ukdpack-validate also goes to the scripts folder (on PATH).
#  * prefix (cmake --install): the runtime library and headers, ukdpack-validate,
#    the packer's Python package with its built extension, a bin/ukdpack launcher
#    running it with the interpreter ukdpack was configured with, and the config.
# Both configs give ukdpack::runtime, ukdpack::validate and the CMake API of
# UkdPackaging.cmake. Paths inside them are relative to the config file.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

if(SKBUILD)
  set(UKDPACK_CONFIG_LAYOUT wheel)
  set(_ukd_libdir ukdpack/lib)
  set(_ukd_includedir ukdpack/include)
  set(_ukd_bindir ukdpack/bin)
  set(_ukd_cmakedir ukdpack/share/cmake/ukdpack)
  # The wheel's root is site-packages: the folder to put on PYTHONPATH.
  set(UKDPACK_CONFIG_PYTHONDIR .)
else()
  set(UKDPACK_CONFIG_LAYOUT prefix)
  set(UKDPACK_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ukdpack" CACHE STRING
      "Where ukdpack's package config is installed")
  set(UKDPACK_INSTALL_PYTHONDIR "${CMAKE_INSTALL_LIBDIR}/ukdpack/python" CACHE STRING
      "Where ukdpack's Python package is installed")
  set(_ukd_libdir "${CMAKE_INSTALL_LIBDIR}")
  set(_ukd_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
  set(_ukd_bindir "${CMAKE_INSTALL_BINDIR}")
  set(_ukd_cmakedir "${UKDPACK_INSTALL_CMAKEDIR}")
  set(UKDPACK_CONFIG_PYTHONDIR "")
  if(UKDPACK_BUILD_PYTHON)
    set(UKDPACK_CONFIG_PYTHONDIR "${UKDPACK_INSTALL_PYTHONDIR}")
  endif()
endif()

install(TARGETS ukdpack_runtime EXPORT ukdpackTargets
        ARCHIVE DESTINATION "${_ukd_libdir}"
        INCLUDES DESTINATION "${_ukd_includedir}")
install(DIRECTORY cpp/include/ukdpack DESTINATION "${_ukd_includedir}")
if(UKDPACK_BUILD_TOOLS)
  set_target_properties(ukdpack-validate PROPERTIES EXPORT_NAME validate)
  install(TARGETS ukdpack-validate EXPORT ukdpackTargets RUNTIME DESTINATION "${_ukd_bindir}")
  if(SKBUILD)
    install(TARGETS ukdpack-validate RUNTIME DESTINATION "${SKBUILD_SCRIPTS_DIR}")
  endif()
endif()

if(UKDPACK_BUILD_PYTHON)
  if(SKBUILD)
    # The Python sources come from wheel.packages (pyproject.toml).
    install(TARGETS ukdpack_python_runtime LIBRARY DESTINATION ukdpack)
  else()
    install(DIRECTORY python/ukdpack DESTINATION "${UKDPACK_INSTALL_PYTHONDIR}"
            PATTERN "__pycache__" EXCLUDE)
    install(TARGETS ukdpack_python_runtime LIBRARY DESTINATION "${UKDPACK_INSTALL_PYTHONDIR}/ukdpack")
    # `python -m ukdpack --cmakedir` of the installed package: the config folder,
    # relative to the package (cmake --install --prefix may move the whole prefix).
    file(RELATIVE_PATH _ukd_rel "/prefix/${UKDPACK_INSTALL_PYTHONDIR}/ukdpack"
         "/prefix/${UKDPACK_INSTALL_CMAKEDIR}")
    file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/ukdpack-install/cmake_dir.txt"
         CONTENT "${_ukd_rel}\n" @ONLY)
    install(FILES "${PROJECT_BINARY_DIR}/ukdpack-install/cmake_dir.txt"
            DESTINATION "${UKDPACK_INSTALL_PYTHONDIR}/ukdpack")
    # bin/ukdpack: the packer's command for users of the prefix (POSIX shell).
    if(NOT WIN32)
      file(RELATIVE_PATH UKDPACK_LAUNCHER_PYTHONDIR "/prefix/${CMAKE_INSTALL_BINDIR}"
           "/prefix/${UKDPACK_INSTALL_PYTHONDIR}")
      set(UKDPACK_LAUNCHER_PYTHON "${Python3_EXECUTABLE}")
      configure_file(cmake/ukdpack-launcher.sh.in "${PROJECT_BINARY_DIR}/ukdpack-install/ukdpack"
                     @ONLY)
      install(PROGRAMS "${PROJECT_BINARY_DIR}/ukdpack-install/ukdpack"
              DESTINATION "${CMAKE_INSTALL_BINDIR}")
    endif()
  endif()
endif()

install(EXPORT ukdpackTargets NAMESPACE ukdpack:: DESTINATION "${_ukd_cmakedir}")

# A wheel names no interpreter (it is installed into environments it knows nothing of):
# its config finds the one that owns it.
set(UKDPACK_CONFIG_PYTHON "")
if(UKDPACK_CONFIG_LAYOUT STREQUAL "prefix")
  set(UKDPACK_CONFIG_PYTHON "${Python3_EXECUTABLE}")
endif()
configure_package_config_file(cmake/ukdpackConfig.cmake.in
  "${PROJECT_BINARY_DIR}/ukdpackConfig.cmake"
  INSTALL_DESTINATION "${_ukd_cmakedir}"
  PATH_VARS UKDPACK_CONFIG_PYTHONDIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/ukdpackConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/ukdpackConfig.cmake"
              "${PROJECT_BINARY_DIR}/ukdpackConfigVersion.cmake"
              cmake/UkdpackDependencies.cmake cmake/UkdPackaging.cmake
              cmake/UkdShardTest.cmake cmake/UkdRequireShards.cmake
              cmake/UkdDvcStamp.cmake cmake/UkdPackStamp.cmake cmake/UkdScriptArgs.cmake
              cmake/UkdCheckPython.py cpp/include/ukdpack/model/targets.def
        DESTINATION "${_ukd_cmakedir}")
if(UKDPACK_BUILD_PYTHON)
  # Written at configure from pyproject.toml (CMakeLists.txt); read by UkdCheckPython.py.
  install(FILES "${UKDPACK_PYTHON_REQUIREMENTS_FILE}" DESTINATION "${_ukd_cmakedir}")
endif()
