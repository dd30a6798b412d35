// The Python modelling code `cabert export` writes beside the weights of the models no transformers class
// computes: lib/interop/python/configuration_cabert.py and modeling_cabert.py, embedded into the binary at
// build time (cmake/CabertEmbedFiles.cmake), registered in config.json through `auto_map`.
#pragma once

#include <string>
#include <vector>

namespace cabert::interop {

struct EmbeddedFile {
  std::string name;  // file name, e.g. "modeling_cabert.py"
  std::string text;
};

// configuration_cabert.py and modeling_cabert.py, as in the source tree when the binary was built.
const std::vector<EmbeddedFile>& hf_python_sources();

}  // namespace cabert::interop
