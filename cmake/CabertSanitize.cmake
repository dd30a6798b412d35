# -DCABERT_SANITIZE=address,undefined builds every project target (formats, kernels, lib, cmd, tests) with
# those sanitizers: compile and link flags, UB made fatal so that a report fails the test that caused it.
# Only cabert's own code is instrumented; the LibTorch wheel, Debian's libprotobuf.a and the other system
# libraries are not (ASan and UBSan work with uninstrumented libraries; they just see less).
#
# The executables carry their own run-time defaults (tests/sanitizer/defaults.cc): the LibTorch wheel's
# CUDA libraries need ASan's protect_shadow_gap=0, and LeakSanitizer reads the suppressions in
# tests/sanitizer/lsan.supp (allocations LibTorch and its dependencies keep for the life of the process).
# ASAN_OPTIONS / UBSAN_OPTIONS / LSAN_OPTIONS in the environment still apply on top. scripts/sanitize.sh
# builds this configuration and runs the tests CI runs under it.
#
# Directory-wide flags (add_compile_options) on purpose: a sanitizer build must instrument every target the
# same way, including the generated protobuf code, and must not change any target when the option is off.
set(CABERT_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined (empty: none)")

if(CABERT_SANITIZE)
  set(_cabert_sanitize_flags "-fsanitize=${CABERT_SANITIZE}" -fno-omit-frame-pointer)
  if(CABERT_SANITIZE MATCHES "undefined")
    list(APPEND _cabert_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_cabert_sanitize_flags}>")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # At -O1 (scripts/sanitize.sh) clang's loop vectoriser does not run, and every `omp simd` loop of the CPU
    # kernels would warn that it was not vectorised.
    add_compile_options(-Wno-pass-failed)
  endif()
  add_link_options(${_cabert_sanitize_flags})
  # Compiled once, without the precompiled header, and linked into each executable (below).
  add_library(cabert_sanitizer_defaults OBJECT "${PROJECT_SOURCE_DIR}/tests/sanitizer/defaults.cc")
  target_compile_definitions(cabert_sanitizer_defaults PRIVATE
    CABERT_LSAN_SUPPRESSIONS="${PROJECT_SOURCE_DIR}/tests/sanitizer/lsan.supp")
  message(STATUS "cabert: sanitizers ${CABERT_SANITIZE} (${_cabert_sanitize_flags})")
endif()

# Adds the sanitizers' run-time defaults to an executable (no-op without CABERT_SANITIZE).
function(cabert_sanitizer_defaults target)
  if(TARGET cabert_sanitizer_defaults)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:cabert_sanitizer_defaults>)
    # The runtimes look the hooks up in the executable's dynamic symbol table. Only they are exported: with
    # every symbol exported, protobuf's inline functions would interpose SentencePiece's own copy.
    foreach(_hook __asan_default_options __ubsan_default_options __lsan_default_options)
      target_link_options(${target} PRIVATE "LINKER:--export-dynamic-symbol=${_hook}")
    endforeach()
  endif()
endfunction()
