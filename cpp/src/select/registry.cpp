#include "ukdpack/select/registry.hpp"

#include <utility>

namespace ukdpack {

Result<bool> DispatchHandler::launch(const LaunchRequest& request) const {
  const std::string what = request.kernel != nullptr ? kernelLabel(*request.kernel) : "a kernel";
  return Result<bool>::failure(makeError(codes::NOT_EXECUTABLE, "", "",
                                         "this dispatch handler declares launches but does not run "
                                         "them; cannot launch " +
                                             what));
}

Result<bool> DispatchHandler::prepareLaunch(const LaunchContext& context, LaunchArgs& out) const {
  (void)out;
  const std::string what = context.kernel != nullptr ? kernelLabel(*context.kernel) : "a kernel";
  return Result<bool>::failure(makeError(codes::NOT_EXECUTABLE, "", "",
                                         "this dispatch handler declares launches but does not prepare "
                                         "them for a device; cannot run " +
                                             what));
}

Result<bool> MatchHandler::matches(const Kernel& kernel, const Json& problem) const {
  (void)kernel;
  (void)problem;
  return Result<bool>::success(true);
}

Result<std::vector<std::size_t>> HeuristicHandler::rank(const std::vector<const Kernel*>& kernels,
                                                        const Json& problem) const {
  (void)problem;
  std::vector<std::size_t> order(kernels.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  return Result<std::vector<std::size_t>>::success(std::move(order));
}

Result<bool> HeuristicHandler::applicable(const Kernel& kernel, const Json& problem) const {
  (void)kernel;
  (void)problem;
  return Result<bool>::success(true);
}

DeclaredDispatchHandler::DeclaredDispatchHandler(std::vector<std::string> launches,
                                                 std::map<std::string, Signature> signatures, std::size_t workspace)
    : launches_(std::move(launches)), signatures_(std::move(signatures)), workspace_(workspace) {}

std::optional<Signature> DeclaredDispatchHandler::expectedSignature(const std::string& launch) const {
  const auto it = signatures_.find(launch);
  if (it == signatures_.end()) return std::nullopt;
  return it->second;
}

namespace {

template <class H>
Result<bool> add(std::map<std::string, std::shared_ptr<const H>>& table, const char* what, const std::string& symbol,
                 std::shared_ptr<const H> handler) {
  if (symbol.empty()) {
    return Result<bool>::failure(makeError(codes::REGISTRY, "", "", std::string("a ") + what + " needs a symbol"));
  }
  if (!handler) {
    return Result<bool>::failure(
        makeError(codes::REGISTRY, "", "", std::string("no ") + what + " given for symbol '" + symbol + "'"));
  }
  if (!table.emplace(symbol, std::move(handler)).second) {
    return Result<bool>::failure(makeError(
        codes::REGISTRY, "", "", std::string("symbol '") + symbol + "' has a " + what + " registered already"));
  }
  return Result<bool>::success(true);
}

template <class H>
std::shared_ptr<const H> get(const std::map<std::string, std::shared_ptr<const H>>& table, const std::string& symbol) {
  const auto it = table.find(symbol);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace

Result<bool> Registry::addDispatch(const std::string& symbol, std::shared_ptr<const DispatchHandler> handler) {
  return add(dispatch_, "dispatch handler", symbol, std::move(handler));
}
Result<bool> Registry::addMatcher(const std::string& symbol, std::shared_ptr<const MatchHandler> handler) {
  return add(matchers_, "matcher", symbol, std::move(handler));
}
Result<bool> Registry::addHeuristic(const std::string& symbol, std::shared_ptr<const HeuristicHandler> handler) {
  return add(heuristics_, "heuristic", symbol, std::move(handler));
}

std::shared_ptr<const DispatchHandler> Registry::dispatch(const std::string& symbol) const {
  return get(dispatch_, symbol);
}
std::shared_ptr<const MatchHandler> Registry::matcher(const std::string& symbol) const {
  return get(matchers_, symbol);
}
std::shared_ptr<const HeuristicHandler> Registry::heuristic(const std::string& symbol) const {
  return get(heuristics_, symbol);
}

std::vector<std::string> Registry::dispatchSymbols() const {
  std::vector<std::string> out;
  for (const auto& entry : dispatch_) out.push_back(entry.first);
  return out;
}

}  // namespace ukdpack
