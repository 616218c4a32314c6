/*
 * What every unit test includes instead of <check.h>: Check with cheap
 * passed assertions, and the scale of randomized tests under valgrind.
 *
 * Check records every passed assertion (_mark_point(), one write() to its
 * message file) so that a test crashing later is reported at its last
 * passed assertion. test_text passes 1.6 million of them: 2.7 s of system
 * time natively, and most of its 96 s under valgrind (CI's slowest stage),
 * where a system call costs tens of microseconds. Here a passed assertion
 * records nothing; a failed one is reported as before, with its line, and
 * a crash at the test's start, with the stack from ASan, UBSan or
 * valgrind.
 */
#ifndef IM_TEST_UNIT_H
#define IM_TEST_UNIT_H

#include <check.h>

#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                                           \
	((expr) ? (void)0                                                  \
		: _ck_assert_failed(__FILE__, __LINE__,                    \
				    "Assertion '" #expr "' failed", ##__VA_ARGS__))

/* Whether AddressSanitizer owns malloc() (its allocator has no glibc heap
 * and holds freed blocks back): 1 or 0. gcc defines __SANITIZE_ADDRESS__;
 * clang (14) only answers __has_feature(). */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

/* Whether malloc() is glibc's, whose heap a test may reason about: not
 * under AddressSanitizer or valgrind, which bring allocators of their own
 * (no mallopt(), freed blocks held back, no heap where glibc's would be). */
static inline int malloc_is_glibcs(void)
{
	return !UNDER_ASAN && !RUNNING_ON_VALGRIND;
}

/*
 * @p n natively and under the sanitizers, a quarter of it (at least 1)
 * under valgrind: valgrind looks for memory errors, which a quarter of a
 * randomized test's trials reach as well as all of them, at 20 to 50
 * times the native time.
 */
static inline int under_valgrind_quarter(int n)
{
	return RUNNING_ON_VALGRIND ? (n + 3) / 4 : n;
}

#endif
