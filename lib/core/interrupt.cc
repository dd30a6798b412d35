#include "lib/core/interrupt.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <ctime>

#include "lib/core/errors.h"

namespace cabert {
namespace {
volatile std::sig_atomic_t g_signal = 0;
char g_json_notice[1024];
volatile std::sig_atomic_t g_json_notice_size = 0;  // 0: the text notice

void put_digits(long long value, int width, char* out) {
  for (int i = width - 1; i >= 0; --i, value /= 10) out[i] = static_cast<char>('0' + value % 10);
}

void write_notice() {
  const size_t size = static_cast<size_t>(g_json_notice_size);
  if (size == 0) {
    static const char kText[] = "\ncabert: signal received, finishing the current unit of work and saving\n";
    ssize_t ignored = write(STDERR_FILENO, kText, sizeof(kText) - 1);
    (void)ignored;
    return;
  }
  char line[sizeof(g_json_notice) + 32];
  std::memcpy(line, g_json_notice, size);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  format_utc_time(now.tv_sec, static_cast<int>(now.tv_nsec / 1000000), line + size);
  std::memcpy(line + size + 24, "\"}\n", 3);
  ssize_t ignored = write(STDERR_FILENO, line, size + 27);
  (void)ignored;
}

void on_signal(int signal_number) {
  if (g_signal != 0) {  // second signal: the user insists
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
    return;
  }
  g_signal = signal_number;
  write_notice();
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

void set_signal_notice_json(const std::string& before_time) {
  g_json_notice_size = 0;
  if (before_time.empty() || before_time.size() > sizeof(g_json_notice)) return;  // the text notice
  std::memcpy(g_json_notice, before_time.data(), before_time.size());
  g_json_notice_size = static_cast<std::sig_atomic_t>(before_time.size());
}

void format_utc_time(long long seconds, int milliseconds, char* out) {
  // Days since 1970-01-01 to a civil date (Howard Hinnant's days_from_civil, inverted).
  long long days = seconds / 86400, rest = seconds % 86400;
  if (rest < 0) {
    rest += 86400;
    --days;
  }
  days += 719468;
  const long long era = (days >= 0 ? days : days - 146096) / 146097;
  const long long day_of_era = days - era * 146097;
  const long long year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const long long day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const long long month_index = (5 * day_of_year + 2) / 153;
  const long long day = day_of_year - (153 * month_index + 2) / 5 + 1;
  const long long month = month_index < 10 ? month_index + 3 : month_index - 9;
  const long long year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  put_digits(year, 4, out);
  out[4] = '-';
  put_digits(month, 2, out + 5);
  out[7] = '-';
  put_digits(day, 2, out + 8);
  out[10] = 'T';
  put_digits(rest / 3600, 2, out + 11);
  out[13] = ':';
  put_digits(rest / 60 % 60, 2, out + 14);
  out[16] = ':';
  put_digits(rest % 60, 2, out + 17);
  out[19] = '.';
  put_digits(milliseconds, 3, out + 20);
  out[23] = 'Z';
}

}  // namespace cabert
