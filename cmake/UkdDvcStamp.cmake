# After `ukdpack dvc-pull`: the stamp of a pull target, and a depfile naming every DVC
# output, so that an output deleted later reruns the pull (the outputs are never
# OUTPUTs of the step, so `clean` leaves them in the source tree).
#   cmake -DSTAMP=<file> -DDEPFILE=<file> -P UkdDvcStamp.cmake -- <output>...
include("${CMAKE_CURRENT_LIST_DIR}/UkdScriptArgs.cmake")
_ukd_script_args(_outputs)
set(_text "${STAMP}:")
foreach(_o IN LISTS _outputs)
  # Makefile depfile syntax: a space in a path is escaped.
  string(REPLACE " " "\\ " _o "${_o}")
  string(APPEND _text " \\\n  ${_o}")
endforeach()
file(WRITE "${DEPFILE}" "${_text}\n")
file(TOUCH "${STAMP}")
