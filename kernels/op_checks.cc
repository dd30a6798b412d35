#include "kernels/op_checks.h"

#include <sstream>

#include "lib/core/errors.h"

namespace cabert::kernels {

std::string shape_of(const at::Tensor& t) {
  if (!t.defined()) return "none";
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

void require(bool ok, const char* op, const std::string& message) {
  if (!ok) throw UsageError(str(op, ": ", message));
}

}  // namespace cabert::kernels
