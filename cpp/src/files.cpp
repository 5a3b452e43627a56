#include "files.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ukdpack::detail {

namespace {
// Closes the descriptor on every path out of readRegularFile.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

const char* kindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISDIR(mode)) return "a folder";
  return "not a regular file";
}
}  // namespace

Result<std::string> readRegularFile(const std::filesystem::path& path, std::uint64_t maxBytes) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0) {
    return Result<std::string>::failure(
        makeError("READ_FAILED", "", "", std::string("cannot read file: ") + std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    return Result<std::string>::failure(
        makeError("READ_FAILED", "", "", std::string("cannot read file: ") + std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return Result<std::string>::failure(makeError(
        "NOT_A_FILE", "", "", std::string("expected a regular file, found ") + kindOf(st.st_mode)));
  }
  if (static_cast<std::uint64_t>(st.st_size) > maxBytes) {
    return Result<std::string>::failure(makeError(
        "READ_FAILED", "", "",
        "file is larger than expected (" + std::to_string(st.st_size) + " bytes, at most " +
            std::to_string(maxBytes) + ")"));
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(f.fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Result<std::string>::failure(
          makeError("READ_FAILED", "", "", std::string("cannot read file: ") + std::strerror(errno)));
    }
    if (n == 0) break;  // shrank while read: what is there
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return Result<std::string>::success(std::move(out));
}

}  // namespace ukdpack::detail
