// AtomicOutput (lib/core/files.h): nothing appears under the final name before commit(), and the temporary
// files a killed writer leaves are recognised by their dead PID and removed, those of live writers kept.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "lib/core/files.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

namespace fs = std::filesystem;

TEST(AtomicOutput, NothingUnderTheFinalNameBeforeCommit) {
  const std::string dir = testing::temp_dir(), path = dir + "/out.bin";
  {
    AtomicOutput out(path);
    out.stream() << "half";
    EXPECT_FALSE(fs::exists(path));
  }  // destroyed without commit
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir)) << "the temporary file was not removed";
  write_file_atomically(path, "whole");
  EXPECT_EQ(testing::read_text(path), "whole");
}

TEST(AtomicOutput, StaleTemporariesOfDeadWritersAreRemoved) {
  const std::string dir = testing::temp_dir();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a PID that no longer runs
  const std::string dead = dir + "/.checkpoint-00000007.cabert.tmp." + std::to_string(child);
  const std::string alive = dir + "/.metrics.cabert.tmp." + std::to_string(getppid());
  const std::string mine = dir + "/.config.textproto.tmp." + std::to_string(getpid());
  const std::string other = dir + "/notes.tmp.txt";
  for (const auto& path : {dead, alive, mine, other}) testing::write_text(path, "x");
  EXPECT_EQ(remove_stale_temporaries(dir), 1u);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_EQ(remove_stale_temporaries(dir + "/absent"), 0u);
}

}  // namespace
}  // namespace cabert
