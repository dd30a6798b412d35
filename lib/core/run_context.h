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

}  // namespace cabert
