// Mixed precision (`pretrain --amp`): bfloat16 autocast on CPU or CUDA, and what the convolution and
// relative-position ops do under it. Their kernels compute in float or double, so under autocast, or given
// bfloat16 / float16 tensors, an op runs in float32 with autocast off inside and returns float32, as
// autocast's own float32 ops (softmax, layer_norm, losses) do; autograd casts the gradients back to each
// input's dtype. Chosen over native bf16 kernels: the ops are a small share of a step's time next to the
// matmuls that autocast does run in bf16, and float accumulation keeps them exact to float tolerance.
#pragma once

#include <torch/torch.h>

#include <initializer_list>
#include <optional>

namespace cabert::ops {

// Autocast to bfloat16 for the device's type while alive (nothing when `enabled` is false).
class AutocastScope {
 public:
  AutocastScope(bool enabled, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  torch::DeviceType type_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// Whether an op given these tensors must run through FloatRegion: one of them is bfloat16 or float16, or
// autocast is on for the first one's device (reduced_precision says so), and the caller is not already inside
// a FloatRegion.
bool needs_float_region(std::initializer_list<torch::Tensor> tensors);

// The reduced precision these tensors ask for: the first bfloat16 / float16 one's dtype, else autocast's dtype
// when it is on for the first one's device, else none. (An op that runs in float32 may still hand a
// tensor-core kernel inside it that dtype, as the composite attention's regions do on CUDA.)
std::optional<at::ScalarType> reduced_precision(std::initializer_list<torch::Tensor> tensors);

// Autocast off (its dispatch keys excluded) while alive; see needs_float_region.
class FloatRegion {
 public:
  FloatRegion();
  ~FloatRegion();

 private:
  c10::impl::ExcludeDispatchKeyGuard no_autocast_;
};

// `t` as float32 when it is bfloat16 or float16; any other tensor (float, double, bool, undefined) as it is.
torch::Tensor to_float32(const torch::Tensor& t);

}  // namespace cabert::ops
