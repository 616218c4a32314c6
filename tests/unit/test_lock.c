/*
 * Unit tests for core/state/lock.c: one holder at a time across processes,
 * the refused one learns the holder's pid, a waiter gets the lock once the
 * holder exits (even by SIGKILL), and a lock survives fork() in the child.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "lock.h"

static char dir[256];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/imatch-test-lock-XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
}

static void teardown(void)
{
	char p[300];

	snprintf(p, sizeof(p), "%s/lock", dir);
	unlink(p);
	rmdir(dir);
}

/* A child that takes the lock (waiting up to @wait_ms), reports the result
 * through its exit status (0 taken, 1 busy with the right holder, 2 other),
 * and holds it for @hold_ms. */
static pid_t child_lock(unsigned wait_ms, unsigned hold_ms, pid_t want_holder)
{
	pid_t pid = fork();

	ck_assert(pid >= 0);
	if (pid == 0) {
		struct im_state_lock *l;
		pid_t holder;
		int ret = im_state_lock(dir, wait_ms, &l, &holder);

		if (ret == -EWOULDBLOCK)
			_exit(holder == want_holder ? 1 : 3);
		if (ret)
			_exit(2);
		usleep(hold_ms * 1000);
		im_state_unlock(l);
		_exit(0);
	}
	return pid;
}

/* Poll until the lock file names @pid as the holder. */
static void wait_holder(pid_t pid)
{
	struct im_state_lock *l;
	pid_t holder = 0;

	for (int i = 0; i < 5000 && holder != pid; i++) {
		int ret = im_state_lock(dir, 0, &l, &holder);

		ck_assert_msg(ret == 0 || ret == -EWOULDBLOCK, "lock: %d", ret);
		if (!ret)
			im_state_unlock(l);
		usleep(1000);
	}
	ck_assert_int_eq(holder, pid);
}

static int exit_of(pid_t pid)
{
	int status;

	ck_assert(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

START_TEST(test_lock_refuses_second_holder_naming_pid)
{
	struct im_state_lock *l;
	pid_t holder = 123;

	ck_assert_int_eq(im_state_lock(dir, 0, &l, &holder), 0);
	ck_assert_int_eq(exit_of(child_lock(0, 0, getpid())), 1);
	/* Even waiting a little: the holder does not let go. */
	ck_assert_int_eq(exit_of(child_lock(100, 0, getpid())), 1);
	im_state_unlock(l);
	ck_assert_int_eq(exit_of(child_lock(0, 0, 0)), 0);
}
END_TEST

START_TEST(test_lock_waits_for_a_holder_to_finish)
{
	struct im_state_lock *l = NULL;
	pid_t holder = 0, pid = child_lock(5000, 300, 0);

	wait_holder(pid);
	ck_assert_int_eq(im_state_lock(dir, 5000, &l, &holder), 0);
	ck_assert_int_eq(exit_of(pid), 0);
	im_state_unlock(l);
}
END_TEST

START_TEST(test_lock_dropped_when_holder_killed)
{
	struct im_state_lock *l = NULL;
	pid_t holder = 0, pid = child_lock(5000, 60000, 0);

	wait_holder(pid);
	kill(pid, SIGKILL);
	ck_assert_int_eq(exit_of(pid), -SIGKILL);
	/* The stale lock file with the dead pid is no obstacle. */
	ck_assert_int_eq(im_state_lock(dir, 0, &l, &holder), 0);
	im_state_unlock(l);
}
END_TEST

START_TEST(test_lock_survives_fork)
{
	struct im_state_lock *l;
	int status, pipefd[2];
	pid_t holder, pid;
	char c;

	ck_assert_int_eq(im_state_lock(dir, 0, &l, &holder), 0);
	ck_assert(pipe(pipefd) == 0);
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		/* The daemonized child: it owns the lock now. */
		close(pipefd[0]);
		if (im_state_lock_own(l))
			_exit(2);
		ck_assert(write(pipefd[1], "x", 1) == 1);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	ck_assert(read(pipefd[0], &c, 1) == 1);
	close(pipefd[0]);
	/* The parent lets go of its copy; the child still holds the lock. */
	im_state_unlock(l);
	ck_assert_int_eq(im_state_lock(dir, 0, &l, &holder), -EWOULDBLOCK);
	ck_assert_int_eq(holder, pid);
	kill(pid, SIGKILL);
	ck_assert(waitpid(pid, &status, 0) == pid);
	ck_assert_int_eq(im_state_lock(dir, 0, &l, &holder), 0);
	im_state_unlock(l);
}
END_TEST

START_TEST(test_lock_missing_dir)
{
	struct im_state_lock *l;
	char p[300];

	snprintf(p, sizeof(p), "%s/missing", dir);
	ck_assert_int_eq(im_state_lock(p, 0, &l, NULL), -ENOENT);
	ck_assert(l == NULL);
}
END_TEST

static Suite *lock_suite(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("lock");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_lock_refuses_second_holder_naming_pid);
	tcase_add_test(tc, test_lock_waits_for_a_holder_to_finish);
	tcase_add_test(tc, test_lock_dropped_when_holder_killed);
	tcase_add_test(tc, test_lock_survives_fork);
	tcase_add_test(tc, test_lock_missing_dir);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lock_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
