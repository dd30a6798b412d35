// Compiled with the flags of the other kernels/cpu files (kernels/CMakeLists.txt), so the macros below say what
// they were vectorised for.
#include <string>

#include "kernels/build_info.h"

namespace cabert::kernels {

std::string cpu_kernel_isa() {
#if defined(__AVX512F__)
  return "AVX-512";
#elif defined(__AVX2__)
  return "AVX2";
#elif defined(__SSE4_2__)
  return "SSE4.2";
#elif defined(__x86_64__)
  return "baseline x86-64";
#elif defined(__aarch64__)
  return "AArch64";
#else
  return "unknown";
#endif
}

}  // namespace cabert::kernels
