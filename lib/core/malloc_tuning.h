// glibc malloc settings for a process that allocates and frees tensors of a few MiB every step. By default
// glibc serves such blocks with fresh mmaps (its threshold adapts, but only up to what it has seen freed) and
// trims the heap top after each free, so every training step page-faults its activations in again (about 5%
// of a bert-small-composite step at T=512 went to the kernel's page clearing). cabert keeps them: blocks up to
// 32 MiB come from the heap, and freed memory stays in the process up to 1 GiB above what is in use.
// Measured: recipes/bench/results/attention-side-by-side-2core.md ("The malloc settings alone").
#pragma once

#include <string>

namespace cabert {

// Applies the settings unless the user chose an allocator or glibc settings of their own (LD_PRELOAD,
// MALLOC_* variables, or glibc.malloc tunables in GLIBC_TUNABLES): theirs win. Call once at start-up.
void tune_malloc_for_tensors();

// What the process allocates with, for bench records: "glibc malloc" and the settings in force, or the
// preloaded allocator.
std::string describe_malloc();

}  // namespace cabert
