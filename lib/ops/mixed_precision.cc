#include "lib/ops/mixed_precision.h"

#include <ATen/autocast_mode.h>

namespace cabert::ops {
namespace {
thread_local int float_region_depth = 0;

bool low_precision(const torch::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}
}  // namespace

AutocastScope::AutocastScope(bool enabled, const torch::Device& device) : enabled_(enabled), type_(device.type()) {
  if (!enabled_) return;
  was_enabled_ = at::autocast::is_autocast_enabled(type_);
  was_dtype_ = at::autocast::get_autocast_dtype(type_);
  at::autocast::set_autocast_enabled(type_, true);
  at::autocast::set_autocast_dtype(type_, at::kBFloat16);
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  at::autocast::set_autocast_enabled(type_, was_enabled_);
  at::autocast::set_autocast_dtype(type_, was_dtype_);
  if (!was_enabled_) at::autocast::clear_cache();
}

std::optional<at::ScalarType> reduced_precision(std::initializer_list<torch::Tensor> tensors) {
  for (const auto& t : tensors) {
    if (low_precision(t)) return t.scalar_type();
  }
  // Autocast exists per device type; cabert uses it on CPU and CUDA (other devices reach the ops' own errors).
  const torch::Tensor& first = *tensors.begin();
  if (!first.defined() || (!first.device().is_cpu() && !first.device().is_cuda())) return std::nullopt;
  if (!at::autocast::is_autocast_enabled(first.device().type())) return std::nullopt;
  return at::autocast::get_autocast_dtype(first.device().type());
}

bool needs_float_region(std::initializer_list<torch::Tensor> tensors) {
  return float_region_depth == 0 && reduced_precision(tensors).has_value();
}

FloatRegion::FloatRegion() : no_autocast_(c10::autocast_dispatch_keyset) { ++float_region_depth; }
FloatRegion::~FloatRegion() { --float_region_depth; }

torch::Tensor to_float32(const torch::Tensor& t) { return low_precision(t) ? t.to(at::kFloat) : t; }

}  // namespace cabert::ops
