#include "lib/models/decoder_attention.h"

#include <cmath>

#include "lib/core/errors.h"
#include "lib/models/layers.h"

namespace cabert::models {
namespace {

int64_t head_size_of(int64_t hidden, int64_t heads) {
  if (heads <= 0 || hidden % heads != 0) {
    throw UsageError(
        str("attention: expected hidden size divisible by a positive head count, got ", hidden, " and ", heads));
  }
  return hidden / heads;
}

// The query, key and value projections (H -> H) and the dropout on the probabilities, with the names every
// checkpoint of these modules uses.
void register_projections(torch::nn::Module& module, int64_t hidden, double dropout, torch::nn::Linear& query,
                          torch::nn::Linear& key, torch::nn::Linear& value, Dropout& attention_dropout) {
  query = module.register_module("query", torch::nn::Linear(hidden, hidden));
  key = module.register_module("key", torch::nn::Linear(hidden, hidden));
  value = module.register_module("value", torch::nn::Linear(hidden, hidden));
  attention_dropout = module.register_module("attention_dropout", Dropout(dropout));
}

// [N, T, H] -> [N, heads, T, d]
torch::Tensor split_heads(const torch::Tensor& t, int64_t heads) {
  return t.view({t.size(0), t.size(1), heads, t.size(2) / heads}).transpose(1, 2);
}

// [N, heads, T, d] -> [N, T, H]
torch::Tensor merge_heads(const torch::Tensor& t) {
  return t.transpose(1, 2).reshape({t.size(0), t.size(2), t.size(1) * t.size(3)});
}

// softmax(q k^T / sqrt(d) + bias) v; bias broadcasts to [N, heads, T, S] or is undefined.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias,
                     Dropout& dropout) {
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (bias.defined()) scores = scores + bias;
  return torch::matmul(dropout(torch::softmax(scores, -1)), v);
}

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t hidden_size, int64_t num_heads, double dropout)
    : hidden(hidden_size), heads(num_heads), head_size(head_size_of(hidden_size, num_heads)) {
  register_projections(*this, hidden, dropout, query, key, value, attention_dropout);
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const int64_t T = x.size(1);
  torch::Tensor future = torch::ones({T, T}, x.options().dtype(torch::kBool)).triu(1);
  torch::Tensor bias = torch::zeros({T, T}, x.options()).masked_fill(future, -std::numeric_limits<double>::infinity());
  if (mask.defined()) bias = bias + key_padding_bias(mask, x.scalar_type());
  if (position_bias) bias = bias + position_bias->between(0, T, T).to(x.scalar_type());
  return merge_heads(attend(split_heads(query(x), heads), split_heads(key(x), heads), split_heads(value(x), heads),
                            bias, attention_dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward_step(const torch::Tensor& x_t, MixerState& state) {
  torch::Tensor k = split_heads(key(x_t), heads), v = split_heads(value(x_t), heads);
  state.keys = state.keys.defined() ? torch::cat({state.keys, k}, 2) : k;
  state.values = state.values.defined() ? torch::cat({state.values, v}, 2) : v;
  // The newest position sees every cached one: no mask needed.
  const int64_t keys = state.keys.size(2);
  torch::Tensor bias =
      position_bias ? position_bias->between(keys - 1, 1, keys).to(x_t.scalar_type()) : torch::Tensor();
  return merge_heads(attend(split_heads(query(x_t), heads), state.keys, state.values, bias, attention_dropout));
}

CrossAttentionImpl::CrossAttentionImpl(int64_t hidden_size, int64_t num_heads, double dropout)
    : hidden(hidden_size), heads(num_heads), head_size(head_size_of(hidden_size, num_heads)) {
  register_projections(*this, hidden, dropout, query, key, value, attention_dropout);
}

torch::Tensor CrossAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& memory,
                                          const torch::Tensor& memory_mask) {
  torch::Tensor bias = memory_mask.defined() ? key_padding_bias(memory_mask, x.scalar_type()) : torch::Tensor();
  return merge_heads(attend(split_heads(query(x), heads), split_heads(key(memory), heads),
                            split_heads(value(memory), heads), bias, attention_dropout));
}

void CrossAttentionImpl::cache_memory(const torch::Tensor& memory, MixerState& state) {
  state.keys = split_heads(key(memory), heads);
  state.values = split_heads(value(memory), heads);
}

torch::Tensor CrossAttentionImpl::forward_step(const torch::Tensor& x_t, const torch::Tensor& memory_mask,
                                               const MixerState& state) {
  if (!state.keys.defined()) throw Error("internal: CrossAttention::forward_step before cache_memory");
  torch::Tensor bias = memory_mask.defined() ? key_padding_bias(memory_mask, x_t.scalar_type()) : torch::Tensor();
  return merge_heads(attend(split_heads(query(x_t), heads), state.keys, state.values, bias, attention_dropout));
}

}  // namespace cabert::models
