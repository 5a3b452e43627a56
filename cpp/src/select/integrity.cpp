#include "ukdpack/select/integrity.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <system_error>
#include <utility>

#include "base/files.hpp"
#include "base/paths.hpp"
#include "base/worker_threads.hpp"
#include "ukdpack/archive/codeobject.hpp"
#include "ukdpack/base/sha256.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace fs = std::filesystem;

Result<std::shared_ptr<const KpackArchive>> ArchiveCache::open(const fs::path& path) {
  using R = Result<std::shared_ptr<const KpackArchive>>;
  const std::string key = path.lexically_normal().string();
  std::lock_guard<std::mutex> lock(mutex_);
  if (const auto it = archives_.find(key); it != archives_.end()) return R::success(it->second);
  auto opened = KpackArchive::open(path);
  if (!opened) return R::failure(opened.error());
  auto shared = std::make_shared<const KpackArchive>(std::move(opened).value());
  archives_.emplace(key, shared);
  return R::success(std::move(shared));
}

std::size_t ArchiveCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return archives_.size();
}

std::shared_ptr<const std::vector<std::uint8_t>> ArchiveCache::verified(const std::string& entry,
                                                                        const std::string& sha256) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = verified_.find(entry);
  if (it == verified_.end() || it->second.sha256 != sha256) return nullptr;
  return it->second.bytes;
}

void ArchiveCache::remember(const std::string& entry, const std::string& sha256,
                            std::shared_ptr<const std::vector<std::uint8_t>> bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!bytes || bytes->size() > maxVerifiedBytes_ || verified_.count(entry) != 0) return;
  while (verifiedBytes_ + bytes->size() > maxVerifiedBytes_ && !verifiedOrder_.empty()) {
    const auto old = verified_.find(verifiedOrder_.front());
    verifiedBytes_ -= old->second.bytes->size();
    verified_.erase(old);
    verifiedOrder_.pop_front();
  }
  verifiedBytes_ += bytes->size();
  verifiedOrder_.push_back(entry);
  verified_.emplace(entry, Verified{sha256, std::move(bytes)});
}

std::shared_ptr<const EntryFindings> ArchiveCache::findings(const std::string& entry) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = findings_.find(entry);
  return it == findings_.end() ? nullptr : it->second;
}

void ArchiveCache::rememberFindings(const std::string& entry, std::shared_ptr<const EntryFindings> findings) {
  std::lock_guard<std::mutex> lock(mutex_);
  findings_.emplace(entry, std::move(findings));
}

bool ArchiveCache::charge(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > maxDecompressedBytes_ - decompressedBytes_) return false;  // never past the budget
  decompressedBytes_ += bytes;
  return true;
}

std::uint64_t ArchiveCache::decompressedBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return decompressedBytes_;
}

namespace {

// "16777216 bytes (16.0 MiB)": exact for the reader who raises the budget, scaled for the eye.
std::string bytesText(std::uint64_t n) {
  std::string out = std::to_string(n) + " bytes";
  if (n < (std::uint64_t(1) << 20)) return out;
  const bool gib = n >= (std::uint64_t(1) << 30);
  const double scaled = static_cast<double>(n) / static_cast<double>(gib ? std::uint64_t(1) << 30 : 1 << 20);
  char buf[32];
  std::snprintf(buf, sizeof buf, " (%.1f %s)", scaled, gib ? "GiB" : "MiB");
  return out + buf;
}

// The key of one archive entry in an ArchiveCache: the archive's path as
// locateLibrary gives it, the toc key and the target ID it is filed under.
std::string entryKey(const fs::path& archive, const std::string& tocKey, const std::string& target) {
  return archive.string() + '\n' + tocKey + '\n' + target;
}

std::string argText(const SignatureArg& a) {
  std::string out = a.kind + "/" + std::to_string(a.size);
  if (a.name) out += " '" + *a.name + "'";
  return out;
}

}  // namespace

std::optional<std::string> signatureMismatch(const Signature& packed, const Signature& expected) {
  if (packed.size() != expected.size()) {
    return "the handler passes " + std::to_string(expected.size()) + " argument" + (expected.size() == 1 ? "" : "s") +
           ", the kernel takes " + std::to_string(packed.size());
  }
  for (std::size_t i = 0; i < packed.size(); ++i) {
    const SignatureArg& p = packed[i];
    const SignatureArg& e = expected[i];
    const bool namesDiffer = p.name && e.name && *p.name != *e.name;
    if (p.kind != e.kind || p.size != e.size || namesDiffer) {
      return "argument " + std::to_string(i) + " is " + argText(p) + " in the kernel, the handler passes " + argText(e);
    }
  }
  return std::nullopt;
}

Result<LibraryLocation> locateLibrary(const fs::path& shardRoot, const fs::path& baseDir, const std::string& library) {
  using R = Result<LibraryLocation>;
  const fs::path root = shardRoot.lexically_normal();
  const auto v = detail::checkContained(root, baseDir, library, true);
  switch (v.problem) {
    case detail::PathProblem::None:
      break;
    case detail::PathProblem::Absolute:
      return R::failure(makeError(codes::LIBRARY_ESCAPES, "", "",
                                  "library '" + library + "' is not a path relative to the descriptor's folder"));
    case detail::PathProblem::Escapes:
      return R::failure(makeError(codes::LIBRARY_ESCAPES, "", "",
                                  "library '" + library + "' leaves the shard root " + root.string()));
    case detail::PathProblem::SymlinkHop:
    case detail::PathProblem::LinkEscapes:
      return R::failure(makeError(codes::LIBRARY_SYMLINK, "", "",
                                  "library '" + library + "' goes through the symbolic link '" + v.hop +
                                      "'; the runtime follows no link inside a shard"));
  }
  return R::success(LibraryLocation{v.joined, v.rootRel});
}

std::optional<Diagnostic> libraryFileMissing(const LibraryLocation& where, const std::string& library) {
  std::error_code ec;
  if (fs::is_regular_file(where.path, ec)) return std::nullopt;
  // A FIFO or device named like the archive is said as such (a stat, no open):
  // "not found" would send the reader looking for a file that is there.
  if (auto kind = detail::nonRegularKind(where.path)) {
    return makeError(
        codes::ARCHIVE_INVALID, "", "",
        "archive '" + library + "' (" + where.rootRel + " in the shard): expected a regular file, found " + *kind);
  }
  return makeError(codes::ARCHIVE_MISSING, "", "",
                   "archive '" + library + "' not found: expected " + where.rootRel + " in the shard");
}

const LocatedLibraries::Found& LocatedLibraries::find(const fs::path& shardRoot, const fs::path& baseDir,
                                                      const std::string& library) {
  std::string key = shardRoot.native() + '\0' + baseDir.native() + '\0' + library;
  if (const auto it = found_.find(key); it != found_.end()) return it->second;
  Found found{locateLibrary(shardRoot, baseDir, library), std::nullopt};
  if (found.located) found.missing = libraryFileMissing(found.located.value(), library);
  return found_.emplace(std::move(key), std::move(found)).first->second;
}

Result<std::vector<std::uint8_t>> loadLaunchCode(const Kernel& kernel, const fs::path& shardRoot,
                                                 const std::optional<std::string>& launch, const std::string& arch,
                                                 const LaunchCodeOptions& options) {
  using R = Result<std::vector<std::uint8_t>>;
  const std::string name = launch.value_or("");
  if (!kernel.unreadable.empty()) {
    return R::failure(makeError(codes::SHARD_INDEX, kernel.file, kernel.jsonPath,
                                "kernel (id " + kernel.id + "): " + kernel.unreadable));
  }

  // Which source: the one reader of a kernel's launches decides the shape.
  const KernelSource* src = singleLaunchSource(kernel);
  std::string label;
  std::string path = jsonPathKey(kernel.jsonPath, "kernel_source");
  if (src != nullptr) {
    if (!name.empty()) {
      return R::failure(makeError(
          codes::NO_SUCH_LAUNCH, kernel.file, kernel.jsonPath,
          kernelLabel(kernel) + " has a single launch, not launch '" + name + "'; load it without a launch name"));
    }
    label = launchLabel(kernel, "");
  } else {
    const std::set<std::string> names = launchNamesOf(kernel);
    const auto it = kernel.sources.find(name);
    if (name.empty() || it == kernel.sources.end()) {
      return R::failure(
          makeError(codes::NO_SUCH_LAUNCH, kernel.file, kernel.jsonPath,
                    kernelLabel(kernel) + " has launches " + describeLaunchSet(names) +
                        (name.empty() ? std::string("; name the launch to load") : ", not launch '" + name + "'")));
    }
    src = &it->second;
    label = launchLabel(kernel, name);
    path = jsonPathKey(jsonPathKey(kernel.jsonPath, "sources"), name);
  }
  auto fail = [&](const std::string& code, const std::string& at, const std::string& message) {
    return R::failure(makeError(code, kernel.file, at, label + ": " + message));
  };
  if (!isPackedSource(*src)) {
    return fail(codes::NOT_PACKED, jsonPathKey(path, "kind"),
                "the source is kind '" + src->kind + "', not the packed kind '" + packedKind().name +
                    "'; code is loaded from a packed shard");
  }

  // 1. library: inside the shard, lexically and with no link on the way.
  const std::string libPath = jsonPathKey(path, "library");
  LocatedLibraries own;
  const LocatedLibraries::Found& library =
      (options.located != nullptr ? *options.located : own).find(shardRoot, kernel.baseDir, src->library);
  if (!library.located) return fail(library.located.error().code, libPath, library.located.error().message);
  const LibraryLocation& where = library.located.value();

  // 2. signature, before the archive is opened.
  if (options.handler != nullptr) {
    if (auto expected = options.handler->expectedSignature(name)) {
      if (auto why = signatureMismatch(src->signature, *expected)) {
        const std::string who = options.dispatchSymbol.empty() ? std::string("its dispatch handler")
                                                               : "dispatch symbol '" + options.dispatchSymbol + "'";
        return fail(codes::SIGNATURE_MISMATCH, jsonPathKey(path, "signature"),
                    "signature " + describeSignature(src->signature) + " does not match what " + who + " passes " +
                        describeSignature(*expected) + ": " + *why);
      }
    }
  }

  // 3. the archive and its toc entry for the arch.
  if (const auto& missing = library.missing) return fail(missing->code, libPath, missing->message);
  ArchiveCache local;
  ArchiveCache& cache = options.cache != nullptr ? *options.cache : local;
  auto archive = cache.open(where.path);
  if (!archive) {
    return fail(codes::ARCHIVE_INVALID, libPath,
                "cannot read archive '" + src->library + "': " + archive.error().str());
  }
  const KpackArchive& ar = *archive.value();
  // The entry is filed under the target ID its object was built for: the device's
  // own, one with fewer features ("any"), or its generic family's. The most specific
  // one the archive holds wins (exact features over "any", exact arch over generic).
  std::string useArch;
  for (const std::string& candidate : compatibleTargets(arch)) {
    if (ar.find(src->tocKey, candidate) != nullptr) {
      useArch = candidate;
      break;
    }
  }
  if (useArch.empty() && !arch.empty()) {
    // Held for the device's arch (or its family) but not its feature settings: say so,
    // naming both; held for other arches only is a missing entry (below).
    std::string held;
    bool sameArch = false;
    for (const std::string& a : ar.arches()) {
      if (ar.find(src->tocKey, a) == nullptr) continue;
      held += (held.empty() ? "" : ", ") + a;
      sameArch = sameArch || targetRunsOn(a, bareArch(arch));
    }
    if (sameArch) {
      return fail(codes::TARGET_MISMATCH, jsonPathKey(path, "toc_key"),
                  "no code object for toc key '" + src->tocKey + "' in archive '" + src->library +
                      "' runs on the device's target " + arch + ": the archive holds it for " + held);
    }
  }
  if (useArch.empty() && arch.empty()) {
    std::vector<std::string> holding;
    for (const std::string& a : ar.arches())
      if (ar.find(src->tocKey, a) != nullptr) holding.push_back(a);
    if (holding.size() > 1) {
      std::string listed;
      for (const std::string& a : holding) listed += (listed.empty() ? "" : ", ") + a;
      return fail(codes::ARCH_REQUIRED, jsonPathKey(path, "toc_key"),
                  "toc key '" + src->tocKey + "' has code for several arches (" + listed + "); name the device arch");
    }
    if (holding.size() == 1) useArch = holding.front();
  }
  if (useArch.empty() || ar.find(src->tocKey, useArch) == nullptr) {
    // The archive's arches, and those it holds this key for: a key packed for another
    // arch only is a shard of the wrong arch, no key at all a descriptor that lies.
    std::string listed;
    std::string keyed;
    for (const std::string& a : ar.arches()) {
      listed += (listed.empty() ? "" : ", ") + a;
      if (ar.find(src->tocKey, a) != nullptr) keyed += (keyed.empty() ? "" : ", ") + a;
    }
    const std::string inShard = where.rootRel == src->library ? "" : " (" + where.rootRel + " in the shard)";
    return fail(
        codes::TOC_MISSING, jsonPathKey(path, "toc_key"),
        "archive '" + src->library + "'" + inShard + " has no entry for toc key '" + src->tocKey + "'" +
            (arch.empty() ? std::string() : " and arch " + arch) + " (it holds arches " +
            (listed.empty() ? std::string("none") : listed) + "): " +
            (keyed.empty() ? std::string("it holds no entry of that key") : "for that key it holds arches " + keyed));
  }
  // 4. the digest binds the bytes to the descriptor; nothing uses them before. A
  // launch with feature variants records one digest per target ID.
  std::string expected = src->sha256;
  if (!src->targets.empty()) {
    const auto it = src->targets.find(useArch);
    if (it == src->targets.end()) {
      return fail(codes::DIGEST_MISMATCH, jsonPathKey(path, "targets"),
                  "the archive files toc key '" + src->tocKey + "' under " + useArch +
                      ", for which the descriptor records no digest; the archive does not hold what this kernel "
                      "was packed with");
    }
    expected = it->second;
  }
  auto mismatch = [&](const std::string& digest) {
    return fail(codes::DIGEST_MISMATCH,
                src->targets.empty() ? jsonPathKey(path, "sha256") : jsonPathKey(jsonPathKey(path, "targets"), useArch),
                "the code object for " + useArch + " (toc key '" + src->tocKey + "' in " + src->library +
                    ") has sha256 " + digest + ", the descriptor says " + expected +
                    "; the archive does not hold what this kernel was packed with");
  };
  // Bytes this cache verified against the same digest are those bytes again; a
  // check that keeps no bytes takes what checkArchiveEntries found of the entry.
  const std::string entry = entryKey(where.path, src->tocKey, useArch);
  std::shared_ptr<const std::vector<std::uint8_t>> code = cache.verified(entry, expected);
  const std::shared_ptr<const EntryFindings> found = code || options.keepBytes ? nullptr : cache.findings(entry);
  if (found && found->sha256 != expected) return mismatch(found->sha256);
  if (!code && !found) {
    // The budget is charged before the work, by the size the TOC gives (the
    // reader holds the frame to it): the load stops before decompressing more.
    const std::uint64_t size = ar.find(src->tocKey, useArch)->originalSize;
    if (!cache.charge(size)) {
      return fail(codes::DECOMPRESS_BUDGET, libPath,
                  "archive '" + src->library + "' (" + where.rootRel + "): toc entry '" + src->tocKey + "' for " +
                      useArch + " would decompress " + bytesText(size) + " more, past this load's budget of " +
                      bytesText(cache.maxDecompressedBytes()) + ", of which " +
                      std::to_string(cache.decompressedBytes()) +
                      " are spent; stopped."
                      " If the shard really holds that much code, raise the budget: "
                      "LoaderOptions::maxDecompressedBytes, ukdpack-validate --max-decompressed-bytes N, "
                      "load_shard(max_decompressed_bytes=N)");
    }
    auto bytes = ar.get(src->tocKey, useArch);
    if (!bytes) {
      return fail(codes::ARCHIVE_INVALID, jsonPathKey(path, "toc_key"),
                  "cannot read toc entry '" + src->tocKey + "' for " + useArch + " from '" + src->library +
                      "': " + bytes.error().str());
    }
    const std::string digest = sha256Hex(bytes.value());
    if (digest != expected) return mismatch(digest);
    code = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes).value());
    cache.remember(entry, digest, code);
  }

  // 5. the symbol is a kernel of the object.
  const Result<std::vector<std::string>> kernels =
      found ? found->kernels
            : codeObjectKernels(std::string_view(reinterpret_cast<const char*>(code->data()), code->size()));
  if (!kernels) {
    return fail(codes::CODE_OBJECT_INVALID, jsonPathKey(path, "toc_key"),
                "the code object for " + useArch + " (toc key '" + src->tocKey +
                    "') is not readable: " + kernels.error().message);
  }
  // ... and its ELF header, its metadata note and the arch it is filed under agree.
  const Result<std::string> target =
      found
          ? found->target
          : checkCodeObjectTarget(std::string_view(reinterpret_cast<const char*>(code->data()), code->size()), useArch);
  if (!target) {
    return fail(
        codes::CODE_OBJECT_INVALID, jsonPathKey(path, "toc_key"),
        "the code object for " + useArch + " (toc key '" + src->tocKey + "') is refused: " + target.error().message);
  }
  if (!std::binary_search(kernels.value().begin(), kernels.value().end(), src->symbol)) {
    std::string held;
    for (const std::string& k : kernels.value()) held += (held.empty() ? "" : ", ") + k;
    return fail(codes::SYMBOL_MISSING, jsonPathKey(path, "symbol"),
                "symbol '" + src->symbol + "' is not a kernel of the code object for " + useArch + " (toc key '" +
                    src->tocKey + "'); it holds " + (held.empty() ? std::string("no kernel") : held));
  }
  if (!options.keepBytes) return R::success({});  // checked: a copy would go unused
  return R::success(std::vector<std::uint8_t>(*code));
}

void checkArchiveEntries(ArchiveCache& cache, const fs::path& path, unsigned threads) {
  const fs::path at = path.lexically_normal();
  auto archive = cache.open(at);
  if (!archive) return;  // the launches that name it word why
  const KpackArchive& ar = *archive.value();
  std::vector<std::pair<std::string, std::string>> entries;  // (toc key, target ID)
  for (const std::string& key : ar.keys()) {
    for (const std::string& target : ar.arches())
      if (ar.find(key, target) != nullptr) entries.emplace_back(key, target);
  }
  std::atomic<std::size_t> next{0};
  detail::runOnThreads(threads, entries.size(), [&] {
    for (std::size_t i = next++; i < entries.size(); i = next++) {
      const auto& [key, target] = entries[i];
      // Charged before the work, as a launch's load is; past the budget, the rest
      // is left to the launches (and the budget's refusal to them).
      if (!cache.charge(ar.find(key, target)->originalSize)) return;
      auto bytes = ar.get(key, target);
      if (!bytes) continue;
      const std::vector<std::uint8_t>& code = bytes.value();
      const std::string_view view(reinterpret_cast<const char*>(code.data()), code.size());
      cache.rememberFindings(entryKey(at, key, target),
                             std::make_shared<const EntryFindings>(EntryFindings{
                                 sha256Hex(code), codeObjectKernels(view), checkCodeObjectTarget(view, target)}));
    }
  });
}

std::vector<std::string> checkDevices(const KernelSource& source, const std::string& arch) {
  if (source.targets.empty() || arch.empty()) return {arch};
  std::vector<std::string> out;
  for (const auto& [target, digest] : source.targets) {
    out.push_back(bareArch(arch) + target.substr(bareArch(target).size()));
  }
  return out;
}

Result<std::vector<std::uint8_t>> loadLaunchCode(const DescriptorSet& set, const std::string& kernelId,
                                                 const std::optional<std::string>& launch, const std::string& arch,
                                                 const LaunchCodeOptions& options) {
  const PackMember* m = set.findKernel(kernelId);
  if (m == nullptr) {
    return Result<std::vector<std::uint8_t>>::failure(
        makeError(codes::KERNEL_UNKNOWN, "", "", "no loaded kernel has id '" + kernelId + "'"));
  }
  if (options.cache != nullptr) return loadLaunchCode(m->kernel(), set.rootOf(*m), launch, arch, options);
  ArchiveCache local(ArchiveCache::kDefaultMaxVerifiedBytes, set.maxDecompressedBytes);
  LaunchCodeOptions withBudget = options;
  withBudget.cache = &local;
  return loadLaunchCode(m->kernel(), set.rootOf(*m), launch, arch, withBudget);
}

}  // namespace ukdpack
