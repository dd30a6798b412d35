// `cabert pretrain|finetune` data-parallel, end to end over loopback (bounded: every run is a few seconds,
// every wait has a deadline): 2 ranks x batch B/2 give the weights of 1 rank x batch B (dropout off), for
// --nproc and for torchrun's environment variables; a resumed 2-rank run continues exactly; SIGTERM (to the
// launcher or to one rank) saves every rank's state and stops them all; a killed rank ends the job with a clear
// error within the timeout; translation (token-budget batches split between the ranks) gives the weights of one
// process of the joint budget, resumes exactly after SIGTERM and fails clearly when a rank is killed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "formats/metrics.pb.h"
#include "formats/task.pb.h"
#include "lib/dist/local_launcher.h"
#include "lib/io/checkpoint_file.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

namespace fs = std::filesystem;
using testing::cabert_binary;
using testing::run_command;

const char* const kModel =
    " --preset bert-tiny-composite --set hidden_size=32 --set embedding_size=32 --set num_layers=2 --set num_heads=2"
    " --set intermediate_size=64 --set dropout=0 --set attention_dropout=0";

class DataParallelCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = (fs::temp_directory_path() / ("cabert_data_parallel_" + std::to_string(getpid()))).string();
    fs::remove_all(root_);
    fs::create_directories(root_);
    // Frames of 4 records: batch 8 on one rank reads two frames, batch 4 on each of two ranks one each.
    auto built = run_command(cabert_binary() + " -q build-corpus -m " + testing::alice_tokenizer() + " -i " +
                             testing::source_dir() +
                             "/recipes/quickstart/data/gutenberg/11-0.txt --input-format "
                             "gutenberg --max-length 32 --frame-records 4 -o " +
                             root_ + "/corpus");
    ASSERT_EQ(built.exit_code, 0) << built.err;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // A directory of this test under the suite's root.
  std::string dir(const std::string& name) const {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string path = root_ + "/" + info->name() + "/" + name;
    fs::create_directories(path);
    return path;
  }
  static std::string pretrain(const std::string& model_dir, const std::string& extra) {
    return cabert_binary() + " --threads 1 pretrain" + kModel + " --corpus " + root_ + "/corpus --model-dir " +
           model_dir + " --lr 3e-3 --warmup-steps 1 --eval-examples 8 --eval-every 2 " + extra;
  }
  // What a torchrun-started rank sees.
  static std::string rank_environment(int rank, int port) {
    return "RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) +
           " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " ";
  }
  // Runs a bash script (background jobs, waits with deadlines).
  testing::CommandResult bash(const std::string& name, const std::string& script) const {
    const std::string path = dir("scripts") + "/" + name + ".sh";
    testing::write_text(path, "set -u\n" + script);
    return run_command("bash " + path);
  }

  // Bash lines that wait (at most 30 s) until rank 0 logged the start of training, then one more second.
  static std::string wait_for_training(const std::string& err_file) {
    return "for i in $(seq 600); do grep -q 'objective mlm' " + err_file + " && break; sleep 0.05; done\nsleep 1\n";
  }

  // `cabert finetune` of a tiny encoder on 200 SST-2 rows of the shipped sample (dev: 100), this test's data
  // directory, `extra` options, up to "--model-dir ".
  std::string sst2_finetune(const std::string& extra) const {
    const std::string data = dir("data");
    const std::string sample = testing::source_dir() + "/recipes/quickstart/data/SST-2";
    const auto copied = run_command("head -201 " + sample + "/train.tsv > " + data + "/train.tsv && head -101 " +
                                    sample + "/dev.tsv > " + data + "/dev.tsv");
    EXPECT_EQ(copied.exit_code, 0) << copied.err;
    return cabert_binary() +
           " --threads 1 finetune --preset bert-tiny-composite --set hidden_size=32 --set embedding_size=32"
           " --set num_layers=1 --set num_heads=2 --set intermediate_size=64 --tokenizer " +
           testing::alice_tokenizer() + " --task SST-2 --train " + data + "/train.tsv --dev " + data +
           "/dev.tsv --max-length 32 --lr 1e-3" + extra + " --model-dir ";
  }
  // `cabert finetune --task translation` of a tiny LightConv encoder-decoder (dropout off) on the first 64 pairs
  // of the shipped Multi30k slice (dev: 8 test pairs, greedy), `extra` options, up to "--model-dir ".
  static std::string translation(const std::string& extra) {
    return cabert_binary() +
           " --threads 1 finetune --task translation --preset wu-lightconv-tiny --set dropout=0"
           " --set attention_dropout=0 --set conv_block.weight_dropout=0 --tokenizer " +
           testing::alice_tokenizer() + " --data " + testing::source_dir() +
           "/tests/data/mt/multi30k-slice --dev-split test --max-train-examples 64 --max-dev-examples 8 --lr 3e-3"
           " --warmup-steps 2" +
           extra + " --model-dir ";
  }
  static std::string root_;
};
std::string DataParallelCli::root_;

// `except_key_biases`: attention's key biases are left out. Softmax is unchanged by a bias added to every key
// of a query, so their gradient is zero up to rounding, and Adam, which divides a gradient by its own running
// size, turns rounding noise that differs between one process and two into lr-sized steps (seen: 2.3e-4 after
// 22 updates at lr 3e-3, while every other tensor agreed to 2e-5).
void expect_same_model(const std::string& a, const std::string& b, double tolerance, bool except_key_biases = false) {
  io::Checkpoint x = io::load_checkpoint(a), y = io::load_checkpoint(b);
  size_t compared = 0;
  for (const auto& [name, tensor] : x.tensors) {
    if (name.rfind("model/", 0) != 0) continue;
    const std::string suffix = ".key.bias";
    if (except_key_biases && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      continue;
    }
    ASSERT_TRUE(y.tensors.count(name)) << name;
    const torch::Tensor& other = y.tensors.at(name);
    if (tensor.is_floating_point()) {
      EXPECT_TRUE(torch::allclose(tensor, other, tolerance, tolerance))
          << name << ": max difference " << (tensor - other).abs().max().item<double>();
    } else {
      EXPECT_TRUE(torch::equal(tensor, other)) << name;
    }
    ++compared;
  }
  EXPECT_GT(compared, 10u);
}

std::vector<pb::MetricsRecord> eval_records(const std::string& model_dir) {
  std::vector<pb::MetricsRecord> out;
  for (const auto& r :
       testing::read_records<pb::MetricsRecord>(model_dir + "/metrics.cabert", "cabert.pb.MetricsRecord")) {
    if (r.phase() == "eval") out.push_back(r);
  }
  return out;
}

TEST_F(DataParallelCli, TwoRanksOfHalfBatchesGiveTheWeightsOfOneRank) {
  const std::string one = dir("one"), two = dir("two"), env = dir("env");
  auto alone = run_command(pretrain(one, "--steps 4 --batch-size 8"));
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  auto spawned = run_command(pretrain(two, "--steps 4 --batch-size 4 --nproc 2"));
  ASSERT_EQ(spawned.exit_code, 0) << spawned.err;
  EXPECT_NE(spawned.err.find("batch 4 x 1 x 2 processes"), std::string::npos) << spawned.err;
  expect_same_model(one + "/checkpoint-00000004.cabert", two + "/checkpoint-00000004.cabert", 2e-5);

  // The held-out evaluation, split over the ranks and summed, is the one-process evaluation.
  auto evals_one = eval_records(one), evals_two = eval_records(two);
  ASSERT_EQ(evals_one.size(), 2u);
  ASSERT_EQ(evals_two.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    for (const auto& [key, value] : evals_one[i].values()) {
      EXPECT_NEAR(evals_two[i].values().at(key), value, 1e-5 * std::max(1.0, std::abs(value)))
          << key << " at step " << evals_one[i].step();
    }
  }
  pb::CheckpointInfo info = io::read_checkpoint_info(two + "/checkpoint-00000004.cabert");
  EXPECT_EQ(info.world_size(), 2u);
  ASSERT_EQ(info.ranks_size(), 2);
  EXPECT_NE(info.ranks(0).data().record(), info.ranks(1).data().record()) << "the ranks read different frames";
  EXPECT_EQ(info.metadata().at("batch_size"), "8");
  EXPECT_EQ(info.metadata().at("processes"), "2");

  // torchrun's way: two processes that find their rank in the environment.
  const int port = dist::free_local_port();
  auto launched = bash("torchrun_like", rank_environment(0, port) + pretrain(env, "--steps 4 --batch-size 4") + " 2> " +
                                            env + "/r0.err & p0=$!\n" + rank_environment(1, port) +
                                            pretrain(env, "--steps 4 --batch-size 4") + " 2> " + env +
                                            "/r1.err & p1=$!\nwait $p0 || exit 1\nwait $p1 || exit 2\n");
  ASSERT_EQ(launched.exit_code, 0) << testing::read_text(env + "/r0.err") << testing::read_text(env + "/r1.err");
  expect_same_model(two + "/checkpoint-00000004.cabert", env + "/checkpoint-00000004.cabert", 1e-6);
  EXPECT_NE(testing::read_text(env + "/r0.err").find("cabert[rank 0]: pretrain:"), std::string::npos);
}

TEST_F(DataParallelCli, AResumedTwoRankRunContinuesExactly) {
  const std::string whole = dir("whole"), resumed = dir("resumed");
  auto run = run_command(pretrain(whole, "--steps 6 --batch-size 4 --nproc 2 --save-every 3 --keep-checkpoints 5"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The same run stopped after step 3: its checkpoint and metrics up to there.
  fs::copy_file(whole + "/checkpoint-00000003.cabert", resumed + "/checkpoint-00000003.cabert");
  auto again = run_command(pretrain(resumed, "--steps 6 --batch-size 4 --nproc 2 --resume"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("resuming from"), std::string::npos) << again.err;
  expect_same_model(whole + "/checkpoint-00000006.cabert", resumed + "/checkpoint-00000006.cabert", 1e-6);
  pb::CheckpointInfo a = io::read_checkpoint_info(whole + "/checkpoint-00000006.cabert");
  pb::CheckpointInfo b = io::read_checkpoint_info(resumed + "/checkpoint-00000006.cabert");
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(a.ranks(rank).data().SerializeAsString(), b.ranks(rank).data().SerializeAsString()) << rank;
    EXPECT_EQ(a.ranks(rank).torch_rng_state(), b.ranks(rank).torch_rng_state()) << rank;
  }
  // Another number of processes cannot continue it: each rank's data position belongs to its share.
  auto alone = run_command(pretrain(resumed, "--steps 9 --batch-size 8 --resume"));
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("was written by a run of 2 process(es); resume it with 2 (this run has 1)"),
            std::string::npos)
      << alone.err;
}

TEST_F(DataParallelCli, SigtermSavesEveryRankAndStopsThemAll) {
  const std::string model = dir("model");
  auto result = bash("sigterm", pretrain(model, "--steps 100000 --batch-size 4 --nproc 2 --save-every 0") + " 2> " +
                                    model + "/err & pid=$!\n" + wait_for_training(model + "/err") +
                                    "kill -TERM $pid\nwait $pid\necho \"rc=$?\"\n"
                                    "pgrep -f -- '--model-dir " +
                                    model + "' && echo orphans\n");
  const std::string err = testing::read_text(model + "/err");
  EXPECT_NE(result.out.find("rc=143"), std::string::npos) << result.out << err;
  EXPECT_EQ(result.out.find("orphans"), std::string::npos) << result.out;
  EXPECT_NE(err.find("cabert[rank 0]: pretrain: stopped at step"), std::string::npos) << err;
  std::vector<std::string> checkpoints;
  for (const auto& entry : fs::directory_iterator(model)) {
    if (entry.path().filename().string().rfind("checkpoint-", 0) == 0) checkpoints.push_back(entry.path().string());
  }
  ASSERT_EQ(checkpoints.size(), 1u) << err;
  pb::CheckpointInfo info = io::read_checkpoint_info(checkpoints[0]);
  EXPECT_GT(info.step(), 0u);
  EXPECT_EQ(info.ranks_size(), 2);
  // It resumes (two more steps).
  auto resumed =
      run_command(pretrain(model, "--steps " + std::to_string(info.step() + 2) + " --batch-size 4 --nproc 2 --resume"));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;

  // SIGTERM to one rank alone (torchrun-style launch): the stop reaches every rank at the same step.
  const std::string single = dir("single");
  const int port = dist::free_local_port();
  const std::string command = pretrain(single, "--steps 100000 --batch-size 4 --save-every 0");
  auto one_rank = bash("sigterm_one_rank", rank_environment(0, port) + command + " 2> " + single + "/r0.err & p0=$!\n" +
                                               rank_environment(1, port) + command + " 2> " + single +
                                               "/r1.err & p1=$!\n" + wait_for_training(single + "/r0.err") +
                                               "kill -TERM $p1\n"
                                               "wait $p0; echo \"rank0=$?\"\nwait $p1; echo \"rank1=$?\"\n");
  EXPECT_NE(one_rank.out.find("rank0=143"), std::string::npos)
      << one_rank.out << testing::read_text(single + "/r0.err");
  EXPECT_NE(one_rank.out.find("rank1=143"), std::string::npos)
      << one_rank.out << testing::read_text(single + "/r1.err");
  size_t saved = 0;
  for (const auto& entry : fs::directory_iterator(single)) {
    if (entry.path().filename().string().rfind("checkpoint-", 0) != 0) continue;
    EXPECT_EQ(io::read_checkpoint_info(entry.path().string()).ranks_size(), 2);
    ++saved;
  }
  EXPECT_EQ(saved, 1u);
}

TEST_F(DataParallelCli, AKilledRankEndsTheJobWithAClearError) {
  const std::string model = dir("model");
  const int port = dist::free_local_port();
  const std::string command = pretrain(model, "--steps 100000 --batch-size 4 --save-every 0 --dist-timeout 10");
  auto result = bash("killed", rank_environment(0, port) + command + " 2> " + model + "/r0.err & p0=$!\n" +
                                   rank_environment(1, port) + command + " 2> " + model + "/r1.err & p1=$!\n" +
                                   wait_for_training(model + "/r0.err") +
                                   "kill -9 $p1\nstart=$(date +%s)\n"
                                   "( sleep 60; kill -9 $p0 ) 2>/dev/null & watchdog=$!\n"
                                   "wait $p0\necho \"rc=$? waited=$(( $(date +%s) - start ))\"\nkill $watchdog\n");
  const std::string err = testing::read_text(model + "/r0.err");
  EXPECT_NE(result.out.find("rc=1 "), std::string::npos) << result.out << err;
  int waited = std::stoi(result.out.substr(result.out.find("waited=") + 7));
  EXPECT_LE(waited, 20) << "rank 0 must stop within the timeout (10 s), not hang";
  EXPECT_NE(err.find("cabert[rank 0]: error: rank 0 of 2: "), std::string::npos) << err;
  EXPECT_NE(err.find("failed: a peer process died or did not answer within 10 s (--dist-timeout); stopping."),
            std::string::npos)
      << err;

  // Under --nproc, the launcher names the rank that died and ends with its code.
  const std::string spawned = dir("spawned");
  auto launched = bash("killed_child", pretrain(spawned, "--steps 100000 --batch-size 4 --save-every 0 --nproc 2 "
                                                         "--dist-timeout 10") +
                                           " 2> " + spawned + "/err & pid=$!\n" + wait_for_training(spawned + "/err") +
                                           "kill -9 $(pgrep -P $pid | tail -1)\n"
                                           "( sleep 90; kill -9 $pid ) 2>/dev/null & watchdog=$!\n"
                                           "wait $pid\necho \"rc=$?\"\nkill $watchdog\n");
  const std::string launcher_err = testing::read_text(spawned + "/err");
  EXPECT_NE(launched.out.find("rc=137"), std::string::npos) << launched.out << launcher_err;
  EXPECT_NE(launcher_err.find(") was killed by signal 9; waiting up to 40 s for the other ranks"), std::string::npos)
      << launcher_err;
  EXPECT_NE(launcher_err.find("a peer process died"), std::string::npos) << launcher_err;
}

TEST_F(DataParallelCli, FinetuningTwoRanksOfHalfBatchesGivesTheWeightsOfOneRank) {
  const std::string data = dir("data"), one = dir("one"), two = dir("two");
  const std::string finetune = sst2_finetune(" --set dropout=0 --set attention_dropout=0 --epochs 2");
  auto alone = run_command(finetune + one + " --batch-size 16");
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  auto spawned = run_command(finetune + two + " --batch-size 8 --nproc 2");
  ASSERT_EQ(spawned.exit_code, 0) << spawned.err;
  EXPECT_NE(spawned.err.find("batch 8 x 2 processes"), std::string::npos) << spawned.err;
  expect_same_model(one + "/best.cabert", two + "/best.cabert", 2e-5);
  auto best_line = [](const std::string& out) {
    const size_t at = out.find("dev: best");
    return at == std::string::npos ? std::string("(none)") : out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_EQ(best_line(spawned.out), best_line(alone.out));
  // Mean pooling leaves the pooler unused: the Reducer must not wait for its gradient.
  auto mean_pooled = run_command(finetune + dir("mean") + " --batch-size 8 --nproc 2 --pooling mean");
  EXPECT_EQ(mean_pooled.exit_code, 0) << mean_pooled.err;
}

// A data-parallel fine-tuning stopped by SIGTERM (to the launcher) saves every rank's state in last.cabert and
// continues with --resume to the uninterrupted run's weights.
TEST_F(DataParallelCli, AFineTuningOfTwoRanksStoppedBySigtermResumesExactly) {
  const std::string whole = dir("whole"), stopped = dir("stopped");
  const std::string finetune = sst2_finetune(" --epochs 30 --batch-size 8 --nproc 2 --log-every 5");
  auto alone = run_command(finetune + whole);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  auto result = bash("finetune_sigterm", finetune + stopped + " 2> " + stopped +
                                             "/err & pid=$!\n"
                                             "for i in $(seq 1200); do grep -q 'epoch 2 SST-2 dev' " +
                                             stopped +
                                             "/err && break; sleep 0.05; done\n"
                                             "kill -TERM $pid\nwait $pid\necho \"rc=$?\"\n");
  const std::string err = testing::read_text(stopped + "/err");
  ASSERT_NE(result.out.find("rc=143"), std::string::npos) << result.out << err;
  const pb::CheckpointInfo last = io::read_checkpoint_info(stopped + "/last.cabert");
  EXPECT_EQ(last.ranks_size(), 2);
  EXPECT_LE(last.position().epoch(), 30u);
  auto resumed = run_command(finetune + stopped + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("finetune: resuming from"), std::string::npos) << resumed.err;
  expect_same_model(whole + "/best.cabert", stopped + "/best.cabert", 0);
  expect_same_model(whole + "/last.cabert", stopped + "/last.cabert", 0);
}

// Translation: the joint batches are those one process cuts with the joint budget (2 x --max-tokens), each split
// between the ranks (data::rank_share), and the loss is per target token of the joint batch: 2 ranks of budget
// B/2 train the weights of 1 rank of budget B.
TEST_F(DataParallelCli, TranslationTwoRanksOfHalfBudgetsGiveTheWeightsOfOneRank) {
  const std::string one = dir("one"), two = dir("two"), env = dir("env");
  auto alone = run_command(translation(" --epochs 2 --max-tokens 600") + one);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  auto spawned = run_command(translation(" --epochs 2 --max-tokens 300 --nproc 2") + two);
  ASSERT_EQ(spawned.exit_code, 0) << spawned.err;
  EXPECT_NE(spawned.err.find("tokens (padded-sum) x 2 processes"), std::string::npos) << spawned.err;
  const pb::CheckpointInfo last_one = io::read_checkpoint_info(one + "/last.cabert");
  const pb::CheckpointInfo last_two = io::read_checkpoint_info(two + "/last.cabert");
  EXPECT_GT(last_one.position().update(), 4u);
  EXPECT_EQ(last_two.position().update(), last_one.position().update()) << "the same joint batches";
  EXPECT_EQ(last_two.world_size(), 2u);
  EXPECT_EQ(last_two.ranks_size(), 2);
  expect_same_model(one + "/last.cabert", two + "/last.cabert", 2e-5, /*except_key_biases=*/true);
  // The training losses (the joint loss) agree too.
  auto losses = [](const std::string& model_dir) {
    std::vector<double> out;
    for (const auto& r : testing::read_records<pb::TaskMetrics>(model_dir + "/metrics.cabert", "cabert.pb.TaskMetrics")) {
      if (r.kind() == pb::TaskMetrics::EPOCH) out.push_back(r.train_loss());
    }
    return out;
  };
  const std::vector<double> a = losses(one), b = losses(two);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::max(1.0, a[i])) << "epoch " << i + 1;

  // torchrun's way: two processes that find their rank in the environment.
  const int port = dist::free_local_port();
  const std::string command = translation(" --epochs 2 --max-tokens 300") + env;
  auto launched = bash("translation_torchrun_like", rank_environment(0, port) + command + " > " + env + "/r0.out 2> " +
                                                        env + "/r0.err & p0=$!\n" + rank_environment(1, port) +
                                                        command + " > /dev/null 2> " + env +
                                                        "/r1.err & p1=$!\nwait $p0 || exit 1\nwait $p1 || exit 2\n");
  ASSERT_EQ(launched.exit_code, 0) << testing::read_text(env + "/r0.err") << testing::read_text(env + "/r1.err");
  expect_same_model(two + "/last.cabert", env + "/last.cabert", 1e-6);
  EXPECT_NE(testing::read_text(env + "/r0.out").find("dev: best BLEU"), std::string::npos);
}

// SIGTERM to the launcher of a 2-rank translation saves last.cabert with both ranks' states; --resume continues
// to the uninterrupted run's weights. A killed rank ends the job with the launcher's and the peer's messages.
TEST_F(DataParallelCli, ATranslationOfTwoRanksStoppedBySigtermResumesExactly) {
  const std::string whole = dir("whole"), stopped = dir("stopped");
  const std::string command = translation(" --epochs 6 --max-tokens 300 --nproc 2 --log-every 2");
  auto uninterrupted = run_command(command + whole);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  auto result = bash("translation_sigterm", command + stopped + " 2> " + stopped +
                                                "/err & pid=$!\n"
                                                "for i in $(seq 1200); do grep -q 'epoch 2 dev' " +
                                                stopped +
                                                "/err && break; sleep 0.05; done\n"
                                                "kill -TERM $pid\nwait $pid\necho \"rc=$?\"\n");
  const std::string err = testing::read_text(stopped + "/err");
  ASSERT_NE(result.out.find("rc=143"), std::string::npos) << result.out << err;
  EXPECT_NE(err.find("translation: stopped at epoch"), std::string::npos) << err;
  const pb::CheckpointInfo last = io::read_checkpoint_info(stopped + "/last.cabert");
  EXPECT_EQ(last.ranks_size(), 2);
  EXPECT_LE(last.position().epoch(), 6u);
  auto resumed = run_command(command + stopped + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("translation: resuming from"), std::string::npos) << resumed.err;
  expect_same_model(whole + "/last.cabert", stopped + "/last.cabert", 0);
  expect_same_model(whole + "/best.cabert", stopped + "/best.cabert", 0);
  // One process cannot continue a 2-rank run: each rank continues from its own generator state.
  auto alone = run_command(translation(" --epochs 8 --max-tokens 600") + stopped + " --resume");
  EXPECT_EQ(alone.exit_code, 2) << alone.err;
  EXPECT_NE(alone.err.find("was written by a run of 2 process(es); resume it with 2 (this run has 1)"),
            std::string::npos)
      << alone.err;

  const std::string killed = dir("killed");
  auto launched = bash("translation_killed_rank",
                       translation(" --epochs 1000 --max-tokens 300 --nproc 2 --dist-timeout 10") + killed + " 2> " +
                           killed + "/err & pid=$!\n" +
                           "for i in $(seq 600); do grep -q 'translation epoch 1' " + killed +
                           "/err && break; sleep 0.05; done\nsleep 1\n"
                           "kill -9 $(pgrep -P $pid | tail -1)\n"
                           "( sleep 90; kill -9 $pid ) 2>/dev/null & watchdog=$!\n"
                           "wait $pid\necho \"rc=$?\"\nkill $watchdog\n");
  const std::string launcher_err = testing::read_text(killed + "/err");
  EXPECT_NE(launched.out.find("rc=137"), std::string::npos) << launched.out << launcher_err;
  EXPECT_NE(launcher_err.find(") was killed by signal 9; waiting up to 40 s for the other ranks"), std::string::npos)
      << launcher_err;
  EXPECT_NE(launcher_err.find("a peer process died"), std::string::npos) << launcher_err;
}

}  // namespace
}  // namespace cabert
