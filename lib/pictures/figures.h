// The pictures of the papers, as PNG files (drawn by lib/plot):
//   kernel_pictures    learned kernels read from a checkpoint's tensors: Chang et al.'s relative-position
//                      kernels beta_h (raw and softmax-normalised) and depthwise value kernels, Wu et al.'s
//                      lightweight convolution kernels
//   sentence_pictures  what a model does with one sentence: attention maps per layer and head, the average
//                      attention by relative offset, ConvBERT's span-based dynamic kernels (and Wu et al.'s
//                      dynamic ones) per position and head
//   curve_pictures     training curves from metrics files, several runs overlaid; fine-tuning dev scores
// This header holds what they share.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "lib/plot/figure.h"

namespace cabert::pictures {

// A figure and the file name it goes to inside the output directory.
struct NamedFigure {
  std::string file;
  plot::Figure figure;
};

// A [rows, cols] tensor as a heatmap's values (row-major doubles).
plot::Heatmap matrix_heatmap(const torch::Tensor& matrix);

// Panels in a grid of at most `max_columns` columns.
int grid_columns(size_t panels, int max_columns = 4);

// Writes every figure into `dir` (created if missing); returns the paths written.
std::vector<std::string> write_figures(const std::vector<NamedFigure>& figures, const std::string& dir);

}  // namespace cabert::pictures
