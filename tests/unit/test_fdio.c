/**
 * @file test_fdio.c
 * Whole writes and reads (core/fdio.h): every byte arrives, in order,
 * through short writes and reads and signals, and a failing descriptor
 * says why.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "unit.h"
#include "fdio.h"

#define BIG (4u << 20)

struct drain {
	int fd;
	unsigned char *got;
	size_t len;
};

/* Read the pipe in small pieces, so that the writer fills it and blocks. */
static void *drain(void *arg)
{
	struct drain *d = arg;
	ssize_t k;

	while ((k = read(d->fd, d->got + d->len, 4096)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		d->len += (size_t)k;
	}
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
}

START_TEST(test_fdio_writes_everything_through_signals)
{
	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
	struct itimerval tick = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
	unsigned char *buf = malloc(BIG);
	struct drain d = {.got = malloc(BIG + 4096)}; /* room for a last read */
	pthread_t t;
	int p[2];

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(d.got);
	for (size_t i = 0; i < BIG; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 24);
	ck_assert_int_eq(pipe(p), 0);
	d.fd = p[0];
	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, drain, &d), 0);
	/* A pipe holds 64 KiB: the writes block, and the timer's signals
	 * cut them short or make them fail with EINTR. */
	ck_assert_int_eq(setitimer(ITIMER_REAL, &tick, NULL), 0);
	ck_assert_int_eq(im_write_all(p[1], buf, BIG), 0);
	setitimer(ITIMER_REAL, &off, NULL);
	close(p[1]);
	pthread_join(t, NULL);
	close(p[0]);
	ck_assert_uint_eq(d.len, BIG);
	ck_assert_msg(!memcmp(d.got, buf, BIG), "the bytes arrived changed");
	free(buf);
	free(d.got);
}
END_TEST

START_TEST(test_fdio_failure_is_negative_errno)
{
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	/* The read end: not open for writing. */
	ck_assert_int_eq(im_write_all(p[0], "x", 1), -EBADF);
	signal(SIGPIPE, SIG_IGN);
	close(p[0]);
	ck_assert_int_eq(im_write_all(p[1], "x", 1), -EPIPE);
	close(p[1]);
	ck_assert_int_eq(im_write_all(p[1], "", 0), 0);
}
END_TEST

START_TEST(test_fdio_reads_up_to_the_end)
{
	/* A pipe hands a reader what was written so far: each read is short. */
	unsigned char buf[64];
	size_t got = 99;
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(im_write_all(p[1], "abc", 3), 0);
	ck_assert_int_eq(im_write_all(p[1], "defg", 4), 0);
	close(p[1]);
	ck_assert_int_eq(im_read_full(p[0], buf, sizeof(buf), &got), 0);
	ck_assert_uint_eq(got, 7); /* the end of the file came first */
	ck_assert(!memcmp(buf, "abcdefg", 7));
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(im_write_all(p[1], "0123456789", 10), 0);
	ck_assert_int_eq(im_read_full(p[0], buf, 4, &got), 0);
	ck_assert_uint_eq(got, 4); /* no more than asked */
	ck_assert(!memcmp(buf, "0123", 4));
	close(p[0]);
	close(p[1]);
	/* The write end: not open for reading. */
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(im_read_full(p[1], buf, 1, &got), -EBADF);
	ck_assert_uint_eq(got, 0);
	close(p[0]);
	close(p[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fdio");
	TCase *tc = tcase_create("write");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_fdio_writes_everything_through_signals);
	tcase_add_test(tc, test_fdio_failure_is_negative_errno);
	tcase_add_test(tc, test_fdio_reads_up_to_the_end);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
