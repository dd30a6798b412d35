// The module tree with parameter counts, as `cabert pretrain --dry-run` prints it.
#pragma once

#include <torch/torch.h>

#include <string>

namespace cabert::models {

int64_t count_parameters(const torch::nn::Module& module);
// One line per module: indented name, type, parameters of the subtree; then the total. Layers with the
// same structure as the previous sibling are listed on one line ("layers.1-11 ... each").
std::string module_tree(const torch::nn::Module& module, const std::string& root_name);
// "13.43M", "812.5K"
std::string human_parameters(int64_t count);

}  // namespace cabert::models
