# Every dependency comes from the system (Debian packages) or from the LibTorch the user points at;
# nothing is vendored.
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)        # gzip-compressed parallel text (Multi30k, WMT)
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(CAIRO REQUIRED IMPORTED_TARGET cairo)  # PNG pictures (lib/plot)
if(CABERT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
