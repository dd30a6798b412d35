// One thread per query row (forward, query side of the backward) or key row (key side), each running the row
// maths of kernels/attention_math.h: linear memory (only the row log-sum-exp is kept between the passes), no
// atomics, Philox dropout regenerated in the backward. Lanes of a warp read the same key (or query) row at the
// same time, so the loads are broadcasts; a tiled tensor-core version is the next step for speed.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/attention_math.h"
#include "kernels/cuda/attention_cuda.h"

namespace cabert::kernels::cuda {
namespace {

namespace am = attention_math;

constexpr int kThreads = 128;
constexpr int64_t kMaxBlocks = 65535;

template <typename T>
using Problem = am::Heads<T>;

#define CABERT_ROW_LOOP(index, n) \
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < (n); index += int64_t(blockDim.x) * gridDim.x)

// out: [B, T, N, d] storage (as the CPU kernel's); logsumexp [B, N, T].
template <typename T>
__global__ void forward_kernel(Problem<T> p, T* out, T* logsumexp) {
  T row[kMaxHeadSize];
  CABERT_ROW_LOOP(index, p.batch * p.heads * p.length) {
    const int64_t i = index % p.length, bh = index / p.length, b = bh / p.heads, h = bh % p.heads;
    logsumexp[index] = am::forward_row(am::head_view(p, b, h), i, row);
    T* o = out + ((b * p.length + i) * p.heads + h) * p.head_size;
    for (int64_t e = 0; e < p.head_size; ++e) o[e] = row[e];
  }
}

// dout, lse, delta: contiguous [B, N, T, d] / [B, N, T]; dq [B, N, T, d]; query_band_grad [B, N, T, w] or null.
template <typename T>
__global__ void backward_query_kernel(Problem<T> p, const T* dout, const T* lse, const T* delta, T* dq,
                                      T* query_band_grad) {
  T row[kMaxHeadSize];
  const int64_t width = 2 * p.radius + 1;
  CABERT_ROW_LOOP(index, p.batch * p.heads * p.length) {
    const int64_t i = index % p.length, bh = index / p.length, b = bh / p.heads, h = bh % p.heads;
    am::backward_query_row(am::head_view(p, b, h), i, dout + index * p.head_size, lse[index], delta[index], row,
                           query_band_grad != nullptr ? query_band_grad + index * width : nullptr);
    T* out = dq + index * p.head_size;
    for (int64_t e = 0; e < p.head_size; ++e) out[e] = row[e];
  }
}

template <typename T>
__global__ void backward_key_kernel(Problem<T> p, const T* dout, const T* lse, const T* delta, T* dk, T* dv,
                                    T* key_band_grad) {
  T dk_row[kMaxHeadSize], dv_row[kMaxHeadSize];
  const int64_t width = 2 * p.radius + 1;
  CABERT_ROW_LOOP(index, p.batch * p.heads * p.length) {
    const int64_t j = index % p.length, bh = index / p.length, b = bh / p.heads, h = bh % p.heads;
    const int64_t head_rows = bh * p.length;
    am::backward_key_row(am::head_view(p, b, h), j, dout + head_rows * p.head_size, lse + head_rows, delta + head_rows,
                         dk_row, dv_row, key_band_grad != nullptr ? key_band_grad + index * width : nullptr);
    for (int64_t e = 0; e < p.head_size; ++e) {
      dk[index * p.head_size + e] = dk_row[e];
      dv[index * p.head_size + e] = dv_row[e];
    }
  }
}

int blocks_for(int64_t n) { return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks)); }

template <typename T>
const T* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// The inputs as the kernels read them: q, k, v, bands contiguous; the mask and which batch rows have a real key.
struct Prepared {
  at::Tensor q, k, v, query_band, key_band, mask, has_real_key;
};

Prepared prepare(const AttentionInputs& in) {
  Prepared p;
  p.q = in.q.contiguous();
  p.k = in.k.contiguous();
  p.v = in.v.contiguous();
  if (in.query_band.defined()) p.query_band = in.query_band.contiguous();
  if (in.key_band.defined()) p.key_band = in.key_band.contiguous();
  if (in.key_mask.defined()) {  // on q's device already (kernels/attention_kernels.cc)
    p.mask = in.key_mask.contiguous();
    p.has_real_key = p.mask.any(1).contiguous();
  }
  return p;
}

template <typename T>
Problem<T> problem_of(const Prepared& prepared, const AttentionInputs& in) {
  Problem<T> p;
  p.q = prepared.q.data_ptr<T>();
  p.k = prepared.k.data_ptr<T>();
  p.v = prepared.v.data_ptr<T>();
  p.query_band = data_or_null<T>(prepared.query_band);
  p.key_band = data_or_null<T>(prepared.key_band);
  p.mask = prepared.mask.defined() ? prepared.mask.data_ptr<bool>() : nullptr;
  p.has_real_key = prepared.has_real_key.defined() ? prepared.has_real_key.data_ptr<bool>() : nullptr;
  p.batch = in.q.size(0);
  p.heads = in.q.size(1);
  p.length = in.q.size(2);
  p.head_size = in.q.size(3);
  p.radius = in.radius;
  p.scale = static_cast<T>(in.scale);
  p.dropout_p = static_cast<float>(in.dropout.p);
  p.kept_scale = T(1) / (T(1) - static_cast<T>(in.dropout.p));  // in T, as the CPU kernel computes it
  p.seed = in.dropout.seed;
  p.offset = in.dropout.offset;
  return p;
}

}  // namespace

AttentionOutputs relative_attention_forward(const AttentionInputs& in) {
  const c10::cuda::CUDAGuard device_guard(in.q.device());
  const Prepared prepared = prepare(in);
  const int64_t B = in.q.size(0), N = in.q.size(1), T = in.q.size(2), d = in.q.size(3);
  AttentionOutputs result;
  result.out = at::empty({B, T, N, d}, in.q.options()).transpose(1, 2);
  result.logsumexp = at::empty({B, N, T}, in.q.options());
  if (B * N * T == 0) return result;
  AT_DISPATCH_FLOATING_TYPES(in.q.scalar_type(), "relative_attention_forward_cuda", [&] {
    forward_kernel<scalar_t><<<blocks_for(B * N * T), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        problem_of<scalar_t>(prepared, in), result.out.data_ptr<scalar_t>(), result.logsumexp.data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return result;
}

AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward) {
  const c10::cuda::CUDAGuard device_guard(in.q.device());
  const Prepared prepared = prepare(in);
  const int64_t B = in.q.size(0), N = in.q.size(1), T = in.q.size(2);
  const at::Tensor dout = grad_out.contiguous(), lse = forward.logsumexp.contiguous();
  const at::Tensor delta = (grad_out * forward.out).sum(-1).contiguous();  // [B, N, T]: dout_i . out_i
  AttentionGrads grads;
  grads.q = at::empty_like(prepared.q);
  grads.k = at::empty_like(prepared.k);
  grads.v = at::empty_like(prepared.v);
  // Inner band entries of absent keys stay zero: the rows are written only where a key (or query) exists.
  if (in.query_band.defined()) grads.query_band = at::zeros_like(prepared.query_band);
  if (in.key_band.defined()) grads.key_band = at::zeros_like(prepared.key_band);
  if (B * N * T == 0) return grads;
  AT_DISPATCH_FLOATING_TYPES(in.q.scalar_type(), "relative_attention_backward_cuda", [&] {
    const Problem<scalar_t> p = problem_of<scalar_t>(prepared, in);
    const auto stream = at::cuda::getCurrentCUDAStream();
    backward_query_kernel<scalar_t><<<blocks_for(B * N * T), kThreads, 0, stream>>>(
        p, dout.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>(), delta.data_ptr<scalar_t>(),
        grads.q.data_ptr<scalar_t>(), grads.query_band.defined() ? grads.query_band.data_ptr<scalar_t>() : nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    backward_key_kernel<scalar_t><<<blocks_for(B * N * T), kThreads, 0, stream>>>(
        p, dout.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>(), delta.data_ptr<scalar_t>(),
        grads.k.data_ptr<scalar_t>(), grads.v.data_ptr<scalar_t>(),
        grads.key_band.defined() ? grads.key_band.data_ptr<scalar_t>() : nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grads;
}

}  // namespace cabert::kernels::cuda
