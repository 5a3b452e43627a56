// One registration function per area; module.cpp calls them all.
#pragma once

#include <pybind11/pybind11.h>

namespace ukdpack::bindings {

void bindViews(pybind11::module_& m);  // Kernel, Launch and Source views of loaded kernels
void bindDescriptors(pybind11::module_& m);
void bindArch(pybind11::module_& m);
void bindKpack(pybind11::module_& m);    // KpackArchive, code object symbols
void bindPaths(pybind11::module_& m);    // library containment, folders holding no shard
void bindRuntime(pybind11::module_& m);  // loader, state manager, integrity, revision
void bindDevice(pybind11::module_& m);   // device backends, buffers, plans that run
void bindEdit(pybind11::module_& m);     // byte spans of descriptor text, for rewriting tools
void bindKinds(pybind11::module_& m);    // the kernel-source kinds table
void bindCodes(pybind11::module_& m);    // the diagnostic codes

}  // namespace ukdpack::bindings
