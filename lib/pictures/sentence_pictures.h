// What a model does with one sentence, read from its mixers (models::MixerProbe) during one forward pass:
//   attention_layer<L>.png      per head, the attention map (queries on y, keys on x, the sentence's tokens on both)
//   attention_by_offset.png     per layer and head, the mean attention a query gives the key at offset j - i: the
//                               concentration on the diagonal that Chang et al. and the ConvBERT paper discuss
//   conv_kernels_layer<L>.png   per convolution head, the kernel generated at every position (ConvBERT's
//                               span-based dynamic convolution, Wu et al.'s dynamic convolution), offsets on x
// Encoders run [CLS] sentence [SEP]; an encoder-decoder's encoder runs sentence [SEP].
#pragma once

#include <string>
#include <vector>

#include "lib/io/checkpoint_file.h"
#include "lib/pictures/figures.h"
#include "lib/text/tokenizer.h"

namespace cabert::pictures {

// Readable token labels: the word-start mark dropped, a continuation piece prefixed with "##".
std::vector<std::string> token_labels(const text::Tokenizer& tokenizer, const std::vector<int>& ids);

// Mean attention by offset: attention [heads, T, T] -> [heads, 2 D + 1] for offsets -D..D (D = max_offset,
// at most T - 1), each the mean over the queries i for which i + d is a position.
torch::Tensor attention_by_offset(const torch::Tensor& attention, int64_t max_offset);

// `max_tokens` caps the sentence (after the framing tokens are counted).
std::vector<NamedFigure> sentence_figures(const io::Checkpoint& checkpoint, const text::Tokenizer& tokenizer,
                                          const std::string& sentence, const std::string& model_name,
                                          int64_t max_tokens = 64, int64_t max_offset = 8);

}  // namespace cabert::pictures
