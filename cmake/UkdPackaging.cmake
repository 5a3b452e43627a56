# UkdPackaging.cmake: ukdpack's public CMake API (filled in by the CMake and DVC work).
include_guard(GLOBAL)
