// Facts about the running command that every output file records in its header: the argv and the
// resolved options. Set once by cmd/main.cc.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cabert {

struct RunContext {
  std::vector<std::string> argv;
  std::map<std::string, std::string> options;
  std::string config;  // the effective options as a --config file (cmd/main.cc)
};

RunContext& run_context();
const char* cabert_version();
// The source commit the binary was built from: 12 hex digits, "-dirty" when tracked files differed from it, or
// "unknown" when built outside a git checkout (generated at build time by cmake/CabertBuildCommit.cmake).
const char* cabert_build_commit();
// Both, as SemVer build metadata: "0.1.0+1a2b3c4d5e6f" (what file headers and bench records record).
std::string cabert_version_and_commit();

}  // namespace cabert
