#include "lib/data/seq2seq_batches.h"

#include <algorithm>
#include <numeric>

#include "lib/core/errors.h"

namespace cabert::data {

Seq2SeqBatch make_seq2seq_batch(const std::vector<Seq2SeqExample>& examples, const std::vector<size_t>& rows,
                                int64_t bos, int64_t eos) {
  const int64_t B = static_cast<int64_t>(rows.size());
  size_t S = 1, T = 1;
  for (size_t row : rows) {
    S = std::max(S, examples[row].source.size());
    T = std::max(T, examples[row].target.size() + 1);
  }
  Seq2SeqBatch batch;
  batch.source = torch::zeros({B, static_cast<int64_t>(S)}, torch::kInt64);
  batch.target_in = torch::zeros({B, static_cast<int64_t>(T)}, torch::kInt64);
  batch.target_out = torch::zeros({B, static_cast<int64_t>(T)}, torch::kInt64);
  auto source = batch.source.accessor<int64_t, 2>();
  auto target_in = batch.target_in.accessor<int64_t, 2>();
  auto target_out = batch.target_out.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const Seq2SeqExample& example = examples[rows[b]];
    for (size_t i = 0; i < example.source.size(); ++i) source[b][i] = example.source[i];
    target_in[b][0] = bos;
    for (size_t i = 0; i < example.target.size(); ++i) {
      target_in[b][i + 1] = example.target[i];
      target_out[b][i] = example.target[i];
    }
    target_out[b][example.target.size()] = eos;
    batch.source_tokens += static_cast<int64_t>(example.source.size());
    batch.target_tokens += static_cast<int64_t>(example.target.size()) + 1;
  }
  batch.source_mask = batch.source.ne(0);
  batch.target_mask = batch.target_out.ne(0);
  return batch;
}

std::vector<std::vector<size_t>> token_budget_batches(const std::vector<Seq2SeqExample>& examples, int64_t max_tokens,
                                                      int64_t max_rows, TokenCount count) {
  if (max_tokens < 1 || max_rows < 1) {
    throw UsageError(str("batching: expected positive max tokens and rows, got ", max_tokens, " and ", max_rows));
  }
  std::vector<size_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = examples[a];
    const auto& y = examples[b];
    if (x.source.size() != y.source.size()) return x.source.size() < y.source.size();
    return x.target.size() < y.target.size();
  });
  std::vector<std::vector<size_t>> batches;
  std::vector<size_t> current;
  size_t longest_source = 0, longest_target = 0;
  for (size_t index : order) {
    size_t source = std::max(longest_source, examples[index].source.size());
    size_t target = std::max(longest_target, examples[index].target.size() + 1);
    const size_t row = count == TokenCount::kPaddedLonger ? std::max(source, target) : source + target;
    const int64_t padded = static_cast<int64_t>((current.size() + 1) * row);
    if (!current.empty() && (padded > max_tokens || static_cast<int64_t>(current.size()) >= max_rows)) {
      batches.push_back(std::move(current));
      current.clear();
      source = examples[index].source.size();
      target = examples[index].target.size() + 1;
    }
    current.push_back(index);
    longest_source = source;
    longest_target = target;
  }
  if (!current.empty()) batches.push_back(std::move(current));
  return batches;
}

std::vector<size_t> rank_share(const std::vector<size_t>& batch, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) {
    throw Error(str("internal: rank ", rank, " of a world of ", world));
  }
  const size_t rows = batch.size();
  const size_t begin = rows * static_cast<size_t>(rank) / static_cast<size_t>(world);
  const size_t end = rows * static_cast<size_t>(rank + 1) / static_cast<size_t>(world);
  return std::vector<size_t>(batch.begin() + static_cast<std::ptrdiff_t>(begin),
                             batch.begin() + static_cast<std::ptrdiff_t>(end));
}

int64_t target_tokens(const std::vector<Seq2SeqExample>& examples, const std::vector<size_t>& rows) {
  int64_t tokens = 0;
  for (size_t row : rows) tokens += static_cast<int64_t>(examples[row].target.size()) + 1;
  return tokens;
}

CorruptedRows corrupt_rows(const torch::Tensor& ids, const torch::Tensor& mask, const SpanCorruptionOptions& options,
                           std::mt19937_64& rng, int64_t eos) {
  RowRandom rows(rng);
  return corrupt_rows(ids, mask, options, rows, eos);
}

CorruptedRows corrupt_rows(const torch::Tensor& ids_in, const torch::Tensor& mask_in,
                           const SpanCorruptionOptions& options, RowRandom& rows, int64_t eos) {
  constexpr int64_t kUnk = 1;
  check_options(options);
  torch::Tensor ids = ids_in.to(torch::kCPU, torch::kInt64).contiguous();
  torch::Tensor mask = mask_in.to(torch::kCPU, torch::kBool).contiguous();
  auto id_rows = ids.accessor<int64_t, 2>();
  auto mask_rows = mask.accessor<bool, 2>();
  const int64_t first_regular = static_cast<int64_t>(options.first_sentinel_id) + options.num_sentinels;
  CorruptedRows out;
  for (int64_t r = 0; r < ids.size(0); ++r) {
    std::vector<int32_t> tokens;
    for (int64_t t = 0; t < ids.size(1); ++t) {
      const int64_t id = id_rows[r][t];
      if (mask_rows[r][t] && (id == kUnk || id >= first_regular)) tokens.push_back(static_cast<int32_t>(id));
    }
    if (tokens.size() < 2) continue;  // nothing to corrupt
    SpanCorruptionExample corrupted = corrupt_spans(tokens, options, rows.row(r));
    out.noise_tokens += corrupted.noise_tokens;
    out.chunk_tokens += static_cast<int64_t>(tokens.size());
    Seq2SeqExample example;
    example.source = std::move(corrupted.input);
    example.source.push_back(static_cast<int32_t>(eos));
    example.target = std::move(corrupted.target);
    out.examples.push_back(std::move(example));
    out.chunks.push_back(std::move(tokens));
  }
  return out;
}

}  // namespace cabert::data
