// Written against commit 34874e7 (it uses train::load_task_model, which issue 9 moved): prints the encoder hidden
// states and task logits of a fine-tuned checkpoint on fixed ids, the NAME.outputs.txt files here. Not built
// by CMake; compiled once against that commit's build (see make_fixtures.sh).
#include <cstdio>
#include "lib/train/finetune.h"
using namespace cabert;
int main(int argc, char** argv) {
  auto loaded = train::load_task_model(argv[1], torch::kCPU);
  loaded.model->eval();
  torch::NoGradGuard ng;
  const int64_t lengths[3] = {5, 11, 17};
  const int64_t V = loaded.info.model().vocab_size();
  torch::Tensor ids = torch::zeros({3, 17}, torch::kInt64), seg = torch::zeros({3, 17}, torch::kInt64);
  torch::Tensor mask = torch::zeros({3, 17}, torch::kBool);
  for (int b = 0; b < 3; ++b) {
    for (int t = 0; t < lengths[b]; ++t) {
      ids[b][t] = t == 0 ? 2 : 5 + (b * 37 + t * 13) % (V - 5);
      seg[b][t] = t > lengths[b] / 2 ? 1 : 0;
      mask[b][t] = true;
    }
  }
  torch::Tensor hidden = loaded.model->encoder(ids, seg, mask);
  torch::Tensor logits = loaded.model(ids, seg, mask);
  std::printf("hidden");
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t t = 0; t < lengths[i]; ++t)
      for (int64_t h = 0; h < hidden.size(2); ++h) std::printf(" %.9e", hidden[i][t][h].item<double>());
  std::printf("\nlogits");
  auto flat = logits.reshape({-1});
  for (int64_t i = 0; i < flat.numel(); ++i) std::printf(" %.9e", flat[i].item<double>());
  std::printf("\n");
}
