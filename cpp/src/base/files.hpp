// Reading a file the runtime was pointed at, without trusting what it is: a
// FIFO, socket or device under a descriptor's or archive's name must be
// refused, not waited on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ukdpack/base/diagnostics.hpp"

namespace ukdpack::detail {

// An open file descriptor, closed once (movable, not copyable).
class FileHandle {
 public:
  FileHandle() = default;
  explicit FileHandle(int fd) : fd_(fd) {}
  FileHandle(FileHandle&& o) noexcept;
  FileHandle& operator=(FileHandle&& o) noexcept;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  ~FileHandle();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

struct RegularFile {
  FileHandle fd;
  std::uint64_t size = 0;
};

// The regular file at `path`, opened for reading (pread on `fd`). It is opened
// non-blocking and checked with fstat before anything is read, so a FIFO never
// blocks; the failure is a READ_FAILED / NOT_A_FILE diagnostic ("expected a
// regular file, found a FIFO") with an empty file (the caller names it).
Result<RegularFile> openRegularFile(const std::filesystem::path& path);

// The whole content of the regular file at `path`, at most `maxBytes` long,
// opened as openRegularFile opens it.
Result<std::string> readRegularFile(const std::filesystem::path& path, std::uint64_t maxBytes);

// The same, read into `buffer` (grown when too small, never shrunk, so that one
// buffer serves many files without being cleared again): a view of its first bytes.
Result<std::string_view> readRegularFileInto(const std::filesystem::path& path, std::uint64_t maxBytes,
                                             std::string& buffer);

// A file's bytes held in memory of their own (views into them stay valid while
// `owner` or a copy of it lives).
struct HeldBytes {
  std::shared_ptr<const void> owner;
  std::string_view bytes;
};

// The whole content of the regular file at `path`, as readRegularFile reads it, into
// memory that is not zero-filled first: a large file (1 MiB or more) is read into
// pages of its own, advised to be huge pages, so that a start-up reading a big
// shard's index does not fault in (and zero) several thousand 4 KiB pages for it.
Result<HeldBytes> readRegularFileHeld(const std::filesystem::path& path, std::uint64_t maxBytes);

// The lowercase hex sha256 of the regular file at `path`, read in chunks (a
// model file may be large), opened as openRegularFile opens it.
Result<std::string> sha256OfRegularFile(const std::filesystem::path& path);

// "a FIFO", "a socket", "a character device", ... when something other than a
// regular file lies at `path` (links followed); nullopt for a regular file or
// nothing. A stat only: nothing is opened.
std::optional<std::string> nonRegularKind(const std::filesystem::path& path);

}  // namespace ukdpack::detail
