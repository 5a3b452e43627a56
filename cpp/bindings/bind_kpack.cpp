#include "modules.hpp"

namespace ukdpack::bindings {

void bindKpack(pybind11::module_& m) { (void)m; }

}  // namespace ukdpack::bindings
