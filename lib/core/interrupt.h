// SIGINT/SIGTERM handling. Long loops poll interrupt_requested() between units of work (a step, a
// frame) so that they can save a checkpoint or clean up temporary files; a second signal exits at once.
#pragma once

#include <string>

namespace cabert {

void install_interrupt_handlers();
// 0 when no signal arrived, else the signal number.
int interrupt_requested();
// Throws Interrupted when a signal arrived.
void throw_if_interrupted();
// For tests: pretend a signal arrived (or clear with 0).
void set_interrupt_for_testing(int signal_number);

// The line the handler writes to stderr when the first signal arrives: text by default; with --log-format json
// (lib/core/log.cc) a JSON line, `before_time` (the line up to the value of its last key, "time") followed by the
// UTC time and `"}`. "" goes back to text.
void set_signal_notice_json(const std::string& before_time);
// The time as the handler writes it, 2026-11-27T03:15:41.577Z: integer arithmetic only, as a signal handler may
// use. Writes 24 bytes to `out`.
void format_utc_time(long long seconds, int milliseconds, char* out);

inline constexpr const char* kSignalNotice = "signal received, finishing the current unit of work and saving";

}  // namespace cabert
