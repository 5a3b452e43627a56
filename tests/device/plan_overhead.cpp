// ukdpack_plan_overhead: the C++ side of the plan-overhead figure. Builds the
// plan of one kernel of a packed shard through the state manager with a C++
// handler, runs it N times, runs the same functions N times with raw backend
// launches + synchronize, and prints one JSON line with both medians and their
// ratio. Needs a GPU (CUDA by default); no CUDA headers, like the runtime.
//
//   ukdpack_plan_overhead --shard OUT_ROOT/sm_90 --kernel <id> --layout layout.json
//                         [--iterations 1000] [--warmup 50] [--device 0] [--backend cuda|hip]
//
// layout.json describes the launches in run order (the handler's order) and
// the buffers their parameters point at:
//   {"workspace_bytes": 4096,
//    "buffers": {"in": {"f32": [1, 2, 3]}, "out": 4096},      // {"size", "f32"|"u32"} or bytes
//    "launches": [
//      {"name": "produce", "grid": [4], "block": [256], "shared": 0,
//       "params": [{"buffer": "in"}, "workspace", {"u32": 1024}, {"f32": 2.0}]},
//      {"name": "consume", "grid": [4], "block": [256],
//       "params": ["workspace", {"buffer": "out"}, {"u32": 1024},
//                  {"struct": [{"f32": 1.0}, {"f32": 0.5}, {"u32": 3}]}]}],
//    "read": ["out"]}                                            // printed as hex after the runs
// A single-launch kernel has one launch with "name": "" (or none).
//
// With --engine ID (a slotted engine) instead of --kernel, it measures the engine's
// device slot program (default picks, or --pick SLOT=KERNEL_ID) against the same
// functions launched raw, in slot order, with one synchronize. The layout then gives
// one handler per dispatch symbol, each as above, and the buffers they share:
//   {"buffers": {...}, "handlers": {"sym_prep": {"workspace_bytes": 8192, "launches": [...]},
//                                   "sym_main": {...}}, "read": ["out"]}
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ukdpack/device/execution.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/plan/plan.hpp"
#include "ukdpack/plan/slot_plan.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/slots.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace {

using Json = nlohmann::json;
using ukdpack::Diagnostic;
using ukdpack::Result;

constexpr const char* kTool = "ukdpack_plan_overhead";

struct Failure {
  std::string message;
  int code = 1;
};

[[noreturn]] void fail(const std::string& message, int code = 1) { throw Failure{message, code}; }

std::string describe(const Diagnostic& d) { return (d.code.empty() ? std::string() : d.code + ": ") + d.str(); }

template <class T>
T take(Result<T> r) {
  if (!r) fail(describe(r.error()));
  return std::move(r).value();
}

// One parameter: the workspace pointer (known at run time) or fixed bytes.
struct Param {
  bool workspace = false;
  std::vector<std::uint8_t> bytes;
};

struct LaunchLayout {
  std::string name;
  ukdpack::LaunchGeometry geometry;
  std::vector<Param> params;
};

struct Layout {
  std::size_t workspaceBytes = 0;
  std::vector<LaunchLayout> launches;
  std::vector<std::string> read;
};

// ------------------------------------------------------------------ layout parsing

template <class T>
std::vector<std::uint8_t> bytesOf(T v) {
  std::vector<std::uint8_t> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}

// A scalar {"u32": 3}; nullopt when `j` is no scalar.
std::optional<std::vector<std::uint8_t>> scalar(const Json& j) {
  if (!j.is_object() || j.size() != 1) return std::nullopt;
  const auto& [key, v] = *j.items().begin();
  if (!v.is_number()) return std::nullopt;
  if (key == "u8") return bytesOf(v.get<std::uint8_t>());
  if (key == "u16") return bytesOf(v.get<std::uint16_t>());
  if (key == "u32") return bytesOf(v.get<std::uint32_t>());
  if (key == "i32") return bytesOf(v.get<std::int32_t>());
  if (key == "u64") return bytesOf(v.get<std::uint64_t>());
  if (key == "i64") return bytesOf(v.get<std::int64_t>());
  if (key == "f32") return bytesOf(v.get<float>());
  if (key == "f64") return bytesOf(v.get<double>());
  return std::nullopt;
}

// A struct of scalars laid out as C does: each field on its own size, the
// whole padded to its widest field.
std::vector<std::uint8_t> structOf(const Json& fields, const std::string& where) {
  if (!fields.is_array()) fail(where + ": \"struct\" is a list of scalars such as {\"f32\": 1.0}", 2);
  std::vector<std::uint8_t> out;
  std::size_t align = 1;
  for (const Json& f : fields) {
    auto bytes = scalar(f);
    if (!bytes) fail(where + ": struct field " + f.dump() + " is not a scalar ({\"u32\": 3}, {\"f32\": 1.0}, ...)", 2);
    align = std::max(align, bytes->size());
    out.resize((out.size() + bytes->size() - 1) / bytes->size() * bytes->size());
    out.insert(out.end(), bytes->begin(), bytes->end());
  }
  out.resize((out.size() + align - 1) / align * align);
  return out;
}

ukdpack::Dim3 dimOf(const Json& j, const std::string& where) {
  if (j.is_null()) return {};
  const Json list = j.is_array() ? j : Json::array({j});
  if (list.empty() || list.size() > 3) fail(where + ": expected 1 to 3 positive ints", 2);
  std::uint32_t d[3] = {1, 1, 1};
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number_unsigned() || list[i].get<std::uint64_t>() == 0) fail(where + ": expected positive ints", 2);
    d[i] = list[i].get<std::uint32_t>();
  }
  return {d[0], d[1], d[2]};
}

struct Buffers {
  std::map<std::string, ukdpack::DeviceBuffer> byName;
};

Buffers makeBuffers(const Json& spec, const std::shared_ptr<ukdpack::DeviceBackend>& backend) {
  Buffers out;
  if (spec.is_null()) return out;
  if (!spec.is_object()) fail("layout: \"buffers\" is {name: bytes | {\"size\", \"f32\" | \"u32\"}}", 2);
  for (const auto& [name, b] : spec.items()) {
    std::vector<std::uint8_t> init;
    std::size_t size = 0;
    if (b.is_number_unsigned()) {
      size = b.get<std::size_t>();
    } else if (b.is_object()) {
      for (const char* kind : {"f32", "u32"}) {
        if (!b.contains(kind)) continue;
        for (const Json& v : b[kind]) {
          const auto bytes = scalar(Json{{kind, v}});
          if (!bytes) fail("layout: buffer '" + name + "': " + v.dump() + " is not a number", 2);
          init.insert(init.end(), bytes->begin(), bytes->end());
        }
      }
      size = b.value("size", init.size());
    }
    if (size == 0 || init.size() > size) fail("layout: buffer '" + name + "' needs a size of at least its contents", 2);
    ukdpack::DeviceBuffer buffer = take(ukdpack::DeviceBuffer::allocate(backend, size));
    take(buffer.zero());
    if (!init.empty()) take(buffer.upload(init.data(), init.size()));
    out.byName.emplace(name, std::move(buffer));
  }
  return out;
}

Layout parseLayout(const Json& doc, const Buffers& buffers) {
  Layout out;
  out.workspaceBytes = doc.value("workspace_bytes", std::size_t{0});
  if (!doc.contains("launches") || !doc["launches"].is_array() || doc["launches"].empty()) {
    fail("layout: \"launches\" is a non-empty list, in run order", 2);
  }
  for (const Json& l : doc["launches"]) {
    LaunchLayout launch;
    launch.name = l.contains("name") && l["name"].is_string() ? l["name"].get<std::string>() : "";
    const std::string where = "layout: launch '" + launch.name + "'";
    launch.geometry.grid = dimOf(l.value("grid", Json()), where + " grid");
    launch.geometry.block = dimOf(l.value("block", Json()), where + " block");
    launch.geometry.sharedBytes = l.value("shared", 0u);
    std::size_t i = 0;
    for (const Json& p : l.value("params", Json::array())) {
      const std::string at = where + " params[" + std::to_string(i++) + "]";
      Param param;
      if (p == "workspace") {
        param.workspace = true;
      } else if (p.is_object() && p.contains("buffer")) {
        const auto it = buffers.byName.find(p["buffer"].get<std::string>());
        if (it == buffers.byName.end()) fail(at + ": no buffer named " + p["buffer"].dump(), 2);
        param.bytes = bytesOf(it->second.ptr());
      } else if (p.is_object() && p.contains("struct")) {
        param.bytes = structOf(p["struct"], at);
      } else if (auto bytes = scalar(p)) {
        param.bytes = std::move(*bytes);
      } else {
        fail(at + ": " + p.dump() +
                 " is none of \"workspace\", {\"buffer\": name}, {\"struct\": [...]}, "
                 "{\"u32\"|\"i32\"|\"u64\"|\"i64\"|\"f32\"|\"f64\": value}",
             2);
      }
      launch.params.push_back(std::move(param));
    }
    out.launches.push_back(std::move(launch));
  }
  for (const Json& r : doc.value("read", Json::array())) out.read.push_back(r.get<std::string>());
  return out;
}

void fillArgs(const LaunchLayout& l, ukdpack::DevicePtr workspace, ukdpack::KernelArgs& args) {
  for (const Param& p : l.params) {
    if (p.workspace) {
      args.addPointer(workspace);
    } else {
      args.add(p.bytes.data(), p.bytes.size());
    }
  }
}

// The figure's C++ handler: launches as the layout says, in its order, the
// arguments built per launch as a real handler builds them.
class LayoutHandler : public ukdpack::DispatchHandler {
 public:
  explicit LayoutHandler(const Layout& layout) : layout_(layout) {
    for (const LaunchLayout& l : layout_.launches) {
      if (!l.name.empty()) names_.push_back(l.name);
      byName_[l.name] = &l;
    }
  }
  std::vector<std::string> launchNames() const override { return names_; }
  std::size_t workspaceSize(const ukdpack::Kernel&) const override { return layout_.workspaceBytes; }
  Result<bool> prepareLaunch(const ukdpack::LaunchContext& c, ukdpack::LaunchArgs& out) const override {
    const auto it = byName_.find(std::string(c.launch));
    if (it == byName_.end()) {
      return Result<bool>::failure(ukdpack::makeError("LAYOUT", "", "", "the layout has no launch of this name"));
    }
    out.geometry = it->second->geometry;
    fillArgs(*it->second, c.workspace, out.args);
    return Result<bool>::success(true);
  }

 private:
  const Layout& layout_;
  std::vector<std::string> names_;
  std::map<std::string, const LaunchLayout*> byName_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

std::string hex(const std::vector<std::uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

struct Options {
  std::string shard, kernel, engine, layout, backend = "cuda";
  std::map<std::string, std::string> picks;  // slot -> kernel id (--pick)
  int iterations = 1000, warmup = 50, device = 0;
};

const char* kUsage =
    "usage: ukdpack_plan_overhead --shard DIR (--kernel ID | --engine ID [--pick SLOT=ID]...) --layout FILE.json "
    "[--iterations N] [--warmup N] [--device N] [--backend cuda|hip]";

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage << "\n";
      std::exit(0);
    }
    if (i + 1 >= argc) fail(std::string(kUsage) + "\n" + a + " needs a value", 2);
    const std::string v = argv[++i];
    auto number = [&](int& slot) {
      try {
        slot = std::stoi(v);
      } catch (const std::exception&) {
        fail(a + " takes a number, found '" + v + "'", 2);
      }
    };
    if (a == "--shard") {
      o.shard = v;
    } else if (a == "--kernel") {
      o.kernel = v;
    } else if (a == "--engine") {
      o.engine = v;
    } else if (a == "--pick") {
      const std::size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
        fail("--pick takes SLOT=KERNEL_ID, found '" + v + "'", 2);
      o.picks[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--layout") {
      o.layout = v;
    } else if (a == "--backend") {
      o.backend = v;
    } else if (a == "--iterations") {
      number(o.iterations);
    } else if (a == "--warmup") {
      number(o.warmup);
    } else if (a == "--device") {
      number(o.device);
    } else {
      fail(std::string(kUsage) + "\nunknown option " + a, 2);
    }
  }
  if (o.shard.empty() || o.kernel.empty() == o.engine.empty() || o.layout.empty())
    fail(std::string(kUsage) + "\n--shard, --layout and one of --kernel and --engine are required", 2);
  if (!o.picks.empty() && o.engine.empty()) fail("--pick needs --engine", 2);
  if (o.iterations < 1 || o.warmup < 0) fail("--iterations must be at least 1 and --warmup not negative", 2);
  if (o.backend != "cuda" && o.backend != "hip") fail("--backend is cuda or hip, found '" + o.backend + "'", 2);
  return o;
}

using Clock = std::chrono::steady_clock;

// Medians of `planned` and `raw`, run alternately (so drift in clocks or load falls
// on both alike) after `warmup` rounds of each.
Json measure(const Options& o, const std::function<void()>& planned, const std::function<void()>& raw) {
  auto timed = [](const std::function<void()>& f) {
    const auto t0 = Clock::now();
    f();
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  for (int i = 0; i < o.warmup; ++i) {
    planned();
    raw();
  }
  std::vector<double> planUs, rawUs;
  for (int i = 0; i < o.iterations; ++i) {
    planUs.push_back(timed(planned));
    rawUs.push_back(timed(raw));
  }
  const double planMedian = median(planUs);
  const double rawMedian = median(rawUs);
  return {{"iterations", o.iterations},
          {"warmup", o.warmup},
          {"plan_median_us", planMedian},
          {"raw_median_us", rawMedian},
          {"ratio", rawMedian > 0 ? planMedian / rawMedian : 0.0},
          {"plan_p90_us", percentile(planUs, 0.9)},
          {"raw_p90_us", percentile(rawUs, 0.9)}};
}

Json outputsOf(const std::vector<std::string>& read, const Buffers& buffers) {
  Json outputs = Json::object();
  for (const std::string& name : read) {
    const auto it = buffers.byName.find(name);
    if (it == buffers.byName.end()) fail("layout: \"read\" names no buffer '" + name + "'", 2);
    std::vector<std::uint8_t> bytes(it->second.size());
    take(it->second.download(bytes.data(), bytes.size()));
    outputs[name] = hex(bytes);
  }
  return outputs;
}

ukdpack::DescriptorSet loadOrFail(const std::string& shard) {
  ukdpack::DescriptorSet set = ukdpack::loadShard(shard);
  if (!set.ok()) {
    std::string all;
    for (const Diagnostic& d : set.diagnostics)
      if (d.severity == ukdpack::Severity::Error) all += "\n  " + describe(d);
    fail("the shard " + shard + " does not load:" + all);
  }
  return set;
}

// The raw launches of one plan: its functions with the layout's arguments over `workspace`.
struct RawLaunch {
  ukdpack::FunctionHandle function;
  const LaunchLayout* layout = nullptr;
  ukdpack::KernelArgs args;
};

void addRawLaunches(const ukdpack::DevicePlan& plan, const Layout& layout, ukdpack::DevicePtr workspace,
                    std::vector<RawLaunch>& out) {
  for (const ukdpack::PlanLaunch& launch : plan.launches()) {
    const auto it = std::find_if(layout.launches.begin(), layout.launches.end(),
                                 [&](const LaunchLayout& l) { return l.name == launch.name; });
    if (it == layout.launches.end())
      fail("layout: no launch '" + launch.name + "' for " + plan.definition().kernel()->name, 2);
    RawLaunch raw{launch.function, &*it, {}};
    fillArgs(*it, workspace, raw.args);
    out.push_back(std::move(raw));
  }
}

void launchRaw(const std::shared_ptr<ukdpack::DeviceBackend>& backend, const std::vector<RawLaunch>& launches) {
  for (const RawLaunch& l : launches) take(backend->launch(l.function, l.layout->geometry, l.args));
  take(backend->synchronize());
}

int runKernel(const Options& o, const std::shared_ptr<ukdpack::DeviceBackend>& backend, const Json& doc) {
  Buffers buffers = makeBuffers(doc.value("buffers", Json()), backend);
  const Layout layout = parseLayout(doc, buffers);
  ukdpack::DescriptorSet set = loadOrFail(o.shard);
  const ukdpack::Pack* pack = nullptr;
  if (set.findKernel(o.kernel, &pack) == nullptr) fail("the shard " + o.shard + " has no kernel '" + o.kernel + "'");
  const ukdpack::Dispatch* dispatch = set.dispatchOf(*pack);
  if (dispatch == nullptr) fail("kernel '" + o.kernel + "' has no dispatch: nothing native launches it");

  ukdpack::Registry registry;
  take(registry.addDispatch(dispatch->dispatchSymbol, std::make_shared<LayoutHandler>(layout)));
  const auto matcher = std::make_shared<ukdpack::MatchHandler>();
  for (const ukdpack::MatcherDescriptor& m : set.matchers) registry.addMatcher(m.matchSymbol, matcher);
  const ukdpack::StateManager manager(std::move(set), registry, backend->arch());
  ukdpack::DevicePlan plan = take(ukdpack::DevicePlan::create(manager, o.kernel, backend));

  // One workspace for both measurements, so they differ only in how they launch.
  ukdpack::DeviceBuffer workspace = take(ukdpack::DeviceBuffer::allocate(backend, plan.workspaceSize()));
  std::vector<RawLaunch> raw;
  addRawLaunches(plan, layout, workspace.ptr(), raw);
  Json line = {{"kernel_id", plan.definition().kernel()->id},
               {"kernel", plan.definition().kernel()->name},
               {"backend", backend->name()},
               {"arch", backend->arch()},
               {"device", backend->device()},
               {"launches", plan.launchNames()},
               {"modules", plan.moduleCount()},
               {"workspace_bytes", plan.workspaceSize()}};
  line.update(measure(
      o, [&] { take(plan.run(workspace.ptr(), workspace.size(), nullptr)); }, [&] { launchRaw(backend, raw); }));
  line["outputs"] = outputsOf(layout.read, buffers);
  std::cout << line.dump() << std::endl;
  return 0;
}

int runEngine(const Options& o, const std::shared_ptr<ukdpack::DeviceBackend>& backend, const Json& doc) {
  Buffers buffers = makeBuffers(doc.value("buffers", Json()), backend);
  if (!doc.contains("handlers") || !doc["handlers"].is_object() || doc["handlers"].empty())
    fail("layout: --engine needs \"handlers\": {dispatch symbol: {\"workspace_bytes\", \"launches\"}}", 2);
  std::map<std::string, Layout> layouts;
  for (const auto& [symbol, handler] : doc["handlers"].items()) layouts.emplace(symbol, parseLayout(handler, buffers));
  std::vector<std::string> read;
  for (const Json& r : doc.value("read", Json::array())) read.push_back(r.get<std::string>());

  ukdpack::DescriptorSet set = loadOrFail(o.shard);
  ukdpack::Registry registry;
  for (const auto& [symbol, layout] : layouts)
    take(registry.addDispatch(symbol, std::make_shared<LayoutHandler>(layout)));
  const auto matcher = std::make_shared<ukdpack::MatchHandler>();
  for (const ukdpack::MatcherDescriptor& m : set.matchers) registry.addMatcher(m.matchSymbol, matcher);
  const ukdpack::StateManager manager(std::move(set), registry, backend->arch());
  const ukdpack::SlotProgram program = take(ukdpack::makeSlotProgram(manager, o.engine, Json::object(), o.picks));
  ukdpack::DeviceSlotProgram device = take(ukdpack::DeviceSlotProgram::create(manager, program, backend));

  ukdpack::DeviceBuffer workspace = take(ukdpack::DeviceBuffer::allocate(backend, device.workspaceSize()));
  std::vector<RawLaunch> raw;
  Json slots = Json::array();
  for (std::size_t i = 0; i < device.plans().size(); ++i) {
    const ukdpack::DevicePlan& plan = device.plans()[i];
    const auto layout = layouts.find(plan.definition().dispatchSymbol());
    if (layout == layouts.end())
      fail("layout: no handler for dispatch symbol '" + plan.definition().dispatchSymbol() + "'", 2);
    addRawLaunches(plan, layout->second, workspace.ptr(), raw);
    slots.push_back({{"slot", device.slots()[i]},
                     {"kernel_id", plan.definition().kernel()->id},
                     {"kernel", plan.definition().kernel()->name},
                     {"launches", plan.launchNames()},
                     {"modules", plan.moduleCount()}});
  }
  Json line = {{"engine_id", device.engine().id}, {"engine", device.engine().name},
               {"backend", backend->name()},      {"arch", backend->arch()},
               {"device", backend->device()},     {"slots", slots},
               {"launch_count", raw.size()},      {"workspace_bytes", device.workspaceSize()}};
  line.update(measure(
      o, [&] { take(device.run(workspace.ptr(), workspace.size(), nullptr)); }, [&] { launchRaw(backend, raw); }));
  line["outputs"] = outputsOf(read, buffers);
  std::cout << line.dump() << std::endl;
  return 0;
}

int run(const Options& o) {
  // The device first: without one nothing else can be measured.
  auto opened = o.backend == "cuda" ? ukdpack::openCudaBackend(o.device) : ukdpack::openHipBackend(o.device);
  if (!opened) fail("no " + o.backend + " device to measure on: " + describe(opened.error()));
  const std::shared_ptr<ukdpack::DeviceBackend> backend = std::move(opened).value();

  std::ifstream in(o.layout);
  if (!in) fail("cannot read the layout " + o.layout, 2);
  const Json doc = Json::parse(in, nullptr, false, true);
  if (doc.is_discarded() || !doc.is_object()) fail("the layout " + o.layout + " is not a JSON object", 2);
  return o.engine.empty() ? runKernel(o, backend, doc) : runEngine(o, backend, doc);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parseOptions(argc, argv));
  } catch (const Failure& f) {
    std::cerr << kTool << ": error: " << f.message << "\n";
    return f.code;
  } catch (const std::exception& e) {  // nlohmann's type errors on a malformed layout
    std::cerr << kTool << ": error: " << e.what() << "\n";
    return 2;
  }
}
