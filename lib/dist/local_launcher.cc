#include "lib/dist/local_launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "lib/core/errors.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"

namespace cabert::dist {
namespace {

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int exit_code = 0;
};

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return str("was killed by signal ", WTERMSIG(status));
  return str("exited with code ", exit_code_of(status));
}

pid_t spawn(int rank, int nproc, int port, const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid < 0) throw Error(str("--nproc: fork failed: ", std::strerror(errno)));
  if (pid > 0) return pid;
  // Child: its own process group, so that a terminal's Ctrl-C reaches the launcher only (which forwards it
  // once; a second signal to a rank would make it exit without saving).
  setpgid(0, 0);
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  std::fprintf(stderr, "cabert: --nproc: could not start rank %d: %s\n", rank, std::strerror(errno));
  _exit(127);
}

}  // namespace

int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(str("--nproc: socket: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    throw Error(str("--nproc: no free port on 127.0.0.1: ", std::strerror(errno)));
  }
  close(fd);
  return ntohs(address.sin_port);
}

void launch_local_processes(int nproc, const std::vector<std::string>& argv, std::chrono::seconds grace) {
  if (nproc < 1) throw UsageError(str("--nproc: expected at least 1 process, got ", nproc));
  const int port = free_local_port();
  log_info("launching ", nproc, " processes (MASTER_ADDR=127.0.0.1 MASTER_PORT=", port, ")");
  std::vector<Child> children(nproc);
  for (int rank = 0; rank < nproc; ++rank) {
    children[rank].rank = rank;
    children[rank].pid = spawn(rank, nproc, port, argv);
    children[rank].running = true;
  }
  int forwarded = 0, running = nproc;
  const Child* first_failure = nullptr;
  std::chrono::steady_clock::time_point kill_at{};
  while (running > 0) {
    const int signal_number = interrupt_requested();
    if (signal_number != 0 && forwarded == 0) {
      for (const auto& child : children) {
        if (child.running) kill(child.pid, signal_number);
      }
      forwarded = signal_number;
    }
    if (first_failure != nullptr && std::chrono::steady_clock::now() >= kill_at) {
      for (const auto& child : children) {
        if (child.running) {
          log_warning("--nproc: rank ", child.rank, " is still running ", grace.count(), " s after rank ",
                      first_failure->rank, " failed; killing it");
          kill(child.pid, SIGKILL);
        }
      }
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    for (auto& child : children) {
      if (child.pid != pid || !child.running) continue;
      child.running = false;
      child.exit_code = exit_code_of(status);
      --running;
      if (child.exit_code != 0 && first_failure == nullptr) {
        first_failure = &child;
        kill_at = std::chrono::steady_clock::now() + grace;
        if (forwarded == 0 || child.exit_code != 128 + forwarded) {
          log_message(LogLevel::kError, str("--nproc: rank ", child.rank, " (pid ", pid, ") ", describe_status(status),
                                            "; waiting up to ", grace.count(), " s for the other ranks"));
        }
      }
    }
  }
  if (forwarded != 0) {
    bool all_saved = true;
    for (const auto& child : children) all_saved = all_saved && child.exit_code == 128 + forwarded;
    if (all_saved || first_failure == nullptr) throw Interrupted(forwarded);
  }
  if (first_failure != nullptr) {
    throw Error(str("--nproc: rank ", first_failure->rank, " failed (exit code ", first_failure->exit_code,
                    "); see its message above"),
                first_failure->exit_code);
  }
}

}  // namespace cabert::dist
