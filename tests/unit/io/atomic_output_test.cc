// AtomicOutput (lib/core/files.h): nothing appears under the final name before commit(), and the temporary
// files a killed writer leaves are recognised by their dead PID and removed, those of live writers kept.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "lib/core/errors.h"
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

// A named pipe stays a pipe: written in place (its reader gets the bytes), not replaced by a regular file.
TEST(AtomicOutput, AFifoIsWrittenInPlace) {
  const std::string dir = testing::temp_dir(), fifo = dir + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    received.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  });
  write_file_atomically(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(fs::directory_iterator(dir)->path().filename(), "pipe") << "a temporary was left beside the pipe";
}

// A symbolic link keeps pointing at its file, which gets the new contents.
TEST(AtomicOutput, ASymbolicLinksFileIsReplacedTheLinkKept) {
  const std::string dir = testing::temp_dir(), file = dir + "/real.txt", link = dir + "/link.txt";
  testing::write_text(file, "old");
  fs::create_symlink("real.txt", link);
  write_file_atomically(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(testing::read_text(file), "new");
}

TEST(AtomicOutput, ADirectoryIsRefusedBeforeAnythingIsWritten) {
  const std::string dir = testing::temp_dir();
  try {
    AtomicOutput out(dir);
    FAIL() << "a directory was accepted as an output file";
  } catch (const std::exception& error) {
    EXPECT_EQ(std::string(error.what()), dir + ": is a directory, expected the path of an output file");
  }
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

// A new writer of an output removes what a killed writer of the same output left (`kill -9` of tokenize encode
// left .OUT.tmp.PID for good), and nothing else.
TEST(AtomicOutput, ANewWriterRemovesTheKilledWritersTemporaryOfTheSameOutput) {
  const std::string dir = testing::temp_dir();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  const std::string dead = dir + "/.tokens.cbr.tmp." + std::to_string(child);
  const std::string dead_other = dir + "/.corpus.tmp." + std::to_string(child);
  const std::string alive = dir + "/.tokens.cbr.tmp." + std::to_string(getppid());
  for (const auto& path : {dead, dead_other, alive}) testing::write_text(path, "x");
  AtomicOutput out(dir + "/tokens.cbr");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(dead_other));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_EQ(remove_stale_temporaries(dir, "corpus"), 1u);
  EXPECT_FALSE(fs::exists(dead_other));
}

TEST(AtomicOutput, APathEndingInASlashIsRefused) {
  const std::string path = testing::temp_dir() + "/new/";
  try {
    AtomicOutput out(path);
    FAIL() << "a path ending in '/' was accepted as an output file";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()), path + ": ends in '/', expected the path of an output file");
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(CreateOutputDirectory, AFileInItsPlaceIsAUsageError) {
  const std::string dir = testing::temp_dir();
  testing::write_text(dir + "/file", "x");
  EXPECT_EQ(testing::usage_error_message([&] { create_output_directory(dir + "/file", "--model-dir"); }),
            "--model-dir " + dir + "/file: is a file, expected a directory");
  EXPECT_EQ(testing::usage_error_message([&] { create_output_directory(dir + "/file/sub/run", "--model-dir"); }),
            "--model-dir " + dir + "/file/sub/run: " + dir + "/file is a file, expected a directory");
  create_output_directory(dir + "/a/b", "--model-dir");
  EXPECT_TRUE(fs::is_directory(dir + "/a/b"));
  create_output_directory(dir + "/a/b", "--model-dir");  // already there: fine
}

}  // namespace
}  // namespace cabert
