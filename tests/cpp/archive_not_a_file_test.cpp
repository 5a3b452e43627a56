// Not every file is a file: a FIFO, socket or device named like a shard's
// archive is refused at once, naming the file and what it is, by the kpack
// reader, the integrity checks, the state manager and ukdpack-validate. A
// reader that blocked on a FIFO would wait forever for a writer; a watchdog
// releases it so that such a regression fails these tests instead of hanging
// the suite.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/files.hpp"
#include "runtime_support.hpp"
#include "ukdpack/archive/kpack.hpp"
#include "ukdpack/base/sha256.hpp"
#include "ukdpack/check/validate.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/integrity.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace {

namespace fs = std::filesystem;
using ukdtest::Json;
using ukdtest::TempTree;
using Clock = std::chrono::steady_clock;

constexpr const char* kArchive = "kpack/kernels_gfx90a.kpack";
constexpr const char* kFifoFound = "expected a regular file, found a FIFO";

// After two seconds, opens the FIFO for writing whenever a reader holds it
// open (a non-blocking writer open succeeds only then) and closes it again:
// the blocked reader sees end of file and returns, and released() says so.
class FifoWatchdog {
 public:
  explicit FifoWatchdog(fs::path fifo) : fifo_(std::move(fifo)), thread_([this] { watch(); }) {}
  ~FifoWatchdog() {
    stop_ = true;
    thread_.join();
  }
  FifoWatchdog(const FifoWatchdog&) = delete;
  FifoWatchdog& operator=(const FifoWatchdog&) = delete;
  bool released() const { return released_; }

 private:
  void watch() {
    const auto start = Clock::now();
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (Clock::now() - start < std::chrono::seconds(2)) continue;
      const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) {
        released_ = true;
        ::close(fd);
      }
    }
  }
  fs::path fifo_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> released_{false};
  std::thread thread_;  // last: started once the flags above exist
};

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void makeFifo(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
  ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0) << std::strerror(errno);
}

// A listening-free AF_UNIX socket bound at `p`; the descriptor is closed, the
// socket file stays (what a crashed server leaves behind).
void makeSocket(const fs::path& p) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(p.native().size(), sizeof addr.sun_path);
  std::strncpy(addr.sun_path, p.c_str(), sizeof addr.sun_path - 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  ::close(fd);
  ASSERT_EQ(bound, 0) << std::strerror(errno);
}

// A packed gfx90a shard: kpack/kernels_gfx90a.kpack holding the real split_kv
// object, ops/split.kdp.json one kernel of it.
struct Shard {
  TempTree tree;

  Shard() {
    const auto object = ukdtest::readBytes(ukdtest::testData("data/objects/split_kv.gfx90a.hsaco"));
    tree.writeBytes(kArchive, ukdtest::makeKpack({{"split_kv_0123456789ab", "gfx90a", object}}));
    ukdtest::writeGenerics(tree);
    const Json source = {{"kind", "kpack"},
                         {"library", std::string("../") + kArchive},
                         {"toc_key", "split_kv_0123456789ab"},
                         {"symbol", "split_kv_produce"},
                         {"sha256", ukdpack::sha256Hex(object)},
                         {"signature", Json::array({{{"kind", "global_buffer"}, {"size", 8}, {"offset", 0}}})}};
    const Json kernel = {{"id", "ukd-split"},
                         {"version", "1.0"},
                         {"name", "split.f32"},
                         {"priority", 0},
                         {"metadata", {{"dtype", "FLOAT"}}},
                         {"kernel_source", source}};
    tree.write("ops/split.kdp.json", ukdtest::kdp("kdp-split", Json::array({kernel}), "udd-1", "ued-1", {"gfx90a"}));
  }
  fs::path archive() const { return tree.path(kArchive); }
};

ukdpack::Registry registry() {
  ukdpack::Registry r;
  r.addDispatch("sym_one", std::make_shared<ukdpack::DeclaredDispatchHandler>(std::vector<std::string>{}));
  r.addMatcher("eng_match", std::make_shared<ukdpack::MatchHandler>());
  return r;
}

}  // namespace

TEST(ArchiveNotAFile, ReaderRefusesAFifoAtOnce) {
  const Shard s;
  makeFifo(s.archive());
  const FifoWatchdog watchdog(s.archive());
  const auto start = Clock::now();
  auto opened = ukdpack::KpackArchive::open(s.archive());
  EXPECT_LT(secondsSince(start), 1.0);
  EXPECT_FALSE(watchdog.released()) << "the reader waited on the FIFO for a writer";
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, "KPACK_IO");
  EXPECT_EQ(opened.error().file, s.archive().string());
  EXPECT_EQ(opened.error().message, kFifoFound);
}

TEST(ArchiveNotAFile, ReaderSaysWhatItFound) {
  const TempTree t;
  makeSocket(t.path("s.kpack"));
  auto socket = ukdpack::KpackArchive::open(t.path("s.kpack"));
  ASSERT_FALSE(socket);
  EXPECT_EQ(socket.error().message, "expected a regular file, found a socket");  // not "No such device"
  auto device = ukdpack::KpackArchive::open("/dev/null");
  ASSERT_FALSE(device);
  EXPECT_EQ(device.error().message, "expected a regular file, found a character device");
  auto folder = ukdpack::KpackArchive::open(t.root());
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.error().message, "expected a regular file, found a folder");

  // The one helper behind every reader says the same, with its own code.
  auto read = ukdpack::detail::readRegularFile(t.path("s.kpack"), 1 << 20);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, "NOT_A_FILE");
  EXPECT_EQ(read.error().message, "expected a regular file, found a socket");
}

TEST(ArchiveNotAFile, ArchiveCacheRefusesAFifoAtOnce) {
  // What loadLaunchCode opens after its own stat: a FIFO swapped in between is
  // refused by the open itself.
  const Shard s;
  makeFifo(s.archive());
  const FifoWatchdog watchdog(s.archive());
  ukdpack::ArchiveCache cache;
  const auto start = Clock::now();
  auto opened = cache.open(s.archive());
  EXPECT_LT(secondsSince(start), 1.0);
  EXPECT_FALSE(watchdog.released());
  ASSERT_FALSE(opened);
  EXPECT_NE(opened.error().str().find(kFifoFound), std::string::npos) << opened.error().str();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(ArchiveNotAFile, StateManagerNamesTheFifo) {
  const Shard s;
  {
    const ukdpack::DescriptorSet loaded = ukdpack::loadShard(s.tree.root());
    ASSERT_TRUE(loaded.ok()) << ukdtest::dump(loaded.diagnostics);
    const ukdpack::StateManager before(loaded, registry(), "gfx90a");
    auto code = before.loadLaunchCode("ukd-split", std::nullopt);
    ASSERT_TRUE(code) << code.error().str();  // the shard is sound until the archive is replaced
  }
  makeFifo(s.archive());
  const FifoWatchdog watchdog(s.archive());
  const auto start = Clock::now();
  const ukdpack::StateManager sm(ukdpack::loadShard(s.tree.root()), registry(), "gfx90a");
  auto code = sm.loadLaunchCode("ukd-split", std::nullopt);
  EXPECT_LT(secondsSince(start), 1.0);
  EXPECT_FALSE(watchdog.released());
  ASSERT_FALSE(code);
  EXPECT_EQ(code.error().code, "ARCHIVE_INVALID");
  EXPECT_EQ(code.error().file, "ops/split.kdp.json");
  EXPECT_EQ(code.error().jsonPath, "$.kernelDescriptors[0].kernel_source.library");
  EXPECT_NE(code.error().message.find(kArchive), std::string::npos) << code.error().message;
  EXPECT_NE(code.error().message.find(kFifoFound), std::string::npos) << code.error().message;
}

TEST(ArchiveNotAFile, ValidateReportsTheFifo) {
  const Shard s;
  makeFifo(s.archive());
  const FifoWatchdog watchdog(s.archive());
  const auto start = Clock::now();
  const ukdpack::ValidationReport report = ukdpack::validateRoots({s.tree.root()});
  EXPECT_LT(secondsSince(start), 1.0);
  EXPECT_FALSE(watchdog.released());
  EXPECT_FALSE(report.ok);
  EXPECT_EQ(report.exitCode(), 1);
  EXPECT_EQ(report.launchesChecked, 0u);
  const ukdpack::Diagnostic* d = ukdtest::findDiag(report.diagnostics, "ARCHIVE_INVALID", kFifoFound);
  ASSERT_NE(d, nullptr) << ukdtest::dump(report.diagnostics);
  EXPECT_NE(d->message.find(kArchive), std::string::npos) << d->message;
}
