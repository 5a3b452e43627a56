#include "pyjson.hpp"

#include <string>

namespace ukdpack::bindings {

namespace {
Json convert(const py::handle& obj, int depth) {
  if (depth > 512) throw py::value_error("object nests deeper than 512 levels");
  if (obj.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(obj)) return obj.cast<bool>();
  if (py::isinstance<py::int_>(obj)) {
    try {
      return obj.cast<std::int64_t>();
    } catch (const py::cast_error&) {
      return obj.cast<std::uint64_t>();
    }
  }
  if (py::isinstance<py::float_>(obj)) return obj.cast<double>();
  if (py::isinstance<py::str>(obj)) return obj.cast<std::string>();
  if (py::isinstance<py::dict>(obj)) {
    Json out = Json::object();
    for (const auto& item : py::reinterpret_borrow<py::dict>(obj)) {
      if (!py::isinstance<py::str>(item.first)) throw py::value_error("object keys must be strings");
      out[item.first.cast<std::string>()] = convert(item.second, depth + 1);
    }
    return out;
  }
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    Json out = Json::array();
    for (const auto& item : obj) out.push_back(convert(item, depth + 1));
    return out;
  }
  throw py::value_error("cannot convert " + std::string(py::str(py::type::of(obj))) + " to JSON");
}

// Object keys are interned: a tree's documents repeat a few dozen names (id, name,
// kernel_source, ...) tens of thousands of times; one str each, not one per use.
py::object internedKey(const std::string& key) {
  PyObject* s = PyUnicode_FromStringAndSize(key.data(), static_cast<Py_ssize_t>(key.size()));
  if (s == nullptr) throw py::error_already_set();
  PyUnicode_InternInPlace(&s);
  return py::reinterpret_steal<py::object>(s);
}

}  // namespace

Json toJson(const py::handle& obj, bool parseStrings) {
  if (parseStrings && py::isinstance<py::str>(obj)) {
    Json parsed = Json::parse(obj.cast<std::string>(), nullptr, false, true);
    if (parsed.is_discarded()) throw py::value_error("not valid JSON text");
    return parsed;
  }
  return convert(obj, 0);
}

py::object fromJson(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return py::none();
    case Json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case Json::value_t::number_integer:
      return py::int_(value.get<std::int64_t>());
    case Json::value_t::number_unsigned:
      return py::int_(value.get<std::uint64_t>());
    case Json::value_t::number_float:
      return py::float_(value.get<double>());
    case Json::value_t::string:
      return py::str(value.get_ref<const std::string&>());
    case Json::value_t::array: {
      py::list out;
      for (const auto& item : value) out.append(fromJson(item));
      return std::move(out);
    }
    case Json::value_t::object: {
      py::dict out;
      for (auto it = value.begin(); it != value.end(); ++it) out[internedKey(it.key())] = fromJson(it.value());
      return std::move(out);
    }
    default:
      throw py::value_error("binary JSON values are not supported");
  }
}

py::dict diagnosticDict(const Diagnostic& d) {
  py::dict out;
  out["severity"] = severityName(d.severity);
  out["code"] = d.code;
  out["file"] = utf8Text(d.file);  // a str cannot hold bytes that are not UTF-8
  out["path"] = utf8Text(d.jsonPath);
  out["message"] = utf8Text(d.message);
  return out;
}

py::list diagnosticList(const std::vector<Diagnostic>& diags) {
  py::list out;
  for (const Diagnostic& d : diags) out.append(diagnosticDict(d));
  return out;
}

void raiseDiagnostics(const std::vector<Diagnostic>& diags) {
  std::string msg;
  for (const Diagnostic& d : diags) {
    if (d.severity != Severity::Error) continue;
    if (!msg.empty()) msg += "\n";
    msg += utf8Text(d.str());
  }
  throw py::value_error(msg.empty() ? "invalid input" : msg);
}

}  // namespace ukdpack::bindings
