#include "lib/models/mixer.h"

#include "lib/core/errors.h"

namespace cabert::models {

void MixerState::reorder(const torch::Tensor& index) {
  for (torch::Tensor* cached : {&inputs, &keys, &values}) {
    if (cached->defined()) *cached = cached->index_select(0, index.to(cached->device()));
  }
}

torch::Tensor Mixer::forward_step(const torch::Tensor&, MixerState&) {
  throw UsageError(str("the ", name(),
                       " mixer looks at both sides of every position, so it cannot decode step by "
                       "step; decoders use causal mixers (e.g. conv_block.causal=true)"));
}

}  // namespace cabert::models
