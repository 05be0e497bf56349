// CHECK macros: for bugs (broken invariants), never for expected failures.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace shoal::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond,
                                     const char* msg) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s %s\n", file, line, cond, msg ? msg : "");
  std::abort();
}
}  // namespace shoal::internal

#define SHOAL_CHECK(cond)                                                 \
  do {                                                                    \
    if (__builtin_expect(!(cond), 0))                                     \
      ::shoal::internal::CheckFailed(__FILE__, __LINE__, #cond, nullptr); \
  } while (0)
#define SHOAL_CHECK_MSG(cond, msg)                                    \
  do {                                                                \
    if (__builtin_expect(!(cond), 0))                                 \
      ::shoal::internal::CheckFailed(__FILE__, __LINE__, #cond, msg); \
  } while (0)
