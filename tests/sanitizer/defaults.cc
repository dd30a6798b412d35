// Run-time defaults of the sanitizers, linked into cabert and cabert_tests when built with
// -DCABERT_SANITIZE=... (cmake/CabertSanitize.cmake). The environment (ASAN_OPTIONS, UBSAN_OPTIONS,
// LSAN_OPTIONS) overrides them.

#define CABERT_SANITIZER_HOOK extern "C" __attribute__((visibility("default"), used)) const char*

// protect_shadow_gap=0: the LibTorch wheel links CUDA libraries that map memory where ASan's shadow gap
// would be. Tests wait for and kill child processes by signal, which must stay fatal: no handle_* changes.
CABERT_SANITIZER_HOOK __asan_default_options() {
  return "protect_shadow_gap=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=0";
}

CABERT_SANITIZER_HOOK __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// Allocations that LibTorch and the libraries under it keep for the life of the process (see the file).
CABERT_SANITIZER_HOOK __lsan_default_options() { return "print_suppressions=0:suppressions=" CABERT_LSAN_SUPPRESSIONS; }
