// Learning-rate schedules (linear warm-up then linear decay to 0 at the last step; inverse square root) and
// gradient clipping.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace cabert::train {

// Learning rate for update number `update` (1-based): peak * update / warmup during warm-up, then
// peak * (total - update) / (total - warmup), never below 0.
double linear_warmup_decay(double peak, int64_t update, int64_t warmup, int64_t total);

// Linear warm-up to `peak` over `warmup` updates, then `peak` to the end (T5's fine-tuning rate; finetune
// --lr-schedule constant).
double warmup_then_constant(double peak, int64_t update, int64_t warmup);

// Inverse square-root schedule (Vaswani et al.; fairseq's inverse_sqrt with warmup_init_lr 0): linear warm-up
// to `peak` over `warmup` updates, then peak * sqrt(warmup / update).
double inverse_sqrt(double peak, int64_t update, int64_t warmup);

// fairseq's cosine schedule with t_mult 1 and lr_shrink 1 (its WMT'16 recipe for Wu et al.): linear warm-up to `peak`
// over `warmup` updates, then min_lr + (peak - min_lr) (1 + cos(pi t / period)) / 2 with t = (update - warmup) mod
// period: a half cosine from peak to min_lr every `period` updates, restarting at peak.
double cosine(double peak, int64_t update, int64_t warmup, int64_t period, double min_lr);

// Translation's warm-up in updates (issue 58): --warmup-steps when given (>= 0); else the warm-up recorded in the
// checkpoint a run resumes from (`recorded`, >= 0), so that a resumed run keeps its schedule even when --epochs
// changes its length; else the rule: fairseq's 4000 updates (its IWSLT'14 and WMT'16 En-De recipes use it for
// the Transformer, LightConv and DynamicConv alike), capped at half the run, so that a run too short for 4000
// still reaches its peak lr halfway. `rule` says which of the three applied, for the run's header and records.
// A checkpoint of an older cabert (recorded < 0, resuming) keeps the rule it was started with,
// min(4000, 10% of the updates).
struct Warmup {
  int64_t updates = 0;
  std::string rule;
};
Warmup translation_warmup(int64_t given, int64_t total_updates, int64_t recorded = -1, bool resuming = false);

// Scales the gradients so that their global L2 norm is at most max_norm (no-op for max_norm <= 0);
// returns the norm before clipping.
double clip_gradients(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace cabert::train
