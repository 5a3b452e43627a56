// ukdpack._runtime: the C++ runtime, reached from Python so that pack-time
// checks run the exact logic the runtime applies.
#include <pybind11/pybind11.h>

#include "modules.hpp"

PYBIND11_MODULE(_runtime, m) {
  m.doc() = "ukdpack's C++ runtime: launch helpers, kpack reader, loader, state manager, device plans";
  ukdpack::bindings::bindViews(m);  // before the bindings whose results hold views
  ukdpack::bindings::bindArch(m);
  ukdpack::bindings::bindDescriptors(m);
  ukdpack::bindings::bindKinds(m);
  ukdpack::bindings::bindCodes(m);
  ukdpack::bindings::bindKpack(m);
  ukdpack::bindings::bindPaths(m);
  ukdpack::bindings::bindEdit(m);
  ukdpack::bindings::bindDevice(m);  // before bindRuntime: StateManager.plan returns its Plan
  ukdpack::bindings::bindRuntime(m);
}
