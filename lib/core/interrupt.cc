#include "lib/core/interrupt.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

#include "lib/core/errors.h"

namespace cabert {
namespace {
volatile std::sig_atomic_t g_signal = 0;

void on_signal(int signal_number) {
  if (g_signal != 0) {  // second signal: the user insists
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
    return;
  }
  g_signal = signal_number;
  static const char kMessage[] = "\ncabert: signal received, finishing the current unit of work and saving\n";
  ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
}
}  // namespace

void install_interrupt_handlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe becomes a write error we can report
}

int interrupt_requested() { return g_signal; }

void throw_if_interrupted() {
  if (g_signal != 0) throw Interrupted(g_signal);
}

void set_interrupt_for_testing(int signal_number) { g_signal = signal_number; }

}  // namespace cabert
