#include "tests/test_paths.h"

#include "lib/core/errors.h"
#include "lib/text/tokenizer.h"

#include <ftw.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace cabert::testing {
namespace fs = std::filesystem;

std::string source_dir() { return CABERT_SOURCE_DIR; }
std::string cabert_binary() { return CABERT_BINARY; }

std::string shared_data_dir() {
  const char* env = std::getenv("CABERT_SHARED_DATA");
  std::string dir = env && *env ? env : CABERT_SHARED_DATA_DEFAULT;
  std::error_code ec;
  return fs::is_directory(dir + "/glue", ec) ? dir : "";
}

namespace {

// The folder of this process's temporary folders (one per test).
fs::path process_temp_root() { return fs::temp_directory_path() / ("cabert_test_" + std::to_string(getpid())); }

// Removes a tree with POSIX's file tree walk, children first, links not followed.
void remove_tree(const std::string& root) {
  nftw(
      root.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) {
        std::remove(path);  // a file, a link or an (emptied) folder
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

// Removes the process's temporary folders after the last test, while every library is still loaded. It was a
// static object's destructor at exit, where a std::filesystem::remove_all jumped to address 0 on the GPU machine
// (Ubuntu 24.04, GCC 13.3, torch 2.11: cuda-gdb placed the call in the wheel's libtorch.so, whose own copy of
// std::filesystem is exported); the walk is libc's, whatever copy of std::filesystem the process binds to.
class RemoveTempFolders : public ::testing::Environment {
 public:
  void TearDown() override { remove_tree(process_temp_root().string()); }
};
[[maybe_unused]] ::testing::Environment* const remove_temp_folders =
    ::testing::AddGlobalTestEnvironment(new RemoveTempFolders);

}  // namespace

std::string temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "cabert";
  for (auto& c : name) {
    if (c == '/') c = '_';
  }
  const fs::path dir = process_temp_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

CommandResult run_command(const std::string& command) {
  std::string dir = temp_dir() + "/.command";
  fs::create_directories(dir);
  std::string out = dir + "/out", err = dir + "/err";
  std::string full = "( " + command + " ) >" + out + " 2>" + err;
  int status = std::system(full.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_text(out);
  result.err = read_text(err);
  return result;
}

std::string python_with(const std::string& modules) {
  static std::map<std::string, std::string> found;
  auto it = found.find(modules);
  if (it != found.end()) return it->second;
  const char* python = std::getenv("CABERT_PYTHON");
#ifdef CABERT_PYTHON_DEFAULT
  if (python == nullptr) python = CABERT_PYTHON_DEFAULT;
#endif
  std::string result;
  if (python != nullptr && *python != '\0') {
    const std::string command = str("'", python, "' -c 'import ", modules, "' >/dev/null 2>&1");
    if (std::system(command.c_str()) == 0) result = python;
  }
  return found[modules] = result;
}

std::string run_python(const std::string& python, const std::string& script, const std::string& args) {
  std::string command = "'" + python + "' '" + script + "' " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return "";
  }
  std::string output;
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  int status = pclose(pipe);
  EXPECT_EQ(status, 0) << command << "\n" << output;
  return output;
}

void write_text(const std::string& path, const std::string& text) {
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  std::ofstream file(path, std::ios::binary);
  file << text;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

namespace {

template <typename ErrorType>
std::string error_message(const std::function<void()>& action, const char* name) {
  try {
    action();
  } catch (const ErrorType& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a " << name;
  return "";
}

}  // namespace

std::string data_error_message(const std::function<void()>& action) {
  return error_message<DataError>(action, "cabert::DataError");
}

std::string usage_error_message(const std::function<void()>& action) {
  return error_message<UsageError>(action, "cabert::UsageError");
}

const std::string& alice_tokenizer() {
  static const std::string model = [] {
    std::string prefix = (fs::temp_directory_path() / ("cabert_alice_tok_" + std::to_string(getpid()))).string();
    text::TokenizerTrainOptions options;
    options.inputs = {source_dir() + "/recipes/quickstart/data/gutenberg/11-0.txt"};
    options.input_format = text::TextFormat::kGutenberg;
    options.vocab_size = 600;
    options.num_sentinels = 8;
    options.lowercase = true;
    options.model_prefix = prefix;
    text::train_tokenizer(options);
    static struct Cleanup {
      std::string prefix;
      ~Cleanup() {
        std::error_code ec;
        fs::remove(prefix + ".model", ec);
        fs::remove(prefix + ".vocab", ec);
      }
    } cleanup{prefix};
    return prefix + ".model";
  }();
  return model;
}

}  // namespace cabert::testing
