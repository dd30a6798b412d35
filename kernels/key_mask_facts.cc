#include "kernels/key_mask_facts.h"

#include <ATen/ops/stack.h>
#include <c10/util/intrusive_ptr.h>

namespace cabert::kernels {
namespace {

using TensorPtr = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
using WeakTensorPtr = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

KeyMaskFacts computed(const at::Tensor& key_mask) {
  const at::Tensor keyless = key_mask.any(1).logical_not();  // [B]
  const at::Tensor masked = key_mask.logical_not().logical_and(keyless.logical_not().unsqueeze(1));
  const at::Tensor answers = at::stack({keyless.any(), masked.any()}).cpu();  // one wait for the device
  return {answers[0].item<bool>(), answers[1].item<bool>()};
}

}  // namespace

KeyMaskFacts key_mask_facts(const at::Tensor& key_mask) {
  struct Kept {
    WeakTensorPtr mask{TensorPtr()};
    int64_t version = 0;
    KeyMaskFacts facts;
  };
  thread_local Kept kept;
  if (key_mask.is_inference()) return computed(key_mask);
  if (kept.mask._unsafe_get_target() == key_mask.unsafeGetTensorImpl() && kept.version == key_mask._version()) {
    return kept.facts;
  }
  kept.facts = computed(key_mask);
  kept.mask = WeakTensorPtr(key_mask.getIntrusivePtr());
  kept.version = key_mask._version();
  return kept.facts;
}

}  // namespace cabert::kernels
