// cabert's glibc malloc settings (lib/core/malloc_tuning.h): the user's own allocator settings win, and once
// tuned a 16 MiB block (an activation of a small model's step) comes from the heap rather than a fresh mmap.
#include "lib/core/malloc_tuning.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <string>

#include "tests/sanitizer/address_sanitizer.h"

namespace cabert {
namespace {

// Unsets an environment variable for the test's lifetime.
class UnsetVariable {
 public:
  explicit UnsetVariable(const char* name) : name_(name) {
    const char* value = std::getenv(name);
    if (value != nullptr) saved_ = value;
    had_ = value != nullptr;
    unsetenv(name);
  }
  ~UnsetVariable() {
    if (had_) setenv(name_, saved_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string saved_;
  bool had_ = false;
};

TEST(MallocTuning, UserSettingsWinAndTunedBlocksComeFromTheHeap) {
#ifdef CABERT_ADDRESS_SANITIZER
  GTEST_SKIP() << "the sanitizer build's malloc ignores mallopt";
#endif
  UnsetVariable preload("LD_PRELOAD"), tunables("GLIBC_TUNABLES");
  setenv("MALLOC_ARENA_MAX", "3", 1);
  tune_malloc_for_tensors();
  EXPECT_EQ(describe_malloc().find("(cabert:"), std::string::npos) << describe_malloc();
  unsetenv("MALLOC_ARENA_MAX");

  tune_malloc_for_tensors();
  EXPECT_EQ(describe_malloc(), "glibc malloc (cabert: mmap_threshold=32MiB trim_threshold=1GiB)");
  const size_t mapped_before = mallinfo2().hblkhd;  // bytes in mmapped blocks
  void* block = std::malloc(16 << 20);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "a 16 MiB block was mmapped";
  std::free(block);
  void* large = std::malloc(64 << 20);  // past the 32 MiB threshold: mmapped, as before
  ASSERT_NE(large, nullptr);
  EXPECT_GE(mallinfo2().hblkhd, mapped_before + (64 << 20));
  std::free(large);
}

}  // namespace
}  // namespace cabert
