// Device execution from Python: the CUDA and HIP backends, device buffers and
// plans that run (StateManager.plan, in bind_runtime.cpp, makes them).
#include <pybind11/stl.h>

#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bind_device.hpp"
#include "modules.hpp"
#include "pyjson.hpp"

namespace ukdpack::bindings {

namespace {

// ukdpack._runtime.DeviceError(RuntimeError): set when the module loads.
PyObject* gDeviceError = nullptr;

template <class T>
T valueOr(Result<T> r) {
  if (!r) raiseFailure(r.error());
  return std::move(r).value();
}

void check(const Result<bool>& r) {
  if (!r) raiseFailure(r.error());
}

PyBuffer allocate(const std::shared_ptr<DeviceBackend>& backend, std::size_t bytes) {
  return PyBuffer{std::make_shared<DeviceBuffer>(valueOr(DeviceBuffer::allocate(backend, bytes)))};
}

// Plan.run and DeviceSlotProgram.run: over `workspace`, else the plan's own
// (kept in `own`, made at the first run), every launch enqueued with the GIL
// held (Python handlers prepare them), the wait without it.
template <class P>
void runFromPython(P& plan, py::object& own, const py::object& args, const py::object& workspace, const char* what) {
  py::object ws = workspace;
  if (ws.is_none()) {
    if (!own) own = py::cast(allocate(plan.backend(), plan.workspaceSize()));
    ws = own;
  }
  if (!py::isinstance<PyBuffer>(ws)) {
    throw py::type_error(std::string(what) + ": workspace must be a DeviceBuffer, found " +
                         std::string(py::str(py::type::of(ws))));
  }
  const DeviceBuffer& buffer = *ws.cast<const PyBuffer&>().buffer;
  if (buffer.backend() != plan.backend()) {
    throw py::value_error(std::string(what) + ": the workspace belongs to another backend than the plan's");
  }
  PyRunArgs run;
  run.args = args;
  run.workspace = ws;
  auto launched = plan.enqueue(buffer.ptr(), buffer.size(), &run);
  if (!launched) raiseFailure(launched.error(), run.error);
  Result<bool> done = Result<bool>::success(true);
  {
    py::gil_scoped_release nogil;
    done = plan.synchronize();
  }
  check(done);
}

py::dict planDict(const DevicePlan& plan) {
  py::dict out;
  out["kernel_id"] = plan.definition().kernel()->id;
  out["name"] = plan.definition().kernel()->name;
  out["launches"] = plan.launchNames();
  std::vector<std::string> symbols;
  for (const PlanLaunch& l : plan.launches()) symbols.push_back(l.symbol);
  out["symbols"] = symbols;
  out["workspace_size"] = plan.workspaceSize();
  out["module_count"] = plan.moduleCount();
  return out;
}

std::string backendRepr(const PyBackend& b) {
  return "<ukdpack " + b.backend->name() + " backend: device " + std::to_string(b.backend->device()) + ", " +
         b.backend->arch() + ">";
}

}  // namespace

[[noreturn]] void raiseFailure(const Diagnostic& d, py::handle cause) {
  const bool device = d.code.rfind("DEVICE_", 0) == 0;
  PyObject* type = device ? gDeviceError : runtimeCheckErrorType();
  const std::string text = utf8Text((d.code.empty() ? std::string() : d.code + ": ") + d.str());
  py::object err = py::reinterpret_borrow<py::object>(type)(text);
  err.attr("code") = d.code;
  err.attr("diagnostic") = diagnosticDict(d);
  if (cause && !cause.is_none()) err.attr("__cause__") = cause;
  PyErr_SetObject(type, err.ptr());
  throw py::error_already_set();
}

void bindDevice(py::module_& m) {
  gDeviceError = PyErr_NewExceptionWithDoc(
      "ukdpack._runtime.DeviceError",
      "A device backend failed or is unavailable (no driver, no device, a failing driver call): str() is "
      "'<CODE>: <message>'; .code and .diagnostic carry the parts.",
      PyExc_RuntimeError, nullptr);
  m.add_object("DeviceError", py::handle(gDeviceError));

  py::class_<PyBackend>(m, "DeviceBackend", "A GPU as ukdpack drives it (CudaBackend or HipBackend).")
      .def_property_readonly("name", [](const PyBackend& b) { return b.backend->name(); })
      .def_property_readonly("device", [](const PyBackend& b) { return b.backend->device(); })
      .def(
          "arch", [](const PyBackend& b) { return b.backend->arch(); },
          "The device arch: 'sm_90', or an AMD device's full target ID ('gfx90a:sramecc+:xnack-').")
      .def(
          "alloc", [](const PyBackend& b, std::size_t nbytes) { return allocate(b.backend, nbytes); },
          py::arg("nbytes"), "Device memory of nbytes (not cleared), freed when the DeviceBuffer goes.")
      .def(
          "synchronize",
          [](const PyBackend& b) {
            Result<bool> r = Result<bool>::success(true);
            {
              py::gil_scoped_release nogil;
              r = b.backend->synchronize();
            }
            check(r);
          },
          "Waits for everything launched on the device.")
      .def("__repr__", &backendRepr);

  py::class_<PyCudaBackend, PyBackend>(m, "CudaBackend",
                                       "The NVIDIA driver (libcuda.so.1, opened at run time), one device.")
      .def(py::init([](int device) {
             PyCudaBackend b;
             b.backend = valueOr(openCudaBackend(device));
             return b;
           }),
           py::arg("device") = 0, "Raises DeviceError naming libcuda.so.1 when there is no NVIDIA driver or device.");

  py::class_<PyHipBackend, PyBackend>(m, "HipBackend", "The HIP runtime (libamdhip64, opened at run time), one device.")
      .def(py::init([](int device) {
             PyHipBackend b;
             b.backend = valueOr(openHipBackend(device));
             return b;
           }),
           py::arg("device") = 0,
           "Raises DeviceError when there is no HIP runtime, no device or no HIP backend built.");

  m.def("hip_backend_compiled", &hipBackendCompiled, "Whether this build has the HIP backend (UKDPACK_WITH_HIP).");

  py::class_<PyBuffer>(m, "DeviceBuffer", "Device memory of one backend, freed when the object goes.")
      .def_property_readonly("size", [](const PyBuffer& b) { return b.buffer->size(); })
      .def_property_readonly(
          "ptr", [](const PyBuffer& b) { return b.buffer->ptr(); },
          "The device address, as an int (0 for an empty buffer).")
      .def(
          "upload",
          [](PyBuffer& b, const py::buffer& data, std::size_t offset) {
            Py_buffer view;
            if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
            const auto bytes = static_cast<std::size_t>(view.len);
            Result<bool> r = b.buffer->upload(view.buf, bytes, offset);
            PyBuffer_Release(&view);
            check(r);
          },
          py::arg("data"), py::arg("offset") = 0, "Copies bytes-like data to the device at offset.")
      .def(
          "download",
          [](const PyBuffer& b, const std::optional<std::size_t>& nbytes, std::size_t offset) {
            const std::size_t size = b.buffer->size();
            const std::size_t n = nbytes.value_or(offset <= size ? size - offset : 0);
            std::string out(n, '\0');
            check(b.buffer->download(out.data(), n, offset));
            return py::bytes(out);
          },
          py::arg("nbytes") = py::none(), py::arg("offset") = 0,
          "The bytes from offset (default: to the end), copied from the device.")
      .def(
          "zero", [](PyBuffer& b) { check(b.buffer->zero()); }, "Sets every byte to 0.")
      .def("__len__", [](const PyBuffer& b) { return b.buffer->size(); })
      .def("__repr__", [](const PyBuffer& b) {
        std::ostringstream out;
        out << "<ukdpack DeviceBuffer: " << b.buffer->size() << " bytes at 0x" << std::hex << b.buffer->ptr() << ">";
        return out.str();
      });

  py::class_<PyPlan>(m, "Plan",
                     "A kept kernel's launches bound to a backend (StateManager.plan): code verified, modules "
                     "loaded, symbols resolved.")
      .def_property_readonly("kernel_id", [](const PyPlan& p) { return p.plan->definition().kernel()->id; })
      .def_property_readonly(
          "launches", [](const PyPlan& p) { return p.plan->launchNames(); },
          "Launch names in run order ('' for a single-launch kernel).")
      .def_property_readonly("symbols",
                             [](const PyPlan& p) {
                               std::vector<std::string> out;
                               for (const PlanLaunch& l : p.plan->launches()) out.push_back(l.symbol);
                               return out;
                             })
      .def_property_readonly("workspace_size", [](const PyPlan& p) { return p.plan->workspaceSize(); })
      .def_property_readonly(
          "module_count", [](const PyPlan& p) { return p.plan->moduleCount(); },
          "Modules loaded: one per distinct code object.")
      .def_property_readonly("arch", [](const PyPlan& p) { return p.plan->arch(); })
      .def(
          "run",
          [](PyPlan& p, const py::object& args, const py::object& workspace) {
            runFromPython(*p.plan, p.workspace, args, workspace, "Plan.run");
          },
          py::arg("args") = py::none(), py::arg("workspace") = py::none(),
          "Runs every launch in order over one workspace (the plan's own, made at the first run, or the "
          "DeviceBuffer given), asking the handler's launch(launch, workspace, args) for each, then "
          "synchronizes. Raises RuntimeCheckError or DeviceError naming the kernel and the launch.")
      .def("__repr__", [](const PyPlan& p) {
        std::string names;
        for (const std::string& n : p.plan->launchNames())
          names += (names.empty() ? "" : ", ") + (n.empty() ? "<single>" : n);
        return "<ukdpack Plan: kernel '" + p.plan->definition().kernel()->name + "' [" + names + "] on " +
               p.plan->backend()->name() + " " + p.plan->arch() + ">";
      });

  py::class_<PySlotPlan>(m, "DeviceSlotProgram",
                         "A slot program's picks planned on one backend (StateManager.plan_slots): run in slot "
                         "order over one workspace every slot sees whole.")
      .def_property_readonly("engine_id", [](const PySlotPlan& p) { return p.program->engine().id; })
      .def_property_readonly("engine_name", [](const PySlotPlan& p) { return p.program->engine().name; })
      .def_property_readonly(
          "slots", [](const PySlotPlan& p) { return p.program->slots(); }, "Slot names in run order.")
      .def_property_readonly(
          "plans",
          [](const PySlotPlan& p) {
            py::list out;
            for (std::size_t i = 0; i < p.program->plans().size(); ++i) {
              py::dict d = planDict(p.program->plans()[i]);
              d["slot"] = p.program->slots()[i];
              out.append(d);
            }
            return out;
          },
          "Per slot in run order: {slot, kernel_id, name, launches, symbols, workspace_size, module_count}.")
      .def_property_readonly(
          "workspace_size", [](const PySlotPlan& p) { return p.program->workspaceSize(); },
          "The largest workspace a pick needs: the one workspace every slot sees.")
      .def(
          "run",
          [](PySlotPlan& p, const py::object& args, const py::object& workspace) {
            runFromPython(*p.program, p.workspace, args, workspace, "DeviceSlotProgram.run");
          },
          py::arg("args") = py::none(), py::arg("workspace") = py::none(),
          "Runs every pick's launches in slot order over one workspace (the program's own, made at the first "
          "run, or the DeviceBuffer given), each pick's handler asked launch(launch, workspace, args) with the "
          "same args, then synchronizes once. Raises RuntimeCheckError or DeviceError naming the slot.")
      .def("__repr__", [](const PySlotPlan& p) {
        std::string picks;
        for (std::size_t i = 0; i < p.program->slots().size(); ++i) {
          picks += (picks.empty() ? "" : ", ") + p.program->slots()[i] + "=" +
                   p.program->plans()[i].definition().kernel()->name;
        }
        return "<ukdpack DeviceSlotProgram: engine '" + p.program->engine().name + "' [" + picks + "] on " +
               p.program->backend()->name() + ">";
      });
}

}  // namespace ukdpack::bindings
