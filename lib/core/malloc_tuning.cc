#include "lib/core/malloc_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace cabert {
namespace {

constexpr int kMmapThreshold = 32 << 20;  // glibc's largest accepted value (HEAP_MAX_SIZE / 2 on 64-bit)
constexpr int kTrimThreshold = 1 << 30;

bool tuned = false;

bool user_chose_malloc() {
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && *preload != '\0') return true;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "MALLOC_", 7) == 0) return true;
    const bool tunables = std::strncmp(*entry, "GLIBC_TUNABLES=", 15) == 0;
    if (tunables && std::strstr(*entry, "glibc.malloc.") != nullptr) return true;
  }
  return false;
}

}  // namespace

void tune_malloc_for_tensors() {
  if (tuned || user_chose_malloc()) return;
  // mallopt returns 1 on success; a refused value leaves glibc's default in force, which is only slower.
  tuned = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  tuned = (mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1) && tuned;
}

std::string describe_malloc() {
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && *preload != '\0') return std::string("LD_PRELOAD=") + preload;
  std::string out = "glibc malloc";
  if (tuned) out += " (cabert: mmap_threshold=32MiB trim_threshold=1GiB)";
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "MALLOC_", 7) == 0 || std::strncmp(*entry, "GLIBC_TUNABLES=", 15) == 0) {
      out += std::string(" ") + *entry;
    }
  }
  return out;
}

}  // namespace cabert
