// Typed, read-only views of a loaded kernel for Python: Kernel, Launch and
// Source (bind_views.cpp). Built on the launch helpers (launchNamesOf,
// singleLaunchSource, allLaunchSources), so Python never reads a kernel's
// launches by key; each view keeps what owns the kernel alive.
#pragma once

#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ukdpack/load/loader.hpp"
#include "ukdpack/model/descriptors.hpp"

namespace ukdpack::bindings {

namespace py = pybind11;

// The Kernel view of `kernel`, which `owner` (a DescriptorSet, a parsed
// document) keeps alive.
py::object kernelView(std::shared_ptr<const void> owner, const Kernel& kernel);

// A document as Python takes it from a load: a Document (bind_views.cpp) holding its
// text, read into Python objects when asked (the packer converts the documents of the
// packs it makes, not of every kernel it models); a value with no text (built in memory),
// converted now.
py::object documentOf(const JsonText& document);

// Sorted launch names (launchNamesOf); empty for a single-launch kernel.
std::vector<std::string> sortedLaunches(const Kernel& kernel);
// Whether every launch has a packed code object (only those have launch code).
bool isPacked(const Kernel& kernel);
// The kinds of a kernel's launch sources, sorted.
std::vector<std::string> kindsOf(const Kernel& kernel);

// (kernel id, launch name or nullopt for the single launch) of the launch of a
// kernel of `set` whose source holds the finding at (`file`, `jsonPath`): how a
// finding about a launch is keyed. nullopt when the path lies in no launch.
std::optional<std::pair<std::string, std::optional<std::string>>> launchAt(const DescriptorSet& set,
                                                                           const std::string& file,
                                                                           const std::string& jsonPath);

// One row per launch whose source's kind is in `kinds`, pack by pack in the set's
// order, each pack's kernels in order, each kernel's launches sorted by name:
// (pack file, kernel file, kernel JSON path, kernel id, kernel name, the
// source's JSON path, kind, the file its file field names or None, Source view).
// What the packer's toc-key rule reads, without a model of every kernel.
py::list codeLaunchRows(const std::shared_ptr<const DescriptorSet>& set, const std::vector<std::string>& kinds);

// Role maps (role -> arch or "default" -> UHD ids) as nested dicts: an engine's
// heuristics, or a slot's.
py::dict roleMapsDict(const std::map<std::string, HeuristicRoleMap>& roles);
// An engine's slots in run order, one dict each (name, knobs, knob_ids, heuristics
// role -> arch -> UHD ids, json_path): how Python reads UED 1.1 `slots`. Empty for an
// unslotted engine.
py::list slotViews(const Engine& engine);
// A slot name, or None (KDP 1.1 `slot`, UHD 1.1 `slot`).
py::object slotOrNone(const std::optional<std::string>& slot);

}  // namespace ukdpack::bindings
