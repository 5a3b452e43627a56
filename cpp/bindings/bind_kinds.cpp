// The kernel-source kinds table (sourceKinds()), as Python's ukdpack.authored.kinds
// reads it: the one source of each kind's fields, producer and packed form.
#include <pybind11/pybind11.h>

#include "modules.hpp"
#include "ukdpack/model/descriptors.hpp"

namespace py = pybind11;

namespace ukdpack::bindings {

namespace {

const char* fieldTypeName(SourceFieldType t) {
  switch (t) {
    case SourceFieldType::String:
      return "string";
    case SourceFieldType::RelativePath:
      return "relative_path";
    case SourceFieldType::Object:
      return "object";
    case SourceFieldType::Build:
      return "build";
    case SourceFieldType::Sha256:
      return "sha256";
    case SourceFieldType::Signature:
      return "signature";
    case SourceFieldType::TargetDigests:
      return "target_digests";
  }
  return "string";
}

// "" in the table is "none" in Python.
py::object orNone(const char* s) { return *s != '\0' ? py::object(py::str(s)) : py::object(py::none()); }

}  // namespace

void bindKinds(py::module_& m) {
  m.def(
      "source_kinds",
      []() {
        py::list out;
        for (const SourceKindInfo& k : sourceKinds()) {
          py::list fields;
          for (const SourceField& f : k.fields) {
            py::dict field;
            field["name"] = f.name;
            field["type"] = fieldTypeName(f.type);
            field["required"] = f.required;
            fields.append(field);
          }
          py::dict item;
          item["name"] = k.name;
          item["fields"] = fields;
          item["file_field"] = orNone(k.fileField);
          item["file_what"] = k.fileWhat;
          item["launchable"] = k.launchable;
          item["entry_type"] = orNone(k.entryType);
          item["authored"] = k.authored;
          item["producer"] = producerName(k.producer);
          item["packed"] = k.packed();
          item["symbol_field"] = orNone(k.symbolField);
          item["stem_field"] = k.stemField;
          item["compiler"] = orNone(k.compiler);
          out.append(item);
        }
        return out;
      },
      "The runtime's table of kernel-source kinds, in table order: name, fields ([{name, type, "
      "required}], in reading order), file_field, file_what, launchable, entry_type, authored, producer "
      "(compile, prebuilt, module, none, packed), packed, symbol_field, stem_field, compiler.");
  m.def(
      "listed_kinds", [](bool authoredOnly) { return listedKinds(authoredOnly); }, py::arg("authored_only"),
      "The kinds as a message lists them ('hip, hsaco, embedded_source, cuda or builder').");
}

}  // namespace ukdpack::bindings
