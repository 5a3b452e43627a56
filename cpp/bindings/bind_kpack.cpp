// KpackArchive and the code-object symbol reader, as ukdpack._runtime sees them.
// Failures raise KpackError / CodeObjectError (both ValueError) with the C++ message.
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "modules.hpp"
#include "pyjson.hpp"
#include "ukdpack/archive/codeobject.hpp"
#include "ukdpack/archive/kpack.hpp"
#include "ukdpack/archive/prebuilt.hpp"

namespace ukdpack::bindings {

namespace {

struct KpackFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct CodeObjectFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class T>
T valueOr(Result<T>&& r) {
  if (!r) throw KpackFailure(utf8Text(r.error().str()));
  return std::move(r).value();
}

template <class T>
T codeValueOr(Result<T>&& r) {
  if (!r) throw CodeObjectFailure(utf8Text(r.error().str()));
  return std::move(r).value();
}

// A metadata integer as Python holds it: negative or unsigned 64-bit alike.
py::int_ metadataInt(const MetadataInt& v) {
  return v.negative ? py::int_(static_cast<std::int64_t>(v.bits)) : py::int_(v.bits);
}

// A name from a code object's bytes as str, undecodable bytes replaced (U+FFFD).
py::str decodedName(const std::string& s) {
  return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

py::tuple metadataRow(const CodeObjectMetadata& meta) {
  py::list kernels;
  for (const auto& [name, args] : meta.kernels) {
    py::list row;
    for (const MetadataArg& a : args) {
      row.append(py::make_tuple(a.kind, metadataInt(a.size), metadataInt(a.offset),
                                a.name ? py::object(py::str(*a.name)) : py::object(py::none())));
    }
    kernels.append(py::make_tuple(decodedName(name), row));
  }
  return py::make_tuple(meta.target ? py::object(decodedName(*meta.target)) : py::object(py::none()), kernels);
}

KpackLimits limitsFor(std::uint64_t maxOriginalSize) {
  KpackLimits limits;
  limits.maxOriginalSize = maxOriginalSize;
  return limits;
}

py::bytes toBytes(const std::vector<std::uint8_t>& v) {
  return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

}  // namespace

void bindKpack(py::module_& m) {
  py::register_exception<KpackFailure>(m, "KpackError", PyExc_ValueError);
  py::register_exception<CodeObjectFailure>(m, "CodeObjectError", PyExc_ValueError);

  py::class_<KpackArchive>(m, "KpackArchive", "A kpack archive (KPAK v1) opened by the C++ runtime's reader.")
      .def(py::init([](const std::string& path, std::uint64_t maxOriginalSize) {
             Result<KpackArchive> r = [&] {
               py::gil_scoped_release unlocked;
               return KpackArchive::open(path, limitsFor(maxOriginalSize));
             }();
             return valueOr(std::move(r));
           }),
           py::arg("path"), py::arg("max_original_size") = KpackLimits{}.maxOriginalSize)
      .def_static(
          "from_bytes",
          [](const py::bytes& data, const std::string& name, std::uint64_t maxOriginalSize) {
            std::string copy = data;
            Result<KpackArchive> r = [&] {
              py::gil_scoped_release unlocked;
              return KpackArchive::fromBytes(std::move(copy), name, limitsFor(maxOriginalSize));
            }();
            return valueOr(std::move(r));
          },
          py::arg("data"), py::arg("name") = "<memory>", py::arg("max_original_size") = KpackLimits{}.maxOriginalSize)
      .def("path", &KpackArchive::path)
      .def("group", &KpackArchive::groupName)
      .def("family", &KpackArchive::archFamily)
      .def("arches", &KpackArchive::arches)
      .def("scheme", &KpackArchive::compressionScheme)
      .def("keys", &KpackArchive::keys, "Toc keys, sorted.")
      .def(
          "entry",
          [](const KpackArchive& a, const std::string& key, const std::string& arch) -> py::object {
            const KpackEntry* e = a.find(key, arch);
            if (e == nullptr) return py::none();
            py::dict d;
            d["type"] = e->type;
            d["ordinal"] = e->ordinal;
            d["original_size"] = e->originalSize;
            d["metadata"] = fromJson(e->metadata);
            return std::move(d);
          },
          py::arg("toc_key"), py::arg("arch"), "{type, ordinal, original_size, metadata} of one entry, or None.")
      .def(
          "get",
          [](const KpackArchive& a, const std::string& key, const std::string& arch) {
            Result<std::vector<std::uint8_t>> r = [&] {
              py::gil_scoped_release unlocked;
              return a.get(key, arch);
            }();
            return toBytes(valueOr(std::move(r)));
          },
          py::arg("toc_key"), py::arg("arch"), "The decompressed bytes of (toc key, arch).")
      .def("__contains__", [](const KpackArchive& a, const std::pair<std::string, std::string>& item) {
        return a.find(item.first, item.second) != nullptr;
      });

  m.def(
      "code_object_elf_span",
      [](const py::bytes& data) {
        const std::string_view view = data;
        const CodeObjectView found = codeValueOr(inspectCodeObject(view));
        return py::make_tuple(static_cast<std::size_t>(found.elf.data() - view.data()), found.elf.size());
      },
      py::arg("data"),
      "(offset, size) of the ELF image of a code object: all of it, or the one amdgcn entry of a clang "
      "offload bundle. Raises ValueError naming what the bytes are instead.");
  m.def(
      "read_prebuilt_objects",
      [](const std::vector<std::string>& paths, unsigned threads, int zstdLevel, int spoolFd) {
        std::vector<PrebuiltObject> found;
        {
          py::gil_scoped_release unlocked;
          found = readPrebuiltObjects(paths, threads, zstdLevel, spoolFd);
        }
        const bool spooled = zstdLevel > 0 && spoolFd >= 0;
        py::list out;
        for (PrebuiltObject& o : found) {
          if (!o.ok) {
            out.append(py::none());
            continue;
          }
          // With a frame, the image itself stays here: the archive stores the frame.
          py::object frame = spooled         ? py::object(py::make_tuple(o.spoolOffset, o.spoolSize, o.elfSize))
                             : zstdLevel > 0 ? py::object(py::bytes(o.frame))
                                             : py::object(py::none());
          py::object elf =
              zstdLevel > 0 ? py::object(py::none()) : py::object(py::bytes(o.bytes.data() + o.elfOffset, o.elfSize));
          out.append(py::make_tuple(elf, o.sha256, py::bytes(o.bytes.data() + o.noteOffset, o.noteSize), frame));
          std::string().swap(o.bytes);  // freed as it goes: the batch holds each file once
          std::string().swap(o.frame);
        }
        return out;
      },
      py::arg("paths"), py::arg("threads") = 0, py::arg("zstd_level") = 0, py::arg("spool_fd") = -1,
      "Prebuilt code objects read in one batch on `threads` threads (0: one per core), the GIL released: "
      "per path (the ELF image, or None when `zstd_level` > 0; its sha256 hex; the AMDGPU metadata note's "
      "msgpack descriptor; the image as one zstd frame of `zstd_level`, or None when 0), or None when "
      "the file is not one the batch takes as it expects (unreadable, no AMDGPU ELF with a metadata note, "
      "malformed): read that one on the packer's own path, which words the problem. With `spool_fd` (a "
      "writable file) and `zstd_level` > 0, each frame is appended to that file as an archive record (u32 "
      "length, then the frame) and the last item is (record offset, record size, image size) instead.");
  m.def(
      "check_code_object_target",
      [](const py::bytes& data, const std::string& arch) {
        const std::string_view view = data;
        return codeValueOr(checkCodeObjectTarget(view, arch));
      },
      py::arg("data"), py::arg("arch") = "",
      "The processor an AMDGPU code object is built for once its ELF header (e_flags) and its metadata "
      "note's amdhsa.target agree (and, with `arch`, it runs there); '' for a cubin. Raises ValueError "
      "naming both sides when they disagree.");
  m.def(
      "code_object_metadata",
      [](const py::bytes& data) {
        const std::string_view view = data;
        return metadataRow(codeValueOr(codeObjectMetadata(view)));
      },
      py::arg("data"),
      "(target or None, [(kernel, [(kind, size, offset, name or None)])]) of a code object: an AMDGPU "
      "object's from its metadata note (hidden arguments dropped, kernels in the note's order), a cubin's "
      "from its .nv.info sections (kernels by name). Raises ValueError naming what is wrong.");
  m.def(
      "amdgpu_note_metadata",
      [](const py::bytes& note) {
        const std::string_view view = note;
        return metadataRow(codeValueOr(amdgpuNoteMetadata(view)));
      },
      py::arg("note"),
      "code_object_metadata of an AMDGPU object whose metadata note's descriptor is `note` (what "
      "read_prebuilt_objects gives).");
  m.def(
      "code_object_kernels",
      [](const py::bytes& data) {
        const std::string_view view = data;
        return codeValueOr(codeObjectKernels(view));
      },
      py::arg("data"), "Sorted kernel symbols of a code object (bare AMDGPU ELF or bundle).");
  m.def(
      "code_object_has_kernel",
      [](const py::bytes& data, const std::string& symbol) {
        const std::string_view view = data;
        return codeValueOr(codeObjectHasKernel(view, symbol));
      },
      py::arg("data"), py::arg("symbol"), "Whether the code object defines kernel `symbol`.");
}

}  // namespace ukdpack::bindings
