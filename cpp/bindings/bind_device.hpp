// What the device bindings (bind_device.cpp) share with the state manager's
// (bind_runtime.cpp): backends, buffers and plans as Python holds them, what
// Plan.run hands a Python dispatch handler, and the error a failure raises.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/device/execution.hpp"
#include "ukdpack/plan/plan.hpp"
#include "ukdpack/plan/slot_plan.hpp"

namespace ukdpack::bindings {

namespace py = pybind11;

struct PyBackend {
  std::shared_ptr<DeviceBackend> backend;
};
struct PyCudaBackend : PyBackend {};
struct PyHipBackend : PyBackend {};

// Shared, so a buffer a handler keeps stays valid however Python drops it.
struct PyBuffer {
  std::shared_ptr<DeviceBuffer> buffer;
};

// A device plan for Python. `owner` (the StateManager the plan points into)
// is declared first so it goes last.
struct PyPlan {
  py::object owner;
  std::unique_ptr<DevicePlan> plan;
  py::object workspace;  // the plan's own DeviceBuffer, made at the first run that needs one
};

// A device slot program for Python (StateManager.plan_slots), held as PyPlan holds a plan.
struct PySlotPlan {
  py::object owner;
  std::unique_ptr<DeviceSlotProgram> program;
  py::object workspace;  // its own DeviceBuffer, made at the first run that needs one
};

// The `arguments` Plan.run passes through DevicePlan to a Python handler's
// launch(): the objects it is called with, and the exception it raised. The
// tag tells it from arguments a C++ caller might pass.
struct PyRunArgs {
  static constexpr std::uint64_t kTag = 0x756b64706c616e31ull;  // "ukdplan1"
  std::uint64_t tag = kTag;
  py::handle args;
  py::handle workspace;
  mutable py::object error;
};

// Raises DeviceError for DEVICE_* codes and RuntimeCheckError for the others,
// "<CODE>: <file>: <path>: <message>" with .code and .diagnostic set; an
// exception in `cause` (what a Python callback raised) becomes __cause__.
[[noreturn]] void raiseFailure(const Diagnostic& d, py::handle cause = py::handle());

// ukdpack._runtime.RuntimeCheckError, made by bindRuntime.
PyObject* runtimeCheckErrorType();

}  // namespace ukdpack::bindings
