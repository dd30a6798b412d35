// Manual throughput check (disabled by default; timings never assert anything):
//   CABERT_BENCH_PRESET=bert-small-composite CABERT_BENCH_STEPS=3 ./build/tests/cabert_tests
//     --gtest_also_run_disabled_tests --gtest_filter='PretrainBench.*'   (one command line)
// Batch 32 x 128 of random regular tokens; prints tokens/s of full pre-training steps (forward, backward,
// AdamW update).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>

#include "formats/corpus.pb.h"
#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/log.h"
#include "lib/io/record_file.h"
#include "lib/train/pretrainer.h"
#include "tests/test_paths.h"

namespace cabert::train {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

TEST(PretrainBench, DISABLED_TokensPerSecond) {
  const std::string dir = testing::temp_dir();
  const std::string corpus = dir + "/bench.cabert";
  {
    io::RecordWriter writer(corpus, "cabert.pb.PretrainingExample", {{"vocab_size", "30004"}});
    std::mt19937_64 rng(1);
    for (int e = 0; e < 400; ++e) {
      pb::PretrainingExample example;
      example.add_token_ids(2);
      for (int i = 0; i < 62; ++i) example.add_token_ids(105 + static_cast<int>(rng() % 29899));
      example.add_token_ids(3);
      example.set_segment_a_length(64);
      for (int i = 0; i < 63; ++i) example.add_token_ids(105 + static_cast<int>(rng() % 29899));
      example.add_token_ids(3);
      writer.write(example);
    }
    writer.close();
  }
  PretrainOptions o;
  o.model = config::preset_config(env_or("CABERT_BENCH_PRESET", "bert-small-composite"));
  o.objective = parse_objective(env_or("CABERT_BENCH_OBJECTIVE", "mlm"));
  o.corpus = {corpus};
  o.model_dir = dir + "/model";
  o.steps = std::stoi(env_or("CABERT_BENCH_STEPS", "3"));
  o.batch_size = std::stoi(env_or("CABERT_BENCH_BATCH", "32"));
  o.eval_examples = 0;
  o.save_every = 0;
  o.first_regular_id = 105;
  o.quiet_progress = true;
  double best = 0;
  o.after_step = [&](int64_t) {};
  PretrainResult result = run_pretraining(o);
  best = result.tokens_per_second;
  std::cout << o.model.name() << " " << env_or("CABERT_BENCH_OBJECTIVE", "mlm") << " batch " << o.batch_size
            << " x 128: " << best << " tokens/s (mean over " << o.steps << " steps, threads " << at::get_num_threads()
            << ")\n";
}

}  // namespace
}  // namespace cabert::train
