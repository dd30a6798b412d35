// How the executables are linked: the C++ standard library's own functions come from libstdc++.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace cabert {
namespace {

// The shared object that holds the code at `address`, as the dynamic linker resolved it.
std::string object_holding(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "(no object)";
  return info.dli_fname;
}

// The LibTorch wheel's libtorch_cpu (2.15; libtorch in 2.11) exports a std::filesystem of its own, built by
// another GCC, with no symbol versions. Searched before libstdc++, it served every std::filesystem call of
// cabert's binaries, mixed with the inline parts of this compiler's: on the first GPU machine (GCC 13.3, torch
// 2.11) a temporary folder's remove_all jumped to address 0. The link puts libstdc++ before LibTorch
// (cmake/CabertTorch.cmake).
TEST(Linking, StdFilesystemComesFromLibstdcxx) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  using Status = std::filesystem::file_status (*)(const std::filesystem::path&, std::error_code&);
  const RemoveAll remove_all = &std::filesystem::remove_all;
  const Status status = &std::filesystem::status;
  for (const std::string& holder :
       {object_holding(reinterpret_cast<void*>(remove_all)), object_holding(reinterpret_cast<void*>(status))}) {
    EXPECT_NE(holder.find("libstdc++"), std::string::npos) << holder;
  }
}

}  // namespace
}  // namespace cabert
