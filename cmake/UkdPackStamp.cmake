# After one arch's pack: add what it published (the shard folder, or the dormancy
# marker of an arch without kernels) to the packer's depfile, then touch the stamp,
# so that deleting the shard or the marker repacks that arch on the next build.
#   cmake -DDEPFILE=<file> -DSHARD=<dir> -DMARKER=<file> -DSTAMP=<file> -P UkdPackStamp.cmake
set(_made "")
if(IS_DIRECTORY "${SHARD}")
  set(_made "${SHARD}")
elseif(EXISTS "${MARKER}")
  set(_made "${MARKER}")
endif()
if(_made AND EXISTS "${DEPFILE}")
  file(READ "${DEPFILE}" _text)
  string(STRIP "${_text}" _text)
  string(REPLACE " " "\\ " _made "${_made}")  # Makefile depfile syntax
  file(WRITE "${DEPFILE}" "${_text} \\\n  ${_made}\n")
endif()
file(TOUCH "${STAMP}")
