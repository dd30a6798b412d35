// Plain ATen below autograd and autocast, for kernels built from ATen calls (kernels/chunked,
// kernels/regions): the products run in the inputs' dtype and nothing is recorded (the op above owns the
// graph; lib/ops/attention_ops.cc).
#pragma once

#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace cabert::kernels {

struct PlainAten {
  at::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
};

}  // namespace cabert::kernels
