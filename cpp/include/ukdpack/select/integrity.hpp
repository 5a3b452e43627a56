// Integrity at launch-code load: before any code object of a packed
// launch is handed on, in this order: `library` containment (no escape from
// the shard, no symlink hop), the signature the handler expects, the toc entry
// for the arch, the sha256 of the decompressed bytes, the symbol in the object,
// and the object's ELF header (e_flags) agreeing with its metadata note and the
// arch it is filed under (checkCodeObjectTarget).
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ukdpack/archive/kpack.hpp"
#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/model/descriptors.hpp"
#include "ukdpack/select/registry.hpp"

namespace ukdpack {

// What checking one archive entry found, kept without its bytes: the sha256 of
// what it decompresses to, and the kernels its code object holds (or why it is
// not a readable code object).
struct EntryFindings {
  std::string sha256;
  Result<std::vector<std::string>> kernels;
  Result<std::string> target;  // checkCodeObjectTarget against the entry's arch
};

// Opened archives, one per path, shared by every launch that names it; and the
// bytes of entries already verified, so the launches of a multi-launch kernel
// (or kernels sharing a code object) decompress and hash it once. Verified
// bytes are kept up to `maxVerifiedBytes` in all, the oldest dropped first.
// It also holds the load's budget of decompressed bytes: loadLaunchCode
// charges every payload it decompresses (a cache hit costs nothing: no work is
// done), so toc keys that all name one small, highly compressible payload
// cannot make a load decompress keys x payload bytes.
class ArchiveCache {
 public:
  static constexpr std::size_t kDefaultMaxVerifiedBytes = std::size_t(8) << 20;

  explicit ArchiveCache(std::size_t maxVerifiedBytes = kDefaultMaxVerifiedBytes,
                        std::uint64_t maxDecompressedBytes = kDefaultMaxDecompressedBytes)
      : maxVerifiedBytes_(maxVerifiedBytes), maxDecompressedBytes_(maxDecompressedBytes) {}

  Result<std::shared_ptr<const KpackArchive>> open(const std::filesystem::path& path);
  std::size_t size() const;

  // The bytes of `entry` when they were verified against exactly `sha256`.
  std::shared_ptr<const std::vector<std::uint8_t>> verified(const std::string& entry, const std::string& sha256) const;
  void remember(const std::string& entry, const std::string& sha256,
                std::shared_ptr<const std::vector<std::uint8_t>> bytes);

  // What checkArchiveEntries found of `entry` (nullptr: nothing).
  std::shared_ptr<const EntryFindings> findings(const std::string& entry) const;
  void rememberFindings(const std::string& entry, std::shared_ptr<const EntryFindings> findings);

  // Takes `bytes` from the budget before they are decompressed: false, and
  // nothing taken, when that would pass maxDecompressedBytes().
  bool charge(std::uint64_t bytes);
  std::uint64_t decompressedBytes() const;  // charged so far
  std::uint64_t maxDecompressedBytes() const { return maxDecompressedBytes_; }

 private:
  struct Verified {
    std::string sha256;
    std::shared_ptr<const std::vector<std::uint8_t>> bytes;
  };
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const KpackArchive>> archives_;
  std::size_t maxVerifiedBytes_;
  std::size_t verifiedBytes_ = 0;
  std::map<std::string, Verified> verified_;
  std::deque<std::string> verifiedOrder_;  // oldest first
  std::map<std::string, std::shared_ptr<const EntryFindings>> findings_;
  std::uint64_t maxDecompressedBytes_;
  std::uint64_t decompressedBytes_ = 0;
};

class LocatedLibraries;

struct LaunchCodeOptions {
  const DispatchHandler* handler = nullptr;  // its expectedSignature() is checked
  std::string dispatchSymbol;                // names the handler in messages
  ArchiveCache* cache = nullptr;             // nullptr: a cache for this call only
  bool keepBytes = true;                     // false: verify only, return no bytes (a check)
  LocatedLibraries* located = nullptr;       // nullptr: each library located anew
};

// The signature refusal, or nullopt when `packed` satisfies `expected`: same
// count, and per argument the same kind and size; names compared only when
// both sides have one.
std::optional<std::string> signatureMismatch(const Signature& packed, const Signature& expected);

// Where a packed source's `library` leads, as loadLaunchCode finds it: joined
// onto the descriptor's folder, inside the shard root lexically and with no
// symbolic link on the way (the runtime follows no link inside a shard).
struct LibraryLocation {
  std::filesystem::path path;  // absolute when the shard root is, normalized
  std::string rootRel;         // '/'-separated, relative to the shard root
};

// The location of `library` named by a descriptor in `baseDir` (the folder of
// its file) of the shard at `shardRoot`, or a failure LIBRARY_ESCAPES or
// LIBRARY_SYMLINK whose message names the library; its file and JSON path are
// left empty for the caller. Shard tools call this, so they refuse what the
// runtime refuses.
Result<LibraryLocation> locateLibrary(const std::filesystem::path& shardRoot, const std::filesystem::path& baseDir,
                                      const std::string& library);

// ARCHIVE_MISSING (file and JSON path left empty) when nothing lies at
// `where`, ARCHIVE_INVALID when something other than a regular file does (a
// FIFO, socket, device or folder: "expected a regular file, found a FIFO");
// nullopt when the archive file is there. Nothing is opened.
std::optional<Diagnostic> libraryFileMissing(const LibraryLocation& where, const std::string& library);

// locateLibrary and libraryFileMissing of each (shard root, folder, library) a
// run of loadLaunchCode meets, found once: a check of many launches naming one
// archive (StateManager::checkLaunchCodes, one per thread) takes the shard's files
// as they are when it starts. Not thread-safe.
class LocatedLibraries {
 public:
  struct Found {
    Result<LibraryLocation> located;
    std::optional<Diagnostic> missing;  // libraryFileMissing, when located
  };
  const Found& find(const std::filesystem::path& shardRoot, const std::filesystem::path& baseDir,
                    const std::string& library);

 private:
  std::map<std::string, Found> found_;
};

// The verified code object of one launch of `kernel`: `launch` is nullopt (or
// "") for a single-launch kernel and names the launch of a multi-launch one;
// `arch` is the device arch (bare or with features; "" takes the one arch the
// archive holds for the toc key). `shardRoot` is the root the kernel came from.
// Failures carry a code: LIBRARY_ESCAPES, LIBRARY_SYMLINK, SIGNATURE_MISMATCH,
// ARCHIVE_MISSING, ARCHIVE_INVALID, TOC_MISSING, ARCH_REQUIRED,
// DECOMPRESS_BUDGET (the cache's budget of decompressed bytes is spent),
// DIGEST_MISMATCH, SYMBOL_MISSING, CODE_OBJECT_INVALID, NOT_PACKED,
// NO_SUCH_LAUNCH, SHARD_INDEX (the kernel's file changed after the load:
// Kernel::unreadable).
// Decompresses and hashes every entry of the archive at `path` on `threads`
// threads (0: one per core) as loadLaunchCode does, charging `cache`'s budget, and
// keeps the findings (no bytes) in `cache`: a launch then checked without its
// bytes (keepBytes false) through that cache takes them instead of doing the
// work again, and words any mismatch as it would have. A pack runs this over a
// staged archive while it writes the descriptors that name its entries. An entry
// past the budget, or that cannot be read, is left to the launches that name it.
void checkArchiveEntries(ArchiveCache& cache, const std::filesystem::path& path, unsigned threads);

// The device target IDs a check of one packed launch loads it for on `arch`: the arch
// itself, or, for a launch with feature variants (`targets`), the arch with each
// variant's settings, so every object is checked as a device of its kind loads it.
std::vector<std::string> checkDevices(const KernelSource& source, const std::string& arch);

Result<std::vector<std::uint8_t>> loadLaunchCode(const Kernel& kernel, const std::filesystem::path& shardRoot,
                                                 const std::optional<std::string>& launch, const std::string& arch,
                                                 const LaunchCodeOptions& options = {});

// The same by kernel id over a loaded set (KERNEL_UNKNOWN when it is not there);
// without options.cache, the set's maxDecompressedBytes is the call's budget.
Result<std::vector<std::uint8_t>> loadLaunchCode(const DescriptorSet& set, const std::string& kernelId,
                                                 const std::optional<std::string>& launch, const std::string& arch,
                                                 const LaunchCodeOptions& options = {});

}  // namespace ukdpack
