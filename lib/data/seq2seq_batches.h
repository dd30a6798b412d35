// Batches of an encoder-decoder: source and target token ids padded to the longest row, the decoder input
// shifted right behind BOS, and fairseq-style token-budget batching (--max-tokens): examples sorted by
// length and cut into batches whose padded size stays within the budget. Used by translation and (next) by
// span-corruption pre-training.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lib/core/random.h"
#include "lib/data/span_corruption.h"

namespace cabert::data {

struct Seq2SeqExample {
  std::vector<int32_t> source;  // encoder input, ending with EOS
  std::vector<int32_t> target;  // target tokens without BOS and EOS
};

struct Seq2SeqBatch {
  torch::Tensor source, source_mask;  // int64 [B, S], bool [B, S]
  torch::Tensor target_in;            // int64 [B, T]: BOS, target tokens (T = longest target + 1)
  torch::Tensor target_out;           // int64 [B, T]: target tokens, EOS; PAD (0) after
  torch::Tensor target_mask;          // bool [B, T]: the real positions of target_in / target_out
  int64_t target_tokens = 0;          // real target positions (EOS included)
  int64_t source_tokens = 0;
};

// The rows `rows` of `examples`, in that order. bos/eos/pad: cabert's [CLS]=2, [SEP]=3, [PAD]=0.
Seq2SeqBatch make_seq2seq_batch(const std::vector<Seq2SeqExample>& examples, const std::vector<size_t>& rows,
                                int64_t bos = 2, int64_t eos = 3);

// How a batch's tokens are counted against the budget:
//   kPaddedSum     rows x (longest source + longest target + 1): every padded position of both sides (cabert's)
//   kPaddedLonger  rows x max(longest source, longest target + 1): the padded length of the longer side, as
//                  fairseq's --max-tokens counts (its batch_by_size over num_tokens = max(source, target length)),
//                  so a budget B holds about twice the sentences kPaddedSum's B holds
enum class TokenCount { kPaddedSum, kPaddedLonger };

// Indices of `examples` grouped into batches: sorted by (source length, target length), each batch at most
// max_rows rows and at most max_tokens tokens counted as `count` says (a single example over the budget still
// gets a batch of its own). Every index appears exactly once.
std::vector<std::vector<size_t>> token_budget_batches(const std::vector<Seq2SeqExample>& examples, int64_t max_tokens,
                                                      int64_t max_rows, TokenCount count = TokenCount::kPaddedSum);

// Data parallelism: rank `rank`'s share of a joint batch of `world` ranks, the contiguous rows
// [rank * n / world, (rank + 1) * n / world) (n = rows; empty when n < world leaves this rank none). The shares
// cover the batch once, in order, whatever `world`: the joint batch is the one a single process would train on.
std::vector<size_t> rank_share(const std::vector<size_t>& batch, int rank, int world);

// The target tokens of `rows` that make_seq2seq_batch counts (each target and its EOS).
int64_t target_tokens(const std::vector<Seq2SeqExample>& examples, const std::vector<size_t>& rows);

// Span corruption of a pre-training batch (ids/mask [B, T] as data::make_batch pads them): each row's regular
// tokens (ids >= options.first_sentinel_id + options.num_sentinels, and [UNK]) form one chunk; rows with fewer
// than 2 are skipped. Example r: source = the corrupted chunk + EOS, target = the sentinel-delimited spans.
struct CorruptedRows {
  std::vector<Seq2SeqExample> examples;
  std::vector<std::vector<int32_t>> chunks;  // the original tokens of each example
  int64_t noise_tokens = 0, chunk_tokens = 0;
};
CorruptedRows corrupt_rows(const torch::Tensor& ids, const torch::Tensor& mask, const SpanCorruptionOptions& options,
                           std::mt19937_64& rng, int64_t eos = 3);
// Row r draws from rows.row(r).
CorruptedRows corrupt_rows(const torch::Tensor& ids, const torch::Tensor& mask, const SpanCorruptionOptions& options,
                           RowRandom& rows, int64_t eos = 3);

}  // namespace cabert::data
