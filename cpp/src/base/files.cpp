#include "base/files.hpp"

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ukdpack/base/sha256.hpp"

namespace ukdpack::detail {

FileHandle::FileHandle(FileHandle&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

FileHandle& FileHandle::operator=(FileHandle&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

const char* kindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISDIR(mode)) return "a folder";
  return "not a regular file";
}

Diagnostic notAFile(const char* kind) {
  return makeError(codes::NOT_A_FILE, "", "", std::string("expected a regular file, found ") + kind);
}

Diagnostic cannotRead(int err) {
  return makeError(codes::READ_FAILED, "", "", std::string("cannot read file: ") + std::strerror(err));
}

}  // namespace

std::optional<std::string> nonRegularKind(const std::filesystem::path& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return std::nullopt;
  return std::string(kindOf(st.st_mode));
}

Result<RegularFile> openRegularFile(const std::filesystem::path& path) {
  using R = Result<RegularFile>;
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of
  // waiting; on a regular file it changes nothing. O_NOCTTY: a terminal named
  // like the file does not become ours.
  RegularFile out;
  out.fd = FileHandle(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (out.fd.get() < 0) {
    const int err = errno;
    // A socket cannot be opened at all (ENXIO): say what it is, not the errno.
    if (auto kind = nonRegularKind(path)) return R::failure(notAFile(kind->c_str()));
    return R::failure(cannotRead(err));
  }
  struct stat st{};
  if (::fstat(out.fd.get(), &st) != 0) return R::failure(cannotRead(errno));
  if (!S_ISREG(st.st_mode)) return R::failure(notAFile(kindOf(st.st_mode)));
  out.size = static_cast<std::uint64_t>(st.st_size);
  return R::success(std::move(out));
}

Result<std::string_view> readRegularFileInto(const std::filesystem::path& path, std::uint64_t maxBytes,
                                             std::string& buffer) {
  using Out = Result<std::string_view>;
  auto opened = openRegularFile(path);
  if (!opened) return Out::failure(opened.error());
  const RegularFile& f = opened.value();
  if (f.size > maxBytes) {
    return Out::failure(makeError(codes::READ_FAILED, "", "",
                                  "file is larger than expected (" + std::to_string(f.size) + " bytes, at most " +
                                      std::to_string(maxBytes) + ")"));
  }
  const auto size = static_cast<std::size_t>(f.size);
  if (buffer.size() < size) buffer.resize(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(f.fd.get(), buffer.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Out::failure(cannotRead(errno));
    if (n == 0) break;  // shrank while read: what is there
    done += static_cast<std::size_t>(n);
  }
  return Out::success(std::string_view(buffer.data(), done));
}

Result<std::string> readRegularFile(const std::filesystem::path& path, std::uint64_t maxBytes) {
  std::string out;
  auto read = readRegularFileInto(path, maxBytes, out);
  if (!read) return Result<std::string>::failure(read.error());
  out.resize(read.value().size());
  return Result<std::string>::success(std::move(out));
}

Result<std::string> sha256OfRegularFile(const std::filesystem::path& path) {
  auto opened = openRegularFile(path);
  if (!opened) return Result<std::string>::failure(opened.error());
  Sha256 digest;
  std::vector<char> chunk(1 << 20);
  while (true) {
    const ssize_t n = ::read(opened.value().fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Result<std::string>::failure(cannotRead(errno));
    if (n == 0) break;
    digest.update(chunk.data(), static_cast<std::size_t>(n));
  }
  return Result<std::string>::success(digest.hex());
}

}  // namespace ukdpack::detail
