// SIGINT/SIGTERM handling. Long loops poll interrupt_requested() between units of work (a step, a
// frame) so that they can save a checkpoint or clean up temporary files; a second signal exits at once.
#pragma once

namespace cabert {

void install_interrupt_handlers();
// 0 when no signal arrived, else the signal number.
int interrupt_requested();
// Throws Interrupted when a signal arrived.
void throw_if_interrupted();
// For tests: pretend a signal arrived (or clear with 0).
void set_interrupt_for_testing(int signal_number);

}  // namespace cabert
