# UkdPackaging.cmake — ukdpack's public CMake API.
#
# Available after add_subdirectory(ukdpack) and after find_package(ukdpack CONFIG).
# Every function parses its arguments with cmake_parse_arguments and stops on an
# unknown or missing one. The packer runs as `<python> -m ukdpack` with PYTHONPATH
# on ukdpack's Python sources and its built extension, so no pip install is needed.
# The first function called checks that the interpreter has the packer's Python
# dependencies (pyproject.toml's [project] dependencies) and fails configure naming
# each missing one and the pip command that installs it.
#
#   ukd_check_dvc_outputs(ROOT <dir> [REQUIRE] [RESULT_VAR <var>])
#   ukd_add_dvc_pull_target(NAME <n> ROOT <dir> [REMOTE <r>])
#   ukd_add_pack_target(NAME <n> SOURCE_ROOT <dir> OUT_ROOT <dir> [ARCHES ...] ...)
#   ukd_add_shard_tests(PACK_NAME <n> [ARCHES ...])
include_guard(GLOBAL)

# Set by ukdpack's CMakeLists.txt (subproject) or by ukdpackConfig.cmake (installed
# copy) before this file is included:
#   _UKDPACK_DEFAULT_PYTHON           the interpreter ukdpack was built for
#   UKDPACK_PYTHONPATH                folders to put on PYTHONPATH (sources, extension)
#   UKDPACK_PYTHON_REQUIREMENTS_FILE  the packer's Python requirements, one a line
#   UKDPACK_RUNTIME_TARGETS           targets a pack must wait for (the extension)
#   UKDPACK_VALIDATE                  the ukdpack-validate target or program

# Cache variables (-D on the cmake command line, or a preset):
#   UKDPACK_PYTHON               the interpreter that runs the packer, its checks and
#                                the shard tests (default: the one ukdpack was built
#                                for, Python3_EXECUTABLE)
#   UKDPACK_PACK_JOBS            compiles that all pack commands together may run at
#                                once (default: the machine's logical cores); see
#                                ukd_add_pack_target
#   UKDPACK_HIPCC, UKDPACK_NVCC  compilers for pack targets without HIPCC / NVCC
#                                (default: the packer's lookup: $UKDPACK_HIPCC or
#                                $UKDPACK_NVCC at build time, then PATH)
#   UKDPACK_CACHE_DIR            compile cache for pack targets without CACHE_DIR
#                                (default: the packer's, ~/.cache/ukdpack)
#   UKDPACK_ALLOW_UNKNOWN_ARCHES a name in ARCHES / GPU_TARGETS that is no GPU arch is
#                                dropped with a warning instead of failing configure;
#                                one of the right shape that is not in ukdpack's target
#                                table is packed anyway (--allow-unknown-arch)
#   UKDPACK_REQUIRE_DVC_OUTPUTS  missing DVC outputs are fatal in ukd_check_dvc_outputs
#   UKDPACK_REMOTE_CACHE         remote compile cache URL for every pack command
#                                (http(s):// or redis://; docs/remote-cache.md)
#   UKDPACK_REMOTE_CACHE_MODE    read or read-write (default: read-write)
#   UKDPACK_REMOTE_EXEC          remote-execution farm (grpc[s]://HOST:PORT[/INSTANCE])
#                                for pack targets without REMOTE_EXEC (docs/packing.md)
#   UKDPACK_REMOTE_EXEC_MODE     auto or require (default: auto)
#   UKDPACK_RESIDENT             pack commands use the resident packer (a server that
#                                keeps ukdpack imported between builds; docs/packing.md,
#                                "The resident packer"); OFF: each pack starts its own
#                                interpreter, unless $UKDPACK_RESIDENT is 1 at build time
set(UKDPACK_PYTHON "" CACHE FILEPATH
    "Python that runs ukdpack's packer (default: the one ukdpack was built for)")
cmake_host_system_information(RESULT _ukd_cores QUERY NUMBER_OF_LOGICAL_CORES)
set(UKDPACK_PACK_JOBS "${_ukd_cores}" CACHE STRING
    "Compiles all ukdpack pack commands together may run at once")
set(UKDPACK_HIPCC "" CACHE FILEPATH "HIP compiler for ukdpack pack targets (default: the packer's lookup)")
set(UKDPACK_NVCC "" CACHE FILEPATH "CUDA compiler for ukdpack pack targets (default: the packer's lookup)")
set(UKDPACK_CACHE_DIR "" CACHE PATH "ukdpack's compile cache (default: ~/.cache/ukdpack)")
option(UKDPACK_ALLOW_UNKNOWN_ARCHES "Drop a GPU_TARGETS/ARCHES entry that is no GPU arch, and pack one ukdpack does not know, with a warning" OFF)
option(UKDPACK_REQUIRE_DVC_OUTPUTS "Make missing DVC outputs fatal in ukd_check_dvc_outputs" OFF)
set(UKDPACK_REMOTE_CACHE "" CACHE STRING
    "remote compile cache URL for every pack (http(s):// or redis://; docs/remote-cache.md)")
set(UKDPACK_REMOTE_CACHE_MODE "" CACHE STRING "read or read-write (default: read-write)")
set(UKDPACK_REMOTE_EXEC "" CACHE STRING
    "remote-execution farm for every pack: grpc[s]://HOST:PORT[/INSTANCE] (docs/packing.md)")
set(UKDPACK_REMOTE_EXEC_MODE "" CACHE STRING "auto or require (default: auto)")
option(UKDPACK_RESIDENT "ukdpack pack commands use the resident packer (docs/packing.md)" OFF)

# _ukd_fail_unparsed(<function> <prefix>): stop on arguments nobody asked for.
macro(_ukd_fail_unparsed fn prefix)
  if(${prefix}_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${fn}: unknown arguments: ${${prefix}_UNPARSED_ARGUMENTS}")
  endif()
  if(${prefix}_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "${fn}: missing values for: ${${prefix}_KEYWORDS_MISSING_VALUES}")
  endif()
endmacro()

# _ukd_require(<function> <prefix> <keyword>...): stop when a required keyword is absent.
macro(_ukd_require fn prefix)
  foreach(_ukd_kw ${ARGN})
    if(NOT DEFINED ${prefix}_${_ukd_kw} OR "${${prefix}_${_ukd_kw}}" STREQUAL "")
      message(FATAL_ERROR "${fn}: ${_ukd_kw} is required")
    endif()
  endforeach()
endmacro()

# _ukd_python(<out-var>): UKDPACK_PYTHON, else the interpreter ukdpack was built for.
function(_ukd_python out)
  if(UKDPACK_PYTHON)
    set(${out} "${UKDPACK_PYTHON}" PARENT_SCOPE)
  elseif(_UKDPACK_DEFAULT_PYTHON)
    set(${out} "${_UKDPACK_DEFAULT_PYTHON}" PARENT_SCOPE)
  else()
    message(FATAL_ERROR "ukdpack: no Python interpreter is known; set UKDPACK_PYTHON, or "
                        "configure ukdpack with UKDPACK_BUILD_PYTHON=ON")
  endif()
endfunction()

# _ukd_command(<out-var>): the command line that runs `python -m ukdpack`, a list with
# one item per argument. PYTHONPATH is UKDPACK_PYTHONPATH's folders alone, joined by
# `cmake -E env --modify` one folder an argument (CMake >= 3.25), else as the
# platform's native path list.
function(_ukd_command out)
  _ukd_python(_py)
  set(_env "PYTHONPATH=")
  if(UKDPACK_PYTHONPATH AND CMAKE_VERSION VERSION_GREATER_EQUAL 3.25)
    set(_env "")
    set(_op set)
    foreach(_p IN LISTS UKDPACK_PYTHONPATH)
      list(APPEND _env --modify "PYTHONPATH=${_op}:${_p}")
      set(_op path_list_append)
    endforeach()
  elseif(UKDPACK_PYTHONPATH)
    cmake_path(CONVERT "${UKDPACK_PYTHONPATH}" TO_NATIVE_PATH_LIST _path NORMALIZE)
    set(_env "PYTHONPATH=${_path}")
  endif()
  if(UKDPACK_RESIDENT)
    list(APPEND _env "UKDPACK_RESIDENT=1")
  endif()
  set(${out} "${CMAKE_COMMAND}" -E env ${_env} "${_py}" -m ukdpack PARENT_SCOPE)
endfunction()

# _ukd_check_python(): the interpreter has ukdpack's Python dependencies, checked by
# installed distribution name (no import-name mapping). A pass is cached (the
# internal cache variable _UKDPACK_PYTHON_CHECKED_FOR) under the interpreter's path,
# its timestamp and the requirement list, so a reconfigure runs no interpreter for
# it; a failure is never cached. Clearing that variable checks again.
function(_ukd_check_python)
  get_property(_done GLOBAL PROPERTY _UKDPACK_PYTHON_CHECKED)
  if(_done)
    return()
  endif()
  _ukd_python(_py)
  get_property(_here GLOBAL PROPERTY _UKDPACK_CMAKE_DIR)
  if(NOT UKDPACK_PYTHON_REQUIREMENTS_FILE OR NOT EXISTS "${UKDPACK_PYTHON_REQUIREMENTS_FILE}")
    message(FATAL_ERROR "ukdpack: the list of the packer's Python requirements "
                        "(UKDPACK_PYTHON_REQUIREMENTS_FILE='${UKDPACK_PYTHON_REQUIREMENTS_FILE}') "
                        "is missing; reinstall ukdpack")
  endif()
  file(TIMESTAMP "${_py}" _stamp "%Y-%m-%dT%H:%M:%S" UTC)
  file(SHA256 "${UKDPACK_PYTHON_REQUIREMENTS_FILE}" _reqs)
  set(_key "${_py} ${_stamp} ${_reqs}")
  if("${_UKDPACK_PYTHON_CHECKED_FOR}" STREQUAL "${_key}")
    set_property(GLOBAL PROPERTY _UKDPACK_PYTHON_CHECKED TRUE)
    return()
  endif()
  execute_process(
    COMMAND "${_py}" "${_here}/UkdCheckPython.py" "${UKDPACK_PYTHON_REQUIREMENTS_FILE}"
    OUTPUT_VARIABLE _missing ERROR_VARIABLE _err RESULT_VARIABLE _rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "ukdpack: cannot run ${_py} (UKDPACK_PYTHON) to check the packer's "
                        "Python dependencies (${_rc}): ${_err}")
  endif()
  if(_missing)
    # One requirement a line; requirements may hold ';' (markers), so no list ops.
    string(REPLACE "\n" ", " _names "${_missing}")
    string(REPLACE "\n" "' '" _args "${_missing}")
    message(FATAL_ERROR "ukdpack: ${_py}, the Python that runs the packer, lacks these "
                        "packages: ${_names}. Install them with\n"
                        "  ${_py} -m pip install '${_args}'\n"
                        "or choose another interpreter with -DUKDPACK_PYTHON=<python>.")
  endif()
  message(STATUS "ukdpack: ${_py} has the packer's Python dependencies")
  set(_UKDPACK_PYTHON_CHECKED_FOR "${_key}" CACHE INTERNAL
      "The interpreter (path, timestamp, requirements) that passed ukdpack's Python check")
  set_property(GLOBAL PROPERTY _UKDPACK_PYTHON_CHECKED TRUE)
endfunction()

# ukd_check_dvc_outputs(ROOT <dir> [REQUIRE] [RESULT_VAR <var>])
#
# Configure-time presence check of the DVC outputs under ROOT (reads the .dvc
# sidecars; no network). Missing outputs give one WARNING listing each with the
# exact `dvc pull` command, then the build target that fetches them all
# (`cmake --build <dir> --target ukd_dvc_<name>`, when ukd_add_dvc_pull_target names
# this ROOT in the same directory); with REQUIRE, or the cache option
# UKDPACK_REQUIRE_DVC_OUTPUTS, a FATAL_ERROR. The message comes at the end of the
# directory's CMakeLists.txt, so the pull target may be added after this call.
#   ROOT        folder whose sidecars are checked (required)
#   REQUIRE     make missing outputs fatal
#   RESULT_VAR  set to TRUE when every output is present, else FALSE
function(ukd_check_dvc_outputs)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "REQUIRE" "ROOT;RESULT_VAR" "")
  _ukd_fail_unparsed(ukd_check_dvc_outputs ARG)
  _ukd_require(ukd_check_dvc_outputs ARG ROOT)
  get_filename_component(_root "${ARG_ROOT}" ABSOLUTE)
  _ukd_check_python()
  _ukd_command(_cmd)
  execute_process(COMMAND ${_cmd} dvc-status "${_root}" --require
    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
  set(_ok TRUE)
  if(NOT _rc EQUAL 0)
    set(_ok FALSE)
    # Strings only, no list operations: the lines hold ';' ("missing; run in ...").
    set(_count "some")
    if(_out MATCHES "([0-9]+ of [0-9]+) DVC outputs not present")
      set(_count "${CMAKE_MATCH_1}")
    endif()
    # dvc-status's closing line names the packer's own pull command, which is not on a
    # CMake user's PATH: the message ends with the build's pull target instead.
    string(REGEX REPLACE "(^|\n)ukdpack: [^\n]*DVC outputs not present[^\n]*" "" _lines "${_out}")
    string(STRIP "${_lines}" _lines)
    set(_text "ukdpack: ${_count} DVC outputs under ${_root} are not present:")
    if(_err)
      string(APPEND _text "\n${_err}")
    endif()
    if(_lines)
      string(APPEND _text "\n  ${_lines}")
    endif()
    set(_mode WARNING)
    if(ARG_REQUIRE OR UKDPACK_REQUIRE_DVC_OUTPUTS)
      set(_mode FATAL_ERROR)
    endif()
    # Said once, at the end of this directory: by then ukd_add_dvc_pull_target has
    # named the build target that pulls this root, if there is one.
    cmake_language(EVAL CODE
      "cmake_language(DEFER CALL _ukd_report_missing_dvc ${_mode} [==[${_root}]==] [==[${_text}]==])")
  endif()
  if(ARG_RESULT_VAR)
    set(${ARG_RESULT_VAR} ${_ok} PARENT_SCOPE)
  endif()
endfunction()

# _ukd_report_missing_dvc(<WARNING|FATAL_ERROR> <root> <text>): the message of
# ukd_check_dvc_outputs, ending with the one command a CMake user runs to fetch the
# outputs: the build's pull target for <root>, or how to add one.
function(_ukd_report_missing_dvc mode root text)
  get_property(_target GLOBAL PROPERTY "_UKDPACK_DVC_PULL_TARGET:${root}")
  if(_target)
    string(APPEND text "\nFetch them with: cmake --build ${CMAKE_BINARY_DIR} --target ${_target}")
  else()
    string(APPEND text "\nFetch them with the dvc pull commands above, or add a build step that "
                       "does: ukd_add_dvc_pull_target(NAME <name> ROOT ${root})")
  endif()
  message(${mode} "${text}")
endfunction()

# ukd_add_dvc_pull_target(NAME <n> ROOT <dir> [REMOTE <r>])
#
# A build step (target ukd_dvc_<n>) that runs `ukdpack dvc-pull` for the sidecars
# under ROOT, which fetches only the outputs that are missing. It is tracked by a
# stamp in the build tree that depends on every sidecar and, through a depfile, on
# every DVC output: an edited sidecar or a deleted output runs it again, and
# `clean` never removes the pulled files from the source tree. Pack targets can
# DEPENDS on it. The sidecars are configure dependencies, so adding or editing one
# reconfigures.
#   NAME    target suffix (required)
#   ROOT    folder whose sidecars are pulled (required)
#   REMOTE  DVC remote for outputs that name none (default: the repository's)
function(ukd_add_dvc_pull_target)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;ROOT;REMOTE" "")
  _ukd_fail_unparsed(ukd_add_dvc_pull_target ARG)
  _ukd_require(ukd_add_dvc_pull_target ARG NAME ROOT)
  if(TARGET ukd_dvc_${ARG_NAME})
    message(FATAL_ERROR "ukd_add_dvc_pull_target: a pull target named '${ARG_NAME}' exists already")
  endif()
  get_filename_component(_root "${ARG_ROOT}" ABSOLUTE)
  _ukd_check_python()
  _ukd_command(_cmd)
  file(GLOB_RECURSE _sidecars CONFIGURE_DEPENDS "${_root}/*.dvc")
  # An edited sidecar may name other outputs: reconfigure, so the list below is fresh.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_sidecars})
  execute_process(COMMAND ${_cmd} dvc-status "${_root}" --outputs
    OUTPUT_VARIABLE _outputs ERROR_VARIABLE _err RESULT_VARIABLE _rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    # Refused sidecars are left out of the list (a build must not touch their outputs).
    message(WARNING "ukd_add_dvc_pull_target(${ARG_NAME}): some DVC outputs under ${_root} "
                    "are left out of the pull step:\n${_err}")
  endif()
  string(REPLACE "\n" ";" _outputs "${_outputs}")
  set(_dir "${CMAKE_CURRENT_BINARY_DIR}/ukdpack")
  set(_stamp "${_dir}/${ARG_NAME}.dvc-pull.stamp")
  set(_depfile "${_dir}/${ARG_NAME}.dvc-pull.d")
  set(_remote_args "")
  if(ARG_REMOTE)
    list(APPEND _remote_args --remote "${ARG_REMOTE}")
  endif()
  get_property(_here GLOBAL PROPERTY _UKDPACK_CMAKE_DIR)
  # The outputs are dependencies (through the depfile), never OUTPUTs: a missing one
  # reruns the pull, and `clean` leaves them alone.
  add_custom_command(OUTPUT "${_stamp}"
    COMMAND ${_cmd} dvc-pull "${_root}" ${_remote_args}
    COMMAND "${CMAKE_COMMAND}" "-DSTAMP=${_stamp}" "-DDEPFILE=${_depfile}"
            -P "${_here}/UkdDvcStamp.cmake" -- ${_outputs}
    DEPENDS ${_sidecars}
    DEPFILE "${_depfile}"
    COMMENT "ukdpack: dvc pull for ${_root}"
    VERBATIM)
  add_custom_target(ukd_dvc_${ARG_NAME} DEPENDS "${_stamp}")
  set_property(GLOBAL PROPERTY "_UKDPACK_DVC_PULL_TARGET:${_root}" "ukd_dvc_${ARG_NAME}")
endfunction()

# _ukd_known_targets(<out-var>): every target of ukdpack's one target table
# (targets.def, which the C++ runtime compiles in too): beside this file in an installed
# copy, under cpp/include/ukdpack/model in the source tree.
function(_ukd_known_targets out)
  get_property(_known GLOBAL PROPERTY _UKDPACK_KNOWN_TARGETS)
  if(NOT _known)
    get_property(_here GLOBAL PROPERTY _UKDPACK_CMAKE_DIR)
    set(_def "${_here}/targets.def")
    if(NOT EXISTS "${_def}")
      set(_def "${_here}/../cpp/include/ukdpack/model/targets.def")
    endif()
    file(STRINGS "${_def}" _rows REGEX "^UKD_TARGET\\(\"")
    foreach(_row IN LISTS _rows)
      string(REGEX REPLACE "^UKD_TARGET\\(\"([^\"]+)\".*$" "\\1" _name "${_row}")
      list(APPEND _known "${_name}")
    endforeach()
    set_property(GLOBAL PROPERTY _UKDPACK_KNOWN_TARGETS "${_known}")
  endif()
  set(${out} "${_known}" PARENT_SCOPE)
endfunction()

# _ukd_edit_distance(<out-var> <a> <b>): Levenshtein distance, for "did you mean".
function(_ukd_edit_distance out a b)
  string(LENGTH "${a}" _la)
  string(LENGTH "${b}" _lb)
  set(_row "")
  foreach(_j RANGE 0 ${_lb})
    list(APPEND _row ${_j})
  endforeach()
  if(_la GREATER 0)
    foreach(_i RANGE 1 ${_la})
      math(EXPR _im1 "${_i} - 1")
      string(SUBSTRING "${a}" ${_im1} 1 _ca)
      list(GET _row 0 _diag)
      set(_new ${_i})
      if(_lb GREATER 0)
        foreach(_j RANGE 1 ${_lb})
          math(EXPR _jm1 "${_j} - 1")
          string(SUBSTRING "${b}" ${_jm1} 1 _cb)
          list(GET _row ${_j} _up)
          list(GET _new ${_jm1} _left)
          set(_cost 1)
          if(_ca STREQUAL _cb)
            set(_cost 0)
          endif()
          math(EXPR _best "${_diag} + ${_cost}")
          math(EXPR _ins "${_left} + 1")
          math(EXPR _del "${_up} + 1")
          if(_ins LESS _best)
            set(_best ${_ins})
          endif()
          if(_del LESS _best)
            set(_best ${_del})
          endif()
          list(APPEND _new ${_best})
          set(_diag ${_up})
        endforeach()
      endif()
      set(_row "${_new}")
    endforeach()
  endif()
  list(GET _row ${_lb} _d)
  set(${out} ${_d} PARENT_SCOPE)
endfunction()

# _ukd_did_you_mean(<out-var> <name>): "; did you mean X or Y?" naming the known targets
# nearest to <name> (at most two edits, at the least distance, those extending <name>
# first, three at most), or empty.
function(_ukd_did_you_mean out name)
  _ukd_known_targets(_known)
  set(_best 3)
  set(_near "")
  foreach(_k IN LISTS _known)
    _ukd_edit_distance(_d "${name}" "${_k}")
    if(_d LESS _best)
      set(_best ${_d})
      set(_near "")
    endif()
    if(_d EQUAL _best)
      list(APPEND _near "${_k}")
    endif()
  endforeach()
  # As the runtime's nearestTargets: names extending what was typed first, three at most.
  set(_first "")
  set(_rest "")
  foreach(_k IN LISTS _near)
    string(FIND "${_k}" "${name}" _at)
    if(_at EQUAL 0)
      list(APPEND _first "${_k}")
    else()
      list(APPEND _rest "${_k}")
    endif()
  endforeach()
  set(_near ${_first} ${_rest})
  list(LENGTH _near _n)
  if(_n GREATER 3)
    list(SUBLIST _near 0 3 _near)
  endif()
  set(_text "")
  list(LENGTH _near _n)
  if(_n EQUAL 1)
    set(_text "; did you mean ${_near}?")
  elseif(_n GREATER 1)
    list(POP_BACK _near _last)
    string(REPLACE ";" ", " _first "${_near}")
    set(_text "; did you mean ${_first} or ${_last}?")
  endif()
  set(${out} "${_text}" PARENT_SCOPE)
endfunction()

# _ukd_normalize_arches(<out-var> <allow-unknown> <name>...): feature suffixes
# stripped, duplicates dropped, order kept. A name that is no arch (the pattern of
# ukdpack::isArchName in cpp/src/model/arch.cpp, which a test checks) or an arch of the right
# shape that is not in ukdpack's target table is a FATAL_ERROR with a "did you mean";
# with <allow-unknown> true the first is dropped with a WARNING and the second kept with
# one (the pack commands then get --allow-unknown-arch).
function(_ukd_normalize_arches out allow)
  _ukd_known_targets(_known)
  set(_arches "")
  set(_fix "fix ARCHES / GPU_TARGETS, or allow it with ALLOW_UNKNOWN_ARCHES or -DUKDPACK_ALLOW_UNKNOWN_ARCHES=ON")
  foreach(_a IN LISTS ARGN)
    string(REGEX REPLACE ":.*$" "" _bare "${_a}")
    if(_bare MATCHES "^(gfx[0-9][0-9][0-9]?[0-9]?[0-9a-f]?|gfx[0-9]+(-[0-9]+)*-generic|sm_[0-9][0-9][0-9]?[a-z]?)$")
      if(NOT _bare IN_LIST _known)
        if(allow)
          message(WARNING "ukdpack: '${_a}' is not in ukdpack's target table; packed anyway "
                          "(UKDPACK_ALLOW_UNKNOWN_ARCHES), so only the compiler can catch a typo")
        else()
          _ukd_did_you_mean(_hint "${_bare}")
          message(FATAL_ERROR "ukdpack: '${_a}' is an unknown GPU arch (not in ukdpack's target "
                              "table)${_hint} To pack for it anyway: ${_fix}")
        endif()
      endif()
      if(NOT _bare IN_LIST _arches)
        list(APPEND _arches "${_bare}")
      endif()
    elseif(allow)
      message(WARNING "ukdpack: '${_a}' is no GPU arch (expected e.g. gfx90a or sm_90); dropped")
    else()
      _ukd_did_you_mean(_hint "${_bare}")
      message(FATAL_ERROR "ukdpack: '${_a}' is no GPU arch (expected e.g. gfx90a, gfx942:xnack- "
                          "or sm_90)${_hint} ${_fix}")
    endif()
  endforeach()
  set(${out} "${_arches}" PARENT_SCOPE)
endfunction()

# _ukd_pack_jobs(<out-var> <arch-count>): the --jobs of every pack command, as a
# generator expression. Pack commands run in the Ninja job pool `ukdpack_pack` whose
# depth is the most arches any pack target has (at most UKDPACK_PACK_JOBS); each
# command gets UKDPACK_PACK_JOBS / depth compiles, so arches x jobs stays within
# UKDPACK_PACK_JOBS. Evaluated at generate time, when every pack target is known.
function(_ukd_pack_jobs out count)
  if(NOT UKDPACK_PACK_JOBS MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "ukdpack: UKDPACK_PACK_JOBS='${UKDPACK_PACK_JOBS}' is no positive "
                        "number of compiles")
  endif()
  if(NOT TARGET _ukdpack_pack_pool)
    add_custom_target(_ukdpack_pack_pool)
    set_property(TARGET _ukdpack_pack_pool PROPERTY UKDPACK_POOL_DEPTH 1)
  endif()
  get_property(_depth TARGET _ukdpack_pack_pool PROPERTY UKDPACK_POOL_DEPTH)
  set(_want ${count})
  if(_want GREATER UKDPACK_PACK_JOBS)
    set(_want ${UKDPACK_PACK_JOBS})
  endif()
  if(_want GREATER _depth)
    set(_depth ${_want})
  endif()
  math(EXPR _each "${UKDPACK_PACK_JOBS} / ${_depth}")
  set_property(TARGET _ukdpack_pack_pool PROPERTY UKDPACK_POOL_DEPTH ${_depth})
  set_property(TARGET _ukdpack_pack_pool PROPERTY UKDPACK_JOBS_EACH ${_each})
  get_property(_pools GLOBAL PROPERTY JOB_POOLS)
  list(FILTER _pools EXCLUDE REGEX "^ukdpack_pack=")
  list(APPEND _pools "ukdpack_pack=${_depth}")
  set_property(GLOBAL PROPERTY JOB_POOLS "${_pools}")
  set(${out} "$<TARGET_PROPERTY:_ukdpack_pack_pool,UKDPACK_JOBS_EACH>" PARENT_SCOPE)
endfunction()

# ukd_add_pack_target(NAME <n> SOURCE_ROOT <dir> OUT_ROOT <dir> [ARCHES <a>...]
#                     [ALLOW_UNKNOWN_ARCHES] [GROUP <g>] [JOBS <n>] [HIPCC <path>]
#                     [NVCC <path>] [CACHE_DIR <dir>] [HANDLERS <file>] [REQUIRED]
#                     [DEPENDS <target-or-file>...] [INSTALL_DESTINATION <dir>]
#                     [COMPONENT <c>] [EXCLUDE_FOLDERS <name>...])
#
# Target ukd_pack_<n> (in ALL), which depends on one target ukd_pack_<n>_<arch> per
# arch, each with one custom command writing OUT_ROOT/<arch>/, so shards build in
# parallel and only those whose inputs changed rebuild: each command has the
# packer's depfile (descriptors, sources, included headers, prebuilt objects) and
# depends on a manifest of the root's descriptor files, so adding or removing a
# descriptor repacks while an unrelated file does not; a deleted shard (or dormancy
# marker) repacks its arch. The commands run in the Ninja job pool `ukdpack_pack`,
# with --jobs chosen so that arches packed at once times compiles each stays within
# UKDPACK_PACK_JOBS. `clean` removes the shards. Configure prints one line per pack
# target naming its shards.
#   NAME                  target suffix; also the label of progress lines (required)
#   SOURCE_ROOT           authored descriptor root (required)
#   OUT_ROOT              where <arch>/ shards are published (required)
#   ARCHES                arches to pack (default: GPU_TARGETS, then AMDGPU_TARGETS);
#                         a name that is no GPU arch, or an arch not in ukdpack's
#                         target table (a typo such as gfx103), fails configure with
#                         a "did you mean"; one shard per bare arch, entries with
#                         features (gfx90a:xnack+) build those variants into it
#   ALLOW_UNKNOWN_ARCHES  drop a name that is no arch with a warning instead, and pack
#                         an unknown arch of the right shape (also the cache option
#                         UKDPACK_ALLOW_UNKNOWN_ARCHES)
#   GROUP                 archive group: kpack/<group>_<arch>.kpack (default: NAME)
#   JOBS                  compiles per arch, overriding the UKDPACK_PACK_JOBS share
#   HIPCC, NVCC           compilers (default: UKDPACK_HIPCC / UKDPACK_NVCC, else the
#                         packer's lookup)
#   CACHE_DIR             compile cache (default: UKDPACK_CACHE_DIR, else the packer's)
#   HANDLERS              handler manifest for the pack-time runtime check
#   REQUIRED              a root that packs nothing for any arch is an error
#   DEPENDS               targets or files each shard waits for (e.g. ukd_dvc_<n>)
#   INSTALL_DESTINATION   install the shards (without stamps or staging) there
#   COMPONENT             install component of the shards (default: ukdpack_<n>)
#   EXCLUDE_FOLDERS       folder names the walk leaves out
#   REMOTE_EXEC           run the compiles on a remote-execution farm:
#                         grpc[s]://HOST:PORT[/INSTANCE] (default: UKDPACK_REMOTE_EXEC;
#                         pack --remote-exec, docs/packing.md); credentials go in the
#                         environment ($UKDPACK_REMOTE_EXEC_TOKEN), never in the URL
# Cache variables UKDPACK_REMOTE_CACHE (URL) and UKDPACK_REMOTE_CACHE_MODE (read or
# read-write) give every pack command a remote compile cache (docs/remote-cache.md);
# UKDPACK_REMOTE_EXEC_MODE (auto or require) applies to REMOTE_EXEC.
function(ukd_add_pack_target)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "REQUIRED;ALLOW_UNKNOWN_ARCHES"
    "NAME;SOURCE_ROOT;OUT_ROOT;GROUP;JOBS;HIPCC;NVCC;CACHE_DIR;HANDLERS;INSTALL_DESTINATION;COMPONENT;REMOTE_EXEC"
    "ARCHES;DEPENDS;EXCLUDE_FOLDERS")
  _ukd_fail_unparsed(ukd_add_pack_target ARG)
  _ukd_require(ukd_add_pack_target ARG NAME SOURCE_ROOT OUT_ROOT)
  if(TARGET ukd_pack_${ARG_NAME})
    message(FATAL_ERROR "ukd_add_pack_target: a pack target named '${ARG_NAME}' exists already")
  endif()
  get_filename_component(_src "${ARG_SOURCE_ROOT}" ABSOLUTE)
  get_filename_component(_out "${ARG_OUT_ROOT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  if(NOT IS_DIRECTORY "${_src}")
    message(FATAL_ERROR "ukd_add_pack_target(${ARG_NAME}): SOURCE_ROOT ${_src} is not a folder")
  endif()
  if(ARG_JOBS AND NOT ARG_JOBS MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "ukd_add_pack_target(${ARG_NAME}): JOBS '${ARG_JOBS}' is no positive number")
  endif()
  # The remote-execution farm: the keyword, else the cache variable.
  set(_farm "${ARG_REMOTE_EXEC}")
  if(NOT _farm)
    set(_farm "${UKDPACK_REMOTE_EXEC}")
  endif()
  if(_farm AND NOT _farm MATCHES "^grpcs?://")
    # shown without its userinfo: a credential is never printed
    string(REGEX REPLACE "^([A-Za-z0-9+.-]*://)?.*@" "\\1***@" _shown "${_farm}")
    message(FATAL_ERROR "ukd_add_pack_target(${ARG_NAME}): REMOTE_EXEC '${_shown}' is no "
                        "grpc://HOST:PORT[/INSTANCE] or grpcs:// URL")
  endif()
  set(_requested "${ARG_ARCHES}")
  if(NOT _requested)
    if(GPU_TARGETS)
      set(_requested "${GPU_TARGETS}")
    elseif(AMDGPU_TARGETS)
      set(_requested "${AMDGPU_TARGETS}")
    endif()
  endif()
  set(_allow OFF)
  if(ARG_ALLOW_UNKNOWN_ARCHES OR UKDPACK_ALLOW_UNKNOWN_ARCHES)
    set(_allow ON)
  endif()
  _ukd_normalize_arches(_arches ${_allow} ${_requested})
  if(NOT _arches)
    message(FATAL_ERROR "ukd_add_pack_target(${ARG_NAME}): no arches: give ARCHES, or set "
                        "GPU_TARGETS or AMDGPU_TARGETS")
  endif()
  _ukd_check_python()
  _ukd_command(_cmd)
  set(_group "${ARG_GROUP}")
  if(NOT _group)
    set(_group "${ARG_NAME}")
  endif()
  list(LENGTH _arches _count)
  if(ARG_JOBS)
    set(_jobs "${ARG_JOBS}")
  else()
    _ukd_pack_jobs(_jobs ${_count})
  endif()

  # The input set: every descriptor file of the root. CONFIGURE_DEPENDS re-globs at
  # build time, and the manifest is rewritten only when the set changed.
  file(GLOB_RECURSE _descriptors CONFIGURE_DEPENDS LIST_DIRECTORIES false "${_src}/*.json")
  list(SORT _descriptors)
  string(REPLACE ";" "\n" _manifest_text "${_descriptors}")
  set(_dir "${CMAKE_CURRENT_BINARY_DIR}/ukdpack/${ARG_NAME}")
  set(_manifest "${_dir}/inputs.txt")
  file(CONFIGURE OUTPUT "${_manifest}" CONTENT "${_manifest_text}\n" @ONLY)

  # A change to the packer itself repacks too.
  set(_tool_deps "")
  foreach(_p IN LISTS UKDPACK_PYTHONPATH)
    if(EXISTS "${_p}/ukdpack")
      file(GLOB_RECURSE _py CONFIGURE_DEPENDS "${_p}/ukdpack/*.py" "${_p}/ukdpack/schemas/*.json")
      list(APPEND _tool_deps ${_py})
    endif()
  endforeach()
  set(_file_deps "")
  set(_target_deps ${UKDPACK_RUNTIME_TARGETS})
  foreach(_d IN LISTS ARG_DEPENDS)
    if(TARGET "${_d}")
      list(APPEND _target_deps "${_d}")
    else()
      get_filename_component(_abs "${_d}" ABSOLUTE)
      list(APPEND _file_deps "${_abs}")
    endif()
  endforeach()

  set(_opts --source-root "${_src}" --out-root "${_out}" --group "${_group}" --plain
            --jobs "${_jobs}")
  foreach(_tool hipcc nvcc)
    string(TOUPPER ${_tool} _kw)
    set(_path "${ARG_${_kw}}")
    if(NOT _path)
      set(_path "${UKDPACK_${_kw}}")
    endif()
    if(_path)
      list(APPEND _opts --${_tool} "${_path}")
    endif()
  endforeach()
  set(_cache "${ARG_CACHE_DIR}")
  if(NOT _cache)
    set(_cache "${UKDPACK_CACHE_DIR}")
  endif()
  if(_cache)
    get_filename_component(_cache "${_cache}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    list(APPEND _opts --cache-dir "${_cache}")
  endif()
  if(ARG_HANDLERS)
    get_filename_component(_handlers "${ARG_HANDLERS}" ABSOLUTE)
    list(APPEND _opts --handlers "${_handlers}")
    list(APPEND _file_deps "${_handlers}")
  endif()
  if(_allow)
    list(APPEND _opts --allow-unknown-arch)
  endif()
  foreach(_x IN LISTS ARG_EXCLUDE_FOLDERS)
    list(APPEND _opts --exclude-folder "${_x}")
  endforeach()
  # The shared compile cache (docs/remote-cache.md). The URL lands in the build files:
  # credentials go in the environment ($UKDPACK_REMOTE_CACHE_TOKEN), never in it.
  if(UKDPACK_REMOTE_CACHE)
    list(APPEND _opts --remote-cache "${UKDPACK_REMOTE_CACHE}")
    if(UKDPACK_REMOTE_CACHE_MODE)
      list(APPEND _opts --remote-cache-mode "${UKDPACK_REMOTE_CACHE_MODE}")
    endif()
  endif()
  # The farm behind both caches (checked above).
  if(_farm)
    list(APPEND _opts --remote-exec "${_farm}")
    if(UKDPACK_REMOTE_EXEC_MODE)
      list(APPEND _opts --remote-exec-mode "${UKDPACK_REMOTE_EXEC_MODE}")
    endif()
  endif()

  get_property(_here GLOBAL PROPERTY _UKDPACK_CMAKE_DIR)
  set(_arch_targets "")
  set(_clean "")
  foreach(_arch IN LISTS _arches)
    set(_stamp "${_dir}/${_arch}.stamp")
    set(_depfile "${_dir}/${_arch}.d")
    # Target IDs with features (gfx90a:xnack+) build their variants into the arch's shard.
    set(_arch_opts "")
    foreach(_t IN LISTS _requested)
      if(_t MATCHES "^${_arch}(:|$)" AND NOT "${_t}" IN_LIST _arch_opts)
        list(APPEND _arch_opts --arch "${_t}")
      endif()
    endforeach()
    if(NOT _arch_opts)
      set(_arch_opts --arch "${_arch}")
    endif()
    add_custom_command(OUTPUT "${_stamp}"
      COMMAND ${_cmd} pack ${_opts} ${_arch_opts} --label "${ARG_NAME}/${_arch}"
              --depfile "${_depfile}" --depfile-target "${_stamp}"
      COMMAND "${CMAKE_COMMAND}" "-DDEPFILE=${_depfile}" "-DSHARD=${_out}/${_arch}"
              "-DMARKER=${_out}/.${_arch}.dormant" "-DSTAMP=${_stamp}"
              -P "${_here}/UkdPackStamp.cmake"
      DEPENDS "${_manifest}" ${_tool_deps} ${_file_deps} ${_target_deps}
      DEPFILE "${_depfile}"
      JOB_POOL ukdpack_pack
      COMMENT "ukdpack: packing ${ARG_NAME} for ${_arch}"
      VERBATIM)
    add_custom_target(ukd_pack_${ARG_NAME}_${_arch} DEPENDS "${_stamp}")
    if(_target_deps)
      add_dependencies(ukd_pack_${ARG_NAME}_${_arch} ${_target_deps})
    endif()
    list(APPEND _arch_targets ukd_pack_${ARG_NAME}_${_arch})
    # The shard, the packer's lock, staging and dormancy marker (CMake removes folders
    # recursively, under Ninja too).
    list(APPEND _clean "${_out}/${_arch}" "${_out}/.${_arch}.lock" "${_out}/.${_arch}.staging"
                       "${_out}/.${_arch}.old" "${_out}/.${_arch}.dormant")
  endforeach()

  set(_check "")
  if(ARG_REQUIRED)
    # Dormancy is a property of the whole root: judged once every shard is built. The
    # check only looks at folders, so it runs on every build.
    set(_check COMMAND "${CMAKE_COMMAND}" "-DOUT_ROOT=${_out}" "-DNAME=${ARG_NAME}"
                       -P "${_here}/UkdRequireShards.cmake" -- ${_arches})
  endif()
  add_custom_target(ukd_pack_${ARG_NAME} ALL ${_check} VERBATIM)
  add_dependencies(ukd_pack_${ARG_NAME} ${_arch_targets})
  set_property(TARGET ukd_pack_${ARG_NAME} APPEND PROPERTY ADDITIONAL_CLEAN_FILES ${_clean})

  if(ARG_INSTALL_DESTINATION)
    set(_component "${ARG_COMPONENT}")
    if(NOT _component)
      set(_component "ukdpack_${ARG_NAME}")
    endif()
    foreach(_arch IN LISTS _arches)
      install(DIRECTORY "${_out}/${_arch}/" DESTINATION "${ARG_INSTALL_DESTINATION}/${_arch}"
              COMPONENT "${_component}" OPTIONAL)
    endforeach()
  elseif(ARG_COMPONENT)
    message(FATAL_ERROR "ukd_add_pack_target(${ARG_NAME}): COMPONENT needs INSTALL_DESTINATION")
  endif()

  string(REPLACE ";" ", " _arch_text "${_arches}")
  message(STATUS "ukdpack: ukd_pack_${ARG_NAME}: shards ${_arch_text} from ${_src} into ${_out}/<arch>/")

  set_property(GLOBAL APPEND PROPERTY UKDPACK_PACK_TARGETS "${ARG_NAME}")
  set_property(GLOBAL PROPERTY UKDPACK_PACK_${ARG_NAME}_TARGET ukd_pack_${ARG_NAME})
  set_property(GLOBAL PROPERTY UKDPACK_PACK_${ARG_NAME}_SOURCE_ROOT "${_src}")
  set_property(GLOBAL PROPERTY UKDPACK_PACK_${ARG_NAME}_OUT_ROOT "${_out}")
  set_property(GLOBAL PROPERTY UKDPACK_PACK_${ARG_NAME}_ARCHES "${_arches}")
  set_property(GLOBAL PROPERTY UKDPACK_PACK_${ARG_NAME}_EXCLUDE_FOLDERS "${ARG_EXCLUDE_FOLDERS}")
endfunction()

# ukd_add_shard_tests(PACK_NAME <n> [ARCHES <a>...])
#
# ctest entries per arch shard of a pack target, labelled `ukdpack` and
# `ukdpack-<n>`: ukdpack.<n>.<arch>.validate (ukdpack-validate, the runtime's own
# loader and state manager), .verify (`ukdpack verify` against the pack's source
# root: every kernel, launch, digest, symbol and signature) and .desk-check
# (`ukdpack desk-check`: the whole-set rules over the packed shard). A missing shard
# fails its tests, unless the last pack recorded the arch dormant (the root has no
# kernels for it: OUT_ROOT/.<arch>.dormant); then they report skipped.
#   PACK_NAME  the NAME given to ukd_add_pack_target (required)
#   ARCHES     a subset of that target's arches (default: all of them)
function(ukd_add_shard_tests)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "PACK_NAME" "ARCHES")
  _ukd_fail_unparsed(ukd_add_shard_tests ARG)
  _ukd_require(ukd_add_shard_tests ARG PACK_NAME)
  get_property(_known GLOBAL PROPERTY UKDPACK_PACK_TARGETS)
  if(NOT ARG_PACK_NAME IN_LIST _known)
    message(FATAL_ERROR "ukd_add_shard_tests: no pack target named '${ARG_PACK_NAME}' (known: ${_known})")
  endif()
  get_property(_out GLOBAL PROPERTY UKDPACK_PACK_${ARG_PACK_NAME}_OUT_ROOT)
  get_property(_src GLOBAL PROPERTY UKDPACK_PACK_${ARG_PACK_NAME}_SOURCE_ROOT)
  get_property(_all GLOBAL PROPERTY UKDPACK_PACK_${ARG_PACK_NAME}_ARCHES)
  set(_arches "${ARG_ARCHES}")
  if(NOT _arches)
    set(_arches "${_all}")
  endif()
  if(NOT UKDPACK_VALIDATE)
    message(FATAL_ERROR "ukd_add_shard_tests: ukdpack-validate is not available (UKDPACK_BUILD_TOOLS=OFF?)")
  endif()
  if(TARGET "${UKDPACK_VALIDATE}")
    set(_validate "$<TARGET_FILE:${UKDPACK_VALIDATE}>")
  else()
    set(_validate "${UKDPACK_VALIDATE}")
  endif()
  get_property(_here GLOBAL PROPERTY _UKDPACK_CMAKE_DIR)
  # The folders the pack left out, so verify expects what the pack packed (a property
  # ukd_add_pack_target may record; none when it does not).
  get_property(_excluded GLOBAL PROPERTY UKDPACK_PACK_${ARG_PACK_NAME}_EXCLUDE_FOLDERS)
  _ukd_command(_cmd)
  set(_exclude_opts "")
  foreach(_x IN LISTS _excluded)
    list(APPEND _exclude_opts --exclude-folder "${_x}")
  endforeach()
  foreach(_arch IN LISTS _arches)
    if(NOT _arch IN_LIST _all)
      message(FATAL_ERROR "ukd_add_shard_tests: ${_arch} is not an arch of pack '${ARG_PACK_NAME}' (${_all})")
    endif()
    set(_shard "${_out}/${_arch}")
    # Each check's command line is a list, one item per argument, passed after `--`.
    set(_argv_validate "${_validate}" "${_shard}")
    set(_argv_verify ${_cmd} verify "${_shard}" --source-root "${_src}" --arch "${_arch}"
                     ${_exclude_opts})
    set(_argv_desk-check ${_cmd} desk-check "${_shard}" --arch "${_arch}")
    foreach(_what validate verify desk-check)
      set(_test "ukdpack.${ARG_PACK_NAME}.${_arch}.${_what}")
      add_test(NAME "${_test}"
        COMMAND "${CMAKE_COMMAND}" "-DSHARD=${_shard}" "-DMARKER=${_out}/.${_arch}.dormant"
                -P "${_here}/UkdShardTest.cmake"
                -- ${_argv_${_what}})
      set_tests_properties("${_test}" PROPERTIES
        LABELS "ukdpack;ukdpack-${ARG_PACK_NAME}"
        SKIP_REGULAR_EXPRESSION "ukdpack: no shard at [^\n]*: dormant arch")
    endforeach()
  endforeach()
endfunction()

# The folder of this file (its helper scripts sit beside it), for the functions above
# wherever they are called from.
set_property(GLOBAL PROPERTY _UKDPACK_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
