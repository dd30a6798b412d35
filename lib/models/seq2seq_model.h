// The encoder-decoder of Wu et al. 2019 (LightConv / DynamicConv translation models, and their Transformer
// baseline) and Tay et al. 2021 (gated lightweight / dynamic / dilated convolutions), SPEC.md section 6:
//   embed(x)  = sqrt(d) * TokenTable[x] + sinusoidal positions (fairseq's layout), dropout; with
//               seq2seq.relative_buckets (T5's positions) no positions here, and instead one relative position
//               bias table for the encoder's self-attention layers and one for the decoder's (T5's, shared across
//               the layers of a stack: relative_position_bias.h)
//   encoder   = EncoderStack of the config's family (the same layers as the encoders; mixer registry), plus
//               optionally one self-attention layer on top (seq2seq.encoder_top_attention)
//   decoder   = DecoderLayers (causal mixer of seq2seq.decoder_family + encoder-decoder attention + FFN)
//   pre-norm  seq2seq.normalize_before: pre-LN layers and a final LayerNorm after the encoder (encoder_norm)
//             and after the decoder (decoder_norm), as fairseq's --encoder/decoder-normalize-before
//   logits    = decoder output x TokenTable^T (tied, seq2seq.tie_output) or a Linear(d -> V) without bias
// One token table serves source and target with seq2seq.share_embeddings (a joint vocabulary).
// Token ids: [PAD]=0 (masked everywhere), the decoder input starts with [CLS]=2 (BOS) and targets end with
// [SEP]=3 (EOS). Incremental decoding (start_decoding / decode_step) equals the full forward.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "formats/model.pb.h"
#include "lib/models/decoder_layer.h"
#include "lib/models/encoder.h"
#include "lib/models/relative_position_bias.h"

namespace cabert::models {

// The decoder seen as a stack of its own: family = seq2seq.decoder_family, num_layers = decoder_layers,
// conv_block.kernel_sizes = decoder_kernel_sizes, conv_block.causal = true. Mixer builders read this.
pb::ModelConfig seq2seq_decoder_config(const pb::ModelConfig& config);

// The per-layer state of incremental decoding, for a batch of rows.
struct DecoderState {
  std::vector<DecoderLayerState> layers;
  torch::Tensor memory_mask;  // [N, S] bool
  void reorder(const torch::Tensor& rows);
};

class Seq2SeqModelImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqModelImpl(const pb::ModelConfig& config);

  // source int64 [N, S], source_mask bool [N, S] -> memory [N, S, d]
  torch::Tensor encode(const torch::Tensor& source, const torch::Tensor& source_mask);
  // target_in int64 [N, T] (BOS first), target_mask bool [N, T] -> logits [N, T, V]
  torch::Tensor decode(const torch::Tensor& target_in, const torch::Tensor& target_mask, const torch::Tensor& memory,
                       const torch::Tensor& memory_mask);
  torch::Tensor forward(const torch::Tensor& source, const torch::Tensor& source_mask, const torch::Tensor& target_in,
                        const torch::Tensor& target_mask) {
    return decode(target_in, target_mask, encode(source, source_mask), source_mask);
  }

  // Incremental decoding: project the source once, then one target position per call.
  DecoderState start_decoding(const torch::Tensor& memory, const torch::Tensor& memory_mask);
  // tokens int64 [N] at target position `step` (0 = BOS) -> logits [N, V]
  torch::Tensor decode_step(const torch::Tensor& tokens, int64_t step, DecoderState& state);

  const pb::ModelConfig& config() const { return config_; }
  torch::nn::Embedding target_embedding() const { return target_table ? target_table : source_table; }

  torch::nn::Embedding source_table{nullptr}, target_table{nullptr};  // target_table null when shared
  EncoderStack encoder{nullptr};
  EncoderLayer encoder_top_attention{nullptr};
  torch::nn::ModuleList decoder;
  torch::nn::Linear output_projection{nullptr};  // null when tied
  torch::nn::LayerNorm encoder_norm{nullptr}, decoder_norm{nullptr};  // normalize_before only
  RelativePositionBias encoder_position_bias{nullptr}, decoder_position_bias{nullptr};  // relative_buckets only
  Dropout dropout{nullptr};

 private:
  torch::Tensor embed(torch::nn::Embedding table, const torch::Tensor& ids, const torch::Tensor& positions);
  torch::Tensor logits(const torch::Tensor& hidden);
  pb::ModelConfig config_;
  double embed_scale_;
};
TORCH_MODULE(Seq2SeqModel);

}  // namespace cabert::models
