// Prebuilt code objects read for a pack in one batch: each file read once, its
// ELF image found, hashed once and its AMDGPU metadata note located, on
// several threads. A file the batch cannot take as it expects (unreadable, not
// a code object, no metadata note, a malformed ELF) is marked so; the packer
// reads that one again on its own path, which words the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/archive/codeobject.hpp"

namespace ukdpack {

struct PrebuiltObject {
  bool ok = false;                           // false: none of the fields below are set
  std::string bytes;                         // the whole file; with a frame, only the note (the frame holds the image)
  std::size_t elfOffset = 0, elfSize = 0;    // the ELF image inside `bytes` (none with a frame)
  std::string sha256;                        // lower-case hex of the ELF image
  std::size_t noteOffset = 0, noteSize = 0;  // the metadata note's descriptor (msgpack) inside `bytes`
  std::string frame;                         // the ELF image as one zstd frame (content size recorded), when asked
  // With a spool: where the archive record (u32 little-endian frame length, then the
  // frame) was written in it; `frame` stays empty and the image's size is in elfSize.
  std::uint64_t spoolOffset = 0, spoolSize = 0;
};

// Every file of `paths`, read as described above on `threads` threads (0: one
// per core); the result has one entry per path, in order. `zstdLevel` > 0 also
// compresses each ELF image into the frame an archive stores, while it is in
// the cache of the thread that read it. With `spoolFd` (an open, writable
// file) the frames are not returned but appended to that file as archive
// records, one after another in the order of `paths`, each at the offset the
// object names: the batch then holds no image in memory, and the archive
// writer copies the records from the file (or, when they are all of it, makes
// the file the archive).
std::vector<PrebuiltObject> readPrebuiltObjects(const std::vector<std::string>& paths, unsigned threads,
                                                int zstdLevel = 0, int spoolFd = -1);

}  // namespace ukdpack
