// Prebuilt objects read in one batch (prebuilt.hpp). The checks here mirror the
// packer's ELF reader (python/ukdpack/produce/codeobject.py) so that a file it
// takes is one that reader takes alike; anything else is left to that reader.
#include "ukdpack/archive/prebuilt.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "base/files.hpp"
#include "base/worker_threads.hpp"
#include "ukdpack/archive/codeobject.hpp"
#include "ukdpack/base/sha256.hpp"

namespace ukdpack {

namespace {

constexpr std::uint64_t kMaxObjectBytes = std::uint64_t(1) << 34;  // 16 GiB: far past any code object

using CompressContext = std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)>;

// One frame of `data` as ZSTD_compress writes it (content size in the header, no
// checksum) into `out` after `reserve` bytes left for the caller; the frame's
// size, or 0 when zstd fails. `out` is reused from object to object: it only
// grows, so its pages are not faulted in (nor zeroed) afresh for each.
std::size_t compressFrame(ZSTD_CCtx* cctx, std::string_view data, int level, std::string& out, std::size_t reserve) {
  const std::size_t bound = reserve + ZSTD_compressBound(data.size());
  if (out.size() < bound) out.resize(bound);
  const std::size_t n =
      ZSTD_compressCCtx(cctx, out.data() + reserve, out.size() - reserve, data.data(), data.size(), level);
  return ZSTD_isError(n) ? 0 : n;
}

// Writes all of `data` at `offset` of `fd`; false on any failure.
bool writeAt(int fd, std::string_view data, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// The whole regular file at `path` into `buffer` (reused from file to file, so
// its pages are not faulted in afresh for each); the bytes read, or nullopt.
std::optional<std::string_view> readInto(const std::string& path, std::string& buffer) {
  auto opened = detail::openRegularFile(path);
  if (!opened || opened.value().size > kMaxObjectBytes) return std::nullopt;
  const detail::RegularFile& f = opened.value();
  if (buffer.size() < f.size) buffer.resize(static_cast<std::size_t>(f.size));
  std::size_t done = 0;
  while (done < f.size) {
    const ssize_t n = ::read(f.fd.get(), buffer.data() + done, static_cast<std::size_t>(f.size) - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;  // shrank while read: what is there
    done += static_cast<std::size_t>(n);
  }
  return std::string_view(buffer.data(), done);
}

// `record` asks for the frame as an archive record: its u32 length first.
PrebuiltObject readOne(const std::string& path, ZSTD_CCtx* cctx, int level, bool record, std::string& buffer,
                       std::string& frameBuffer) {
  PrebuiltObject out;
  if (detail::nonRegularKind(path)) return out;  // stat first: a device is not even opened
  const auto read = readInto(path, buffer);
  if (!read) return out;
  const std::string_view all = *read;
  auto view = inspectCodeObject(all);
  if (!view || view.value().format == CodeObjectFormat::CudaElf) return out;
  const std::string_view elf = view.value().elf;
  const auto note = amdgpuMetadataNote(elf);
  if (!note || !checkCodeObjectTarget(all)) return out;
  out.sha256 = sha256Hex(elf.data(), elf.size());
  if (out.sha256.empty()) return out;
  out.elfOffset = static_cast<std::size_t>(elf.data() - all.data());
  out.elfSize = elf.size();
  out.noteOffset = static_cast<std::size_t>(note->data() - all.data());
  out.noteSize = note->size();
  if (level <= 0) {
    out.bytes.assign(all.data(), all.size());
    out.ok = true;
    return out;
  }
  const std::size_t reserve = record ? 4 : 0;
  const std::size_t n = compressFrame(cctx, elf, level, frameBuffer, reserve);
  if (n == 0 || n > 0xFFFFFFFFu) return PrebuiltObject{};
  for (std::size_t i = 0; i < reserve; ++i) frameBuffer[i] = char((n >> (8 * i)) & 0xFF);
  // A record stays in `frameBuffer` (spoolSize long) for the caller to write from.
  if (record) {
    out.spoolSize = reserve + n;
  } else {
    out.frame.assign(frameBuffer.data(), n);
  }
  out.bytes.assign(note->data(), note->size());  // the image itself is in the frame
  out.noteOffset = 0;
  out.elfOffset = 0;
  if (!record) out.elfSize = 0;  // kept with a record: the size its frame decompresses to
  out.ok = true;
  return out;
}

}  // namespace

std::vector<PrebuiltObject> readPrebuiltObjects(const std::vector<std::string>& paths, unsigned threads, int zstdLevel,
                                                int spoolFd) {
  std::vector<PrebuiltObject> out(paths.size());
  std::uint64_t end = 0;
  const bool spooled = spoolFd >= 0 && zstdLevel > 0;
  if (spooled) {
    struct stat st{};
    if (::fstat(spoolFd, &st) != 0) return out;  // every object left to the packer's path
    end = std::uint64_t(st.st_size);
  }
  // The records follow one another in the order of `paths` (so a spool of one
  // arch's objects, read in the archive's order, is that archive's data as it
  // stands). Each is written as soon as the ones before it are: by one thread at
  // a time (two writing one file contend for its lock), while the others compress.
  std::mutex writeMutex;
  std::vector<char> done(spooled ? paths.size() : 0);
  std::size_t written = 0;  // the records before this one are in the spool
  bool writing = false;     // a thread is writing: the others go on reading
  // The thread whose record is next writes it from its own buffer; one that is not
  // next copies its record aside for the writer, which takes every record that is
  // ready in order.
  auto spool = [&](std::size_t finished, const std::string& frameBuffer) {
    std::unique_lock<std::mutex> lock(writeMutex);
    const bool direct = !writing && finished == written;
    if (!direct) {
      lock.unlock();
      PrebuiltObject& mine = out[finished];
      if (mine.ok) mine.frame.assign(frameBuffer.data(), static_cast<std::size_t>(mine.spoolSize));
      lock.lock();
    }
    done[finished] = 1;
    if (writing) return;
    writing = true;
    while (written < out.size() && done[written] != 0) {
      PrebuiltObject& o = out[written];
      if (o.ok) {
        const std::string_view record = direct && written == finished
                                            ? std::string_view(frameBuffer.data(), std::size_t(o.spoolSize))
                                            : std::string_view(o.frame);
        o.spoolOffset = end;
        end += o.spoolSize;
        lock.unlock();
        // A record that cannot be written leaves a hole the archive writer never copies.
        if (!writeAt(spoolFd, record, o.spoolOffset)) o = PrebuiltObject{};
        std::string().swap(o.frame);
        lock.lock();
      }
      ++written;
    }
    writing = false;
  };
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    const CompressContext cctx(zstdLevel > 0 ? ZSTD_createCCtx() : nullptr, &ZSTD_freeCCtx);
    if (zstdLevel > 0 && !cctx) return;  // no memory: every object left to the packer's path
    std::string buffer, frameBuffer;
    for (std::size_t i = next++; i < paths.size(); i = next++) {
      out[i] = readOne(paths[i], cctx.get(), zstdLevel, spooled, buffer, frameBuffer);
      if (spooled) spool(i, frameBuffer);
    }
  };
  detail::runOnThreads(threads, paths.size(), work);
  return out;
}

}  // namespace ukdpack
