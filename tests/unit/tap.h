/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal TAP output for the host unit tests.
 *
 * Each test is a function; tap_run() calls it and prints one "ok N name"
 * or "not ok N name" line (or "ok N name # SKIP why", tap_skip()).
 * tap_done() prints the plan "1..N" and returns
 * the exit status for main(). scripts/check counts those lines; anything
 * else a test prints starts with "# ".
 *
 * Inside a test, two families of checks, after kselftest_harness.h:
 *
 *   TAP_EXPECT_*(...)	record a failure with its file and line, and the
 *			values involved, and keep going;
 *   TAP_ASSERT_*(...)	the same, then stop the current test: tap_run()
 *			marks it failed and goes on with the next one.
 *
 * TAP_CHECK(cond) is TAP_EXPECT_TRUE(cond) under its old name.
 *
 * The comparisons (EQ, NE, LT, LE, GT, GE) take integers (any width,
 * signed or unsigned, enums, bool), evaluate each side once and compare
 * them exactly as "a op b" in C would, usual conversions included; a
 * failure prints both sides, each in its own signedness:
 *
 *   # test_foo.c:42: expected n (5) == want (7)
 *
 * Pointers compare, but print as plain numbers; floating point goes
 * through TAP_EXPECT_TRUE() (the value would be cast to an integer).
 *
 * The names carry TAP_ because kselftest_harness.h defines EXPECT_EQ and
 * friends unconditionally: a file that sees both headers must not get
 * two meanings of one name, and TAP_ keeps them one family with
 * TAP_CHECK and TAP_RUN.
 *
 * An ASSERT leaves the test with longjmp() back into tap_run(), as
 * kselftest leaves with a return from the test function: whatever the
 * test held (memory, descriptors, scratch directories) is leaked, so put
 * an ASSERT where going on makes no sense, not where cleanup matters more
 * than stopping (there a TAP_EXPECT_*() and a goto to the cleanup stays
 * the right tool). ASan and UBSan handle longjmp(); a test that failed
 * already fails, so LeakSanitizer's report of the leak changes nothing.
 * In a child a test forked (scratch_as_nobody()), an ASSERT ends the
 * child with _exit(1) instead: the parent's check of its exit status
 * fails the test.
 */
#ifndef KVC_TAP_H
#define KVC_TAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Tests run so far, how many failed, and whether the current one has. */
extern int tap_count, tap_failed, tap_cur_failed;

void tap_run(const char *name, void (*fn)(void));
int tap_done(void);

#define TAP_RUN(fn) tap_run(#fn, fn)

/*
 * The current test could not run here (a resource the host lacks): it
 * reports "ok N name # SKIP why", which scripts/check counts as skipped,
 * not passed. Return from the test after calling it. A failure recorded
 * before or after still fails the test.
 */
void tap_skip(const char *why);

/* The reporting behind the macros below: file, line, what failed. */
void tap_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void tap_fail_cmp(const char *file, int line, const char *a, const char *op,
		  const char *b, int a_signed, uintmax_t va, int b_signed,
		  uintmax_t vb);
void tap_fail_str(const char *file, int line, const char *a, const char *op,
		  const char *b, const char *va, const char *vb);
int tap_memeq(const char *file, int line, const char *a, const char *b,
	      const void *pa, const void *pb, size_t len);
/* Leave the current test (an ASSERT failed): does not return. */
_Noreturn void tap_stop(void);

/* stop is 1 for ASSERT, 0 for EXPECT. */
#define TAP__END(stop)							\
	do {								\
		if (stop)						\
			tap_stop();					\
	} while (0)

#define TAP__BOOL(cond, want, stop)					\
	do {								\
		if (!(cond) != !(want)) {				\
			tap_fail(__FILE__, __LINE__, (want) ?		\
				 "check failed: %s" :			\
				 "check failed: !(%s)", #cond);		\
			TAP__END(stop);					\
		}							\
	} while (0)

/* Whether an integer type is signed, as kselftest_harness.h decides it. */
#define TAP__SIGNED(x) ((__typeof__(x))-1 < (__typeof__(x))1)

/*
 * Each side is evaluated once into a variable of its own type, so the
 * comparison is the one the caller wrote. -Wsign-compare is off for it:
 * written out, "n == 5" with n unsigned is fine, but once 5 sits in an
 * int variable GCC warns about what is the caller's own comparison.
 */
#define TAP__CMP(a, op, b, stop)					\
	do {								\
		_Pragma("GCC diagnostic push")				\
		_Pragma("GCC diagnostic ignored \"-Wsign-compare\"")	\
		__typeof__(a) tap__a = (a);				\
		__typeof__(b) tap__b = (b);				\
		if (!(tap__a op tap__b)) {				\
			tap_fail_cmp(__FILE__, __LINE__, #a, #op, #b,	\
				     TAP__SIGNED(tap__a),		\
				     (uintmax_t)tap__a,			\
				     TAP__SIGNED(tap__b),		\
				     (uintmax_t)tap__b);		\
			TAP__END(stop);					\
		}							\
		_Pragma("GCC diagnostic pop")				\
	} while (0)

#define TAP__STR(a, b, eq, stop)					\
	do {								\
		const char *tap__a = (a), *tap__b = (b);		\
		int tap__same = tap__a && tap__b ?			\
				!strcmp(tap__a, tap__b) :		\
				tap__a == tap__b;			\
		if (tap__same != (eq)) {				\
			tap_fail_str(__FILE__, __LINE__, #a,		\
				     (eq) ? "==" : "!=", #b,		\
				     tap__a, tap__b);			\
			TAP__END(stop);					\
		}							\
	} while (0)

#define TAP__MEM(a, b, len, stop)					\
	do {								\
		if (!tap_memeq(__FILE__, __LINE__, #a, #b, (a), (b),	\
			       (len)))					\
			TAP__END(stop);					\
	} while (0)

#define TAP_CHECK(cond)			TAP__BOOL(cond, 1, 0)

#define TAP_EXPECT_TRUE(cond)		TAP__BOOL(cond, 1, 0)
#define TAP_EXPECT_FALSE(cond)		TAP__BOOL(cond, 0, 0)
#define TAP_EXPECT_EQ(a, b)		TAP__CMP(a, ==, b, 0)
#define TAP_EXPECT_NE(a, b)		TAP__CMP(a, !=, b, 0)
#define TAP_EXPECT_LT(a, b)		TAP__CMP(a, <, b, 0)
#define TAP_EXPECT_LE(a, b)		TAP__CMP(a, <=, b, 0)
#define TAP_EXPECT_GT(a, b)		TAP__CMP(a, >, b, 0)
#define TAP_EXPECT_GE(a, b)		TAP__CMP(a, >=, b, 0)
#define TAP_EXPECT_STREQ(a, b)		TAP__STR(a, b, 1, 0)
#define TAP_EXPECT_STRNE(a, b)		TAP__STR(a, b, 0, 0)
#define TAP_EXPECT_MEMEQ(a, b, len)	TAP__MEM(a, b, len, 0)

#define TAP_ASSERT_TRUE(cond)		TAP__BOOL(cond, 1, 1)
#define TAP_ASSERT_FALSE(cond)		TAP__BOOL(cond, 0, 1)
#define TAP_ASSERT_EQ(a, b)		TAP__CMP(a, ==, b, 1)
#define TAP_ASSERT_NE(a, b)		TAP__CMP(a, !=, b, 1)
#define TAP_ASSERT_LT(a, b)		TAP__CMP(a, <, b, 1)
#define TAP_ASSERT_LE(a, b)		TAP__CMP(a, <=, b, 1)
#define TAP_ASSERT_GT(a, b)		TAP__CMP(a, >, b, 1)
#define TAP_ASSERT_GE(a, b)		TAP__CMP(a, >=, b, 1)
#define TAP_ASSERT_STREQ(a, b)		TAP__STR(a, b, 1, 1)
#define TAP_ASSERT_STRNE(a, b)		TAP__STR(a, b, 0, 1)
#define TAP_ASSERT_MEMEQ(a, b, len)	TAP__MEM(a, b, len, 1)

#endif /* KVC_TAP_H */
