// Byte spans of descriptor text, for tools that rewrite descriptors in place
// (ukdpack migrate): Python plans the edit, the runtime says where each value
// lies, so no Python module has to parse descriptor JSON.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "modules.hpp"
#include "pyjson.hpp"
#include "ukdpack/json/json_spans.hpp"
#include "ukdpack/load/loader.hpp"

namespace ukdpack::bindings {

namespace py = pybind11;

void bindEdit(py::module_& m) {
  m.def(
      "json_spans",
      [](const py::bytes& data) -> py::tuple {
        const std::string text = data;
        auto spans = jsonSpans(text);
        if (!spans) {
          return py::make_tuple(py::none(), utf8Text(spans.error().jsonPath), utf8Text(spans.error().message));
        }
        py::list out;
        for (const JsonSpan& s : spans.value()) {
          py::dict d;
          d["path"] = s.path;
          d["begin"] = s.begin;
          d["end"] = s.end;
          d["key_begin"] = s.member ? py::object(py::int_(s.keyBegin)) : py::object(py::none());
          d["key_end"] = s.member ? py::object(py::int_(s.keyEnd)) : py::object(py::none());
          d["indent"] = s.indent;
          d["inline"] = s.inlineStart;
          out.append(std::move(d));
        }
        return py::make_tuple(std::move(out), py::none(), py::none());
      },
      py::arg("text"),
      "(spans, None, None) for descriptor text (bytes) the reader accepts, else (None, json_path, "
      "message). One dict per value in document order: path, begin, end (byte offsets of the value), "
      "key_begin, key_end (of an object member's quoted key, else None), indent (the blanks opening "
      "the line it starts on) and inline (whether something precedes it on that line).");
  m.def(
      "read_json_text",
      [](const py::bytes& data) -> py::tuple {
        auto doc = parseDescriptorText(std::string(data));
        if (!doc) return py::make_tuple(py::none(), doc.error().jsonPath, doc.error().message);
        return py::make_tuple(fromJson(doc.value()), py::none(), py::none());
      },
      py::arg("text"),
      "read_json_file's reading of bytes already read: (value, None, None), else (None, json_path, "
      "message).");
  m.def(
      "walk_root",
      [](const std::string& root, const std::vector<std::string>& excludeFolders) -> py::tuple {
        std::vector<Diagnostic> diags;
        const std::vector<WalkedFile> files = walkRoot(root, diags, excludeFolders);
        py::list out;
        // A name is bytes: the file system's, which need not be UTF-8 (os.fsdecode reads it).
        for (const WalkedFile& f : files) out.append(py::make_tuple(py::bytes(f.rel), f.type));
        return py::make_tuple(std::move(out), diagnosticList(diags));
      },
      py::arg("root"), py::arg("exclude_folders") = std::vector<std::string>{},
      "The loader's walk of a descriptor root: ([(rel as bytes, type)], diagnostics), sorted by "
      "rel; the diagnostics say what was skipped (notes) or refused (a FIFO, a link leaving the "
      "root, a folder that cannot be listed).");
  m.def(
      "descriptor_type", [](const std::string& name) { return descriptorType(name); }, py::arg("name"),
      "'foo.kdp.json' -> 'kdp': the type token of a descriptor file name as the loader's walk "
      "reads it; None for a name that is no descriptor's.");
  m.def(
      "read_versions",
      [](const std::string& type) {
        if (!descriptorType("x." + type + ".json")) throw py::value_error("unknown descriptor type '" + type + "'");
        const Version max = VersionLimits{}.of(type);
        std::vector<std::string> out;
        for (int minor = 0; minor <= max.minor; ++minor) out.push_back(Version{max.major, minor}.str());
        return out;
      },
      py::arg("type"),
      "Every version of a descriptor type ('ukd') this build reads, oldest first: the loader's "
      "limits (['1.0', '1.1']).");
}

}  // namespace ukdpack::bindings
