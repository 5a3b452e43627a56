// The descriptor model: kernels (UKD) and their sources, and the three helpers
// that are the one reader of a kernel's launches (SPEC 3.3).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ukdpack/diagnostics.hpp"

namespace ukdpack {

using Json = nlohmann::json;

// "<major>.<minor>" of a descriptor type's version line.
struct Version {
  int major = 0;
  int minor = 0;

  static std::optional<Version> parse(std::string_view text);
  std::string str() const;
  friend bool operator==(const Version& a, const Version& b) {
    return a.major == b.major && a.minor == b.minor;
  }
  friend bool operator!=(const Version& a, const Version& b) { return !(a == b); }
  friend bool operator<(const Version& a, const Version& b) {
    return a.major != b.major ? a.major < b.major : a.minor < b.minor;
  }
};

// One kernel argument as the AMDGPU metadata note (or a cubin's parameter
// records) describe it; hidden arguments are never part of a signature.
struct SignatureArg {
  std::string kind;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
  std::optional<std::string> name;
};
using Signature = std::vector<SignatureArg>;

// "[global_buffer/8@0 'ws', by_value/4@8]" for log lines.
std::string describeSignature(const Signature& sig);

// One source of a kernel: the single `kernel_source` or one `sources` entry.
struct KernelSource {
  std::string kind;  // hip, hsaco, embedded_source, cuda, builder, kpack
  Json fields = Json::object();  // the entry as written, `kind` included

  // Filled when kind == "kpack" (the packed form).
  std::string library;
  std::string tocKey;
  std::string symbol;
  std::string sha256;
  Signature signature;
};

// One kernel variant (a UKD, standalone or inline in a KDP).
struct Kernel {
  std::string id;
  std::string name;
  Version version;
  Json metadata = Json::object();
  std::int64_t priority = 0;
  std::optional<std::vector<std::string>> arch;  // absent: the pack's arches

  // Single launch: `source`. Multi launch: `sources`, keyed by launch name
  // (so iteration is in sorted name order); `source` then stays default.
  // Read both only through the helpers below.
  KernelSource source;
  std::map<std::string, KernelSource> sources;

  Json provenance;  // null when absent
  std::string file;       // descriptor file it was read from
  std::string jsonPath;   // "$" standalone, "$.kernelDescriptors[<i>]" inline
  std::filesystem::path baseDir;  // folder that `library` paths are joined onto
};

// The launch names of a kernel: empty for a single-launch kernel.
std::set<std::string> launchNamesOf(const Kernel& kernel);

// The one source of a single-launch kernel, or nullptr for a multi-launch
// kernel. Points into `kernel`: valid only while it lives.
const KernelSource* singleLaunchSource(const Kernel& kernel);
const KernelSource* singleLaunchSource(const Kernel&& kernel) = delete;

// Whether every launch's source satisfies `pred`, whatever the kernel's shape.
bool allLaunchSources(const Kernel& kernel,
                      const std::function<bool(const KernelSource&)>& pred);

// "{consume, produce}" (sorted), "{}" for a single-launch kernel.
std::string describeLaunchSet(const std::set<std::string>& names);

// Where a kernel object sits, for diagnostics and `library` resolution.
struct KernelContext {
  std::string file;
  std::string jsonPath = "$";
  std::filesystem::path baseDir;
};

// Parses one UKD object strictly: every problem is appended to `diags`
// (errors name file and JSON path); returns nothing when any error was found.
std::optional<Kernel> parseKernel(const Json& ukd, const KernelContext& ctx,
                                  std::vector<Diagnostic>& diags);

// Whether a key is extension data (`x-` or `_` prefix): carried, never read.
bool isExtensionKey(std::string_view key);

// Whether a launch name has the shape [A-Za-z][A-Za-z0-9_]*.
bool isLaunchName(std::string_view name);

// JSON path helpers: "$" + ".key" (or ["key"]) + "[i]".
std::string jsonPathKey(const std::string& base, std::string_view key);
std::string jsonPathIndex(const std::string& base, std::size_t index);

}  // namespace ukdpack
