// CABERT_ADDRESS_SANITIZER is 1 in a build with AddressSanitizer (scripts/sanitize.sh), from either compiler:
// GCC defines __SANITIZE_ADDRESS__, clang 14 only answers __has_feature(address_sanitizer).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define CABERT_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CABERT_ADDRESS_SANITIZER 1
#endif
#endif
