#include "lib/core/run_context.h"

namespace cabert {

RunContext& run_context() {
  static RunContext context;
  return context;
}

const char* cabert_version() { return CABERT_VERSION_STRING; }

std::string cabert_version_and_commit() { return std::string(cabert_version()) + "+" + cabert_build_commit(); }

}  // namespace cabert
