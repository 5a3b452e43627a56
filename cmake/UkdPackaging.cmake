# UkdPackaging.cmake — ukdpack's public CMake API.
#
# Available after add_subdirectory(ukdpack) and after find_package(ukdpack CONFIG).
# Every function parses its arguments with cmake_parse_arguments and stops on an
# unknown or missing one. The packer runs as `<python> -m ukdpack` with PYTHONPATH
# on ukdpack's Python sources and its built extension, so no pip install is needed.
#
#   ukd_check_dvc_outputs(ROOT <dir> [REQUIRE] [RESULT_VAR <var>])
#   ukd_add_dvc_pull_target(NAME <n> ROOT <dir> [REMOTE <r>])
#   ukd_add_pack_target(NAME <n> SOURCE_ROOT <dir> OUT_ROOT <dir> [ARCHES ...] ...)
#   ukd_add_shard_tests(PACK_NAME <n> [ARCHES ...])
include_guard(GLOBAL)

# Where the packer's Python lives; set by ukdpack's CMakeLists.txt (subproject) or by
# ukdpackConfig.cmake (installed copy) before this file is included.
#   UKDPACK_PYTHON          the interpreter
#   UKDPACK_PYTHONPATH      folders to put on PYTHONPATH (sources, built extension)
#   UKDPACK_RUNTIME_TARGETS targets a pack must wait for (the extension)
#   UKDPACK_VALIDATE        the ukdpack-validate target or program
# The packer's runtime dependencies ([project] dependencies of pyproject.toml; a test keeps
# the two lists equal).
set(_UKDPACK_PY_MODULES jsonschema jsonschema_rs yaml zstandard msgpack rich)
set(_UKDPACK_PY_PACKAGES jsonschema jsonschema-rs pyyaml zstandard msgpack rich)
set(UKDPACK_REMOTE_CACHE "" CACHE STRING
    "remote compile cache URL for every pack (http(s):// or redis://; docs/remote-cache.md)")
set(UKDPACK_REMOTE_CACHE_MODE "" CACHE STRING "read or read-write (default: read-write)")

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

# _ukd_command(<out-var>): the command line that runs `python -m ukdpack`.
function(_ukd_command out)
  if(NOT UKDPACK_PYTHON)
    message(FATAL_ERROR "ukdpack: no Python interpreter is known (UKDPACK_PYTHON); was ukdpack "
                        "configured with UKDPACK_BUILD_PYTHON=ON?")
  endif()
  string(REPLACE ";" ":" _path "${UKDPACK_PYTHONPATH}")
  set(${out} "${CMAKE_COMMAND}" -E env "PYTHONPATH=${_path}" "${UKDPACK_PYTHON}" -m ukdpack
      PARENT_SCOPE)
endfunction()

# _ukd_check_python(): the interpreter imports ukdpack's Python dependencies, once.
function(_ukd_check_python)
  get_property(_done GLOBAL PROPERTY _UKDPACK_PYTHON_CHECKED)
  if(_done)
    return()
  endif()
  execute_process(
    COMMAND "${UKDPACK_PYTHON}" -c
      "import importlib.util, sys; print(';'.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
      ${_UKDPACK_PY_MODULES}
    OUTPUT_VARIABLE _missing OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "ukdpack: cannot run ${UKDPACK_PYTHON}")
  endif()
  if(_missing)
    set(_pkgs "")
    foreach(_m IN LISTS _missing)
      list(FIND _UKDPACK_PY_MODULES "${_m}" _i)
      list(GET _UKDPACK_PY_PACKAGES ${_i} _p)
      list(APPEND _pkgs "${_p}")
    endforeach()
    string(REPLACE ";" " " _pkgs_text "${_pkgs}")
    string(REPLACE ";" ", " _missing_text "${_missing}")
    message(FATAL_ERROR "ukdpack: ${UKDPACK_PYTHON} cannot import ${_missing_text}, which the "
                        "packer needs. Install them with\n  ${UKDPACK_PYTHON} -m pip install ${_pkgs_text}")
  endif()
  set_property(GLOBAL PROPERTY _UKDPACK_PYTHON_CHECKED TRUE)
endfunction()

# ukd_check_dvc_outputs(ROOT <dir> [REQUIRE] [RESULT_VAR <var>])
#
# Configure-time presence check of the DVC outputs under ROOT (reads the .dvc
# sidecars; no network). Missing outputs give one WARNING listing each with the
# exact `dvc pull` command; with REQUIRE, or the cache option
# UKDPACK_REQUIRE_DVC_OUTPUTS, a FATAL_ERROR.
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
    set(_text "ukdpack: DVC outputs under ${_root} are missing:\n${_out}\n${_err}\nFetch them with the "
              "commands above, or: ukdpack dvc-pull ${_root}")
    if(ARG_REQUIRE OR UKDPACK_REQUIRE_DVC_OUTPUTS)
      message(FATAL_ERROR ${_text})
    else()
      message(WARNING ${_text})
    endif()
  endif()
  if(ARG_RESULT_VAR)
    set(${ARG_RESULT_VAR} ${_ok} PARENT_SCOPE)
  endif()
endfunction()

# ukd_add_dvc_pull_target(NAME <n> ROOT <dir> [REMOTE <r>])
#
# A build step (target ukd_dvc_<n>) that runs `dvc pull` for the sidecars under
# ROOT when a sidecar changed or an output is missing. Pack targets can DEPENDS on
# it. The sidecar set is globbed with CONFIGURE_DEPENDS, so adding one reconfigures.
#   NAME    target suffix (required)
#   ROOT    folder whose sidecars are pulled (required)
#   REMOTE  DVC remote for outputs that name none (default: the repository's)
function(ukd_add_dvc_pull_target)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;ROOT;REMOTE" "")
  _ukd_fail_unparsed(ukd_add_dvc_pull_target ARG)
  _ukd_require(ukd_add_dvc_pull_target ARG NAME ROOT)
  get_filename_component(_root "${ARG_ROOT}" ABSOLUTE)
  _ukd_check_python()
  _ukd_command(_cmd)
  file(GLOB_RECURSE _sidecars CONFIGURE_DEPENDS "${_root}/*.dvc")
  execute_process(COMMAND ${_cmd} dvc-status "${_root}" --outputs
    OUTPUT_VARIABLE _outputs RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\n" ";" _outputs "${_outputs}")
  set(_stamp "${CMAKE_CURRENT_BINARY_DIR}/ukdpack/${ARG_NAME}.dvc-pull.stamp")
  set(_remote_args "")
  if(ARG_REMOTE)
    set(_remote_args --remote "${ARG_REMOTE}")
  endif()
  # The outputs are listed as outputs too: one that goes missing makes the step run.
  set(_touch "")
  foreach(_o IN LISTS _outputs)
    list(APPEND _touch COMMAND "${CMAKE_COMMAND}" -E touch_nocreate "${_o}")
  endforeach()
  add_custom_command(OUTPUT "${_stamp}" ${_outputs}
    COMMAND ${_cmd} dvc-pull "${_root}" ${_remote_args}
    ${_touch}
    COMMAND "${CMAKE_COMMAND}" -E touch "${_stamp}"
    DEPENDS ${_sidecars}
    COMMENT "ukdpack: dvc pull for ${_root}"
    VERBATIM)
  add_custom_target(ukd_dvc_${ARG_NAME} DEPENDS "${_stamp}")
endfunction()

# _ukd_normalize_arches(<out-var> <name>...): feature suffixes stripped, duplicates
# dropped, order kept; a name that is no arch is a WARNING and is dropped. The
# pattern is the one of ukdpack::isArchName (cpp/src/arch.cpp), which a test checks.
function(_ukd_normalize_arches out)
  set(_arches "")
  foreach(_a IN LISTS ARGN)
    string(REGEX REPLACE ":.*$" "" _bare "${_a}")
    if(_bare MATCHES "^(gfx[0-9][0-9][0-9]?[0-9]?[0-9a-f]?|gfx[0-9]+(-[0-9]+)*-generic|sm_[0-9][0-9][0-9]?[a-z]?)$")
      if(NOT _bare IN_LIST _arches)
        list(APPEND _arches "${_bare}")
      endif()
    else()
      message(WARNING "ukdpack: '${_a}' is no GPU arch (expected e.g. gfx90a or sm_90); dropped")
    endif()
  endforeach()
  set(${out} "${_arches}" PARENT_SCOPE)
endfunction()

# ukd_add_pack_target(NAME <n> SOURCE_ROOT <dir> OUT_ROOT <dir> [ARCHES <a>...]
#                     [GROUP <g>] [JOBS <n>] [HANDLERS <file>] [REQUIRED]
#                     [DEPENDS <target-or-file>...] [INSTALL_DESTINATION <dir>]
#                     [EXCLUDE_FOLDERS <name>...])
#
# Target ukd_pack_<n> (in ALL) with one custom command per arch shard, so shards
# build in parallel and only those whose inputs changed rebuild: each command has
# the packer's depfile (descriptors, sources, included headers, prebuilt objects)
# and depends on a manifest of the root's descriptor files, so adding or removing
# a descriptor repacks while an unrelated file does not.
#   NAME                 target suffix; also the label of progress lines (required)
#   SOURCE_ROOT          authored descriptor root (required)
#   OUT_ROOT             where <arch>/ shards are published (required)
#   ARCHES               arches to pack (default: GPU_TARGETS, then AMDGPU_TARGETS); one
#                        shard per bare arch, entries with features (gfx90a:xnack+) build
#                        those variants into it
#   GROUP                archive group: kpack/<group>_<arch>.kpack (default: NAME)
#   JOBS                 parallel compiles per shard (default: the packer's)
#   HANDLERS             handler manifest for the pack-time runtime check
#   REQUIRED             a root that packs nothing for any arch is an error
#   DEPENDS              targets or files each shard waits for (e.g. ukd_dvc_<n>)
#   INSTALL_DESTINATION  install the shards (without stamps or staging) there
#   EXCLUDE_FOLDERS      folder names the walk leaves out
# Cache variables UKDPACK_REMOTE_CACHE (URL) and UKDPACK_REMOTE_CACHE_MODE (read or
# read-write) give every pack command a remote compile cache (docs/remote-cache.md).
function(ukd_add_pack_target)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "REQUIRED"
    "NAME;SOURCE_ROOT;OUT_ROOT;GROUP;JOBS;HANDLERS;INSTALL_DESTINATION"
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
  set(_requested "${ARG_ARCHES}")
  if(NOT _requested)
    if(GPU_TARGETS)
      set(_requested "${GPU_TARGETS}")
    elseif(AMDGPU_TARGETS)
      set(_requested "${AMDGPU_TARGETS}")
    endif()
  endif()
  _ukd_normalize_arches(_arches ${_requested})
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

  set(_opts --source-root "${_src}" --out-root "${_out}" --group "${_group}" --plain)
  if(ARG_JOBS)
    list(APPEND _opts --jobs "${ARG_JOBS}")
  endif()
  if(ARG_HANDLERS)
    get_filename_component(_handlers "${ARG_HANDLERS}" ABSOLUTE)
    list(APPEND _opts --handlers "${_handlers}")
    list(APPEND _file_deps "${_handlers}")
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

  set(_stamps "")
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
      COMMAND "${CMAKE_COMMAND}" -E touch "${_stamp}"
      DEPENDS "${_manifest}" ${_tool_deps} ${_file_deps} ${_target_deps}
      DEPFILE "${_depfile}"
      COMMENT "ukdpack: packing ${ARG_NAME} for ${_arch}"
      VERBATIM)
    list(APPEND _stamps "${_stamp}")
  endforeach()

  get_property(_here GLOBAL PROPERTY _UKDPACK_CMAKE_DIR)
  set(_final "${_stamps}")
  if(ARG_REQUIRED)
    # Dormancy is a property of the whole root: judged once every shard is built.
    set(_check "${_dir}/required.stamp")
    add_custom_command(OUTPUT "${_check}"
      COMMAND "${CMAKE_COMMAND}" "-DOUT_ROOT=${_out}" "-DARCHES=${_arches}" "-DNAME=${ARG_NAME}"
              "-DSTAMP=${_check}" -P "${_here}/UkdRequireShards.cmake"
      DEPENDS ${_stamps}
      VERBATIM)
    set(_final "${_check}")
  endif()
  add_custom_target(ukd_pack_${ARG_NAME} ALL DEPENDS ${_final})
  if(_target_deps)
    add_dependencies(ukd_pack_${ARG_NAME} ${_target_deps})
  endif()

  if(ARG_INSTALL_DESTINATION)
    foreach(_arch IN LISTS _arches)
      install(DIRECTORY "${_out}/${_arch}/" DESTINATION "${ARG_INSTALL_DESTINATION}/${_arch}"
              OPTIONAL)
    endforeach()
  endif()

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
# (`ukdpack desk-check`: the whole-set rules over the packed shard). A shard that
# the build left out (a dormant arch) reports skipped.
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
  # Checks are "<name>|<argv joined by |>"; the packer's command line is a list too.
  string(REPLACE ";" "|" _ukdpack "${_cmd}")
  set(_exclude_opts "")
  foreach(_x IN LISTS _excluded)
    string(APPEND _exclude_opts "|--exclude-folder|${_x}")
  endforeach()
  foreach(_arch IN LISTS _arches)
    if(NOT _arch IN_LIST _all)
      message(FATAL_ERROR "ukd_add_shard_tests: ${_arch} is not an arch of pack '${ARG_PACK_NAME}' (${_all})")
    endif()
    set(_shard "${_out}/${_arch}")
    set(_checks
      "validate|${_validate}|${_shard}"
      "verify|${_ukdpack}|verify|${_shard}|--source-root|${_src}|--arch|${_arch}${_exclude_opts}"
      "desk-check|${_ukdpack}|desk-check|${_shard}|--arch|${_arch}")
    foreach(_c IN LISTS _checks)
      string(REPLACE "|" ";" _argv "${_c}")
      list(POP_FRONT _argv _what)
      set(_test "ukdpack.${ARG_PACK_NAME}.${_arch}.${_what}")
      add_test(NAME "${_test}"
        COMMAND "${CMAKE_COMMAND}" "-DSHARD=${_shard}" -P "${_here}/UkdShardTest.cmake"
                -- ${_argv})
      set_tests_properties("${_test}" PROPERTIES
        LABELS "ukdpack;ukdpack-${ARG_PACK_NAME}"
        SKIP_REGULAR_EXPRESSION "ukdpack: no shard at .* \\(dormant arch\\)")
    endforeach()
  endforeach()
endfunction()

# The folder of this file (its helper scripts sit beside it), for the functions above
# wherever they are called from.
set_property(GLOBAL PROPERTY _UKDPACK_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
