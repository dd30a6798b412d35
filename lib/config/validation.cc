#include "lib/config/validation.h"

#include <cmath>

#include "lib/core/errors.h"

namespace cabert::config {

// Checks run in order and stop at the first problem, so that no later check divides by a size an earlier
// one found to be zero.
std::string model_config_problem(const pb::ModelConfig& c) {
  if (c.vocab_size() <= 5) return str("expected vocab_size > 5, got ", c.vocab_size());
  if (!(c.embedding_size() > 0 && c.hidden_size() > 0 && c.num_layers() > 0 && c.num_heads() > 0 &&
        c.intermediate_size() > 0 && c.max_length() > 0)) {
    return str("expected positive embedding_size, hidden_size, num_layers, num_heads, intermediate_size, "
               "max_length, got ",
               c.embedding_size(), ", ", c.hidden_size(), ", ", c.num_layers(), ", ", c.num_heads(), ", ",
               c.intermediate_size(), ", ", c.max_length());
  }
  if (c.hidden_size() % c.num_heads() != 0) {
    return str("expected hidden_size divisible by num_heads, got ", c.hidden_size(), " and ", c.num_heads());
  }
  if (!(c.dropout() >= 0 && c.dropout() < 1 && c.attention_dropout() >= 0 && c.attention_dropout() < 1)) {
    return "expected dropout and attention_dropout in [0, 1)";
  }
  // Numbers a file can hold but no model can use: NaN, infinities, negative scales, probabilities past 1
  // (the comparisons are false for NaN).
  const auto unit = [](float p) { return p >= 0 && p <= 1; };
  const auto scale = [](float x) { return std::isfinite(x) && x >= 0; };
  if (!(scale(c.layer_norm_eps()) && scale(c.initializer_range()))) {
    return str("expected finite, non-negative layer_norm_eps and initializer_range, got ", c.layer_norm_eps(), " and ",
               c.initializer_range());
  }
  // The two fractions split the selected tokens; float rounding may put a sum like 0.7 + 0.3 a hair above 1.
  if (!(unit(c.mask_probability()) && unit(c.mask_token_fraction()) && unit(c.random_token_fraction()) &&
        c.mask_token_fraction() + c.random_token_fraction() <= 1 + 1e-6f)) {
    return str("expected mask_probability, mask_token_fraction and random_token_fraction in [0, 1] (the two fractions "
               "summing to at most 1), got ",
               c.mask_probability(), ", ", c.mask_token_fraction(), ", ", c.random_token_fraction());
  }
  const auto& e = c.electra();
  if (!(unit(e.mask_probability()) && unit(e.mask_token_fraction()) && unit(e.max_predictions_fraction()))) {
    return str("expected electra.mask_probability, mask_token_fraction and max_predictions_fraction in [0, 1], got ",
               e.mask_probability(), ", ", e.mask_token_fraction(), ", ", e.max_predictions_fraction());
  }
  if (!(scale(e.discriminator_weight()) && scale(e.generator_weight()) && e.generator_divisor() >= 0)) {
    return str("expected finite, non-negative electra weights and generator_divisor, got ", e.discriminator_weight(),
               ", ", e.generator_weight(), ", ", e.generator_divisor());
  }
  const auto& a = c.attention();
  if ((a.relative_fixed() || a.relative_dynamic() || a.relative_key() || a.depthwise_values() || a.conv_query() ||
       a.conv_key() || a.conv_value()) &&
      a.relative_radius() <= 0) {
    return str("expected attention.relative_radius > 0, got ", a.relative_radius());
  }
  if ((a.conv_query() || a.conv_key() || a.conv_value()) && c.family() == pb::BERT && c.num_heads() < 2) {
    return "expected at least 2 heads for convolutional queries/keys/values (half the heads)";
  }
  if (c.family() == pb::CONVBERT) {
    const auto& cb = c.convbert();
    if (cb.head_ratio() < 1) return str("expected convbert.head_ratio >= 1, got ", cb.head_ratio());
    if (cb.conv_kernel_size() < 1) return str("expected convbert.conv_kernel_size >= 1, got ", cb.conv_kernel_size());
    if (!(cb.ffn_groups() >= 1 && c.hidden_size() % cb.ffn_groups() == 0 &&
          c.intermediate_size() % cb.ffn_groups() == 0)) {
      return str("expected convbert.ffn_groups dividing hidden_size and intermediate_size, got ", cb.ffn_groups());
    }
  }
  const auto is_conv = [](pb::EncoderFamily f) {
    return f == pb::LIGHTCONV || f == pb::DYNAMICCONV || f == pb::DILATEDCONV;
  };
  if (is_conv(c.family())) {
    const auto& b = c.conv_block();
    if (b.kernel_sizes_size() == 0) return "expected at least one conv_block.kernel_sizes entry";
    if (b.dilation_cycle() < 0 || b.dilation_cycle() > 16) {
      return str("expected conv_block.dilation_cycle in [0, 16], got ", b.dilation_cycle());
    }
    if (c.family() == pb::DILATEDCONV && b.dilation_cycle() == 0 && c.num_layers() > 16) {
      return "expected conv_block.dilation_cycle > 0 with more than 16 dilated layers (dilation 2^layer)";
    }
    for (int k : b.kernel_sizes()) {
      if (k < 1) return str("expected conv_block.kernel_sizes >= 1, got ", k);
    }
    if (b.conv_heads() < 0) return str("expected conv_block.conv_heads >= 0, got ", b.conv_heads());
    int heads = b.conv_heads() > 0 ? b.conv_heads() : c.num_heads();
    if (c.hidden_size() % heads != 0) return str("expected hidden_size divisible by conv heads ", heads);
    if (!(b.weight_dropout() >= 0 && b.weight_dropout() < 1)) return "expected conv_block.weight_dropout in [0, 1)";
  }
  if (c.has_seq2seq()) {
    const auto& s = c.seq2seq();
    if (s.decoder_layers() <= 0) return str("expected seq2seq.decoder_layers > 0, got ", s.decoder_layers());
    if (c.embedding_size() != c.hidden_size()) {
      return str("expected embedding_size == hidden_size in an encoder-decoder, got ", c.embedding_size(), " and ",
                 c.hidden_size());
    }
    if (c.hidden_size() < 4) return str("expected hidden_size >= 4 for sinusoidal positions, got ", c.hidden_size());
    if (s.decoder_family() == pb::CONVBERT) {
      return "expected seq2seq.decoder_family BERT, LIGHTCONV, DYNAMICCONV or DILATEDCONV (CONVBERT has no causal "
             "form)";
    }
    if (is_conv(s.decoder_family())) {
      if (s.decoder_kernel_sizes_size() == 0) return "expected at least one seq2seq.decoder_kernel_sizes entry";
      for (int k : s.decoder_kernel_sizes()) {
        if (k < 1) return str("expected seq2seq.decoder_kernel_sizes >= 1, got ", k);
      }
      int heads = c.conv_block().conv_heads() > 0 ? c.conv_block().conv_heads() : c.num_heads();
      if (c.hidden_size() % heads != 0) return str("expected hidden_size divisible by conv heads ", heads);
    }
    if (!(s.label_smoothing() >= 0 && s.label_smoothing() < 1)) {
      return str("expected seq2seq.label_smoothing in [0, 1), got ", s.label_smoothing());
    }
    if (s.relative_buckets() != 0) {
      if (s.relative_buckets() < 4 || s.relative_buckets() % 2 != 0 || s.relative_buckets() > 1024) {
        return str("expected seq2seq.relative_buckets 0 (sinusoidal positions) or an even number in [4, 1024], got ",
                   s.relative_buckets());
      }
      if (s.relative_max_distance() <= s.relative_buckets() / 2 || s.relative_max_distance() > 65536) {
        return str("expected seq2seq.relative_max_distance in (relative_buckets / 2, 65536], got ",
                   s.relative_max_distance());
      }
      if (c.family() != pb::BERT || s.decoder_family() != pb::BERT || s.encoder_top_attention()) {
        return "expected family and seq2seq.decoder_family BERT without encoder_top_attention for "
               "seq2seq.relative_buckets (T5's positions are for self-attention stacks)";
      }
      if (c.attention().relative_fixed() || c.attention().relative_dynamic() || c.attention().relative_key() ||
          c.attention().depthwise_values()) {
        return "expected attention variant none with seq2seq.relative_buckets (T5's bias replaces the relative terms)";
      }
    }
  }
  return "";
}

void validate_model_config(const pb::ModelConfig& config) {
  std::string problem = model_config_problem(config);
  if (!problem.empty()) {
    throw UsageError(str("model config ", config.name().empty() ? "" : str("'", config.name(), "' "), problem));
  }
}

void validate_stored_model_config(const pb::ModelConfig& config, const std::string& source) {
  std::string problem = model_config_problem(config);
  if (!problem.empty()) throw DataError(str(source, ": the model config stored in the file is invalid: ", problem));
}

}  // namespace cabert::config
