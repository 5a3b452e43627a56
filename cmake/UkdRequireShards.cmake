# A REQUIRED pack target: at least one arch must have produced a shard.
# `cmake -DOUT_ROOT=<dir> -DNAME=<n> -P UkdRequireShards.cmake -- <arch>...`
include("${CMAKE_CURRENT_LIST_DIR}/UkdScriptArgs.cmake")
_ukd_script_args(ARCHES)
set(_found "")
foreach(_a IN LISTS ARCHES)
  if(IS_DIRECTORY "${OUT_ROOT}/${_a}")
    list(APPEND _found "${_a}")
  endif()
endforeach()
if(NOT _found)
  string(REPLACE ";" ", " _list "${ARCHES}")
  message(FATAL_ERROR "ukdpack: pack target '${NAME}' is REQUIRED but its root packed no kernels "
                      "for any of ${_list}")
endif()
