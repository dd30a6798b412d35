// Dropout on hidden states, convolution weights and the decoders' attention probabilities, with Philox masks
// (kernels/dropout_kernels.h): what torch's dropout computes, except that the mask is regenerated in the
// backward from one seed instead of being stored, is the same on every device and under either kernel path,
// and is drawn sixteen counter blocks at a time in vector lanes on the CPU (torch's CPU dropout draws one
// Mersenne Twister number per element on one thread: 7.4 ms against 1.4 ms for a [8, 512, 256] forward on one
// thread, `cabert bench --op dropout,torch-dropout`).
#pragma once

#include <torch/torch.h>

#include "kernels/dropout_kernels.h"

namespace cabert::ops {

// The next 64-bit number of the default CPU generator: --seed makes it reproducible, and a checkpoint's generator
// state resumes it exactly.
uint64_t draw_seed();

// One Philox stream per call: the seed draw_seed()'s, the offset 0.
kernels::DropoutDraw draw_dropout(double p);

// x itself unless training with p > 0 (p in [0, 1)). Fused path: the kernel forward, the same kernel on the
// gradient backward, nothing saved but the seed. Reference path (`--kernels reference`, and CUDA tensors in a
// build without CUDA kernels): x * keep / (1 - p) through autograd, with the same keep-mask.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

}  // namespace cabert::ops
