// Learned kernels straight from a checkpoint's tensors (no forward pass):
//   relative_kernels[_softmax].png   Chang et al.'s fixed lightweight convolution beta_h[r] of the fixed and
//                                    composite variants: per layer, heads x offsets -n..n, raw (diverging colours
//                                    around 0) and softmax-normalised over the offsets (the kernel a fixed
//                                    lightweight convolution applies, Chang et al. Eq. 4 and their figures)
//   depthwise_value_kernels.png      Eq. 7's depthwise convolution of the values: per layer, each head's kernel
//                                    (the mean over its channels, times its scale s_h)
//   lightconv_kernels[_softmax].png  Wu et al.'s lightweight convolution weights per layer, heads x taps
// Files of a group other than the encoder (the ELECTRA generator, a decoder) start with its name.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "formats/model.pb.h"
#include "lib/pictures/figures.h"

namespace cabert::pictures {

// One kernel matrix [heads, K] of a layer; `first_offset` is the offset of column 0 (-n for centred kernels,
// -(K-1) for causal ones).
struct LayerKernel {
  int64_t layer = 0;
  torch::Tensor kernel;
  int64_t first_offset = 0;
};

// A panel per layer (heads on y, offsets on x). softmax: normalised over the offsets, colours 0..max;
// else raw, diverging around 0.
plot::Figure kernel_grid(const std::vector<LayerKernel>& layers, const std::string& title, bool softmax);

// `tensors`: the checkpoint's model tensors without the "model/" prefix. Empty when the model has no such kernels.
std::vector<NamedFigure> kernel_figures(const pb::ModelConfig& config,
                                        const std::map<std::string, torch::Tensor>& tensors,
                                        const std::string& model_name);

}  // namespace cabert::pictures
