# Finds ukdpack's C++ dependencies (never vendored) and defines the helpers that
# apply ukdpack's own compile settings to ukdpack's own targets only.
# Shared by the build and by the installed package config.
include_guard(GLOBAL)

find_package(nlohmann_json 3.10 REQUIRED)
# UKDPACK_PREFER_STATIC_DEPS: link zstd and libcrypto statically, for a runtime and
# extension that run on machines without those libraries (e.g. a lent GPU machine).
option(UKDPACK_PREFER_STATIC_DEPS "Link ukdpack's zstd and OpenSSL statically" OFF)
if(UKDPACK_PREFER_STATIC_DEPS)
  set(OPENSSL_USE_STATIC_LIBS TRUE)
endif()
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# Threads: the runtime checks a shard's launches on several threads.
find_package(Threads REQUIRED)

# zstd: the upstream config where there is one, else the library and header.
find_package(zstd CONFIG QUIET)
if(UKDPACK_PREFER_STATIC_DEPS AND TARGET zstd::libzstd_static)
  set(UKDPACK_ZSTD_TARGET zstd::libzstd_static)
elseif(TARGET zstd::libzstd_shared)
  set(UKDPACK_ZSTD_TARGET zstd::libzstd_shared)
elseif(TARGET zstd::libzstd_static)
  set(UKDPACK_ZSTD_TARGET zstd::libzstd_static)
else()
  find_path(UKDPACK_ZSTD_INCLUDE_DIR zstd.h)
  find_library(UKDPACK_ZSTD_LIBRARY NAMES zstd)
  if(NOT UKDPACK_ZSTD_INCLUDE_DIR OR NOT UKDPACK_ZSTD_LIBRARY)
    message(FATAL_ERROR "ukdpack: zstd not found; install it (Debian: apt-get install libzstd-dev)")
  endif()
  add_library(ukdpack_zstd_imported UNKNOWN IMPORTED)
  set_target_properties(ukdpack_zstd_imported PROPERTIES
    IMPORTED_LOCATION "${UKDPACK_ZSTD_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${UKDPACK_ZSTD_INCLUDE_DIR}")
  set(UKDPACK_ZSTD_TARGET ukdpack_zstd_imported)
endif()

# _ukdpack_header_library(<name> <header> <what> <debian package>): an INTERFACE target
# ukdpack_<name>_headers for a dependency used header-only inside the runtime's sources,
# its folder in the cache variable UKDPACK_<NAME>_INCLUDE_DIR. Not for consumers of an
# installed copy (the package config): the runtime's headers include none of them.
function(_ukdpack_header_library name header what package)
  if(TARGET ukdpack_${name}_headers OR _UKDPACK_FROM_PACKAGE_CONFIG)
    return()
  endif()
  string(TOUPPER "${name}" _ukd_upper)
  find_path(UKDPACK_${_ukd_upper}_INCLUDE_DIR ${header})
  if(NOT UKDPACK_${_ukd_upper}_INCLUDE_DIR)
    message(FATAL_ERROR "ukdpack: ${what} not found; install it (Debian: apt-get install ${package})")
  endif()
  add_library(ukdpack_${name}_headers INTERFACE)
  target_include_directories(ukdpack_${name}_headers INTERFACE "${UKDPACK_${_ukd_upper}_INCLUDE_DIR}")
endfunction()

# msgpack-cxx: kpack tables and code objects' AMDGPU metadata notes. Its Boost
# dependency is not needed (MSGPACK_NO_BOOST), so only the header is looked up.
_ukdpack_header_library(msgpack msgpack.hpp msgpack-cxx libmsgpack-cxx-dev)
if(TARGET ukdpack_msgpack_headers)
  target_compile_definitions(ukdpack_msgpack_headers INTERFACE MSGPACK_NO_BOOST MSGPACK_DEFAULT_API_VERSION=3)
endif()
set(UKDPACK_MSGPACK_TARGET ukdpack_msgpack_headers)
# xxHash (XXH_INLINE_ALL): the digest binding a shard's index to its files.
_ukdpack_header_library(xxhash xxhash.h xxHash libxxhash-dev)
set(UKDPACK_XXHASH_TARGET ukdpack_xxhash_headers)

# ukdpack_find_hip(): whether the HIP backend is built (UKDPACK_WITH_HIP: AUTO,
# ON or OFF). Its headers give types only; the runtime library is opened at run
# time, so nothing here reaches ukdpack's consumers. Sets UKDPACK_HAVE_HIP and
# UKDPACK_HIP_INCLUDE_DIR. Called by the build, not by the package config.
function(ukdpack_find_hip)
  set(UKDPACK_HAVE_HIP OFF PARENT_SCOPE)
  string(TOUPPER "${UKDPACK_WITH_HIP}" _ukd_with_hip)
  if(NOT _ukd_with_hip STREQUAL "AUTO" AND NOT UKDPACK_WITH_HIP)
    message(STATUS "ukdpack: HIP backend off (UKDPACK_WITH_HIP=${UKDPACK_WITH_HIP})")
    return()
  endif()
  find_path(UKDPACK_HIP_INCLUDE_DIR hip/hip_runtime_api.h
    HINTS "$ENV{ROCM_PATH}/include" "$ENV{HIP_PATH}/include" /opt/rocm/include
    DOC "Folder holding hip/hip_runtime_api.h, for ukdpack's HIP backend")
  if(NOT UKDPACK_HIP_INCLUDE_DIR)
    if(NOT _ukd_with_hip STREQUAL "AUTO")
      message(FATAL_ERROR "ukdpack: UKDPACK_WITH_HIP=${UKDPACK_WITH_HIP} but hip/hip_runtime_api.h was not found; "
                          "install the HIP runtime headers (Debian: apt-get install libamdhip64-dev, or ROCm) "
                          "or set UKDPACK_HIP_INCLUDE_DIR")
    endif()
    message(STATUS "ukdpack: HIP backend off (hip/hip_runtime_api.h not found)")
    return()
  endif()
  set(UKDPACK_HAVE_HIP ON PARENT_SCOPE)
  message(STATUS "ukdpack: HIP backend on (${UKDPACK_HIP_INCLUDE_DIR}/hip/hip_runtime_api.h)")
endfunction()

# ukdpack_target_defaults(<target>): warnings and the UKDPACK_SANITIZE sanitizers,
# on this target only, so a superbuild's flags are left as they are.
function(ukdpack_target_defaults target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  endif()
  if(UKDPACK_SANITIZE)
    string(REPLACE ";" "," _ukd_san "${UKDPACK_SANITIZE}")
    target_compile_options(${target} PRIVATE -fsanitize=${_ukd_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${_ukd_san})
  endif()
endfunction()

# ukdpack_find_pybind11(): pybind11 through the chosen interpreter
# (python -m pybind11 --cmakedir), else find_package(pybind11).
macro(ukdpack_find_pybind11)
  if(NOT TARGET pybind11::module)
    find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
    if(NOT pybind11_DIR)
      execute_process(
        COMMAND "${Python3_EXECUTABLE}" -m pybind11 --cmakedir
        OUTPUT_VARIABLE _ukd_pybind11_dir
        OUTPUT_STRIP_TRAILING_WHITESPACE
        RESULT_VARIABLE _ukd_pybind11_rc
        ERROR_QUIET)
      if(_ukd_pybind11_rc EQUAL 0 AND EXISTS "${_ukd_pybind11_dir}")
        set(pybind11_DIR "${_ukd_pybind11_dir}" CACHE PATH "pybind11 CMake directory")
      endif()
    endif()
    set(PYBIND11_FINDPYTHON ON)
    find_package(pybind11 CONFIG)
    if(NOT pybind11_FOUND)
      message(FATAL_ERROR
        "ukdpack: pybind11 not found for ${Python3_EXECUTABLE}. Install it with\n"
        "  ${Python3_EXECUTABLE} -m pip install pybind11\n"
        "or configure with -DUKDPACK_BUILD_PYTHON=OFF.")
    endif()
  endif()
endmacro()
