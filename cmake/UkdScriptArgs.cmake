# _ukd_script_args(<out-var>): the arguments after `--` of a `cmake -P` script, as a
# list, one item per argument: how UkdPackaging.cmake passes lists (paths, arches,
# a command line) to its scripts, so an item keeps its spaces and any other character
# (a `;` cannot be in a CMake list item at all).
#   cmake -D... -P <script> -- <item>...
macro(_ukd_script_args out)
  set(${out} "")
  set(_ukd_after FALSE)
  math(EXPR _ukd_last "${CMAKE_ARGC} - 1")
  foreach(_ukd_i RANGE 1 ${_ukd_last})
    if(_ukd_after)
      list(APPEND ${out} "${CMAKE_ARGV${_ukd_i}}")
    elseif("${CMAKE_ARGV${_ukd_i}}" STREQUAL "--")
      set(_ukd_after TRUE)
    endif()
  endforeach()
endmacro()
