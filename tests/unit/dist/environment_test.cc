// Reading a launcher's environment (lib/dist/environment.h): torchrun's variables, their defaults, and a
// clear error for each malformed one.
#include <gtest/gtest.h>

#include <cstdlib>

#include "lib/core/errors.h"
#include "lib/dist/environment.h"
#include "tests/test_paths.h"

namespace cabert::dist {
namespace {

class EnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
      unsetenv(name);
    }
  }
};

TEST_F(EnvironmentTest, AloneWithoutLauncherVariables) {
  Environment env = read_environment();
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.rank, 0);
  EXPECT_FALSE(env.distributed());
  EXPECT_FALSE(started_by_launcher());
}

TEST_F(EnvironmentTest, ReadsTorchrunVariables) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "node0", 1);
  setenv("MASTER_PORT", "29511", 1);
  Environment env = read_environment();
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29511);
  EXPECT_TRUE(env.distributed());
  EXPECT_TRUE(started_by_launcher());
}

TEST_F(EnvironmentTest, MalformedVariablesAreUsageErrors) {
  setenv("RANK", "2", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  EXPECT_EQ(testing::usage_error_message([] { read_environment(); }), "environment: RANK=2 is not below WORLD_SIZE=2");
  setenv("RANK", "one", 1);
  EXPECT_EQ(testing::usage_error_message([] { read_environment(); }),
            "environment variable RANK='one': expected an integer >= 0");
  setenv("RANK", "0", 1);
  unsetenv("MASTER_ADDR");
  EXPECT_EQ(testing::usage_error_message([] { read_environment(); }),
            "environment: WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (rank 0's address)");
  unsetenv("WORLD_SIZE");
  EXPECT_EQ(testing::usage_error_message([] { read_environment(); }),
            "a data-parallel launch sets both RANK and WORLD_SIZE (torchrun does); only one is set");
}

// Each process of a job takes its own GPU: "cuda" maps LOCAL_RANK onto the devices the process sees (one each;
// under a launcher that shows each process one GPU, that one), an indexed device is refused when processes share
// the machine (all on one GPU, NCCL's refusal reads as a dead peer), the CPU stays the CPU.
TEST(RankDevice, EachLocalProcessTakesItsOwnGpu) {
  Environment env;
  env.world_size = 4;
  env.local_world_size = 2;
  env.local_rank = 1;
  EXPECT_EQ(rank_device("cuda", env, 2), "cuda:1");
  EXPECT_EQ(rank_device("cuda", env, 1), "cuda:0") << "one visible GPU per process";
  EXPECT_EQ(rank_device("cpu", env, 2), "cpu");
  EXPECT_EQ(rank_device("cuda", env, 0), "cuda") << "left to --device's own error (no CUDA device)";
  try {
    rank_device("cuda:0", env, 2);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(),
                 "--device cuda:0: with 2 processes on this machine each takes its own GPU; give --device cuda "
                 "(process LOCAL_RANK takes cuda:LOCAL_RANK)");
  }
  env.local_world_size = 1;  // one process per machine: the device it names
  EXPECT_EQ(rank_device("cuda:1", env, 2), "cuda:1");
}

}  // namespace
}  // namespace cabert::dist
