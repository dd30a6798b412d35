#include "kernels/conv_checks.h"

#include <string>

#include "kernels/op_checks.h"
#include "lib/core/errors.h"

namespace cabert::kernels {
namespace {

void check_floating(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  require(t.is_floating_point(), op, str("expected ", name, " to be float or double, got ", t.scalar_type()));
  require(t.scalar_type() == x.scalar_type(), op,
          str("expected ", name, " of dtype ", x.scalar_type(), " (as x), got ", t.scalar_type()));
  require(t.device() == x.device(), op, str("expected ", name, " on ", x.device(), " (as x), got ", t.device()));
}

ConvShape check_input(const char* op, const at::Tensor& x, int64_t kernel_size, int64_t padding_left,
                      const at::Tensor& mask) {
  require(x.defined() && x.dim() == 3, op, str("expected x of shape [B, T, C], got ", shape_of(x)));
  require(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, op,
          str("expected x to be float or double, got ", x.scalar_type()));
  ConvShape shape;
  shape.batch = x.size(0);
  shape.length = x.size(1);
  shape.channels = x.size(2);
  shape.kernel_size = kernel_size;
  require(kernel_size >= 1, op, str("expected a kernel size >= 1, got ", kernel_size));
  require(
      padding_left >= 0 && padding_left <= kernel_size - 1, op,
      str("expected padding_left in [0, ", kernel_size - 1, "] for kernel size ", kernel_size, ", got ", padding_left));
  if (mask.defined()) {
    require(mask.scalar_type() == at::kBool, op, str("expected a bool mask, got ", mask.scalar_type()));
    require(mask.dim() == 2 && mask.size(0) == shape.batch && mask.size(1) == shape.length, op,
            str("expected mask of shape [", shape.batch, ", ", shape.length, "], got ", shape_of(mask)));
    require(mask.device() == x.device(), op, str("expected mask on ", x.device(), ", got ", mask.device()));
  }
  return shape;
}

void check_heads(const char* op, ConvShape& shape, int64_t heads) {
  require(heads >= 1 && shape.channels % heads == 0, op,
          str("expected the ", shape.channels, " channels to split into ", heads, " equal head blocks"));
  shape.heads = heads;
}

}  // namespace

ConvShape check_lightweight_conv(const at::Tensor& x, const at::Tensor& weight, int64_t padding_left,
                                 const at::Tensor& mask) {
  const char* op = "lightweight_conv";
  require(weight.defined() && weight.dim() == 2, op, str("expected weight of shape [H, K], got ", shape_of(weight)));
  ConvShape shape = check_input(op, x, weight.size(1), padding_left, mask);
  check_floating(op, "weight", weight, x);
  check_heads(op, shape, weight.size(0));
  return shape;
}

ConvShape check_dynamic_conv(const at::Tensor& x, const at::Tensor& kernels, int64_t padding_left,
                             const at::Tensor& mask) {
  const char* op = "dynamic_conv";
  require(kernels.defined() && kernels.dim() == 4, op,
          str("expected kernels of shape [B, T, H, K], got ", shape_of(kernels)));
  ConvShape shape = check_input(op, x, kernels.size(3), padding_left, mask);
  check_floating(op, "kernels", kernels, x);
  require(
      kernels.size(0) == shape.batch && kernels.size(1) == shape.length, op,
      str("expected kernels of shape [", shape.batch, ", ", shape.length, ", H, K] (as x), got ", shape_of(kernels)));
  check_heads(op, shape, kernels.size(2));
  return shape;
}

ConvShape check_depthwise_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                               int64_t padding_left, const at::Tensor& mask) {
  const char* op = "depthwise_conv";
  require(weight.defined() && weight.dim() == 2, op, str("expected weight of shape [C, K], got ", shape_of(weight)));
  ConvShape shape = check_input(op, x, weight.size(1), padding_left, mask);
  check_floating(op, "weight", weight, x);
  require(weight.size(0) == shape.channels, op,
          str("expected weight of shape [", shape.channels, ", K], got ", shape_of(weight)));
  if (bias.defined()) {
    check_floating(op, "bias", bias, x);
    require(bias.dim() == 1 && bias.size(0) == shape.channels, op,
            str("expected bias of shape [", shape.channels, "], got ", shape_of(bias)));
  }
  shape.heads = shape.channels;
  return shape;
}

RelposShape check_relative_position_scores(const at::Tensor& q, const at::Tensor& w, const at::Tensor& beta,
                                           int64_t radius) {
  const char* op = "relative_position_scores";
  require(q.defined() && q.dim() == 4, op, str("expected q of shape [B, N, T, d], got ", shape_of(q)));
  require(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble, op,
          str("expected q to be float or double, got ", q.scalar_type()));
  require(radius >= 0, op, str("expected a radius >= 0, got ", radius));
  require(w.defined() || beta.defined(), op, "expected w, beta or both, got neither");
  RelposShape shape{q.size(0), q.size(1), q.size(2), q.size(3), 2 * radius + 1};
  if (w.defined()) {
    check_floating(op, "w", w, q);
    require(w.dim() == 2 && w.size(0) == shape.width && w.size(1) == shape.head_size, op,
            str("expected w of shape [", shape.width, ", ", shape.head_size, "], got ", shape_of(w)));
  }
  if (beta.defined()) {
    check_floating(op, "beta", beta, q);
    require(beta.dim() == 2 && beta.size(0) == shape.heads && beta.size(1) == shape.width, op,
            str("expected beta of shape [", shape.heads, ", ", shape.width, "], got ", shape_of(beta)));
  }
  return shape;
}

}  // namespace cabert::kernels
