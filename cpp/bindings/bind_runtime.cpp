#include "modules.hpp"

namespace ukdpack::bindings {

void bindRuntime(pybind11::module_& m) { (void)m; }

}  // namespace ukdpack::bindings
