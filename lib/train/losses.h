// The training losses, one place for all of them:
//   MLM (BERT; Chang et al.): cross-entropy of the predictions at the masked positions;
//   replaced-token detection (ELECTRA; ConvBERT): binary cross-entropy over the real tokens, mean per token;
//   fine-tuning: cross-entropy (classification), mean squared error (regression), or the mean of the start
//   and end cross-entropies (span extraction);
//   encoder-decoders: label-smoothed cross-entropy over the real target tokens (fairseq's
//   label_smoothed_cross_entropy: (1 - eps - eps/(V-1)) * NLL + eps/(V-1) * sum_v -log p_v).
// Losses are computed in float32 whatever the model's dtype (autocast).
#pragma once

#include <torch/torch.h>

#include "lib/tasks/task_definition.h"

namespace cabert::train {

// logits [M, V], labels int64 [M] -> scalar.
torch::Tensor mlm_loss(const torch::Tensor& logits, const torch::Tensor& labels);

// logits [B, T], replaced {0, 1} float [B, T], mask bool [B, T] (real tokens) -> scalar.
torch::Tensor replaced_token_detection_loss(const torch::Tensor& logits, const torch::Tensor& replaced,
                                            const torch::Tensor& mask);

// output: logits [B, C] / predictions [B] / span logits [B, T, 2]; targets: class [B] / value [B] /
// (start, end) [B, 2].
torch::Tensor task_loss(tasks::TaskKind kind, const torch::Tensor& output, const torch::Tensor& targets);

struct SmoothedLoss {
  torch::Tensor loss;  // summed over the real target tokens (normalise by their count)
  torch::Tensor nll;   // the plain negative log-likelihood, summed likewise (perplexity, reports)
};
// logits [N, T, V], targets int64 [N, T] with PAD (0) at the positions to ignore, epsilon in [0, 1).
SmoothedLoss label_smoothed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets, double epsilon);

}  // namespace cabert::train
