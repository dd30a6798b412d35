// How a cabert model maps onto Hugging Face transformers' classes, one table for both directions (export and
// import): which HF family has the architecture, and the name (and layout) of every tensor there.
//
//   cabert                                      Hugging Face
//   BERT family, absolute positions, E == H     bert      BertModel / BertForMaskedLM / ...ForSequenceClassification
//   BERT family, absolute positions, E != H     electra   ElectraModel / ElectraForMaskedLM (same maths: an
//     or an ELECTRA checkpoint                            embedding projection and an H->E MLM transform)
//                                                         / ElectraForPreTraining (the discriminator)
//   ConvBERT, SDConv, bottleneck, odd kernel,   convbert  ConvBertModel / ConvBertForMaskedLM
//     head size H/N == HF's H/(2 N/ratio)
//   everything else (Chang et al.'s relative, composite, depthwise and conv-QKV variants, Wu et al.'s and Tay et
//   al.'s blocks, every encoder-decoder): no HF class computes it; the export keeps cabert's own tensor names.
//
// Where the maths differ although the tensors fit (documented in docs/export.md):
//   - cabert masks padding inside ConvBERT's convolutions, HF's ConvBERT does not: outputs agree on inputs
//     without padding;
//   - cabert's classification head is BERT's pooler (tanh); HF's ELECTRA and ConvBERT classification heads apply
//     GELU there, so those exports name the base model class and keep the head under `classifier.*` for the
//     documented recipe (BERT's own class is exact).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "formats/model.pb.h"

namespace cabert::interop {

enum class HfFamily { kNone, kBert, kElectra, kConvBert };

// What a checkpoint holds on top of the encoder, told by its tensors.
enum class ModelHead {
  kEncoder,         // the encoder alone
  kMlm,             // MLM pre-training (mlm_head.*)
  kElectra,         // ELECTRA pre-training: discriminator head + generator
  kClassification,  // fine-tuned classification or regression head (head.1 pooler, head.4 output)
  kSpan,            // fine-tuned SQuAD head (head.0)
};
const char* model_head_name(ModelHead head);

// HF stores a few tensors with extra unit dimensions (Conv1d weights, ConvBERT's [O, 1] bias).
enum class Reshape {
  kSame,
  kDepthwise,  // cabert [C, K]  <-> HF Conv1d depthwise [C, 1, K]
  kPointwise,  // cabert [O, C]  <-> HF Conv1d pointwise [O, C, 1]
  kColumn,     // cabert [O]     <-> HF [O, 1]
};
torch::Tensor to_hf_layout(const torch::Tensor& tensor, Reshape reshape);
torch::Tensor from_hf_layout(const torch::Tensor& tensor, Reshape reshape);
std::vector<int64_t> hf_shape(std::vector<int64_t> cabert_shape, Reshape reshape);

// cabert's module name (without "model/") <-> HF's state-dict name.
struct TensorLink {
  std::string cabert, hf;
  Reshape reshape = Reshape::kSame;
};

struct HfTarget {
  HfFamily family = HfFamily::kNone;
  std::string why_not;  // family == kNone: why no HF class computes this model
};
HfTarget hf_target(const pb::ModelConfig& config, ModelHead head);

const char* hf_model_type(HfFamily family);   // "bert", "electra", "convbert"
std::string hf_base_prefix(HfFamily family);  // "bert.", "electra.", "convbert."
// The class whose outputs equal cabert's (the base model class where HF's head computes something else).
std::string hf_architecture(HfFamily family, ModelHead head);

// Every tensor of the model with its HF name. The ELECTRA generator is not among them: it is a model of its
// own (hf_generator_links), exported beside the discriminator.
std::vector<TensorLink> hf_links(const pb::ModelConfig& config, HfFamily family, ModelHead head);
// The ELECTRA generator as an MLM model of `generator_family` (its config: models::generator_config).
std::vector<TensorLink> hf_generator_links(const pb::ModelConfig& config, HfFamily generator_family);

}  // namespace cabert::interop
