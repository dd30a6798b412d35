// Reading a launcher's environment (lib/dist/environment.h): torchrun's variables, their defaults, and a
// clear error for each malformed one.
#include <gtest/gtest.h>

#include <cstdlib>

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
  EXPECT_EQ(testing::usage_error_message([] { read_environment(); }),
            "environment: RANK=2 is not below WORLD_SIZE=2");
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

}  // namespace
}  // namespace cabert::dist
