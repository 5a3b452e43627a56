// The handler registry: native code registers the dispatch
// handlers, matchers and heuristics that descriptors name by symbol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/device/execution.hpp"
#include "ukdpack/model/descriptors.hpp"

namespace ukdpack {

// One launch of a plan, as runPlan() hands it to DispatchHandler::launch():
// the verified code for handlers that launch it themselves.
struct LaunchRequest {
  const Kernel* kernel = nullptr;
  std::string launch;                               // "" for a single-launch kernel
  const std::vector<std::uint8_t>* code = nullptr;  // the verified code object
  const KernelSource* source = nullptr;             // the launch's packed source
  void* workspace = nullptr;                        // one workspace shared by every launch
  std::size_t workspaceSize = 0;
  void* stream = nullptr;           // the backend's stream handle
  const void* arguments = nullptr;  // the operation's arguments (handler-defined)
};

// One launch of a device plan (plan.hpp DevicePlan), as prepareLaunch() sees
// it: the plan owns the code and the module, the handler says what to launch.
struct LaunchContext {
  const Kernel* kernel = nullptr;
  std::string_view launch;          // "" for a single-launch kernel
  DevicePtr workspace = 0;          // one workspace shared by every launch; 0 when none
  std::size_t workspaceSize = 0;    // the bytes the workspace holds
  const void* arguments = nullptr;  // the operation's arguments (handler-defined)
};

// Native code that launches the kernels of packs whose UDD names its symbol.
class DispatchHandler {
 public:
  virtual ~DispatchHandler() = default;

  // The launches it runs, in run order; empty for a single-launch handler.
  // The state manager keeps exactly the kernels whose launch set equals it.
  virtual std::vector<std::string> launchNames() const = 0;

  // The one workspace every launch of `kernel` shares, in bytes.
  virtual std::size_t workspaceSize(const Kernel& kernel) const {
    (void)kernel;
    return 0;
  }

  // The argument list the handler passes to `launch` ("" for a single-launch
  // kernel), or nullopt when it does not say; checked before code is loaded.
  virtual std::optional<Signature> expectedSignature(const std::string& launch) const {
    (void)launch;
    return std::nullopt;
  }

  // Runs one launch. runPlan() calls it once per launch, in launchNames() order.
  // The default refuses: a handler that executes overrides it.
  virtual Result<bool> launch(const LaunchRequest& request) const;

  // What one launch of a device plan runs: fills `out` (geometry and the
  // argument bytes, in the kernel's parameter order). DevicePlan::run calls it
  // once per launch, in launchNames() order, with `out` cleared but its storage
  // kept from the last run. A failure stops the run. The default refuses.
  virtual Result<bool> prepareLaunch(const LaunchContext& context, LaunchArgs& out) const;
};

// A native applicability check named by a UMD's match_symbol (or a UED's
// graph_match.native).
class MatchHandler {
 public:
  virtual ~MatchHandler() = default;

  // Whether `kernel` serves `problem` (handler-defined JSON). A failure stops
  // the selection. The base accepts every problem: a matcher that only exists
  // (a stub) filters nothing.
  virtual Result<bool> matches(const Kernel& kernel, const Json& problem) const;
};

// A native heuristic named by a UHD (native.symbol, custom_library.symbol).
// A slot's sort_kernel_catalog and predict_applicable_kernels call it when a
// slot program picks (select/slots.hpp).
class HeuristicHandler {
 public:
  virtual ~HeuristicHandler() = default;

  // The order to try `kernels` in for `problem`: indices into `kernels`, best
  // first. Kernels it leaves out follow in the order given (so a top-k answer
  // is enough); an index out of range or named twice is refused
  // (HEURISTIC_FAILED). The base keeps the order given (priority, then id).
  virtual Result<std::vector<std::size_t>> rank(const std::vector<const Kernel*>& kernels, const Json& problem) const;

  // Whether `kernel` can serve `problem` (a slot's predict_applicable_kernels).
  // A failure stops the pick. The base says yes.
  virtual Result<bool> applicable(const Kernel& kernel, const Json& problem) const;
};

// A dispatch handler that only declares: launch names and, optionally, the
// expected signature of each launch. Stubs, tests and Python handlers use it.
class DeclaredDispatchHandler : public DispatchHandler {
 public:
  explicit DeclaredDispatchHandler(std::vector<std::string> launches, std::map<std::string, Signature> signatures = {},
                                   std::size_t workspace = 0);
  std::vector<std::string> launchNames() const override { return launches_; }
  std::size_t workspaceSize(const Kernel&) const override { return workspace_; }
  std::optional<Signature> expectedSignature(const std::string& launch) const override;

 private:
  std::vector<std::string> launches_;
  std::map<std::string, Signature> signatures_;
  std::size_t workspace_ = 0;
};

class Registry {
 public:
  // Registers a handler under a symbol; refuses an empty symbol, a null
  // handler and a symbol taken already (the first registration stays).
  Result<bool> addDispatch(const std::string& symbol, std::shared_ptr<const DispatchHandler> handler);
  Result<bool> addMatcher(const std::string& symbol, std::shared_ptr<const MatchHandler> handler);
  Result<bool> addHeuristic(const std::string& symbol, std::shared_ptr<const HeuristicHandler> handler);

  // nullptr when nothing is registered under the symbol.
  std::shared_ptr<const DispatchHandler> dispatch(const std::string& symbol) const;
  std::shared_ptr<const MatchHandler> matcher(const std::string& symbol) const;
  std::shared_ptr<const HeuristicHandler> heuristic(const std::string& symbol) const;

  std::vector<std::string> dispatchSymbols() const;  // sorted

 private:
  std::map<std::string, std::shared_ptr<const DispatchHandler>> dispatch_;
  std::map<std::string, std::shared_ptr<const MatchHandler>> matchers_;
  std::map<std::string, std::shared_ptr<const HeuristicHandler>> heuristics_;
};

}  // namespace ukdpack
