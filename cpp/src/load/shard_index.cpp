// The shard index (index.ukdx): its bytes, written from a shard's JSON load and
// read back checked, and the one way an inline kernel is read from its span.
//
// Layout, little-endian: "UKDX", u32 format, u64 body size, the body's binding
// digest (base/binding_digest.hpp: XXH3-128, 16 bytes), then the body: the writer's
// identity (str), u32 folder count and each folder the walk entered below the root
// (str, sorted), u32 file count and per file its path (str), type (str), u64 size,
// binding digest hex (str), u8 spans and,
// with spans, u32 list count and each distinct arch or launch list its kernels name
// (u32 count, str...), u32 kernel count and per kernel u32 list index, u64 begin, u64
// end, id (str), i64 priority, u32 its arch list (UINT32_MAX: its pack's), u32 its
// sorted launch names' list; then the file's skeleton (str: its text with each
// kernel's object cut to "{}"); then the set's selection tables (ukdpack/load/loader.hpp):
// u32 member count and that many u32 (the ranking), u32 slot count and that many u32
// (the id table). A str is a u32 length and its bytes.
#include "ukdpack/load/shard_index.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "base/binding_digest.hpp"
#include "base/files.hpp"
#include "base/utf8.hpp"
#include "json/json_tape.hpp"
#include "load/loader_impl.hpp"
#include "load/shard_folder.hpp"
#include "load/shard_index_impl.hpp"
#include "model/object_reader.hpp"

#ifndef UKDPACK_VERSION
#error "UKDPACK_VERSION must be defined (CMakeLists.txt passes the project version)"
#endif

namespace ukdpack {

namespace fs = std::filesystem;

namespace detail {

namespace {

constexpr char kMagic[4] = {'U', 'K', 'D', 'X'};
// Format 6: the set's selection tables, so that a start-up through the index neither
// ranks nor hashes its kernels; format 5: each file's arch and launch lists once, each kernel naming its two by place
// (format 4 wrote them with every kernel); format 4 listed the folders the walk enters,
// so that a load need not walk a shard none of whose folders changed (format 3 had none;
// format 2 no skeletons; format 1 bound by sha256, which a load paid on every descriptor byte).
constexpr std::uint32_t kFormat = 6;
constexpr std::size_t kDigestSize = 16;
constexpr std::size_t kHeaderSize = 4 + 4 + 8 + kDigestSize;
// An index larger than this is no index this reader wrote (a shard's descriptors are at most 256 MiB a file).
constexpr std::uint64_t kMaxIndexBytes = 1ull << 30;

// Who wrote it: the version, and the descriptor versions it reads (an index is
// the load of one reader: another may read the same JSON differently).
std::string writerIdentity() {
  const VersionLimits v;
  return std::string("ukdpack ") + UKDPACK_VERSION + "; kdp " + v.kdp.str() + ", ukd " + v.ukd.str() + ", udd " +
         v.udd.str() + ", ued " + v.ued.str() + ", kmd " + v.kmd.str() + ", umd " + v.umd.str() + ", uhd " +
         v.uhd.str();
}

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads records, every length and count checked against what is left.
class Reader {
 public:
  Reader(std::string_view bytes, std::size_t at) : bytes_(bytes), at_(at) {}
  bool ok() const { return ok_; }
  std::size_t at() const { return at_; }
  std::size_t left() const { return bytes_.size() - at_; }
  std::uint64_t uint(int size) {
    if (!ok_ || left() < static_cast<std::size_t>(size)) return fail();
    std::uint64_t v = 0;
    for (int i = 0; i < size; ++i) v |= std::uint64_t(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    at_ += static_cast<std::size_t>(size);
    return v;
  }
  std::string_view str() {
    const std::uint64_t n = uint(4);
    if (!ok_ || left() < n) return fail(), std::string_view();
    const std::string_view s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  // `n` u32s into `out`, one copy of their bytes (the tables run to a u32 per kernel).
  void u32s(std::size_t n, std::vector<std::uint32_t>& out) {
    if (!ok_ || left() / 4 < n) return static_cast<void>(fail());
    out.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto* b = reinterpret_cast<const unsigned char*>(bytes_.data() + at_ + 4 * i);
      out[i] = std::uint32_t{b[0]} | std::uint32_t{b[1]} << 8 | std::uint32_t{b[2]} << 16 | std::uint32_t{b[3]} << 24;
    }
    at_ += 4 * n;
  }
  // A count of records each at least `minSize` bytes: more than could fit is a damaged index.
  std::uint32_t count(std::size_t minSize) {
    const std::uint64_t n = uint(4);
    if (!ok_ || n > left() / minSize) return static_cast<std::uint32_t>(fail());
    return static_cast<std::uint32_t>(n);
  }

 private:
  std::uint64_t fail() {
    ok_ = false;
    return 0;
  }
  std::string_view bytes_;
  std::size_t at_;
  bool ok_ = true;
};

// Whether `rel` is a path the walk could give below a root: '/'-separated UTF-8 names,
// none empty or dot-prefixed (so no "." or ".."), not absolute, not under the
// top-level archive folder (which is not walked). A hostile index names no other.
bool walkablePath(std::string_view rel) {
  if (rel.empty() || rel.front() == '/' || rel.find('\0') != std::string_view::npos || !validUtf8(rel)) return false;
  if (rel.substr(0, rel.find('/')) == kArchiveFolder) return false;
  for (std::size_t start = 0;;) {
    const std::size_t slash = rel.find('/', start);
    const std::string_view name = rel.substr(start, slash == std::string_view::npos ? rel.npos : slash - start);
    if (name.empty() || name.front() == '.') return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// The folder `rel` lies in ("" for the root).
std::string_view folderOf(std::string_view rel) {
  const std::size_t slash = rel.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : rel.substr(0, slash);
}

// Why the index's folders and files are not a listing the walk could give (empty when
// they are): each path walkable, folders sorted and each inside the root or a listed
// folder, files in walk order, each in a listed folder and named for its type.
std::string listingProblem(const ShardIndex& index) {
  for (std::size_t i = 0; i < index.folders.size(); ++i) {
    const std::string_view f = index.folders[i];
    if (!walkablePath(f) || (i > 0 && index.folders[i - 1] >= f)) return "a folder '" + std::string(f) + "'";
    const std::string_view parent = folderOf(f);
    if (!parent.empty() && !std::binary_search(index.folders.begin(), index.folders.begin() + i, parent))
      return "a folder '" + std::string(f) + "' outside the folders it lists";
  }
  for (std::size_t i = 0; i < index.files.size(); ++i) {
    const IndexedFile& file = index.files[i];
    const std::string_view parent = folderOf(file.rel);
    const std::string_view name = parent.empty() ? file.rel : file.rel.substr(parent.size() + 1);
    const std::optional<std::string> type = descriptorType(name);
    if (!walkablePath(file.rel) || (i > 0 && index.files[i - 1].rel >= file.rel) || !type || *type != file.type ||
        (!parent.empty() && !std::binary_search(index.folders.begin(), index.folders.end(), parent)))
      return "a file '" + std::string(file.rel) + "'";
  }
  return "";
}

// Whether `t` is a ranking of its members (each once) and an id table whose probes end
// (the size the writer gives, each member in it once): what a start-up relies on
// without rereading the kernels; whether the order is the kernels' own, ukdpack-validate
// and the packer's confirmation say.
bool tablesInRange(const SelectionTables& t) {
  if (t.ranking.size() != t.members || t.idSlots.size() != SelectionTables::idSlotsFor(t.members)) return false;
  std::vector<bool> seen(t.members, false);
  for (const std::uint32_t g : t.ranking) {
    if (g >= t.members || seen[g]) return false;
    seen[g] = true;
  }
  seen.assign(t.members, false);
  std::size_t placed = 0;
  for (const std::uint32_t s : t.idSlots) {
    if (s == 0) continue;
    if (s > t.members || seen[s - 1]) return false;
    seen[s - 1] = true;
    ++placed;
  }
  return placed == t.members;
}

std::int64_t mtimeNs(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::int64_t nowNs() {
  struct timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

std::string hexToBytes(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string describeSource(const KernelSource& s) {
  std::string out = s.kind + " fields " + std::string(s.fields.text()) + " file " + s.file.value_or("-") + " library " +
                    s.library + " toc " + s.tocKey + " symbol " + s.symbol + " sha256 " + s.sha256 + " signature " +
                    describeSignature(s.signature) + " targets";
  for (const auto& [target, digest] : s.targets) out += " " + target + "=" + digest;
  return out;
}

}  // namespace

bool indexApplies(const LoaderOptions& options) {
  const VersionLimits builtIn;
  const VersionLimits& v = options.maxVersions;
  return !options.authored && !options.sourceFiles && options.excludeFolders.empty() && options.arches.empty() &&
         v.kdp == builtIn.kdp && v.ukd == builtIn.ukd && v.udd == builtIn.udd && v.ued == builtIn.ued &&
         v.kmd == builtIn.kmd && v.umd == builtIn.umd && v.uhd == builtIn.uhd;
}

std::optional<ShardIndex> parseShardIndex(std::shared_ptr<const std::string> bytes, std::string& why) {
  const std::string_view all(*bytes);
  return parseShardIndex(all, std::move(bytes), why);
}

std::optional<ShardIndex> parseShardIndex(std::string_view all, std::shared_ptr<const void> owner, std::string& why) {
  const std::string name = kShardIndexFile;
  if (all.size() < kHeaderSize) {
    why = name + " is truncated: " + std::to_string(all.size()) + " bytes, shorter than its header";
    return std::nullopt;
  }
  if (std::memcmp(all.data(), kMagic, 4) != 0) {
    why = name + " is no shard index (it does not start with UKDX)";
    return std::nullopt;
  }
  Reader header(all, 4);
  const std::uint64_t format = header.uint(4);
  const std::uint64_t bodySize = header.uint(8);
  if (format != kFormat) {
    why = name + " has format " + std::to_string(format) + "; this reader reads format " + std::to_string(kFormat);
    return std::nullopt;
  }
  if (bodySize != all.size() - kHeaderSize) {
    why = name + " is truncated or padded: its header states a body of " + std::to_string(bodySize) +
          " bytes, it has " + std::to_string(all.size() - kHeaderSize);
    return std::nullopt;
  }
  const std::string_view digest = all.substr(16, kDigestSize);
  if (hexToBytes(bindingDigestHex(all.data() + kHeaderSize, bodySize)) != digest) {
    why = name + "'s body does not have the digest its header states (damaged or edited)";
    return std::nullopt;
  }
  ShardIndex index;
  Reader r(all, kHeaderSize);
  index.writer = r.str();
  if (r.ok() && index.writer != writerIdentity()) {
    why = name + " was written by " + std::string(index.writer) + "; this reader is " + writerIdentity();
    return std::nullopt;
  }
  const std::uint32_t folders = r.count(4);
  index.folders.reserve(folders);
  for (std::uint32_t f = 0; f < folders && r.ok(); ++f) index.folders.push_back(r.str());
  const std::uint32_t files = r.count(4 + 4 + 8 + 4 + 1);
  index.files.reserve(files);
  std::vector<std::size_t> at;  // skeletonPlaces' scratch
  for (std::uint32_t f = 0; f < files && r.ok(); ++f) {
    IndexedFile& file = index.files.emplace_back();
    file.rel = r.str();
    file.type = r.str();
    file.size = r.uint(8);
    file.digest = r.str();
    file.spans = r.uint(1) != 0;
    if (!file.spans) continue;
    const std::uint32_t lists = r.count(4);
    file.lists.resize(lists);
    for (std::vector<std::string_view>& l : file.lists) {
      const std::uint32_t n = r.count(4);
      for (std::uint32_t i = 0; i < n && r.ok(); ++i) l.push_back(r.str());
    }
    const std::uint32_t kernels = r.count(4 + 8 + 8 + 4 + 8 + 4 + 4);
    file.kernels.reserve(kernels);
    for (std::uint32_t k = 0; k < kernels && r.ok(); ++k) {
      IndexedKernel& kernel = file.kernels.emplace_back();
      kernel.listIndex = static_cast<std::uint32_t>(r.uint(4));
      kernel.begin = r.uint(8);
      kernel.end = r.uint(8);
      kernel.id = r.str();
      kernel.priority = static_cast<std::int64_t>(r.uint(8));
      kernel.arch = static_cast<std::uint32_t>(r.uint(4));
      kernel.launches = static_cast<std::uint32_t>(r.uint(4));
      if (kernel.begin > kernel.end || kernel.end > file.size) {
        why = name + " places a kernel of " + std::string(file.rel) + " outside the file";
        return std::nullopt;
      }
      if ((kernel.arch != IndexedKernel::kPackArches && kernel.arch >= lists) || kernel.launches >= lists) {
        if (!r.ok()) break;  // the records end early: worded below
        why = name + " names a list a kernel of " + std::string(file.rel) + " does not have";
        return std::nullopt;
      }
    }
    file.skeleton = r.str();
    if (r.ok() && !skeletonPlaces(file, at)) {
      why = name + "'s skeleton of " + std::string(file.rel) + " does not fit its kernels' spans";
      return std::nullopt;
    }
  }
  if (r.ok()) {
    auto tables = std::make_shared<SelectionTables>();
    tables->members = r.count(4);
    r.u32s(tables->members, tables->ranking);
    r.u32s(r.count(4), tables->idSlots);
    if (r.ok() && !tablesInRange(*tables)) {
      why = name + "'s selection tables are not an order and a table of its kernels";
      return std::nullopt;
    }
    index.selection = std::move(tables);
  }
  if (!r.ok() || r.left() != 0) {
    why = name + "'s records do not fit its body (at byte " + std::to_string(r.at()) + ")";
    return std::nullopt;
  }
  if (const std::string problem = listingProblem(index); !problem.empty()) {
    why = name + " lists " + problem + " that no walk of a shard gives";
    return std::nullopt;
  }
  index.bytes = std::move(owner);
  return index;
}

std::optional<ShardIndex> readShardIndex(const fs::path& root, std::string& why) {
  const fs::path path = root / kShardIndexFile;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) {
    why = std::string("the shard has no ") + kShardIndexFile;
    return std::nullopt;
  }
  auto read = readRegularFileHeld(path, kMaxIndexBytes);
  if (!read) {
    why = std::string("cannot read ") + kShardIndexFile + ": " + read.error().message;
    return std::nullopt;
  }
  std::optional<ShardIndex> index = parseShardIndex(read.value().bytes, std::move(read.value().owner), why);
  struct stat st{};
  if (index && ::stat(path.c_str(), &st) == 0) {
    const std::int64_t written = mtimeNs(st);
    if (written <= nowNs()) index->writtenNs = written;
  }
  return index;
}

bool skeletonPlaces(const IndexedFile& file, std::vector<std::size_t>& at) {
  at.clear();
  std::uint64_t cut = 0;  // what the kernels before this one were cut by
  std::uint64_t next = 0;
  for (const IndexedKernel& k : file.kernels) {
    // Spans in order, each at least "{}" (so `cut` never passes `begin`); no sum that can wrap.
    if (k.begin < next || k.end < k.begin || k.end - k.begin < 2) return false;
    next = k.end;
    const std::uint64_t place = k.begin - cut;
    if (place > file.skeleton.size() || file.skeleton.size() - place < 2 || file.skeleton.compare(place, 2, "{}") != 0)
      return false;
    at.push_back(place);
    cut += k.end - k.begin - 2;
  }
  return cut <= file.size && file.skeleton.size() == file.size - cut;  // nothing after the last cut either
}

OpenFolder::OpenFolder(const fs::path& path) : fd_(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {}

OpenFolder::~OpenFolder() {
  if (fd_ >= 0) ::close(fd_);
}

bool listingUnchanged(const fs::path& root, const OpenFolder& shard, const ShardIndex& index) {
  if (!index.writtenNs || shard.fd() < 0) return false;
  // The root's own listing: it changes with the index itself, so it is compared, not dated.
  std::set<std::string_view> top;
  for (const std::string_view f : index.folders)
    if (f.find('/') == std::string_view::npos) top.insert(f);
  for (const IndexedFile& f : index.files)
    if (f.rel.find('/') == std::string_view::npos) top.insert(f.rel);
  std::size_t seen = 0;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code e2;
    const bool isDir = it->is_directory(e2);    // a link to a folder included: the walk names it
    if (!isDir && !isJsonName(name)) continue;  // no business of the walk (the index, say)
    if (isArchiveFolder(true, name, isDir && !it->is_symlink(e2))) continue;
    if (top.count(name) == 0) return false;
    ++seen;
  }
  if (ec || seen != top.size()) return false;
  for (const std::string_view f : index.folders) {
    struct stat st{};
    const std::string rel(f);
    // Listable too: a folder the walk could not list is its error to word.
    if (::fstatat(shard.fd(), rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        mtimeNs(st) >= *index.writtenNs || ::faccessat(shard.fd(), rel.c_str(), R_OK | X_OK, AT_EACCESS) != 0)
      return false;
  }
  return true;
}

bool unchangedSinceIndex(const fs::path& path, const std::string& rel, const OpenFolder& shard, const IndexedFile& file,
                         const ShardIndex& index) {
  if (!index.writtenNs) return false;
  struct stat st{};
  const int rc =
      shard.fd() >= 0 ? ::fstatat(shard.fd(), rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) : ::lstat(path.c_str(), &st);
  return rc == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) == file.size &&
         mtimeNs(st) < *index.writtenNs;
}

std::optional<PackMember> memberFromSpan(const std::shared_ptr<const std::string>& text, const IndexedKernel& k,
                                         const KernelContext& ctx, const Version& maxUkd) {
  // The object alone: what the JSON load's tape holds for it, read by the same reader.
  const auto span = std::make_shared<const std::string>(*text, k.begin, k.end - k.begin);
  const auto tape = JsonTape::scan(span);
  if (!tape || !tape->root().is_object()) return std::nullopt;
  std::vector<Diagnostic> diags;
  if (checkVersionOf(tape->root(), "ukd", maxUkd).gate != VersionGate::Read) return std::nullopt;
  auto kernel = parseKernelFrom(tape->root(), ctx, diags);
  if (!kernel || !diags.empty()) return std::nullopt;
  PackMember m;
  m.index = k.listIndex;
  m.setKernel(std::move(*kernel));
  m.setRaw(JsonText(text, k.begin, k.end - k.begin));
  return m;
}

SpanKernels::SpanKernels(std::filesystem::path path, std::shared_ptr<const ShardIndex> index, const IndexedFile* entry,
                         std::string file, std::filesystem::path baseDir, Version maxUkd)
    : path_(std::move(path)),
      index_(std::move(index)),
      entry_(entry),
      file_(std::move(file)),
      baseDir_(std::move(baseDir)),
      maxUkd_(maxUkd),
      records_(entry_->kernels.size()) {
  lists_.reserve(entry_->lists.size());
  for (const std::vector<std::string_view>& l : entry_->lists) lists_.emplace_back(std::in_place, l.begin(), l.end());
  static const std::optional<std::vector<std::string>> packArches;
  for (std::size_t i = 0; i < records_.size(); ++i) {
    const IndexedKernel& k = entry_->kernels[i];
    DeferredKernel& d = records_[i];
    d.reader = this;
    d.index = i;
    d.id = k.id;
    d.priority = k.priority;
    d.arch = k.arch == IndexedKernel::kPackArches ? &packArches : &lists_[k.arch];
    d.launches = &*lists_[k.launches];
  }
}

bool bindsTo(std::string_view bytes, const IndexedFile& file) {
  return bytes.size() == file.size && bindingDigestHex(bytes.data(), bytes.size()) == file.digest;
}

const std::shared_ptr<const std::string>& SpanKernels::text() const {
  std::call_once(textOnce_, [this] {
    // Read again, and kept only when it is still the file the load bound the index to.
    auto read = readRegularFile(path_, kMaxDescriptorBytes);
    if (!read) {
      unread_ = "does not read (" + read.error().message + ")";
    } else if (!bindsTo(read.value(), *entry_)) {
      unread_ =
          "is not the one the shard's index.ukdx records (its size or digest differs): it changed after the "
          "shard was packed or loaded";
    } else {
      text_ = std::make_shared<const std::string>(std::move(read.value()));
    }
  });
  return text_;
}

JsonText SpanKernels::raw(std::size_t index) const {
  const IndexedKernel& k = entry_->kernels.at(index);
  const std::shared_ptr<const std::string>& text = this->text();
  return text ? JsonText(text, k.begin, k.end - k.begin) : JsonText();
}

void SpanKernels::read(std::size_t index, Kernel& kernel, Json& completedMetadata) const {
  const IndexedKernel& k = entry_->kernels.at(index);
  const std::shared_ptr<const std::string>& text = this->text();
  std::optional<PackMember> m =
      text ? memberFromSpan(text, k, KernelContext{file_, jsonPathIndex("$.kernelDescriptors", k.listIndex), baseDir_},
                            maxUkd_)
           : std::nullopt;
  if (m) {
    kernel = std::move(m->editKernel());
  } else {
    // Not for an index that binds (its writer read every span back), unless the file
    // changed after the load (shard files stay as packed while a process uses them):
    // what the index says, at least.
    kernel.id = std::string(k.id);
    kernel.priority = k.priority;
    kernel.file = file_;
    kernel.jsonPath = jsonPathIndex("$.kernelDescriptors", k.listIndex);
    kernel.baseDir = baseDir_;
    kernel.unreadable = "its file " +
                        (unread_.empty() ? "does not read at its span in the shard's index.ukdx" : unread_) +
                        "; the kernel is not read from it. Leave a loaded shard in place while the process uses "
                        "it, or load it again";
  }
  std::vector<Diagnostic> unused;  // the pack-time load completed the same bytes without a word
  std::optional<Json> completed = kmd_ ? completeMetadata(*kmd_, kernel, unused) : std::nullopt;
  completedMetadata = completed ? std::move(*completed) : kernel.metadata;
}

std::optional<std::string> packSkeleton(std::string_view text, const IndexedFile& file, std::vector<std::size_t>& at) {
  at.clear();
  std::string out;
  out.reserve(text.size() < 4096 ? text.size() : 4096);
  std::uint64_t next = 0;
  for (const IndexedKernel& k : file.kernels) {
    if (k.begin < next || k.end > text.size() || k.end - k.begin < 2 || text[k.begin] != '{' || text[k.end - 1] != '}')
      return std::nullopt;
    out.append(text.substr(next, k.begin - next));
    at.push_back(out.size());
    out += "{}";
    next = k.end;
  }
  out.append(text.substr(next));
  return out;
}

std::string describePack(const Pack& p) {
  return "pack " + p.id + " " + p.name + " " + p.version.str() + " " + p.file + " arch " + joined(p.arch) +
         " matchers " + joined(p.matchers) + " engine " + p.engine.value_or("-") + " dispatch " +
         p.dispatch.value_or("-") + " slot " + p.slot.value_or("-") + " raw " + p.raw.dump() + " provenance " +
         p.provenance.dump() + " members " + std::to_string(p.members.size());
}

std::vector<std::string> describeSet(const DescriptorSet& set) {
  std::vector<std::string> out;
  out.push_back("diagnostics " + std::to_string(set.diagnostics.size()));
  for (const Diagnostic& d : set.diagnostics) out.push_back("diagnostic " + d.str());
  for (const DescriptorSet::Walked& f : set.files) out.push_back("file " + f.rel + " " + f.type);
  out.push_back("descriptors: " + std::to_string(set.dispatches.size()) + " UDD, " +
                std::to_string(set.engines.size()) + " UED, " + std::to_string(set.metadataSchemas.size()) + " KMD, " +
                std::to_string(set.matchers.size()) + " UMD, " + std::to_string(set.heuristics.size()) + " UHD, " +
                std::to_string(set.refusedPacks.size()) + " refused packs");
  for (const Pack& p : set.packs) {
    out.push_back(describePack(p));
    for (const PackMember& m : p.members) {
      const Kernel& k = m.kernel();
      out.push_back(" kernel " + k.id + " of " + p.id + " at " + std::to_string(m.index) + " ref " + m.ref() +
                    " root " + std::to_string(m.root) + " name " + k.name + " version " + k.version.str() + " file " +
                    k.file + " path " + k.jsonPath + " base " + k.baseDir.generic_string() + " priority " +
                    std::to_string(k.priority) + " arch " + (k.arch ? joined(*k.arch) : "-") + " metadata " +
                    k.metadata.dump() + " completed " + m.completedMetadata().dump() + " provenance " +
                    k.provenance.dump() + " raw " + std::string(m.raw().text()));
      if (const KernelSource* single = singleLaunchSource(k)) {
        out.push_back("  source " + describeSource(*single));
      } else {
        for (const auto& [name, src] : k.sources) out.push_back("  launch " + name + " " + describeSource(src));
      }
    }
  }
  return out;
}

namespace {

// Appends one field, length-prefixed, so that no two different field lists read alike.
void field(std::string& out, std::string_view v) {
  out += std::to_string(v.size());
  out += ':';
  out.append(v);
}

void sourceFields(std::string& out, const KernelSource& s) {
  field(out, s.kind);
  field(out, s.fields.text());
  field(out, s.file ? "1" + *s.file : "0");
  field(out, s.library);
  field(out, s.tocKey);
  field(out, s.symbol);
  field(out, s.sha256);
  field(out, std::to_string(s.signature.size()));
  for (const SignatureArg& a : s.signature) {
    field(out, a.kind);
    field(out, std::to_string(a.size));
    field(out, std::to_string(a.offset));
    field(out, a.name ? "1" + *a.name : "0");
  }
  field(out, std::to_string(s.targets.size()));
  for (const auto& [target, digest] : s.targets) {
    field(out, target);
    field(out, digest);
  }
}

// The digest of everything the runtime reads of one member: the JSON load's and the
// index load's must agree, and only one load's digests are held while the other loads.
// XXH3-128 (base/binding_digest.hpp), not sha256: both loads are this process's own, so
// the digest need only tell different bytes apart (a third of a draft's time at sha256).
std::string memberDigest(const PackMember& m, const Kernel& k, const Json& completed) {
  std::string s;
  field(s, std::to_string(m.index));
  field(s, m.ref());
  field(s, m.raw().text());
  field(s, k.id);
  field(s, k.name);
  field(s, k.version.str());
  field(s, std::to_string(k.priority));
  field(s, k.arch ? std::to_string(k.arch->size()) : "-");
  if (k.arch)
    for (const std::string& a : *k.arch) field(s, a);
  field(s, k.file);
  field(s, k.jsonPath);
  field(s, k.baseDir.generic_string());
  field(s, k.metadata.dump());
  field(s, k.provenance.dump());
  field(s, completed.dump());
  sourceFields(s, k.source);
  field(s, std::to_string(k.sources.size()));
  for (const auto& [name, src] : k.sources) {
    field(s, name);
    sourceFields(s, src);
  }
  return bindingDigestHex(s.data(), s.size());
}

// Per pack (in order): its id and each member's digest; "" for an inline member of
// an `unchanged` file, which the confirmation does not read back.
using SetDigests = decltype(ShardIndexDraft::expected);

// A pack's own fields (what its skeleton gives, the index's or its file's), as a digest.
std::string packDigest(const Pack& p) {
  const std::string described = describePack(p);
  return p.id + " " + bindingDigestHex(described.data(), described.size());
}

SetDigests setDigests(const DescriptorSet& set, const std::set<std::string>& unchanged) {
  SetDigests out;
  out.reserve(set.packs.size());
  for (const Pack& p : set.packs) {
    const bool kept = unchanged.count(p.file) != 0;
    std::vector<std::string> members;
    members.reserve(p.members.size());
    for (const PackMember& m : p.members)
      members.push_back(kept && m.ref().empty() ? std::string() : memberDigest(m, m.kernel(), m.completedMetadata()));
    out.emplace_back(packDigest(p), std::move(members));
  }
  return out;
}

// Whether two records of one file say the same: its bytes (size and digest) and
// each inline kernel's place, span, id, priority, arches and launches.
bool sameRecords(const IndexedFile& a, const IndexedFile& b) {
  if (a.rel != b.rel || a.type != b.type || a.size != b.size || a.digest != b.digest || a.spans != b.spans ||
      a.kernels.size() != b.kernels.size())
    return false;
  const auto listOf = [](const IndexedFile& f, std::uint32_t at) {
    return at == IndexedKernel::kPackArches ? nullptr : &f.lists.at(at);
  };
  const auto sameList = [&](std::uint32_t x, std::uint32_t y) {
    const auto* l = listOf(a, x);
    const auto* r = listOf(b, y);
    return l == nullptr || r == nullptr ? l == r : *l == *r;
  };
  for (std::size_t i = 0; i < a.kernels.size(); ++i) {
    const IndexedKernel& x = a.kernels[i];
    const IndexedKernel& y = b.kernels[i];
    if (x.listIndex != y.listIndex || x.begin != y.begin || x.end != y.end || x.id != y.id ||
        x.priority != y.priority || !sameList(x.arch, y.arch) || !sameList(x.launches, y.launches))
      return false;
  }
  return true;
}

// The files of `previous.files` whose records in the index `drafted` are those of
// the previous shard's index (none when that one does not read: every kernel is
// read back).
std::set<std::string> unchangedFiles(const std::string& drafted, const PreviousIndex& previous) {
  std::set<std::string> out;
  if (previous.root.empty() || previous.files.empty()) return out;
  std::string why;
  const auto before = readShardIndex(previous.root, why);
  const auto now = before ? parseShardIndex(std::make_shared<const std::string>(drafted), why) : std::nullopt;
  if (!now) return out;
  std::map<std::string_view, const IndexedFile*> earlier;
  for (const IndexedFile& f : before->files) earlier.emplace(f.rel, &f);
  std::set<std::string_view> asked(previous.files.begin(), previous.files.end());
  for (const IndexedFile& f : now->files) {
    const auto it = earlier.find(f.rel);
    if (f.spans && asked.count(f.rel) != 0 && it != earlier.end() && sameRecords(f, *it->second)) out.emplace(f.rel);
  }
  return out;
}

// The first kernel the index's load reads differently from the JSON load's digests,
// worded; empty when none.
std::string firstKernelDifference(const SetDigests& json, const DescriptorSet& indexed) {
  if (json.size() != indexed.packs.size()) return "the packs differ";
  for (std::size_t p = 0; p < json.size(); ++p) {
    const auto& a = json[p].second;
    const Pack& pack = indexed.packs[p];
    if (json[p].first != packDigest(pack) || a.size() != pack.members.size()) return "pack " + pack.id + " differs";
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].empty()) continue;  // read back by the previous shard's confirmation
      // Each kernel read from its span and dropped again: the check holds no built kernel.
      const PackMember& m = pack.members[i];
      Kernel read;
      Json completed;
      const bool deferred = m.readUnkept(read, completed);
      const Kernel& k = deferred ? read : m.kernel();
      if (a[i] != memberDigest(m, k, deferred ? completed : m.completedMetadata()))
        return kernelLabel(k) + " (" + pack.file + ") differs";
      // What ranking and filtering read without building the kernel must be the kernel's.
      if (m.id() != k.id || m.priority() != k.priority || m.arch() != k.arch || !m.launchesAre(launchNamesOf(k)))
        return kernelLabel(k) + " (" + pack.file + "): the index records another id, priority, arches or launches";
    }
  }
  return "";
}

// The first line where two descriptions differ, worded; empty when they agree.
std::string firstDifference(const std::vector<std::string>& json, const std::vector<std::string>& indexed) {
  const std::size_t n = std::min(json.size(), indexed.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (json[i] != indexed[i]) return "the JSON load has \"" + json[i] + "\", the index's \"" + indexed[i] + "\"";
  }
  if (json.size() != indexed.size()) {
    return json.size() > indexed.size() ? "the index's load lacks \"" + json[n] + "\""
                                        : "the index's load has more: \"" + indexed[n] + "\"";
  }
  return "";
}

// Whether the selection tables a load through the index took are those of the JSON
// load, worded; empty when they are.
std::string tablesDifference(const DescriptorSet& json, const DescriptorSet& indexed) {
  if (!indexed.selection) return "the index's selection tables are not the set's";
  const SelectionTables want = selectionTablesOf(json);
  if (indexed.selection->ranking != want.ranking) return "the index ranks the kernels in another order";
  if (indexed.selection->idSlots != want.idSlots) return "the index's id table is not the kernels'";
  return "";
}

}  // namespace

}  // namespace detail

Result<std::string> buildShardIndex(const fs::path& root) {
  LoaderOptions jsonOnly;
  jsonOnly.useIndex = false;
  DescriptorSet set = loadShard(root, jsonOnly);
  Result<ShardIndexDraft> draft = draftShardIndex(set);
  if (!draft) return Result<std::string>::failure(draft.error());
  set = DescriptorSet{};  // one loaded set at a time: the JSON load is kept as digests only
  return confirmShardIndex(root, std::move(draft.value()));
}

Result<ShardIndexDraft> draftShardIndex(const DescriptorSet& set, const PreviousIndex& previous) {
  using R = Result<ShardIndexDraft>;
  if (set.fromIndex || set.roots.size() != 1) {
    return R::failure(
        makeError(codes::SHARD_INDEX, kShardIndexFile, "", "an index is made from one shard's JSON load"));
  }
  if (!set.diagnostics.empty()) {
    return R::failure(makeError(codes::SHARD_INDEX, kShardIndexFile, "",
                                "no index for a shard whose load gives diagnostics (" +
                                    std::to_string(set.diagnostics.size()) +
                                    ", the first: " + set.diagnostics.front().str() + ")"));
  }
  // Each pack's inline members, by file and list place.
  std::map<std::string, const Pack*> packOf;
  for (const Pack& p : set.packs) packOf.emplace(p.file, &p);
  const fs::path top = set.roots.front();
  // The folders the walk enters, listed by a walk of the same shard: a load may then
  // take the files from the index while none of them changed.
  std::vector<Diagnostic> walkDiags;
  std::vector<std::string> folders;
  const std::vector<WalkedFile> walked = walkRoot(top, walkDiags, {}, &folders);
  const bool sameFiles =
      walked.size() == set.files.size() && std::equal(walked.begin(), walked.end(), set.files.begin(),
                                                      [](const WalkedFile& w, const DescriptorSet::Walked& f) {
                                                        return w.rel == f.rel && w.type == f.type;
                                                      });
  if (!walkDiags.empty() || !sameFiles) {
    return R::failure(
        makeError(codes::SHARD_INDEX, kShardIndexFile, "", "the shard's files changed while its index was made"));
  }
  detail::Writer body;
  body.str(detail::writerIdentity());
  body.u32(static_cast<std::uint32_t>(folders.size()));
  for (const std::string& f : folders) body.str(f);
  body.u32(static_cast<std::uint32_t>(set.files.size()));
  for (const DescriptorSet::Walked& f : set.files) {
    auto read = detail::readRegularFile(top / f.rel, detail::kMaxDescriptorBytes);
    if (!read) return R::failure(read.error());
    const auto text = std::make_shared<const std::string>(std::move(read.value()));
    body.str(f.rel);
    body.str(f.type);
    body.u64(text->size());
    body.str(detail::bindingDigestHex(text->data(), text->size()));
    const auto pack = packOf.find(f.rel);
    const auto tape = f.type == "kdp" && pack != packOf.end() ? detail::JsonTape::scan(text) : nullptr;
    const detail::JsonNode* list = nullptr;
    if (tape && tape->root().is_object()) {
      const auto it = tape->root().find("kernelDescriptors");
      if (it != tape->root().end() && it->is_array()) list = &*it;
    }
    // A KDP the tape does not read (a comment, say) is bound but read as JSON.
    if (list == nullptr) {
      body.u8(0);
      continue;
    }
    // Each list place's inline member (the first, as members are in list order):
    // found by place, not searched for, so a pack of many kernels drafts in linear time.
    std::vector<const PackMember*> inlineAt(list->size(), nullptr);
    for (const PackMember& x : pack->second->members) {
      if (x.ref().empty() && x.index < inlineAt.size() && inlineAt[x.index] == nullptr) inlineAt[x.index] = &x;
    }
    std::vector<std::pair<const detail::JsonNode*, const PackMember*>> kernels;
    for (std::size_t i = 0; i < list->size(); ++i) {
      const detail::JsonNode& item = (*list)[i];
      if (!item.is_object()) continue;
      const PackMember* m = inlineAt[i];
      if (m == nullptr) {
        return R::failure(makeError(codes::SHARD_INDEX, f.rel, jsonPathIndex("$.kernelDescriptors", i),
                                    "an inline kernel the load did not keep; no index is written"));
      }
      kernels.emplace_back(&item, m);
    }
    body.u8(1);
    // The file's distinct arch and launch lists, in the order its kernels first name
    // them; each kernel then names its two by place.
    std::map<std::vector<std::string>, std::uint32_t> listAt;
    std::vector<const std::vector<std::string>*> lists;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> places;
    const auto placeOf = [&](std::vector<std::string> l) {
      const auto [it, added] = listAt.emplace(std::move(l), static_cast<std::uint32_t>(lists.size()));
      if (added) lists.push_back(&it->first);
      return it->second;
    };
    for (const auto& [item, m] : kernels) {
      const Kernel& k = m->kernel();
      const std::set<std::string> launches = launchNamesOf(k);
      const std::uint32_t arch = k.arch ? placeOf(*k.arch) : detail::IndexedKernel::kPackArches;
      places.emplace_back(arch, placeOf(std::vector<std::string>(launches.begin(), launches.end())));
    }
    body.u32(static_cast<std::uint32_t>(lists.size()));
    for (const std::vector<std::string>* l : lists) {
      body.u32(static_cast<std::uint32_t>(l->size()));
      for (const std::string& item : *l) body.str(item);
    }
    body.u32(static_cast<std::uint32_t>(kernels.size()));
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      const auto& [item, m] = kernels[i];
      const Kernel& k = m->kernel();
      body.u32(static_cast<std::uint32_t>(m->index));
      body.u64(item->begin_offset());
      body.u64(item->end_offset());
      body.str(k.id);
      body.u64(static_cast<std::uint64_t>(k.priority));
      body.u32(places[i].first);
      body.u32(places[i].second);
    }
    detail::IndexedFile spans;
    spans.size = text->size();
    for (const auto& [item, m] : kernels) {
      detail::IndexedKernel& k = spans.kernels.emplace_back();
      k.begin = item->begin_offset();
      k.end = item->end_offset();
    }
    std::vector<std::size_t> at;
    const std::optional<std::string> skeleton = detail::packSkeleton(*text, spans, at);
    if (!skeleton) {
      return R::failure(makeError(codes::SHARD_INDEX, f.rel, "$.kernelDescriptors",
                                  "its kernels' objects do not lie in order in the file; no index is written"));
    }
    body.str(*skeleton);
  }
  // What a state manager makes of the set: written here, from the JSON load, so that a
  // start-up through the index takes it.
  const SelectionTables tables = selectionTablesOf(set);
  body.u32(static_cast<std::uint32_t>(tables.members));
  for (const std::uint32_t g : tables.ranking) body.u32(g);
  body.u32(static_cast<std::uint32_t>(tables.idSlots.size()));
  for (const std::uint32_t slot : tables.idSlots) body.u32(slot);
  const std::string b = body.take();
  detail::Writer header;
  std::string out(detail::kMagic, 4);
  header.u32(detail::kFormat);
  header.u64(b.size());
  out += header.take();
  out += detail::hexToBytes(detail::bindingDigestHex(b.data(), b.size()));
  out += b;
  const std::set<std::string> unchanged = detail::unchangedFiles(out, previous);
  ShardIndexDraft draft{std::move(out), detail::setDigests(set, unchanged), {}};
  draft.unchanged.assign(unchanged.begin(), unchanged.end());
  return R::success(std::move(draft));
}

Result<std::string> confirmShardIndex(const fs::path& root, ShardIndexDraft draft) {
  using R = Result<std::string>;
  // What the runtime would load through it must be the JSON load, field by field.
  std::string why;
  const auto index = detail::parseShardIndex(std::make_shared<const std::string>(draft.bytes), why);
  if (!index) {
    return R::failure(makeError(codes::SHARD_INDEX, kShardIndexFile, "", "the index written does not read: " + why));
  }
  // The load through it must bind, and every kernel read from its span must be the
  // JSON load's (ukdpack-validate compares the whole set), held as digests.
  const DescriptorSet indexed = detail::loadShardWithIndex(root, *index);
  std::string difference = indexed.fromIndex ? detail::firstKernelDifference(draft.expected, indexed)
                                             : "it does not bind: " + indexed.indexReason;
  // Its members are the JSON load's (above): their tables, made again, are what it must carry.
  if (difference.empty()) difference = detail::tablesDifference(indexed, indexed);
  if (!difference.empty()) {
    return R::failure(makeError(codes::SHARD_INDEX, kShardIndexFile, "",
                                "the load through the index written differs from the JSON load: " + difference));
  }
  return R::success(std::move(draft.bytes));
}

ShardIndexCheck checkShardIndex(const fs::path& root) {
  ShardIndexCheck check;
  std::error_code ec;
  check.present = fs::exists(fs::symlink_status(root / kShardIndexFile, ec));
  if (!check.present) return check;
  LoaderOptions jsonOnly;
  jsonOnly.useIndex = false;
  const DescriptorSet json = loadShard(root, jsonOnly);
  // Every file read and checked against the index, whatever its modification time.
  const DescriptorSet indexed = detail::loadShardReadingEveryFile(root);
  check.binds = indexed.fromIndex;
  if (!check.binds) {
    check.why = indexed.indexReason;
    return check;
  }
  check.difference = detail::firstDifference(detail::describeSet(json), detail::describeSet(indexed));
  if (check.difference.empty()) check.difference = detail::tablesDifference(json, indexed);
  return check;
}

}  // namespace ukdpack
