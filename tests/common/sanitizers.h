// Which sanitizer the test executable was built with (scripts/test.sh's asan
// and tsan legs): GCC defines __SANITIZE_*__, clang answers __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define HEXIR_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEXIR_TEST_ASAN 1
#endif
#endif
#ifndef HEXIR_TEST_ASAN
#define HEXIR_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define HEXIR_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HEXIR_TEST_TSAN 1
#endif
#endif
#ifndef HEXIR_TEST_TSAN
#define HEXIR_TEST_TSAN 0
#endif
