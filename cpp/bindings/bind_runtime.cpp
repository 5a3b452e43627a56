// The loader, state manager, integrity checks, selector revision, plan capture
// and validator, reached from Python: the packer's runtime check
// runs this code, not a copy of it. Also the state manager's selection and
// device plans, with dispatch handlers and matchers given from Python.
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bind_device.hpp"
#include "modules.hpp"
#include "pyjson.hpp"
#include "ukdpack/base/build_info.hpp"
#include "ukdpack/base/sha256.hpp"
#include "ukdpack/check/validate.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/load/revision.hpp"
#include "ukdpack/load/shard_index.hpp"
#include "ukdpack/plan/plan.hpp"
#include "ukdpack/plan/slot_plan.hpp"
#include "ukdpack/rules/set_rules.hpp"
#include "ukdpack/select/integrity.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/slots.hpp"
#include "ukdpack/select/state_manager.hpp"
#include "views.hpp"

namespace ukdpack::bindings {

namespace {

// ukdpack._runtime.RuntimeCheckError(ValueError): set when the module loads.
PyObject* gRuntimeCheckError = nullptr;

// Raises RuntimeCheckError("<CODE>: <file>: <path>: <message>") with .code
// and .diagnostic set, so callers can both print and branch on it.
[[noreturn]] void raise(const Diagnostic& d) {
  const std::string text = utf8Text((d.code.empty() ? std::string() : d.code + ": ") + d.str());
  py::object type = py::reinterpret_borrow<py::object>(gRuntimeCheckError);
  py::object err = type(text);
  err.attr("code") = d.code;
  err.attr("diagnostic") = diagnosticDict(d);
  PyErr_SetObject(gRuntimeCheckError, err.ptr());
  throw py::error_already_set();
}

template <class T>
T valueOrRaise(Result<T> r) {
  if (!r) raise(r.error());
  return std::move(r).value();
}

py::object optionalList(const std::optional<std::vector<std::string>>& v) {
  if (!v) return py::none();
  return py::cast(*v);
}

// lean: only what the packer's models read (DescriptorSet.model_packs), the derived
// views left out.
py::dict kernelDict(const std::shared_ptr<const DescriptorSet>& owner, const Pack& pack, const PackMember& m,
                    bool lean = false) {
  const DescriptorSet& set = *owner;
  const Kernel& k = m.kernel();
  py::dict out;
  out["id"] = k.id;
  out["name"] = k.name;
  out["version"] = k.version.str();
  out["priority"] = k.priority;
  out["arch"] = optionalList(k.arch);
  if (!lean) {
    out["arches"] = kernelArches(pack, k);  // its own, else its pack's; [] = every arch
    out["launches"] = sortedLaunches(k);
    out["packed"] = isPacked(k);
    out["kinds"] = kindsOf(k);
  }
  out["metadata"] = fromJson(k.metadata);
  if (!lean) out["completed_metadata"] = fromJson(m.completedMetadata());
  out["file"] = k.file;
  out["path"] = k.jsonPath;
  if (!lean) {
    out["base_dir"] = k.baseDir.string();
    out["root"] = set.rootOf(m).string();
  }
  out["ref"] = m.ref().empty() ? py::object(py::none()) : py::object(py::str(m.ref()));
  out["ref_path"] = jsonPathIndex("$.kernelDescriptors", m.index);  // where the KDP holds it
  out["view"] = kernelView(owner, k);                               // its launches, through the launch helpers
  const JsonText raw = m.raw();
  // lean: a Document, read by the packer only for the packs it makes
  out["raw"] = lean ? documentOf(raw) : fromJson(raw.json());
  if (lean) {
    // The sha256 of the bytes `raw` was read from (None for a value built otherwise): the
    // packer keys a pack's files by it rather than hashing `raw` again in Python.
    const std::string_view text = raw.text();
    out["raw_sha256"] =
        text.empty() ? py::object(py::none()) : py::object(py::str(sha256Hex(text.data(), text.size())));
  }
  return out;
}

py::dict packDict(const std::shared_ptr<const DescriptorSet>& owner, const Pack& p, bool lean = false) {
  const DescriptorSet& set = *owner;
  py::dict out;
  out["id"] = p.id;
  out["name"] = p.name;
  out["version"] = p.version.str();
  out["file"] = p.file;
  if (!lean) out["root"] = set.rootOf(p).string();
  out["arch"] = p.arch;
  out["matchers"] = p.matchers;
  out["engine"] = p.engine ? py::object(py::str(*p.engine)) : py::object(py::none());
  out["dispatch"] = p.dispatch ? py::object(py::str(*p.dispatch)) : py::object(py::none());
  out["slot"] = slotOrNone(p.slot);
  if (!lean) {
    const Engine* engine = set.engineOf(p);
    out["engine_name"] = engine ? py::object(py::str(engine->name)) : py::object(py::none());
    const Dispatch* dispatch = set.dispatchOf(p);
    out["dispatch_symbol"] = dispatch ? py::object(py::str(dispatch->dispatchSymbol)) : py::object(py::none());
  }
  py::list kernels;
  for (const PackMember& m : p.members) kernels.append(kernelDict(owner, p, m, lean));
  out["kernels"] = kernels;
  out["raw"] = fromJson(p.raw);  // the KDP as written without kernelDescriptors
  return out;
}

template <class T>
py::dict infoDict(const DescriptorSet& set, const T& d) {
  py::dict out;
  out["id"] = d.id;
  out["name"] = d.name;
  out["version"] = d.version.str();
  out["file"] = d.file;
  out["root"] = set.rootOf(d).string();
  out["raw"] = fromJson(d.raw);
  return out;
}

// Python's view of a loaded set: the C++ set, shared with state managers.
struct PySet {
  std::shared_ptr<const DescriptorSet> set;
};

LoaderOptions loaderOptions(const std::optional<std::string>& maxUkd, const std::optional<py::dict>& maxVersions,
                            const std::vector<std::string>& excludeFolders,
                            std::uint64_t maxDecompressedBytes = kDefaultMaxDecompressedBytes) {
  LoaderOptions options;
  options.maxDecompressedBytes = maxDecompressedBytes;
  auto version = [](const std::string& text, const std::string& what) {
    const auto v = Version::parse(text);
    if (!v) throw py::value_error(what + ": expected a version '<major>.<minor>', found '" + text + "'");
    return *v;
  };
  if (maxVersions) {
    for (const auto& item : *maxVersions) {
      const std::string type = item.first.cast<std::string>();
      const Version v = version(item.second.cast<std::string>(), "max_versions['" + type + "']");
      Version* slot = nullptr;
      VersionLimits& l = options.maxVersions;
      if (type == "kdp") slot = &l.kdp;
      if (type == "ukd") slot = &l.ukd;
      if (type == "udd") slot = &l.udd;
      if (type == "ued") slot = &l.ued;
      if (type == "kmd") slot = &l.kmd;
      if (type == "umd") slot = &l.umd;
      if (type == "uhd") slot = &l.uhd;
      if (slot == nullptr) {
        throw py::value_error("max_versions: unknown descriptor type '" + type +
                              "'; expected one of ukd, kdp, udd, ued, kmd, umd, uhd");
      }
      *slot = v;
    }
  }
  if (maxUkd) options.maxVersions.ukd = version(*maxUkd, "max_ukd_version");
  options.excludeFolders = excludeFolders;
  return options;
}

Signature signatureFrom(const py::handle& obj, const std::string& where) {
  const Json j = toJson(obj);
  if (!j.is_array()) throw py::value_error(where + ": expected a list of {kind, size, offset, name?} dicts");
  Signature sig;
  for (const Json& a : j) {
    auto count = [&](const char* key) {
      return a.contains(key) && a[key].is_number_integer() && a[key].get<std::int64_t>() >= 0;
    };
    if (!a.is_object() || !a.contains("kind") || !a["kind"].is_string() || !count("size")) {
      throw py::value_error(where + ": each argument is {kind: str, size: int, offset: int, name?: str}, found " +
                            a.dump());
    }
    SignatureArg arg;
    arg.kind = a["kind"].get<std::string>();
    arg.size = static_cast<std::uint64_t>(a["size"].get<std::int64_t>());
    if (count("offset")) arg.offset = static_cast<std::uint64_t>(a["offset"].get<std::int64_t>());
    if (a.contains("name") && a["name"].is_string()) arg.name = a["name"].get<std::string>();
    sig.push_back(std::move(arg));
  }
  return sig;
}

// Python callbacks see kernels as the dicts DescriptorSet.kernel() gives. The
// state manager's own copy of the set exists only once it is built, so the
// views are shared with the handlers and pointed at it afterwards.
struct PyKernelViews {
  std::shared_ptr<const DescriptorSet> set;
  std::map<const Kernel*, py::object> dicts;
  py::handle problem;  // the object select() was given, while it runs

  ~PyKernelViews() {
    py::gil_scoped_acquire gil;
    dicts.clear();
  }
  py::object dict(const Kernel& k) {
    if (const auto it = dicts.find(&k); it != dicts.end()) return it->second;
    py::object out;
    if (set != nullptr) {
      for (const Pack& p : set->packs) {
        for (const PackMember& m : p.members)
          if (&m.kernel() == &k) out = kernelDict(set, p, m);
      }
    }
    if (!out) {
      py::dict bare;
      bare["id"] = k.id;
      bare["name"] = k.name;
      out = bare;
    }
    dicts.emplace(&k, out);
    return out;
  }
};

std::string exceptionText(const py::error_already_set& e) {
  return std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(e.value()));
}

std::uint32_t dimension(const py::handle& v, const char* what) {
  if (!py::isinstance<py::int_>(v)) {
    throw py::type_error(std::string(what) + " must be ints, found " + std::string(py::str(py::type::of(v))));
  }
  const auto n = v.cast<std::int64_t>();
  if (n < 0 || n > 0xffffffffll)
    throw py::value_error(std::string(what) + " " + std::to_string(n) + " is out of range");
  return static_cast<std::uint32_t>(n);
}

Dim3 dim3From(const py::handle& v, const char* what) {
  if (py::isinstance<py::int_>(v)) return Dim3{dimension(v, what), 1, 1};
  if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v)) {
    throw py::type_error(std::string(what) + " must be an int or a tuple of 1 to 3 ints");
  }
  const auto seq = py::reinterpret_borrow<py::sequence>(v);
  if (seq.size() < 1 || seq.size() > 3) throw py::type_error(std::string(what) + " must hold 1 to 3 ints");
  std::uint32_t d[3] = {1, 1, 1};
  for (std::size_t i = 0; i < seq.size(); ++i) d[i] = dimension(seq[i], what);
  return Dim3{d[0], d[1], d[2]};
}

// launch()'s answer: (grid, block, shared, params), each param bytes-like
// (its raw bytes) or a DeviceBuffer (its 8-byte device address).
void launchFrom(const py::handle& got, LaunchArgs& out) {
  if (!py::isinstance<py::sequence>(got) || py::isinstance<py::str>(got) || py::len(got) != 4) {
    throw py::type_error("launch() must return (grid, block, shared, params), found " +
                         std::string(py::str(py::type::of(got))));
  }
  const auto t = py::reinterpret_borrow<py::sequence>(got);
  out.geometry.grid = dim3From(t[0], "grid");
  out.geometry.block = dim3From(t[1], "block");
  out.geometry.sharedBytes = dimension(t[2], "shared");
  const py::object params = t[3];
  if (!py::isinstance<py::sequence>(params) || py::isinstance<py::str>(params) || py::isinstance<py::bytes>(params)) {
    throw py::type_error("launch()'s params must be a list of bytes or DeviceBuffer");
  }
  std::size_t i = 0;
  for (const auto& p : params) {
    if (py::isinstance<PyBuffer>(p)) {
      out.args.addPointer(p.cast<const PyBuffer&>().buffer->ptr());
    } else if (PyObject_CheckBuffer(p.ptr()) != 0) {
      Py_buffer view;
      if (PyObject_GetBuffer(p.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
      out.args.add(view.buf, static_cast<std::size_t>(view.len));
      PyBuffer_Release(&view);
    } else {
      throw py::type_error("launch()'s params[" + std::to_string(i) + "] is " + std::string(py::str(py::type::of(p))) +
                           "; expected bytes or a DeviceBuffer");
    }
    ++i;
  }
}

// A handler given from Python as an object: launch_names() read once, when
// the state manager is built; expected_signature(launch) asked at each load;
// workspace_size(kernel) and launch(launch, workspace, args) by device plans.
class PyDispatchHandler : public DispatchHandler {
 public:
  PyDispatchHandler(py::object obj, std::vector<std::string> launches, std::shared_ptr<PyKernelViews> views)
      : obj_(std::move(obj)), launches_(std::move(launches)), views_(std::move(views)) {}
  ~PyDispatchHandler() override {
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }
  std::vector<std::string> launchNames() const override { return launches_; }
  std::optional<Signature> expectedSignature(const std::string& launch) const override {
    py::gil_scoped_acquire gil;
    if (!py::hasattr(obj_, "expected_signature")) return std::nullopt;
    py::object got = obj_.attr("expected_signature")(launch.empty() ? py::object(py::none()) : py::str(launch));
    if (got.is_none()) return std::nullopt;
    return signatureFrom(got, "expected_signature(" + (launch.empty() ? std::string("None") : launch) + ")");
  }
  // A Python exception here reaches the caller as it is: the size has no result to carry it.
  std::size_t workspaceSize(const Kernel& kernel) const override {
    py::gil_scoped_acquire gil;
    if (!py::hasattr(obj_, "workspace_size")) return 0;
    return obj_.attr("workspace_size")(views_->dict(kernel)).cast<std::size_t>();
  }
  Result<bool> prepareLaunch(const LaunchContext& context, LaunchArgs& out) const override {
    py::gil_scoped_acquire gil;
    const auto* run = static_cast<const PyRunArgs*>(context.arguments);
    if (run == nullptr || run->tag != PyRunArgs::kTag) {
      return Result<bool>::failure(makeError(codes::NOT_EXECUTABLE, "", "",
                                             "a dispatch handler given from Python runs only in plans run from "
                                             "Python (Plan.run)"));
    }
    if (!py::hasattr(obj_, "launch")) {
      return Result<bool>::failure(
          makeError(codes::NOT_EXECUTABLE, "", "", "the handler object has no launch(launch, workspace, args) method"));
    }
    try {
      const py::object name =
          context.launch.empty() ? py::object(py::none()) : py::object(py::str(std::string(context.launch)));
      launchFrom(obj_.attr("launch")(name, run->workspace, run->args), out);
    } catch (py::error_already_set& e) {
      run->error = e.value();
      return Result<bool>::failure(makeError(codes::HANDLER_FAILED, "", "", "launch() raised " + exceptionText(e)));
    } catch (const py::builtin_exception& e) {  // what launchFrom() refuses in the answer
      return Result<bool>::failure(
          makeError(codes::HANDLER_FAILED, "", "", std::string("launch() answered badly: ") + e.what()));
    }
    return Result<bool>::success(true);
  }

 private:
  py::object obj_;
  std::vector<std::string> launches_;
  std::shared_ptr<PyKernelViews> views_;
};

// A matcher given from Python: fn(kernel_dict, problem) -> bool.
class PyMatchHandler : public MatchHandler {
 public:
  PyMatchHandler(py::object fn, std::shared_ptr<PyKernelViews> views) : fn_(std::move(fn)), views_(std::move(views)) {}
  ~PyMatchHandler() override {
    py::gil_scoped_acquire gil;
    fn_ = py::object();
  }
  Result<bool> matches(const Kernel& kernel, const Json& problem) const override {
    py::gil_scoped_acquire gil;
    try {
      // The very object select() was given, when there is one: tuples and the like stay as they are.
      const py::object p = views_->problem ? py::reinterpret_borrow<py::object>(views_->problem) : fromJson(problem);
      const py::object verdict = fn_(views_->dict(kernel), p);
      const int truth = PyObject_IsTrue(verdict.ptr());
      if (truth < 0) throw py::error_already_set();
      return Result<bool>::success(truth == 1);
    } catch (py::error_already_set& e) {
      error = e.value();
      return Result<bool>::failure(makeError(codes::MATCHER_FAILED, "", "", "it raised " + exceptionText(e)));
    }
  }
  mutable py::object error;  // the exception it raised last, for __cause__

 private:
  py::object fn_;
  std::shared_ptr<PyKernelViews> views_;
};

// A heuristic given from Python: a callable ranker fn(kernels, problem) ->
// indices best first, or an object with rank(kernels, problem) and/or
// applicable(kernel, problem) -> bool; what it leaves out keeps the base's answer.
class PyHeuristicHandler : public HeuristicHandler {
 public:
  PyHeuristicHandler(py::object obj, std::shared_ptr<PyKernelViews> views)
      : obj_(std::move(obj)), views_(std::move(views)) {}
  ~PyHeuristicHandler() override {
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }
  Result<std::vector<std::size_t>> rank(const std::vector<const Kernel*>& kernels, const Json& problem) const override {
    using R = Result<std::vector<std::size_t>>;
    py::gil_scoped_acquire gil;
    const bool method = py::hasattr(obj_, "rank");
    if (!method && !PyCallable_Check(obj_.ptr())) return HeuristicHandler::rank(kernels, problem);
    try {
      py::list views;
      for (const Kernel* k : kernels) views.append(views_->dict(*k));
      const py::object got = (method ? obj_.attr("rank") : obj_)(views, problemOf(problem));
      std::vector<std::size_t> out;
      for (const auto& item : got) {
        if (!py::isinstance<py::int_>(item) || item.cast<std::int64_t>() < 0) {
          return R::failure(makeError(codes::HEURISTIC_FAILED, "", "",
                                      "it answered " + std::string(py::repr(got)) +
                                          "; expected indices (non-negative ints) into the kernels it was given"));
        }
        out.push_back(item.cast<std::size_t>());
      }
      return R::success(std::move(out));
    } catch (py::error_already_set& e) {
      error = e.value();
      return R::failure(makeError(codes::HEURISTIC_FAILED, "", "", "it raised " + exceptionText(e)));
    }
  }
  Result<bool> applicable(const Kernel& kernel, const Json& problem) const override {
    py::gil_scoped_acquire gil;
    if (!py::hasattr(obj_, "applicable")) return Result<bool>::success(true);
    try {
      const py::object verdict = obj_.attr("applicable")(views_->dict(kernel), problemOf(problem));
      const int truth = PyObject_IsTrue(verdict.ptr());
      if (truth < 0) throw py::error_already_set();
      return Result<bool>::success(truth == 1);
    } catch (py::error_already_set& e) {
      error = e.value();
      return Result<bool>::failure(makeError(codes::HEURISTIC_FAILED, "", "", "it raised " + exceptionText(e)));
    }
  }
  mutable py::object error;  // the exception it raised last, for __cause__

 private:
  // The very object the caller gave, when there is one (as a Python matcher gets it).
  py::object problemOf(const Json& problem) const {
    return views_->problem ? py::reinterpret_borrow<py::object>(views_->problem) : fromJson(problem);
  }
  py::object obj_;
  std::shared_ptr<PyKernelViews> views_;
};

std::vector<std::string> launchNamesFrom(const py::handle& value, const std::string& symbol) {
  std::vector<std::string> names;
  for (const auto& item : value) {
    if (!py::isinstance<py::str>(item)) {
      throw py::value_error("handlers['" + symbol + "']: expected launch names (str), found " +
                            std::string(py::str(py::type::of(item))));
    }
    const std::string name = item.cast<std::string>();
    if (!isLaunchName(name)) {
      throw py::value_error("handlers['" + symbol +
                            "']: expected a launch name matching [A-Za-z][A-Za-z0-9_]*, found '" + name + "'");
    }
    names.push_back(name);
  }
  return names;
}

std::shared_ptr<const DispatchHandler> handlerFrom(const std::string& symbol, const py::handle& value,
                                                   const std::shared_ptr<PyKernelViews>& views) {
  if (py::hasattr(value, "launch_names")) {
    py::object names = value.attr("launch_names")();
    return std::make_shared<PyDispatchHandler>(py::reinterpret_borrow<py::object>(value),
                                               launchNamesFrom(names, symbol), views);
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    return std::make_shared<DeclaredDispatchHandler>(launchNamesFrom(value, symbol));
  }
  throw py::value_error("handlers['" + symbol + "']: expected a list of launch names or an object with launch_names()");
}

// Python's state manager: the C++ one, built over the loaded set (shared, not
// copied), and the Python matchers, whose exceptions select() raises as the cause.
struct PyStateManager {
  std::shared_ptr<PyKernelViews> views;
  std::vector<std::shared_ptr<const PyMatchHandler>> matchers;
  std::vector<std::shared_ptr<const PyHeuristicHandler>> heuristics;
  std::unique_ptr<StateManager> manager;
};

// The problem Python callbacks see while one call runs: the object the caller
// gave, whatever JSON makes of it; the Python errors of the last call cleared.
struct ProblemStash {
  PyKernelViews& views;
  py::handle before;
  ProblemStash(const PyStateManager& s, py::handle problem) : views(*s.views), before(s.views->problem) {
    views.problem = problem;
    for (const auto& m : s.matchers) m->error = py::object();
    for (const auto& h : s.heuristics) h->error = py::object();
  }
  ~ProblemStash() { views.problem = before; }
  ProblemStash(const ProblemStash&) = delete;
  ProblemStash& operator=(const ProblemStash&) = delete;
};

Json problemJson(const py::object& problem) {
  try {
    return toJson(problem);
  } catch (const py::builtin_exception&) {
    return nullptr;  // not JSON: only the Python callbacks, which get the object itself, can read it
  }
}

// Raises a failure of a call that ran Python callbacks, with what they raised as the cause.
[[noreturn]] void raiseWithCause(const PyStateManager& s, const Diagnostic& d) {
  py::handle cause;
  for (const auto& m : s.matchers)
    if (m->error) cause = m->error;
  for (const auto& h : s.heuristics)
    if (h->error) cause = h->error;
  raiseFailure(d, cause);
}

// A slot program for Python; `owner` (its StateManager) first, so it goes last.
struct PySlotProgram {
  py::object owner;
  SlotProgram program;
};

py::dict slottedDict(const SlottedEngine& se) {
  py::dict out;
  out["id"] = se.engine->id;
  out["name"] = se.engine->name;
  py::list slots;
  for (const SlotCatalog& c : se.slots) {
    py::dict slot;
    slot["name"] = c.name;
    slot["index"] = c.index;
    std::vector<std::string> kept;
    for (const KernelDefinition* d : c.kept) kept.push_back(d->kernel()->id);
    slot["kept"] = kept;
    py::list dropped;
    for (const DroppedKernel& d : c.dropped) {
      py::dict item;
      item["kernel_id"] = d.kernelId;
      item["name"] = d.kernelName;
      item["code"] = d.code;
      item["reason"] = d.reason;
      dropped.append(item);
    }
    slot["dropped"] = dropped;
    slot["ranker"] = c.ranker;
    slot["rank_heuristic"] = c.rankHeuristic ? py::object(py::str(c.rankHeuristic->id)) : py::object(py::none());
    slot["applicability_heuristic"] =
        c.applicabilityHeuristic ? py::object(py::str(c.applicabilityHeuristic->id)) : py::object(py::none());
    slots.append(slot);
  }
  out["slots"] = slots;
  out["dropped_reason"] = se.droppedReason ? py::object(py::str(*se.droppedReason)) : py::object(py::none());
  return out;
}

py::dict keptDict(const KernelDefinition& d, const DescriptorSet& set) {
  py::dict out;
  out["kernel_id"] = d.kernel()->id;
  out["name"] = d.kernel()->name;
  out["pack"] = d.pack->id;
  out["pack_name"] = d.pack->name;
  out["pack_file"] = d.pack->file;
  out["file"] = d.kernel()->file;
  out["path"] = d.kernel()->jsonPath;
  out["launches"] = sortedLaunches(*d.kernel());
  out["handler_launches"] = d.handler->launchNames();
  out["packed"] = isPacked(*d.kernel());  // False: no launch code to load (e.g. embedded_source)
  out["kinds"] = kindsOf(*d.kernel());
  out["dispatch_symbol"] = d.dispatchSymbol();
  out["engine"] = d.engine ? py::object(py::str(d.engine->name)) : py::object(py::none());
  out["arches"] = kernelArches(*d.pack, *d.kernel());
  out["root"] = set.rootOf(*d.member).string();
  return out;
}

py::dict droppedDict(const DroppedKernel& d) {
  py::dict out;
  out["kernel_id"] = d.kernelId;
  out["name"] = d.kernelName;
  out["pack"] = d.packId;
  out["pack_name"] = d.packName;
  out["file"] = d.file;
  out["path"] = d.jsonPath;
  out["dispatch_symbol"] = d.dispatchSymbol;
  out["code"] = d.code;
  out["reason"] = d.reason;
  return out;
}

py::bytes toBytes(const std::vector<std::uint8_t>& v) {
  return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

std::optional<std::string> launchArg(const std::optional<std::string>& launch) {
  if (launch && launch->empty()) return std::nullopt;
  return launch;
}

}  // namespace

PyObject* runtimeCheckErrorType() { return gRuntimeCheckError; }

namespace {

// RuntimeCheckError: what a refused runtime check raises.
void bindRuntimeCheckError(py::module_& m) {
  gRuntimeCheckError = PyErr_NewExceptionWithDoc(
      "ukdpack._runtime.RuntimeCheckError",
      "A runtime check refused: str() is '<CODE>: <file>: <path>: <message>'; .code and .diagnostic "
      "carry the parts.",
      PyExc_ValueError, nullptr);
  m.add_object("RuntimeCheckError", py::handle(gRuntimeCheckError));
}

// DescriptorSet: a loaded set, its descriptors as dicts and its kernels' views.
void bindDescriptorSet(py::module_& m) {
  py::class_<PySet>(m, "DescriptorSet", "Descriptors loaded by the C++ loader, with its diagnostics.")
      .def_property_readonly("packs",
                             [](const PySet& s) {
                               py::list out;
                               for (const Pack& p : s.set->packs) out.append(packDict(s.set, p));
                               return out;
                             })
      .def(
          "model_packs",
          [](const PySet& s) {
            py::list out;
            for (const Pack& p : s.set->packs) out.append(packDict(s.set, p, /*lean=*/true));
            return out;
          },
          "packs, less the views the packer's models do not read (root, engine_name, dispatch_symbol; per "
          "kernel arches, launches, packed, kinds, completed_metadata, base_dir, root), each kernel with "
          "raw_sha256: the sha256 of the bytes its raw was read from (None when it was not read from them); "
          "a kernel's raw is a Document where it was read from text (its value() the dict), else the dict.")
      .def(
          "code_launches",
          [](const PySet& s, const std::vector<std::string>& kinds) { return codeLaunchRows(s.set, kinds); },
          py::arg("kinds"),
          "(pack file, kernel file, kernel JSON path, kernel id, kernel name, source JSON path, kind, the file its "
          "file field names or None, Source view) of every launch whose kind is in `kinds`: pack by pack, each "
          "pack's kernels in order, each kernel's launches sorted by name.")
      .def_property_readonly(
          "counts",
          [](const PySet& s) {
            std::size_t kernels = 0;
            for (const Pack& p : s.set->packs) kernels += p.members.size();
            return py::make_tuple(s.set->packs.size(), kernels);
          },
          "(packs, kernels): the packs loaded and the kernels they hold.")
      .def_property_readonly("diagnostics", [](const PySet& s) { return diagnosticList(s.set->diagnostics); })
      .def_property_readonly("roots",
                             [](const PySet& s) {
                               std::vector<std::string> out;
                               for (const auto& r : s.set->roots) out.push_back(r.string());
                               return out;
                             })
      .def_property_readonly("ok", [](const PySet& s) { return s.set->ok(); })
      .def_property_readonly(
          "files",
          [](const PySet& s) {
            py::list out;
            for (const auto& f : s.set->files) out.append(py::make_tuple(f.rel, f.type, f.root));
            return out;
          },
          "Every descriptor file the walk found: (root-relative path, type, root index), sorted.")
      .def_property_readonly(
          "skipped",
          [](const PySet& s) {
            py::list out;
            for (const auto& k : s.set->skipped) out.append(py::make_tuple(k.rel, k.why));
            return out;
          },
          "Every path the walk skipped: (root-relative path, why).")
      .def_property_readonly(
          "from_index", [](const PySet& s) { return s.set->fromIndex; },
          "Whether the load read the shard's index (index.ukdx); the set is the JSON load's either way.")
      .def_property_readonly(
          "index_reason", [](const PySet& s) { return s.set->indexReason; },
          "Why the load did not read the shard's index ('' when it did, or did not look for one).")
      .def_property_readonly(
          "listed_by_index", [](const PySet& s) { return s.set->listedByIndex; },
          "Whether the load took the files the index lists instead of walking the shard (none of its "
          "folders changed since the index was written).")
      .def_property_readonly("dispatches",
                             [](const PySet& s) {
                               py::list out;
                               for (const Dispatch& d : s.set->dispatches) {
                                 py::dict item = infoDict(*s.set, d);
                                 item["dispatch_symbol"] = d.dispatchSymbol;
                                 item["launches"] = optionalList(d.launches);
                                 out.append(item);
                               }
                               return out;
                             })
      .def_property_readonly("engines",
                             [](const PySet& s) {
                               py::list out;
                               for (const Engine& e : s.set->engines) {
                                 py::dict item = infoDict(*s.set, e);
                                 item["metadata"] = e.metadata;
                                 item["knobs"] = e.knobs;
                                 item["heuristics"] = roleMapsDict(e.heuristics);
                                 item["slots"] = slotViews(e);
                                 out.append(item);
                               }
                               return out;
                             })
      .def_property_readonly("metadata_schemas",
                             [](const PySet& s) {
                               py::list out;
                               for (const MetadataSchema& k : s.set->metadataSchemas) {
                                 py::dict item = infoDict(*s.set, k);
                                 py::list fields;
                                 for (const MetadataField& f : k.fields) {
                                   py::dict field;
                                   field["name"] = f.name;
                                   field["type"] = f.type;
                                   if (f.defaultValue) field["default_value"] = fromJson(*f.defaultValue);
                                   fields.append(field);
                                 }
                                 item["fields"] = fields;
                                 out.append(item);
                               }
                               return out;
                             })
      .def_property_readonly("matchers",
                             [](const PySet& s) {
                               py::list out;
                               for (const MatcherDescriptor& u : s.set->matchers) {
                                 py::dict item = infoDict(*s.set, u);
                                 item["scope"] = u.scope;
                                 item["match_symbol"] = u.matchSymbol;
                                 out.append(item);
                               }
                               return out;
                             })
      .def_property_readonly("heuristics",
                             [](const PySet& s) {
                               py::list out;
                               for (const HeuristicDescriptor& h : s.set->heuristics) {
                                 py::dict item = infoDict(*s.set, h);
                                 item["adapter"] = h.adapter;
                                 item["symbol"] = h.symbol ? py::object(py::str(*h.symbol)) : py::object(py::none());
                                 item["artifact"] =
                                     h.artifact ? py::object(py::str(*h.artifact)) : py::object(py::none());
                                 // custom_library's library ships beside the UHD as an artifact does.
                                 item["library"] = h.library ? py::object(py::str(*h.library)) : py::object(py::none());
                                 item["slot"] = slotOrNone(h.slot);
                                 out.append(item);
                               }
                               return out;
                             })
      .def(
          "kernel",
          [](const PySet& s, const std::string& id) -> py::object {
            const Pack* pack = nullptr;
            const PackMember* member = s.set->findKernel(id, &pack);
            if (member == nullptr) return py::none();
            return kernelDict(s.set, *pack, *member);
          },
          py::arg("kernel_id"), "The kernel with this id (a dict), or None.")
      .def(
          "launch_at",
          [](const PySet& s, const std::string& file, const std::string& jsonPath) {
            return launchAt(*s.set, file, jsonPath);
          },
          py::arg("file"), py::arg("json_path"),
          "(kernel id, launch name or None for the single launch) of the launch whose source holds a finding "
          "at (file, json_path): how findings about one launch are matched. None when the path lies in no "
          "launch.")
      .def(
          "pack",
          [](const PySet& s, const std::string& id) -> py::object {
            const Pack* p = s.set->findPack(id);
            if (p == nullptr) return py::none();
            return packDict(s.set, *p);
          },
          py::arg("pack_id"), "The pack with this id (a dict), or None.")
      .def("__repr__", [](const PySet& s) {
        std::size_t kernels = 0;
        for (const Pack& p : s.set->packs) kernels += p.members.size();
        return "<ukdpack DescriptorSet: " + std::to_string(s.set->packs.size()) + " packs, " + std::to_string(kernels) +
               " kernels, " + std::to_string(s.set->diagnostics.size()) + " diagnostics>";
      });
}

// load_shard and load_roots: the loader, with its options.
void bindLoaders(py::module_& m) {
  m.attr("DEFAULT_MAX_DECOMPRESSED_BYTES") = kDefaultMaxDecompressedBytes;
  m.attr("ARCHIVE_FOLDER") = kArchiveFolder;
  m.attr("SHARD_INDEX_FILE") = kShardIndexFile;
  m.def(
      "shard_index",
      [](const std::string& path) -> py::tuple {
        Result<std::string> built = [&] {
          py::gil_scoped_release released;
          return buildShardIndex(path);
        }();
        if (!built) return py::make_tuple(py::none(), built.error().message);
        return py::make_tuple(py::bytes(built.value()), std::string());
      },
      py::arg("path"),
      "(bytes, '') of the index (index.ukdx) for the shard at `path`, or (None, why) when it gets none: "
      "its load gives a diagnostic, or the load through the index would differ from the JSON load.");
  py::class_<ShardIndexDraft>(m, "ShardIndexDraft",
                              "An index made from a shard's JSON load, not yet checked against the load through it.")
      .def_property_readonly("data", [](const ShardIndexDraft& d) { return py::bytes(d.bytes); })
      .def_readonly("unchanged", &ShardIndexDraft::unchanged,
                    "The files whose inline kernels confirm does not read back: the previous shard's "
                    "confirmation read them (shard_index_draft's `previous`).")
      .def(
          "confirm",
          [](const ShardIndexDraft& d, const std::string& path) {
            Result<std::string> confirmed = [&] {
              py::gil_scoped_release released;
              return confirmShardIndex(path, d);
            }();
            return confirmed ? std::string() : confirmed.error().message;
          },
          py::arg("path"),
          "'' when the load through `data` of the shard at `path` is the JSON load the draft was made from, "
          "kernel by kernel; else why not (then no index is written).");
  m.def(
      "shard_index_draft",
      [](const PySet& set, const std::string& previous, const std::vector<std::string>& unchanged) -> py::tuple {
        Result<ShardIndexDraft> draft = [&] {
          py::gil_scoped_release released;
          return draftShardIndex(*set.set, PreviousIndex{previous, unchanged});
        }();
        if (!draft) return py::make_tuple(py::none(), draft.error().message);
        return py::make_tuple(py::cast(std::move(draft.value())), std::string());
      },
      py::arg("set"), py::arg("previous") = std::string(), py::arg("unchanged") = std::vector<std::string>{},
      "(draft, '') of the index for the shard `set` is the JSON load of (load_shard(path, use_index=False)), or "
      "(None, why) when it gets none (the load gives a diagnostic); shard_index is this and confirm. "
      "`previous` is the shard this one replaces, its index confirmed by this same code, and `unchanged` the "
      "files taken from it as they were: those of them whose records the draft finds in that index unchanged "
      "are not read back by confirm (draft.unchanged); '' or []: every kernel is.");
  m.def(
      "check_shard_index",
      [](const std::string& path) {
        ShardIndexCheck check;
        {
          py::gil_scoped_release released;
          check = checkShardIndex(path);
        }
        py::dict out;
        out["present"] = check.present;
        out["binds"] = check.binds;
        out["why"] = check.why;
        out["difference"] = check.difference;
        return out;
      },
      py::arg("path"),
      "What ukdpack-validate says of a shard's index: {present, binds, why (it does not bind), "
      "difference (the first from the JSON load, when it binds)}.");
  m.def(
      "load_shard",
      [](const std::string& path, const std::optional<std::string>& maxUkd, const std::optional<py::dict>& maxVersions,
         const std::vector<std::string>& excludeFolders, bool authored, const std::vector<std::string>& arches,
         std::uint64_t maxDecompressedBytes, unsigned threads, bool useIndex) {
        LoaderOptions options = loaderOptions(maxUkd, maxVersions, excludeFolders, maxDecompressedBytes);
        options.authored = authored;
        options.arches = arches;
        options.threads = threads;
        options.useIndex = useIndex;
        py::gil_scoped_release released;  // a large tree reads for a while
        return PySet{std::make_shared<const DescriptorSet>(loadShard(path, options))};
      },
      py::arg("path"), py::arg("max_ukd_version") = py::none(), py::arg("max_versions") = py::none(),
      py::arg("exclude_folders") = std::vector<std::string>{}, py::arg("authored") = false,
      py::arg("arches") = std::vector<std::string>{}, py::arg("max_decompressed_bytes") = kDefaultMaxDecompressedBytes,
      py::arg("threads") = 0u, py::arg("use_index") = true,
      "Load one shard (or descriptor root) as the runtime does. max_ukd_version ('1.0') or "
      "max_versions ({type: 'M.m'}) emulate an older reader; authored reads an authored tree (packed "
      "sources refused, newer versions an error); arches limits the per-arch rules to those shards; "
      "max_decompressed_bytes is the budget of archive bytes its launch code loads may decompress "
      "(per state manager; over it RuntimeCheckError DECOMPRESS_BUDGET); threads reads the files in that "
      "many threads (0: one per core; the result is the same for any); use_index=False never reads the "
      "shard's index (index.ukdx; the result is the same either way). "
      "Never raises for bad input: see .diagnostics.");
  m.def(
      "load_roots",
      [](const std::vector<std::string>& paths, const std::optional<std::string>& maxUkd,
         const std::optional<py::dict>& maxVersions, const std::vector<std::string>& excludeFolders,
         std::uint64_t maxDecompressedBytes, unsigned threads) {
        LoaderOptions options = loaderOptions(maxUkd, maxVersions, excludeFolders, maxDecompressedBytes);
        options.threads = threads;
        std::vector<std::filesystem::path> roots(paths.begin(), paths.end());
        py::gil_scoped_release released;  // as load_shard: a large tree reads for a while
        return PySet{std::make_shared<const DescriptorSet>(loadRoots(roots, options))};
      },
      py::arg("paths"), py::arg("max_ukd_version") = py::none(), py::arg("max_versions") = py::none(),
      py::arg("exclude_folders") = std::vector<std::string>{},
      py::arg("max_decompressed_bytes") = kDefaultMaxDecompressedBytes, py::arg("threads") = 0u,
      "Load several roots into one set (ids unique across all of them).");
}

// The whole-set rules and what a shard ships.
void bindSetChecks(py::module_& m) {
  m.def(
      "check_set_rules",
      [](const PySet& dset, const std::vector<std::string>& arches) {
        const std::shared_ptr<const DescriptorSet> set = dset.set;  // kept while the GIL is released
        std::vector<Diagnostic> found;
        {
          // The packer runs its own rules beside these (authored/load.py): the set is read-only.
          py::gil_scoped_release released;
          found = checkSetRules(*set, arches);
        }
        return diagnosticList(found);
      },
      py::arg("dset"), py::arg("arches") = std::vector<std::string>{},
      "The whole-set rules (launch sets per dispatch handler, packed toc keys) over a loaded set, for the "
      "shards of `arches` (empty: every arch): diagnostic dicts. Releases the GIL while it checks.");
  m.def(
      "shard_contents",
      [](const PySet& dset, const std::string& arch) {
        const ShardContents c = shardContents(*dset.set, arch);
        py::list packs, kernels, generics;
        for (const Pack* p : c.packs) packs.append(p->file);
        for (const PackMember* m : c.kernels) kernels.append(m->kernel().id);
        for (const DescriptorInfo* d : c.generics) generics.append(d->file);
        py::dict out;
        out["packs"] = packs;
        out["kernels"] = kernels;
        out["generics"] = generics;
        return out;
      },
      py::arg("dset"), py::arg("arch") = "",
      "What the shard of `arch` ships ('': any shard): {'packs': [KDP files], 'kernels': [ids of their "
      "kernels in the shard], 'generics': [files of the generic descriptors those packs reach]}.");
  m.def(
      "unreachable_note", [](const PySet& dset) { return diagnosticList(unreachableNote(*dset.set)); }, py::arg("dset"),
      "The note naming the generic descriptors no pack reaches (they ship in no shard), as a list of "
      "0 or 1 diagnostic dicts.");
}

// ArchiveCache: opened archives, checked entries and the decompression budget.
void bindArchiveCache(py::module_& m) {
  py::class_<ArchiveCache, std::shared_ptr<ArchiveCache>>(
      m, "ArchiveCache",
      "Opened archives and what checking their entries found, with a budget of decompressed bytes; a "
      "StateManager given one (archives=) loads launch code through it.")
      .def(py::init([](std::uint64_t maxDecompressedBytes) {
             return std::make_shared<ArchiveCache>(ArchiveCache::kDefaultMaxVerifiedBytes, maxDecompressedBytes);
           }),
           py::arg("max_decompressed_bytes") = kDefaultMaxDecompressedBytes)
      .def(
          "check_entries",
          [](ArchiveCache& cache, const std::string& path, unsigned threads) {
            py::gil_scoped_release unlocked;
            checkArchiveEntries(cache, path, threads);
          },
          py::arg("path"), py::arg("threads") = 0u,
          "Decompress and hash every entry of the archive at path on `threads` threads (0: one per core), the "
          "GIL released, keeping the digests and kernel lists: check_launch_codes through this cache takes them "
          "instead of doing the work again.")
      .def_property_readonly("decompressed_bytes", &ArchiveCache::decompressedBytes,
                             "Bytes charged to the budget so far.");
}

// A state manager over a loaded set: handlers, matchers and heuristics as Python
// gives them (see StateManager's docstring), else every symbol the set names.
PyStateManager makeStateManager(const PySet& dset, const std::optional<py::dict>& handlers, const std::string& arch,
                                const py::object& matchers, const py::object& heuristics,
                                std::shared_ptr<ArchiveCache> archives) {
  Registry registry;
  PyStateManager out;
  out.views = std::make_shared<PyKernelViews>();
  if (handlers) {
    for (const auto& item : *handlers) {
      const std::string symbol = item.first.cast<std::string>();
      auto added = registry.addDispatch(symbol, handlerFrom(symbol, item.second, out.views));
      if (!added) raise(added.error());
    }
  }
  // Matchers and heuristics: every symbol the set names unless listed;
  // matchers given as {symbol: callable} run from Python.
  const auto matcher = std::make_shared<MatchHandler>();
  const auto heuristic = std::make_shared<HeuristicHandler>();
  if (py::isinstance<py::dict>(matchers)) {
    for (const auto& item : py::reinterpret_borrow<py::dict>(matchers)) {
      const std::string symbol = item.first.cast<std::string>();
      if (!PyCallable_Check(item.second.ptr())) {
        throw py::type_error("matchers['" + symbol + "']: expected a callable(kernel, problem) -> bool");
      }
      auto handler = std::make_shared<const PyMatchHandler>(py::reinterpret_borrow<py::object>(item.second), out.views);
      out.matchers.push_back(handler);
      auto added = registry.addMatcher(symbol, handler);
      if (!added) raise(added.error());
    }
  } else if (!matchers.is_none()) {
    for (const std::string& s : matchers.cast<std::vector<std::string>>()) registry.addMatcher(s, matcher);
  } else {
    for (const MatcherDescriptor& u : dset.set->matchers) registry.addMatcher(u.matchSymbol, matcher);
    for (const Engine& e : dset.set->engines)
      if (e.graphMatchSymbol) registry.addMatcher(*e.graphMatchSymbol, matcher);
  }
  if (py::isinstance<py::dict>(heuristics)) {
    for (const auto& item : py::reinterpret_borrow<py::dict>(heuristics)) {
      const std::string symbol = item.first.cast<std::string>();
      const py::object value = py::reinterpret_borrow<py::object>(item.second);
      if (!PyCallable_Check(value.ptr()) && !py::hasattr(value, "rank") && !py::hasattr(value, "applicable")) {
        throw py::type_error("heuristics['" + symbol +
                             "']: expected a callable(kernels, problem) -> [indices] or an object with "
                             "rank(kernels, problem) and/or applicable(kernel, problem)");
      }
      auto handler = std::make_shared<const PyHeuristicHandler>(value, out.views);
      out.heuristics.push_back(handler);
      auto added = registry.addHeuristic(symbol, handler);
      if (!added) raise(added.error());
    }
  } else if (!heuristics.is_none()) {
    for (const std::string& s : heuristics.cast<std::vector<std::string>>()) registry.addHeuristic(s, heuristic);
  } else {
    for (const HeuristicDescriptor& h : dset.set->heuristics)
      if (h.symbol) registry.addHeuristic(*h.symbol, heuristic);
  }
  out.manager = std::make_unique<StateManager>(dset.set, registry, arch, std::move(archives));
  out.views->set = dset.set;  // the manager's own: it shares the set, no copy
  return out;
}

// StateManager: selection, drops and launch code loads, with handlers and matchers from Python.
void bindStateManager(py::module_& m) {
  py::class_<PySlotProgram>(
      m, "SlotProgram", "Per slot of a slotted engine, in run order, the kernel it runs (StateManager.slot_program).")
      .def_property_readonly("engine_id", [](const PySlotProgram& p) { return p.program.engine->id; })
      .def_property_readonly("engine_name", [](const PySlotProgram& p) { return p.program.engine->name; })
      .def_property_readonly(
          "picks",
          [](const PySlotProgram& p) {
            py::list out;
            for (const SlotPick& pick : p.program.picks) {
              py::dict d;
              d["slot"] = pick.slot;
              d["kernel_id"] = pick.definition->kernel()->id;
              d["name"] = pick.definition->kernel()->name;
              d["chosen"] = pick.chosen;
              out.append(d);
            }
            return out;
          },
          "[{slot, kernel_id, name, chosen}] in run order; chosen: the caller's pick, not the slot's default.")
      .def("__repr__", [](const PySlotProgram& p) {
        std::string picks;
        for (const SlotPick& pick : p.program.picks)
          picks += (picks.empty() ? "" : ", ") + pick.slot + "=" + pick.definition->kernel()->name;
        return "<ukdpack SlotProgram: engine '" + p.program.engine->name + "' [" + picks + "]>";
      });
  py::class_<PyStateManager>(m, "StateManager",
                             "Which loaded kernels the given dispatch handlers serve on a device arch.")
      .def(py::init(&makeStateManager), py::arg("dset"), py::arg("handlers") = py::none(), py::arg("arch") = "",
           py::arg("matchers") = py::none(), py::arg("heuristics") = py::none(),
           py::arg("archives") = std::shared_ptr<ArchiveCache>(),
           "handlers: {dispatch_symbol: [launch names]} or {symbol: object with launch_names() and optionally "
           "expected_signature(launch) -> [{kind, size, offset, name?}] or None, workspace_size(kernel) -> int and "
           "launch(launch, workspace, args) -> (grid, block, shared, params)}. arch '' keeps every arch. "
           "matchers: registered symbols, or {match_symbol: callable(kernel, problem) -> bool}; heuristics: "
           "registered symbols (default for both: every symbol the set names); heuristics may also be {symbol: "
           "callable(kernels, problem) -> [indices, best first] or an object with rank(kernels, problem) and/or "
           "applicable(kernel, problem) -> bool}, the native rankers and applicability checks of slots. archives: "
           "the ArchiveCache its launch code loads go through (default: its own, with the set's budget).")
      .def("kept",
           [](const PyStateManager& s) {
             py::list out;
             for (const KernelDefinition& d : s.manager->kept()) out.append(keptDict(d, s.manager->descriptors()));
             return out;
           })
      .def(
          "packed_launches",
          [](const PyStateManager& s) {
            py::list out;
            for (const KernelDefinition& d : s.manager->kept()) {
              if (!isPacked(*d.kernel())) continue;
              const std::vector<std::string> launches = sortedLaunches(*d.kernel());
              if (launches.empty()) out.append(py::make_tuple(d.kernel()->id, py::none()));
              for (const std::string& launch : launches) out.append(py::make_tuple(d.kernel()->id, launch));
            }
            return out;
          },
          "(kernel_id, launch) of every launch of the kept kernels that ship code (launch None for a "
          "single-launch kernel), in kept() order: what check_launch_codes takes, without kept()'s dicts.")
      .def("dropped",
           [](const PyStateManager& s) {
             py::list out;
             for (const DroppedKernel& d : s.manager->dropped()) out.append(droppedDict(d));
             return out;
           })
      .def("filtered",
           [](const PyStateManager& s) {
             py::list out;
             for (const DroppedKernel& d : s.manager->filtered()) out.append(droppedDict(d));
             return out;
           })
      .def("log", [](const PyStateManager& s) { return s.manager->log(); })
      .def("diagnostics", [](const PyStateManager& s) { return diagnosticList(s.manager->diagnostics()); })
      .def_property_readonly("arch", [](const PyStateManager& s) { return s.manager->arch(); })
      .def(
          "load_launch_code",
          [](const PyStateManager& s, const std::string& kernelId, const std::optional<std::string>& launch,
             const std::string& arch) {
            return toBytes(valueOrRaise(s.manager->loadLaunchCode(kernelId, launchArg(launch), arch)));
          },
          py::arg("kernel_id"), py::arg("launch") = py::none(), py::arg("arch") = "",
          "The verified code object of one launch of a kept kernel (launch None for a single-launch kernel; "
          "arch '' = the manager's). Raises RuntimeCheckError ('DIGEST_MISMATCH: ...', ...).")
      .def(
          "check_devices",
          [](const PyStateManager& s, const std::string& kernelId, const std::optional<std::string>& launch,
             const std::string& arch) -> std::vector<std::string> {
            const KernelDefinition* def = s.manager->find(kernelId);
            const std::string on = arch.empty() ? s.manager->arch() : arch;
            if (def == nullptr) return {on};
            const KernelSource* src = nullptr;
            if (launch) {
              const auto it = def->kernel()->sources.find(*launch);
              if (it != def->kernel()->sources.end()) src = &it->second;
            } else {
              src = singleLaunchSource(*def->kernel());
            }
            return src != nullptr ? checkDevices(*src, on) : std::vector<std::string>{on};
          },
          py::arg("kernel_id"), py::arg("launch") = py::none(), py::arg("arch") = "",
          "The device target IDs a check loads one launch for: the arch, or the arch with each feature "
          "variant's settings.")
      .def(
          "check_launch_codes",
          [](const PyStateManager& s, const std::vector<std::pair<std::string, std::optional<std::string>>>& launches,
             const std::string& arch, unsigned threads) {
            std::vector<std::pair<std::string, std::optional<std::string>>> args;
            args.reserve(launches.size());
            for (const auto& [id, launch] : launches) args.emplace_back(id, launchArg(launch));
            std::vector<std::optional<Diagnostic>> found;
            {
              py::gil_scoped_release unlocked;
              found = s.manager->checkLaunchCodes(args, arch, threads);
            }
            py::list out;
            for (const auto& d : found) out.append(d ? py::object(diagnosticDict(*d)) : py::object(py::none()));
            return out;
          },
          py::arg("launches"), py::arg("arch") = "", py::arg("threads") = 0,
          "load_launch_code of every (kernel_id, launch) on `threads` threads (0: one per core), the GIL "
          "released, the bytes dropped: per launch None, or the diagnostic load_launch_code would raise with.")
      .def(
          "execution_plan",
          [](const PyStateManager& s, const std::string& kernelId) {
            const ExecutionPlan plan = valueOrRaise(makeExecutionPlan(*s.manager, kernelId));
            py::dict out;
            out["kernel_id"] = plan.definition->kernel()->id;
            out["launches"] = plan.launches;
            out["workspace_size"] = plan.workspaceSize;
            return out;
          },
          py::arg("kernel_id"), "The launches a plan runs, in the handler's order, and its workspace size.")
      .def(
          "select",
          [](const PyStateManager& s, const py::object& problem) -> py::object {
            const Json j = problemJson(problem);
            const ProblemStash stash(s, problem);
            auto picked = s.manager->select(j);
            if (!picked) raiseWithCause(s, picked.error());
            if (picked.value() == nullptr) return py::none();
            const KernelDefinition& d = *picked.value();
            py::dict out = keptDict(d, s.manager->descriptors());
            out["priority"] = d.kernel()->priority;
            out["metadata"] = fromJson(d.member->completedMetadata());
            return out;
          },
          py::arg("problem"),
          "The kept kernel for a problem: among those whose pack's matchers all accept it, the highest "
          "priority, ties by the lower id; None when none is accepted. A kept() dict plus priority and metadata. "
          "Kernels of slotted engines are not candidates: they run only in slot programs.")
      .def(
          "slotted_engines",
          [](const PyStateManager& s) {
            py::list out;
            for (const SlottedEngine& se : s.manager->slottedEngines()) out.append(slottedDict(se));
            return out;
          },
          "The slotted engines that ship for the arch: {id, name, slots: [{name, index, kept: "
          "[kernel ids, in catalog order], dropped: [{kernel_id, name, code, reason}], ranker, rank_heuristic, "
          "applicability_heuristic}], dropped_reason (None, or why a slot empty on the arch drops the engine)}.")
      .def(
          "slot_program",
          [](const py::object& self, const std::string& engineId, const py::object& problem,
             const std::optional<std::map<std::string, std::string>>& picks) {
            const PyStateManager& s = self.cast<const PyStateManager&>();
            const Json j = problemJson(problem);
            const ProblemStash stash(s, problem);
            auto made = makeSlotProgram(*s.manager, engineId, j, picks.value_or(std::map<std::string, std::string>{}));
            if (!made) raiseWithCause(s, made.error());
            return PySlotProgram{self, std::move(made).value()};
          },
          py::arg("engine_id"), py::arg("problem") = py::none(), py::arg("picks") = py::none(),
          "The slot program of a slotted engine (id or name) for a problem: per slot in run order, its best-ranked "
          "applicable kept kernel, or the kernel `picks` ({slot: kernel_id}) chooses, checked. Raises "
          "RuntimeCheckError (ENGINE_UNKNOWN, ENGINE_NOT_SLOTTED, SLOT_EMPTY, SLOT_UNKNOWN, SLOT_PICK, "
          "MATCHER_FAILED, HEURISTIC_FAILED).")
      .def(
          "plan_slots",
          [](const py::object& self, const PySlotProgram& program, const PyBackend& backend,
             const std::optional<std::string>& arch) {
            const PyStateManager& s = self.cast<const PyStateManager&>();
            if (!program.owner.is(self)) {
              throw py::value_error("plan_slots: the slot program was made by another StateManager");
            }
            auto made = DeviceSlotProgram::create(*s.manager, program.program, backend.backend, arch.value_or(""));
            if (!made) raiseFailure(made.error());
            PySlotPlan plan;
            plan.owner = self;
            plan.program = std::make_unique<DeviceSlotProgram>(std::move(made).value());
            return plan;
          },
          py::arg("program"), py::arg("backend"), py::arg("arch") = py::none(),
          "A DeviceSlotProgram: every pick planned as plan() plans a kernel (nothing is planned unless every pick "
          "is). Raises RuntimeCheckError or DeviceError naming the slot and the kernel.")
      .def(
          "plan",
          [](const py::object& self, const std::string& kernelId, const PyBackend& backend,
             const std::optional<std::string>& arch) {
            const PyStateManager& s = self.cast<const PyStateManager&>();
            auto made = DevicePlan::create(*s.manager, kernelId, backend.backend, arch.value_or(""));
            if (!made) raiseFailure(made.error());
            PyPlan plan;
            plan.owner = self;
            plan.plan = std::make_unique<DevicePlan>(std::move(made).value());
            return plan;
          },
          py::arg("kernel_id"), py::arg("backend"), py::arg("arch") = py::none(),
          "A Plan of a kept kernel on a backend (arch None: the backend's): every launch's code verified, "
          "loaded and resolved. Raises RuntimeCheckError or DeviceError naming the kernel and the launch.");
}

// Launch code loads without a manager, selector revisions, stub handlers, saved plans.
void bindLaunchCodeAndRevision(py::module_& m) {
  m.def(
      "load_launch_code",
      [](const PySet& dset, const std::string& kernelId, const std::optional<std::string>& launch,
         const std::string& arch, const std::shared_ptr<ArchiveCache>& archives) {
        LaunchCodeOptions options;
        options.cache = archives.get();
        return toBytes(valueOrRaise(loadLaunchCode(*dset.set, kernelId, launchArg(launch), arch, options)));
      },
      py::arg("dset"), py::arg("kernel_id"), py::arg("launch") = py::none(), py::arg("arch") = "",
      py::arg("archives") = std::shared_ptr<ArchiveCache>(),
      "The verified code object of one launch (no handler signature check), through `archives` when given "
      "(each archive opened once over many calls; its budget). Raises RuntimeCheckError.");
  m.def(
      "selector_revision",
      [](const PySet& dset, const std::string& packId) { return valueOrRaise(selectorRevision(*dset.set, packId)); },
      py::arg("dset"), py::arg("pack_id"), "sha256 over the pack's engine-visible content.");
  m.def(
      "selector_revision_document",
      [](const PySet& dset, const std::string& packId) {
        const Pack* p = dset.set->findPack(packId);
        if (p == nullptr) raise(makeError(codes::PACK_UNKNOWN, "", "", "no loaded pack has id '" + packId + "'"));
        return fromJson(selectorRevisionDocument(*dset.set, *p));
      },
      py::arg("dset"), py::arg("pack_id"), "The document selector_revision digests.");
  m.def(
      "stub_handlers", [](const PySet& dset, const std::string& arch) { return stubLaunchSets(*dset.set, arch); },
      py::arg("dset"), py::arg("arch") = "",
      "ukdpack-validate's stub rule: {dispatch_symbol: launch names} (the UDD's launches, else the first "
      "kernel's launch set).");
  m.def(
      "capture_plan",
      [](const PySet& dset, const std::string& kernelId) {
        return fromJson(valueOrRaise(capturePlan(*dset.set, kernelId)).toJson());
      },
      py::arg("dset"), py::arg("kernel_id"),
      "The saved plan of a single-launch packed kernel; RuntimeCheckError (PLAN_MULTI_LAUNCH) for a kernel "
      "with several launches, PLAN_SLOTTED for a kernel of a slotted engine.");
}

// ukdpack-validate's verdict and what the runtime was built with.
void bindValidator(py::module_& m) {
  m.def(
      "validate_roots",
      [](const std::vector<std::string>& paths,
         const std::optional<std::variant<std::string, std::vector<std::string>>>& expectEngine,
         const std::optional<std::string>& maxUkd, const std::vector<std::string>& excludeFolders,
         std::uint64_t maxDecompressedBytes) {
        ValidateOptions options;
        options.loader = loaderOptions(maxUkd, std::nullopt, excludeFolders, maxDecompressedBytes);
        if (expectEngine) {
          if (const auto* one = std::get_if<std::string>(&*expectEngine)) {
            options.expectEngines.push_back(*one);
          } else {
            options.expectEngines = std::get<std::vector<std::string>>(*expectEngine);
          }
        }
        std::vector<std::filesystem::path> roots(paths.begin(), paths.end());
        return fromJson(validateRoots(roots, options).toJson());
      },
      py::arg("paths"), py::arg("expect_engine") = py::none(), py::arg("max_ukd_version") = py::none(),
      py::arg("exclude_folders") = std::vector<std::string>{},
      py::arg("max_decompressed_bytes") = kDefaultMaxDecompressedBytes,
      "What ukdpack-validate decides, as its --json verdict (a dict).");
  m.def(
      "build_info",
      [] {
        const BuildInfo info = buildInfo();
        py::dict d;
        d["compiler"] = info.compiler;
        d["cplusplus"] = info.cplusplus;
        d["zstd"] = info.zstd;
        d["zstd_headers"] = info.zstdHeaders;
        d["openssl"] = info.openssl;
        d["openssl_headers"] = info.opensslHeaders;
        d["pybind11"] = std::to_string(PYBIND11_VERSION_MAJOR) + "." + std::to_string(PYBIND11_VERSION_MINOR) + "." +
                        std::to_string(PYBIND11_VERSION_PATCH);
        return d;
      },
      "What the runtime was built with: compiler, cplusplus, zstd and openssl (the libraries loaded), "
      "zstd_headers and openssl_headers (what it was built against), pybind11.");
}

}  // namespace

void bindRuntime(py::module_& m) {
  bindRuntimeCheckError(m);
  bindDescriptorSet(m);
  bindLoaders(m);
  bindSetChecks(m);
  bindArchiveCache(m);
  bindStateManager(m);
  bindLaunchCodeAndRevision(m);
  bindValidator(m);
}

}  // namespace ukdpack::bindings
