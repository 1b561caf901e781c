/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the harnesses of file formats share (fuzz_manifest, fuzz_journal):
 * a scratch directory with an input and an output path, buffers grown to
 * the largest input, and whole-file write and read. The readers under
 * test take paths, so each input goes through a real file.
 */
#ifndef KVC_FUZZ_FILES_H
#define KVC_FUZZ_FILES_H

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static char dir[256], in_path[300], out_path[300];
static uint8_t *fixed, *want, *got;
static size_t cap;

static void cleanup(void)
{
	char p[320];

	unlink(in_path);
	unlink(out_path);
	snprintf(p, sizeof(p), "%s.new", out_path);
	unlink(p);
	rmdir(dir);
}

/*
 * A scratch directory $TMPDIR/<name>.XXXXXX with the paths "in" and
 * "out" in it, removed at exit. Call from LLVMFuzzerInitialize().
 */
static void fuzz_files_init(const char *name)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/%s.XXXXXX", t ? t : "/tmp", name);
	if (!mkdtemp(dir)) {
		fprintf(stderr, "%s: mkdtemp: %s\n", name, strerror(errno));
		exit(1);
	}
	snprintf(in_path, sizeof(in_path), "%s/in", dir);
	snprintf(out_path, sizeof(out_path), "%s/out", dir);
	atexit(cleanup);
}

static void grow(size_t size)
{
	if (size <= cap)
		return;
	free(fixed);
	free(want);
	free(got);
	cap = size;
	fixed = malloc(cap);
	want = malloc(cap);
	got = malloc(cap + 1);
	FUZZ_CHECK(fixed && want && got);
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, p, n) == (ssize_t)n);
	close(fd);
}

/* The whole file at path into got; its size. */
static size_t read_file(const char *path, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;

	FUZZ_CHECK(fd >= 0);
	while ((r = read(fd, got + n, max + 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	FUZZ_CHECK(r == 0 && n <= max);
	return n;
}

#endif /* KVC_FUZZ_FILES_H */
