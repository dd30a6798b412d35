// What the attention routes need to know of a [B, T] bool key mask before they launch anything. On CUDA each
// answer is a copy to the host that waits for the GPU, and an encoder hands each of its layers the same mask, so
// the answers are kept per thread with the mask they were computed for (held by a weak reference: no other tensor
// can take its address while it is kept) and that mask's version (an in-place change raises it): the device is
// asked once per mask, not once per layer and pass.
#pragma once

#include <ATen/core/Tensor.h>

namespace cabert::kernels {

struct KeyMaskFacts {
  bool keyless_row = false;  // some batch row has no real key (it attends to all of its keys alike)
  bool masked_key = false;   // some row with a real key has a masked one
};

// `key_mask`: [B, T] bool, true at real keys. A tensor made in inference mode (no version counter) is asked
// every time.
KeyMaskFacts key_mask_facts(const at::Tensor& key_mask);

}  // namespace cabert::kernels
