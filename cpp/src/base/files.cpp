#include "base/files.hpp"

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
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

namespace {

// The regular file at `path`, opened as openRegularFile opens it, when it is at most
// `maxBytes` long.
Result<RegularFile> openAtMost(const std::filesystem::path& path, std::uint64_t maxBytes) {
  auto opened = openRegularFile(path);
  if (opened && opened.value().size > maxBytes) {
    return Result<RegularFile>::failure(makeError(codes::READ_FAILED, "", "",
                                                  "file is larger than expected (" +
                                                      std::to_string(opened.value().size) + " bytes, at most " +
                                                      std::to_string(maxBytes) + ")"));
  }
  return opened;
}

// Up to `size` bytes of `fd` into `into`: how many there were (fewer when the file
// shrank while read).
Result<std::size_t> readUpTo(int fd, char* into, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, into + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Result<std::size_t>::failure(cannotRead(errno));
    if (n == 0) break;  // shrank while read: what is there
    done += static_cast<std::size_t>(n);
  }
  return Result<std::size_t>::success(done);
}

}  // namespace

Result<std::string_view> readRegularFileInto(const std::filesystem::path& path, std::uint64_t maxBytes,
                                             std::string& buffer) {
  using Out = Result<std::string_view>;
  auto opened = openAtMost(path, maxBytes);
  if (!opened) return Out::failure(opened.error());
  const auto size = static_cast<std::size_t>(opened.value().size);
  if (buffer.size() < size) buffer.resize(size);
  auto done = readUpTo(opened.value().fd.get(), buffer.data(), size);
  if (!done) return Out::failure(done.error());
  return Out::success(std::string_view(buffer.data(), done.value()));
}

Result<std::string> readRegularFile(const std::filesystem::path& path, std::uint64_t maxBytes) {
  std::string out;
  auto read = readRegularFileInto(path, maxBytes, out);
  if (!read) return Result<std::string>::failure(read.error());
  out.resize(read.value().size());
  return Result<std::string>::success(std::move(out));
}

namespace {

// Below this a file is read into a std::string: the pages of its own would cost more
// (two system calls) than the zero-fill they save.
constexpr std::size_t kHeldPagesFrom = std::size_t{1} << 20;
constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Anonymous pages for `size` bytes, starting on a 2 MiB boundary and advised to be
// huge pages (where the kernel's transparent huge pages allow it); nullptr when
// they cannot be had.
std::shared_ptr<char> hugeAdvisedPages(std::size_t size) {
  const std::size_t length = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* got = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (got == MAP_FAILED) return nullptr;
  // The mapping is trimmed to the aligned `length` bytes: only an aligned 2 MiB
  // range can be a huge page.
  const auto base = reinterpret_cast<std::uintptr_t>(got);
  const std::uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (start > base) ::munmap(got, start - base);
  if (const std::uintptr_t end = start + length, mapped = base + length + kHugePage; mapped > end)
    ::munmap(reinterpret_cast<void*>(end), mapped - end);
  auto* pages = reinterpret_cast<char*>(start);
  ::madvise(pages, length, MADV_HUGEPAGE);  // advice only: refused, the pages are small
  return std::shared_ptr<char>(pages, [length](char* p) { ::munmap(p, length); });
}

}  // namespace

Result<HeldBytes> readRegularFileHeld(const std::filesystem::path& path, std::uint64_t maxBytes) {
  using Out = Result<HeldBytes>;
  auto opened = openAtMost(path, maxBytes);
  if (!opened) return Out::failure(opened.error());
  const int fd = opened.value().fd.get();
  const auto size = static_cast<std::size_t>(opened.value().size);
  if (std::shared_ptr<char> pages = size >= kHeldPagesFrom ? hugeAdvisedPages(size) : nullptr) {
    auto done = readUpTo(fd, pages.get(), size);
    if (!done) return Out::failure(done.error());
    const std::string_view bytes(pages.get(), done.value());
    return Out::success(HeldBytes{std::shared_ptr<const void>(std::move(pages)), bytes});
  }
  auto text = std::make_shared<std::string>(size, '\0');
  auto done = readUpTo(fd, text->data(), size);
  if (!done) return Out::failure(done.error());
  text->resize(done.value());
  const std::string_view bytes(*text);
  return Out::success(HeldBytes{std::shared_ptr<const void>(std::move(text)), bytes});
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
