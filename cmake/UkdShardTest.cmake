# Runs one shard check:
#   cmake -DSHARD=<dir> -DMARKER=<file> -P UkdShardTest.cmake -- <command...>
# A missing shard fails the check, unless the packer recorded its arch dormant (the
# root has no kernels for it) in MARKER: then the test reports skipped, through its
# SKIP_REGULAR_EXPRESSION.
include("${CMAKE_CURRENT_LIST_DIR}/UkdScriptArgs.cmake")
_ukd_script_args(_argv)
if(NOT IS_DIRECTORY "${SHARD}")
  if(EXISTS "${MARKER}")
    file(READ "${MARKER}" _why)
    string(STRIP "${_why}" _why)
    message("ukdpack: no shard at ${SHARD}: dormant arch (${_why})")
    return()
  endif()
  message(FATAL_ERROR "ukdpack: the shard ${SHARD} is missing, and the last pack did not "
                      "record its arch as having no kernels (no ${MARKER}): the pack failed, "
                      "was interrupted or has not run; build the pack target and look at its output")
endif()
execute_process(COMMAND ${_argv} RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "ukdpack: shard check failed (${_rc}): ${_argv}")
endif()
