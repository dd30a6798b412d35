#include "lib/generate/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "lib/core/errors.h"
#include "lib/ops/device.h"

namespace cabert::generate {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

void check_batch(int64_t batch) {
  if (batch < 0) throw UsageError(str("batch: expected >= 0, got ", batch));
}

// The model's answer for `rows` rows: [rows, V] floating point on the model's device, V covering the ids.
void check_answer(const torch::Tensor& log_probs, int64_t rows, const torch::Device& device,
                  const SearchOptions& options) {
  if (!log_probs.defined() || log_probs.dim() != 2 || log_probs.size(0) != rows) {
    throw Error(str("StepModel::log_probs: expected [", rows, ", V], got ",
                    log_probs.defined() ? log_probs.sizes() : c10::IntArrayRef{}));
  }
  if (!log_probs.is_floating_point()) {
    throw Error(str("StepModel::log_probs: expected floating point, got ", log_probs.scalar_type()));
  }
  if (!ops::on_device(log_probs.device(), device)) {
    throw Error(str("StepModel::log_probs: expected a tensor on ", device, ", got ", log_probs.device()));
  }
  const int64_t largest_id = std::max({options.bos_id, options.eos_id, options.pad_id});
  if (log_probs.size(1) <= largest_id) {
    throw UsageError(str("vocabulary size: expected > ", largest_id, " (the largest of bos_id, eos_id, pad_id), got ",
                         log_probs.size(1)));
  }
}

// Scores accumulate in double when the model answers in double, else in float (half answers would lose the
// ranking after a few steps).
torch::ScalarType accumulation_type(const torch::Tensor& log_probs) {
  return log_probs.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// The search's rules on top of the model's log-probabilities, on a copy (the answer may be the model's own
// buffer): no PAD, no repeated n-gram, no EOS before min_length, nothing but EOS at max_length.
torch::Tensor constrain(const torch::Tensor& answer, const torch::Tensor& history, int64_t step,
                        const SearchOptions& options) {
  torch::Tensor log_probs = answer.to(accumulation_type(answer), /*non_blocking=*/false, /*copy=*/true);
  const double minus_inf = kMinusInf;
  log_probs.select(1, options.pad_id).fill_(minus_inf);
  if (options.no_repeat_ngram > 0 && history.size(1) >= options.no_repeat_ngram) {
    log_probs.masked_fill_(repeated_ngram_mask(history, options.no_repeat_ngram, log_probs.size(1)), minus_inf);
  }
  if (step < options.min_length) log_probs.select(1, options.eos_id).fill_(minus_inf);
  if (step >= options.max_length) {
    torch::Tensor eos = log_probs.select(1, options.eos_id).clone();
    log_probs.fill_(minus_inf);
    log_probs.select(1, options.eos_id).copy_(eos);
  }
  return log_probs;
}

double normalised(double log_prob, int64_t length, double length_penalty) {
  return log_prob / std::pow(static_cast<double>(length), length_penalty);
}

Hypothesis finished(const torch::Tensor& history_row, double log_prob, const SearchOptions& options) {
  Hypothesis hypothesis;
  const int64_t* data = history_row.data_ptr<int64_t>();
  hypothesis.tokens.assign(data, data + history_row.numel());
  hypothesis.log_prob = log_prob;
  hypothesis.score = normalised(log_prob, static_cast<int64_t>(hypothesis.tokens.size()), options.length_penalty);
  return hypothesis;
}

torch::Tensor long_tensor(const std::vector<int64_t>& values, const torch::Device& device) {
  return torch::tensor(values, torch::kLong).to(device);
}

}  // namespace

void check_options(const SearchOptions& options) {
  if (options.beam_size < 1) throw UsageError(str("beam_size: expected >= 1, got ", options.beam_size));
  if (options.min_length < 0) throw UsageError(str("min_length: expected >= 0, got ", options.min_length));
  if (options.max_length < options.min_length) {
    throw UsageError(str("max_length: expected >= min_length (", options.min_length, "), got ", options.max_length));
  }
  if (!std::isfinite(options.length_penalty)) {
    throw UsageError(str("length_penalty: expected a finite number, got ", options.length_penalty));
  }
  if (options.no_repeat_ngram < 0) {
    throw UsageError(str("no_repeat_ngram: expected >= 0 (0 = off), got ", options.no_repeat_ngram));
  }
  const std::pair<const char*, int64_t> ids[] = {
      {"bos_id", options.bos_id}, {"eos_id", options.eos_id}, {"pad_id", options.pad_id}};
  for (const auto& [name, id] : ids) {
    if (id < 0) throw UsageError(str(name, ": expected >= 0, got ", id));
  }
  if (options.eos_id == options.pad_id) {
    throw UsageError(str("eos_id: expected an id other than pad_id (", options.pad_id, "), got ", options.eos_id));
  }
}

torch::Tensor repeated_ngram_mask(const torch::Tensor& history, int64_t n, int64_t vocab_size) {
  TORCH_CHECK(history.dim() == 2 && history.scalar_type() == torch::kLong, "history: expected int64 [N, T], got ",
              history.scalar_type(), " ", history.sizes());
  TORCH_CHECK(n >= 1, "n: expected >= 1, got ", n);
  const int64_t rows = history.size(0), length = history.size(1);
  torch::Tensor banned = torch::zeros({rows, vocab_size}, history.options());
  if (length < n) return banned.to(torch::kBool);  // no complete n-gram yet
  if (n == 1) return banned.scatter_(1, history, 1).to(torch::kBool);
  // An n-gram starting at i repeats when its first n-1 tokens equal the last n-1 generated: then its last
  // token history[i + n - 1] is banned. Windows i = 0 .. length - n are the ones with a token after them.
  const int64_t starts = length - n + 1;
  torch::Tensor prefixes = history.unfold(1, n - 1, 1).narrow(1, 0, starts);     // [N, starts, n-1]
  torch::Tensor suffix = history.narrow(1, length - n + 1, n - 1).unsqueeze(1);  // [N, 1, n-1]
  torch::Tensor matches = prefixes.eq(suffix).all(2);                            // [N, starts]
  torch::Tensor next = history.narrow(1, n - 1, starts);                         // [N, starts]
  banned.scatter_add_(1, next, matches.to(torch::kLong));
  return banned.gt(0);
}

std::vector<Hypothesis> greedy_search(StepModel& model, int64_t batch, const SearchOptions& options) {
  check_options(options);
  check_batch(batch);
  std::vector<Hypothesis> results(batch);
  if (batch == 0) return results;
  const torch::Device device = model.device();
  const auto on_device = torch::TensorOptions().dtype(torch::kLong).device(device);

  std::vector<int64_t> example(batch);  // the example of every live row
  std::iota(example.begin(), example.end(), 0);
  torch::Tensor last = torch::full({batch}, options.bos_id, on_device);
  torch::Tensor history = torch::empty({batch, 0}, on_device);  // generated tokens [N, step]
  torch::Tensor log_prob;                                       // [N], accumulated
  for (int64_t step = 0;; ++step) {
    const int64_t rows = static_cast<int64_t>(example.size());
    torch::Tensor answer = model.log_probs(last, step);
    check_answer(answer, rows, device, options);
    torch::Tensor log_probs = constrain(answer, history, step, options);
    if (!log_prob.defined()) log_prob = torch::zeros({rows}, log_probs.options());
    auto [best, token] = log_probs.max(1);
    if (step >= options.max_length) {  // EOS even for a row whose every token is -inf
      token = torch::full({rows}, options.eos_id, on_device);
      best = log_probs.select(1, options.eos_id);
    }
    log_prob = log_prob + best;
    history = torch::cat({history, token.unsqueeze(1)}, 1);

    const torch::Tensor done = token.eq(options.eos_id).cpu();  // the one host copy of a step
    const bool* done_data = done.data_ptr<bool>();
    std::vector<int64_t> finished_rows, kept_rows;
    for (int64_t row = 0; row < rows; ++row) (done_data[row] ? finished_rows : kept_rows).push_back(row);
    if (finished_rows.empty()) {
      last = token;
      continue;
    }
    const torch::Tensor finished_index = long_tensor(finished_rows, device);
    const torch::Tensor finished_tokens = history.index_select(0, finished_index).cpu().contiguous();
    const torch::Tensor finished_log_probs = log_prob.index_select(0, finished_index).to(torch::kCPU, torch::kDouble);
    for (size_t i = 0; i < finished_rows.size(); ++i) {
      results[example[finished_rows[i]]] = finished(finished_tokens[i], finished_log_probs[i].item<double>(), options);
    }
    if (kept_rows.empty()) break;
    const torch::Tensor kept = long_tensor(kept_rows, device);
    model.reorder(kept);
    std::vector<int64_t> kept_examples;
    for (int64_t row : kept_rows) kept_examples.push_back(example[row]);
    example = std::move(kept_examples);
    history = history.index_select(0, kept);
    log_prob = log_prob.index_select(0, kept);
    last = token.index_select(0, kept);
  }
  return results;
}

std::vector<std::vector<Hypothesis>> beam_search(StepModel& model, int64_t batch, const SearchOptions& options) {
  check_options(options);
  check_batch(batch);
  std::vector<std::vector<Hypothesis>> results(batch);
  if (batch == 0) return results;
  const int64_t beams = options.beam_size;
  const torch::Device device = model.device();
  const auto on_device = torch::TensorOptions().dtype(torch::kLong).device(device);

  std::vector<int64_t> example(batch);  // the example of every live group of `beams` rows
  std::iota(example.begin(), example.end(), 0);
  torch::Tensor last = torch::full({batch * beams}, options.bos_id, on_device);
  torch::Tensor history = torch::empty({batch * beams, 0}, on_device);  // generated tokens [N, step]
  torch::Tensor scores;  // [B, beams] log-probabilities of the live hypotheses
  for (int64_t step = 0;; ++step) {
    const int64_t groups = static_cast<int64_t>(example.size());
    torch::Tensor answer = model.log_probs(last, step);
    check_answer(answer, groups * beams, device, options);
    torch::Tensor log_probs = constrain(answer, history, step, options);
    const int64_t vocab = log_probs.size(1);
    if (!scores.defined()) {
      // All beams start identical: only the first may expand, or step 0 would pick the same token `beams` times.
      scores = torch::full({groups, beams}, kMinusInf, log_probs.options());
      scores.select(1, 0).fill_(0);
    }

    // The best 2*beams continuations of each example: at most `beams` of them are EOS (one per beam), so at
    // least `beams` carry on.
    const int64_t candidates = std::min(2 * beams, beams * vocab);
    torch::Tensor flat = (log_probs + scores.reshape({-1, 1})).view({groups, beams * vocab});
    auto [candidate_scores, candidate_index] = flat.topk(candidates, 1);
    torch::Tensor candidate_beam = candidate_index.div(vocab, "floor");
    torch::Tensor candidate_token = candidate_index.remainder(vocab);
    torch::Tensor is_eos = candidate_token.eq(options.eos_id);

    // Carrying on: the first `beams` candidates that are not EOS, in rank order.
    torch::Tensor rank = torch::arange(candidates, on_device).unsqueeze(0);
    torch::Tensor carry = std::get<1>((is_eos.to(torch::kLong) * candidates + rank).topk(beams, 1, /*largest=*/false));
    torch::Tensor next_beam = candidate_beam.gather(1, carry);
    torch::Tensor next_token = candidate_token.gather(1, carry);
    torch::Tensor next_scores = candidate_scores.gather(1, carry);

    // Finishing: EOS among the first `beams` candidates with a finite score (the one host copy of a step,
    // plus the finished rows themselves when there are any).
    const torch::Tensor finishing =
        (is_eos.narrow(1, 0, beams) & candidate_scores.narrow(1, 0, beams).gt(kMinusInf)).cpu().contiguous();
    const bool* finishing_data = finishing.data_ptr<bool>();
    std::vector<int64_t> finished_group, finished_candidate;
    for (int64_t g = 0; g < groups; ++g) {
      int64_t room = beams - static_cast<int64_t>(results[example[g]].size());
      for (int64_t c = 0; c < beams && room > 0; ++c) {
        if (!finishing_data[g * beams + c]) continue;
        finished_group.push_back(g);
        finished_candidate.push_back(c);
        --room;
      }
    }
    if (!finished_group.empty()) {
      const torch::Tensor g = long_tensor(finished_group, device), c = long_tensor(finished_candidate, device);
      const torch::Tensor rows = g * beams + candidate_beam.index({g, c});
      const torch::Tensor tokens =
          torch::cat({history.index_select(0, rows), torch::full({rows.size(0), 1}, options.eos_id, on_device)}, 1)
              .cpu()
              .contiguous();
      const torch::Tensor log_prob = candidate_scores.index({g, c}).to(torch::kCPU, torch::kDouble);
      for (size_t i = 0; i < finished_group.size(); ++i) {
        results[example[finished_group[i]]].push_back(finished(tokens[i], log_prob[i].item<double>(), options));
      }
    }

    std::vector<int64_t> kept_groups, kept_examples;
    for (int64_t g = 0; g < groups; ++g) {
      const bool done = static_cast<int64_t>(results[example[g]].size()) >= beams || step >= options.max_length;
      if (done) continue;
      kept_groups.push_back(g);
      kept_examples.push_back(example[g]);
    }
    if (kept_groups.empty()) break;
    // While every group carries on (most steps), their indices are made on the device instead of uploaded.
    const torch::Tensor kept = static_cast<int64_t>(kept_groups.size()) == groups ? torch::arange(groups, on_device)
                                                                                  : long_tensor(kept_groups, device);
    const torch::Tensor first_row = (kept * beams).unsqueeze(1);
    const torch::Tensor rows = (first_row + next_beam.index_select(0, kept)).reshape({-1});
    model.reorder(rows);
    example = std::move(kept_examples);
    last = next_token.index_select(0, kept).reshape({-1});
    history = torch::cat({history.index_select(0, rows), last.unsqueeze(1)}, 1);
    scores = next_scores.index_select(0, kept);
  }
  for (auto& hypotheses : results) {
    std::stable_sort(hypotheses.begin(), hypotheses.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  }
  return results;
}

}  // namespace cabert::generate
