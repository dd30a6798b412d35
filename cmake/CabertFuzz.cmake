# -DCABERT_FUZZ=ON: the libFuzzer configuration (tests/fuzz). Every target of it, the generated protobuf
# code included, is instrumented for coverage and built with ASan and UBSan (UB fatal); the fuzz targets
# link libFuzzer's main. Directory-wide flags on purpose: this configuration builds nothing else.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "CABERT_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang "
                      "(Debian: apt-get install clang libclang-rt-14-dev)")
endif()
set(_cabert_fuzz_flags -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                       -fno-omit-frame-pointer)
add_compile_options(${_cabert_fuzz_flags})
add_link_options(-fsanitize=address,undefined)
# File by file: these sources include no LibTorch, so compiling them in units (the default) would save nothing.
set(CMAKE_UNITY_BUILD OFF)
