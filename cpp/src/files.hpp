// Reading a file the runtime was pointed at, without trusting what it is: a
// FIFO, socket or device under a descriptor's or archive's name must be
// refused, not waited on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "ukdpack/diagnostics.hpp"

namespace ukdpack::detail {

// The whole content of the regular file at `path`, at most `maxBytes` long.
// The file is opened non-blocking and checked with fstat before any read, so
// a FIFO never blocks; the failure is a READ_FAILED / NOT_A_FILE diagnostic
// with an empty file (the caller names it).
Result<std::string> readRegularFile(const std::filesystem::path& path, std::uint64_t maxBytes);

}  // namespace ukdpack::detail
