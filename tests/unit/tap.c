// SPDX-License-Identifier: GPL-2.0
/*
 * The TAP runner and failure reports behind tap.h, compiled once and
 * linked into every unit test.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tap.h"

int tap_count, tap_failed, tap_cur_failed;

/* Why the current test skipped itself (tap_skip()), or NULL. */
static const char *tap_skip_why;

/*
 * Where an ASSERT goes back to: set by tap_run() around each test. The
 * pid tells a child the test forked from the test itself, which must not
 * jump into a copy of the runner and run the remaining tests twice.
 */
static jmp_buf tap_stop_to;
static int tap_in_test;
static pid_t tap_pid;

void tap_run(const char *name, void (*fn)(void))
{
	tap_cur_failed = 0;
	tap_skip_why = NULL;
	tap_in_test = 1;
	tap_pid = getpid();
	/* Only globals change between setjmp() and longjmp(). */
	if (!setjmp(tap_stop_to))
		fn();
	tap_in_test = 0;
	tap_count++;
	if (tap_cur_failed)
		tap_failed++;
	if (tap_skip_why && !tap_cur_failed)
		printf("ok %d %s # SKIP %s\n", tap_count, name, tap_skip_why);
	else
		printf("%sok %d %s\n", tap_cur_failed ? "not " : "",
		       tap_count, name);
	fflush(stdout);
}

void tap_skip(const char *why)
{
	tap_skip_why = why;
}

int tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

void tap_stop(void)
{
	fflush(stdout);
	if (tap_in_test && getpid() == tap_pid)
		longjmp(tap_stop_to, 1);
	if (tap_in_test)	/* a forked child: its exit status reports */
		_exit(1);
	printf("# assertion failed outside a test\n");
	fflush(stdout);
	exit(1);
}

void tap_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	tap_cur_failed = 1;
	printf("# %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* One side of a comparison, as the type it had in the test. */
static void tap_value(char *buf, size_t len, int is_signed, uintmax_t v)
{
	if (is_signed)
		snprintf(buf, len, "%" PRIdMAX, (intmax_t)v);
	else
		snprintf(buf, len, "%" PRIuMAX, v);
}

void tap_fail_cmp(const char *file, int line, const char *a, const char *op,
		  const char *b, int a_signed, uintmax_t va, int b_signed,
		  uintmax_t vb)
{
	char sa[32], sb[32];

	tap_value(sa, sizeof(sa), a_signed, va);
	tap_value(sb, sizeof(sb), b_signed, vb);
	tap_fail(file, line, "expected %s (%s) %s %s (%s)", a, sa, op, b, sb);
}

void tap_fail_str(const char *file, int line, const char *a, const char *op,
		  const char *b, const char *va, const char *vb)
{
	tap_fail(file, line, "expected %s (%s%s%s) %s %s (%s%s%s)",
		 a, va ? "\"" : "", va ? va : "NULL", va ? "\"" : "", op,
		 b, vb ? "\"" : "", vb ? vb : "NULL", vb ? "\"" : "");
}

/* 1 when equal; else the first byte that differs is reported. */
int tap_memeq(const char *file, int line, const char *a, const char *b,
	      const void *pa, const void *pb, size_t len)
{
	const unsigned char *x = pa, *y = pb;
	size_t i;

	for (i = 0; i < len; i++)
		if (x[i] != y[i])
			break;
	if (i == len)
		return 1;
	tap_fail(file, line,
		 "expected %s == %s (%zu bytes): byte %zu is 0x%02x, not 0x%02x",
		 a, b, len, i, x[i], y[i]);
	return 0;
}
