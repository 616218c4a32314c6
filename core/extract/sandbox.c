/**
 * @file sandbox.c
 * The helper processes that run container extractors (extract.h).
 *
 * Each struct im_extractor owns at most one helper, so the pool is one
 * helper per extracting thread, started on the first file that needs one
 * and kept for the next. A helper is fork()ed from the calling thread,
 * without exec: extraction needs no fresh image, and glibc's fork leaves
 * malloc usable in the child of a threaded parent. The parent never
 * touches poppler or GLib itself, so the child inherits no lock of theirs.
 * Before its first request the child
 *   - dies with its parent (PR_SET_PDEATHSIG), resets signal handlers and
 *     unblocks signals, points 0-2 at /dev/null and closes every other fd
 *     but its socket;
 *   - limits its address space to what it inherited plus mem_bytes
 *     (RLIMIT_AS: allocations beyond fail), its CPU time to twice
 *     cpu_seconds over its life (RLIMIT_CPU: SIGXCPU, then SIGKILL), core
 *     dumps and file sizes to 0;
 *   - loads a seccomp filter (libseccomp, loaded on first use by the parent
 *     like poppler, dl.h; a child without it refuses to start) that allows
 *     memory management,
 *     reading and writing its already open fds, time, getrandom, futexes,
 *     exiting and signalling itself (abort()); every other call fails with
 *     EPERM, so it can open no file, socket or process;
 *   - says it is ready ({0, 0}), or says which step failed with which
 *     errno and exits; the file fails "sandbox", and the extractor keeps
 *     the reason (im_extractor_sandbox_error()).
 * Under valgrind the filter is not loaded (valgrind's own calls would be
 * refused); everything else is the same.
 * The parent retires a helper whose reported CPU time passed cpu_seconds,
 * so every file gets at least cpu_seconds before RLIMIT_CPU.
 *
 * Protocol on a socketpair: request {u32 format, u32 0, u64 len, bytes},
 * reply {u32 fail, u32 format, u32 compressed, u32 cpu_ms, u64 len, text}.
 * The parent waits at most deadline_ms for the whole exchange (poll), and
 * kills the helper on a timeout, an oversized reply or any protocol error;
 * a helper that died is reaped and its signal names the failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <seccomp.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#include "dl.h"
#include "extract_internal.h"

struct request {
	uint32_t format, pad;
	uint64_t len;
};

struct reply {
	uint32_t fail, format, compressed, cpu_ms;
	uint64_t len;
};

/* The child's first message: step 0 when ready, else what failed. */
struct start {
	uint32_t step;
	int32_t err;
};

enum start_step {
	START_READY,
	START_PARENT,
	START_SIGNALS,
	START_FDS,
	START_LIMITS,
	START_SECCOMP,
	START_EXTRACTOR,
};

static const char *const start_steps[] = {
	[START_READY] = "ready",
	[START_PARENT] = "parent-death signal",
	[START_SIGNALS] = "signal mask",
	[START_FDS] = "file descriptors",
	[START_LIMITS] = "resource limits",
	[START_SECCOMP] = "seccomp filter",
	[START_EXTRACTOR] = "extractor",
};

/* ---- Time ---------------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Wait until @p fd is ready for @p events or the deadline passes.
 * @return 0, -ETIMEDOUT, or -EPIPE when the other end is gone.
 */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int64_t left = deadline - now_ms();
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		if (p.revents & events)
			return 0;
		if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
			return -EPIPE;
	}
}

/* Write or read all of s[0, n) on a non-blocking fd by the deadline. */
static int xfer(int fd, bool out, void *s, size_t n, int64_t deadline)
{
	char *p = s;

	while (n) {
		ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : read(fd, p, n);

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -EPIPE;
		k = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
		if (k)
			return (int)k;
	}
	return 0;
}

/* ---- The child ------------------------------------------------------------ */

/* Blocking I/O in the child; any failure ends it. */
static void child_io(int fd, bool out, void *s, size_t n)
{
	char *p = s;

	while (n) {
		ssize_t k = out ? write(fd, p, n) : read(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			_exit(0);
		p += k;
		n -= (size_t)k;
	}
}

static uint64_t vm_size(void)
{
	char buf[64] = {0};
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	return strtoull(buf, NULL, 10) * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int limit(int resource, uint64_t soft, uint64_t hard)
{
	struct rlimit rl = {.rlim_cur = soft, .rlim_max = hard};

	return setrlimit(resource, &rl);
}

/* ---- Loading libseccomp ------------------------------------------------- */

/* The functions used here: a scan of plain text starts no helper, and
 * loading the library cost every start of imatch about 60 us of CPU. */
static struct {
	scmp_filter_ctx (*init)(uint32_t);
	int (*rule_add)(scmp_filter_ctx, uint32_t, int, unsigned int, ...);
	int (*load)(scmp_filter_ctx);
	void (*release)(scmp_filter_ctx);
} sc;
static bool sc_ok;
static pthread_once_t sc_once = PTHREAD_ONCE_INIT;

static void sc_load(void)
{
	const struct im_dlsym syms[] = {
		{"seccomp_init", (void **)&sc.init},
		{"seccomp_rule_add", (void **)&sc.rule_add},
		{"seccomp_load", (void **)&sc.load},
		{"seccomp_release", (void **)&sc.release},
	};

	sc_ok = im_dl_load("libseccomp.so.2", "libseccomp.so", syms,
			   sizeof(syms) / sizeof(syms[0]));
}

static int load_seccomp(void)
{
	static const int allowed[] = {
		SCMP_SYS(read),
		SCMP_SYS(write),
		SCMP_SYS(readv),
		SCMP_SYS(writev),
		SCMP_SYS(recvfrom),
		SCMP_SYS(sendto),
		SCMP_SYS(close),
		SCMP_SYS(fstat),
		SCMP_SYS(newfstatat),
		SCMP_SYS(lseek),
		SCMP_SYS(mmap),
		SCMP_SYS(munmap),
		SCMP_SYS(mremap),
		SCMP_SYS(mprotect),
		SCMP_SYS(brk),
		SCMP_SYS(madvise),
		SCMP_SYS(futex),
		SCMP_SYS(exit),
		SCMP_SYS(exit_group),
		SCMP_SYS(rt_sigreturn),
		SCMP_SYS(rt_sigprocmask),
		SCMP_SYS(rt_sigaction),
		SCMP_SYS(getrusage),
		SCMP_SYS(clock_gettime),
		SCMP_SYS(gettimeofday),
		SCMP_SYS(getrandom),
		SCMP_SYS(sched_yield),
		SCMP_SYS(getpid),
		SCMP_SYS(gettid),
	};
	const struct scmp_arg_cmp self = {.arg = 0,
					  .op = SCMP_CMP_EQ,
					  .datum_a = (scmp_datum_t)getpid(),
					  .datum_b = 0};
	scmp_filter_ctx ctx;
	int ret = 0;

	/* spawn() loaded it before the fork, if it could: never unconfined. */
	if (!sc_ok)
		return -ENOSYS;
	ctx = sc.init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]) && !ret;
	     i++)
		ret = sc.rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
	/* abort() signals its own thread; nothing else may be signalled. */
	if (!ret)
		ret = sc.rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
				  self);
	if (!ret)
		ret = sc.load(ctx);
	sc.release(ctx);
	return ret;
}

/*
 * Everything a child does before its first request; its socket is fd 3
 * after the step START_FDS. @return START_READY, or the step that failed
 * (errno says why; for START_PARENT, 0 when the parent was gone).
 */
static enum start_step child_setup(int fd, pid_t parent,
				   const struct im_extract_opts *o)
{
	sigset_t all;
	int null;

	errno = 0;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		return START_PARENT;
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&all);
	if (sigprocmask(SIG_SETMASK, &all, NULL))
		return START_SIGNALS;
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(fd, 3) < 0)
		return START_FDS;
	for (int i = 0; i < 3; i++)
		if (dup2(null, i) < 0)
			return START_FDS;
	if (close_range(4, ~0u, 0))
		return START_FDS;
	/* One reading for both limits: under valgrind the size grew between
	 * two, and a soft limit above the hard one is EINVAL (CI saw it). */
	uint64_t as = vm_size() + o->mem_bytes;
	if (limit(RLIMIT_AS, as, as) ||
	    limit(RLIMIT_CPU, 2 * (uint64_t)o->cpu_seconds,
		  2 * (uint64_t)o->cpu_seconds + 1) ||
	    limit(RLIMIT_CORE, 0, 0) || limit(RLIMIT_FSIZE, 0, 0))
		return START_LIMITS;
	/* Valgrind's own work in the child needs calls the filter refuses;
	 * the tests that run under it check memory, not confinement. */
	if (RUNNING_ON_VALGRIND)
		return START_READY;
	int ret = load_seccomp();
	if (ret) {
		errno = ret < 0 ? -ret : 0;
		return START_SECCOMP;
	}
	return START_READY;
}

static uint32_t cpu_ms(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (uint32_t)(ru.ru_utime.tv_sec * 1000 +
			  ru.ru_utime.tv_usec / 1000 +
			  ru.ru_stime.tv_sec * 1000 +
			  ru.ru_stime.tv_usec / 1000);
}

static void child_main(int sock, pid_t parent, const struct im_extract_opts *po)
{
	struct im_extract_opts o = *po;
	struct im_extractor *x = NULL;
	const int fd = 3;
	struct start st = {0};
	int ret;

	o.sandbox = false;
	o.filters = NULL;
	st.step = child_setup(sock, parent, &o);
	if (st.step == START_READY && (ret = im_extractor_new(&o, &x))) {
		st.step = START_EXTRACTOR;
		errno = -ret;
	}
	if (st.step != START_READY) {
		st.err = errno;
		/* The socket is fd 3 only past START_FDS. */
		child_io(st.step > START_FDS ? fd : sock, true, &st,
			 sizeof(st));
		_exit(1);
	}
	child_io(fd, true, &st, sizeof(st));
	for (;;) {
		struct im_extract_result r;
		struct request q;
		struct reply a = {0};
		char *buf;

		child_io(fd, false, &q, sizeof(q));
		buf = malloc(q.len ? q.len : 1);
		if (!buf) {
			/* Read the request away, then say why. */
			char sink[4096];

			for (uint64_t left = q.len; left;) {
				size_t k = left < sizeof(sink) ? left
							       : sizeof(sink);

				child_io(fd, false, sink, k);
				left -= k;
			}
			a.fail = IM_XF_MEMORY;
			a.cpu_ms = cpu_ms();
			child_io(fd, true, &a, sizeof(a));
			continue;
		}
		child_io(fd, false, buf, q.len);
		if (im_extract_local(x, (enum im_format)q.format, buf, q.len,
				     &r) < 0)
			r.fail = IM_XF_MEMORY;
		if (o.max_text && r.len > o.max_text)
			r.fail = IM_XF_OUTPUT;
		a.fail = r.fail;
		a.format = r.format;
		a.compressed = r.compressed;
		a.len = r.fail ? 0 : r.len;
		a.cpu_ms = cpu_ms();
		child_io(fd, true, &a, sizeof(a));
		child_io(fd, true, (void *)r.text, a.len);
		free(buf);
	}
}

/* ---- The parent ----------------------------------------------------------- */

void im_helper_init(struct im_helper *h)
{
	h->pid = 0;
	h->fd = -1;
	h->cpu_ms = 0;
	h->spawned = 0;
	h->why[0] = '\0';
}

/* Reap a helper that is gone or going; @return why it ended, its wait
 * status in @p status. */
static int reap_status(struct im_helper *h, bool killed_for_time, int *status)
{
	int why = IM_XF_CRASH;

	*status = 0;

	if (h->pid > 0) {
		if (killed_for_time)
			kill(h->pid, SIGKILL);
		while (waitpid(h->pid, status, 0) < 0 && errno == EINTR)
			;
		if (killed_for_time)
			why = IM_XF_TIMEOUT;
		else if (WIFSIGNALED(*status) &&
			 (WTERMSIG(*status) == SIGXCPU ||
			  WTERMSIG(*status) == SIGKILL))
			why = IM_XF_CPU;
	}
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	h->pid = 0;
	h->cpu_ms = 0;
	return why;
}

static int reap(struct im_helper *h, bool killed_for_time)
{
	int status;

	return reap_status(h, killed_for_time, &status);
}

void im_helper_stop(struct im_helper *h)
{
	if (h->pid > 0)
		kill(h->pid, SIGKILL);
	reap(h, false);
}

static int spawn(struct im_helper *h, const struct im_extract_opts *o)
{
	/* The caller's deadline, if longer, also bounds the start: a helper
	 * forked under valgrind on a busy machine can take seconds to be
	 * ready, and the unit tests give their helpers minutes. */
	unsigned start_ms = o->deadline_ms > 10000 ? o->deadline_ms : 10000;
	pid_t parent = getpid(), pid;
	struct start st;
	int sv[2], ret, status;

	/* A helper cannot open the libraries once it runs (seccomp), nor
	 * safely load one after a threaded parent's fork. */
	im_pdf_load();
	im_archive_load();
	im_xml_load();
	pthread_once(&sc_once, sc_load);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		ret = -errno;
		snprintf(h->why, sizeof(h->why), "socketpair: %s",
			 strerrordesc_np(-ret));
		return ret;
	}
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(sv[0]);
		close(sv[1]);
		snprintf(h->why, sizeof(h->why), "fork: %s",
			 strerrordesc_np(-ret));
		return ret;
	}
	if (pid == 0) {
		close(sv[0]);
		child_main(sv[1], parent, o);
		_exit(0);
	}
	close(sv[1]);
	h->pid = pid;
	h->fd = sv[0];
	h->spawned++;
	ret = fcntl(h->fd, F_SETFL, O_NONBLOCK)
		      ? -errno
		      : xfer(h->fd, false, &st, sizeof(st),
			     now_ms() + start_ms);
	if (!ret && st.step == START_READY) {
		h->why[0] = '\0';
		return 0;
	}
	reap_status(h, ret == -ETIMEDOUT, &status);
	if (!ret && st.step < sizeof(start_steps) / sizeof(start_steps[0]))
		snprintf(h->why, sizeof(h->why), "%s: %s", start_steps[st.step],
			 st.err ? strerrordesc_np(st.err) : "parent gone");
	else if (!ret)
		snprintf(h->why, sizeof(h->why), "bad start message");
	else if (ret == -ETIMEDOUT)
		snprintf(h->why, sizeof(h->why), "not ready within %u ms",
			 start_ms);
	else if (WIFSIGNALED(status))
		snprintf(h->why, sizeof(h->why),
			 "killed by signal %d before it was ready",
			 WTERMSIG(status));
	else
		snprintf(h->why, sizeof(h->why),
			 "exited with status %d before it was ready",
			 WEXITSTATUS(status));
	return -EIO;
}

int im_helper_extract(struct im_helper *h, const struct im_extract_opts *o,
		      enum im_format f, const char *buf, size_t len,
		      struct im_buf *out, struct im_extract_result *r)
{
	struct request q = {.format = f, .len = len};
	struct reply a;
	int64_t deadline;
	int ret;

	if (h->pid && h->cpu_ms > (uint64_t)o->cpu_seconds * 1000)
		im_helper_stop(h);
	if (!h->pid && spawn(h, o))
		return IM_XF_SANDBOX;
	deadline = now_ms() + o->deadline_ms;
	ret = xfer(h->fd, true, &q, sizeof(q), deadline);
	if (!ret)
		ret = xfer(h->fd, true, (void *)buf, len, deadline);
	if (!ret)
		ret = xfer(h->fd, false, &a, sizeof(a), deadline);
	if (ret)
		return reap(h, ret == -ETIMEDOUT);
	h->cpu_ms = a.cpu_ms;
	if (a.fail >= IM_XF_COUNT || a.format >= IM_FMT_COUNT ||
	    (o->max_text && a.len > o->max_text)) {
		reap(h, true);
		return IM_XF_OUTPUT;
	}
	if (im_buf_reserve(out, a.len)) {
		im_helper_stop(h);
		return -ENOMEM;
	}
	ret = xfer(h->fd, false, out->p ? out->p : (char *)"", a.len, deadline);
	if (ret)
		return reap(h, ret == -ETIMEDOUT);
	out->len = a.len;
	r->format = (enum im_format)a.format;
	r->compressed = a.compressed;
	return (int)a.fail;
}

/* ---- External filters ----------------------------------------------------- */

static void filter_child(const char *cmd, int in, int out,
			 const struct im_extract_opts *o)
{
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	sigset_t all;

	setpgid(0, 0);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (null < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
	    dup2(null, 2) < 0 || close_range(3, ~0u, 0))
		_exit(126);
	/* exec gives a fresh address space: the limit is absolute here. */
	if (limit(RLIMIT_AS, o->mem_bytes, o->mem_bytes) ||
	    limit(RLIMIT_CPU, o->cpu_seconds, (uint64_t)o->cpu_seconds + 1) ||
	    limit(RLIMIT_CORE, 0, 0) || limit(RLIMIT_FSIZE, 0, 0) ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		_exit(126);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	_exit(127);
}

/*
 * write() to the filter's stdin. A filter that exits without reading all
 * of it (`exit 3`, `head -c 10`) makes the write raise SIGPIPE, which kills
 * a process that does not ignore it (imatch does not; a library must not
 * change the process's dispositions). So SIGPIPE is blocked in this thread
 * for the write, and one the write raised is taken before it is unblocked:
 * the caller sees EPIPE only.
 */
static ssize_t write_no_sigpipe(int fd, const void *p, size_t n)
{
	const struct timespec now = {0, 0};
	sigset_t pipe_set, pending, old;
	bool was_pending;
	ssize_t k;
	int e;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE);
	k = write(fd, p, n);
	e = errno;
	if (k < 0 && e == EPIPE && !was_pending)
		while (sigtimedwait(&pipe_set, NULL, &now) < 0 &&
		       errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return k;
}

int im_filter_run(const char *cmd, const struct im_extract_opts *o,
		  const char *buf, size_t len, struct im_buf *out)
{
	int64_t deadline = now_ms() + o->deadline_ms;
	int in[2] = {-1, -1}, res[2] = {-1, -1};
	size_t sent = 0;
	int ret = 0, status = 0;
	bool timed_out = false;
	pid_t pid;

	if (pipe2(in, O_CLOEXEC) || pipe2(res, O_CLOEXEC)) {
		ret = IM_XF_SANDBOX;
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		ret = IM_XF_SANDBOX;
		goto out;
	}
	if (pid == 0)
		filter_child(cmd, in[0], res[1], o);
	close(in[0]);
	close(res[1]);
	in[0] = res[1] = -1;
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	fcntl(res[0], F_SETFL, O_NONBLOCK);
	/* Feed stdin and drain stdout together: either may fill its pipe. */
	while (res[0] >= 0 && !ret) {
		struct pollfd p[2] = {{.fd = res[0], .events = POLLIN},
				      {.fd = in[1], .events = POLLOUT}};
		int64_t left = deadline - now_ms();
		nfds_t n = in[1] >= 0 ? 2 : 1;

		if (left <= 0 || poll(p, n, (int)left) == 0) {
			timed_out = true;
			break;
		}
		if (n == 2 && p[1].revents) {
			ssize_t k =
				write_no_sigpipe(in[1], buf + sent, len - sent);

			if (k > 0)
				sent += (size_t)k;
			if ((k < 0 && errno != EAGAIN && errno != EINTR) ||
			    sent == len) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (p[0].revents) {
			char chunk[16384];
			ssize_t k = read(res[0], chunk, sizeof(chunk));

			if (k == 0 ||
			    (k < 0 && errno != EAGAIN && errno != EINTR)) {
				close(res[0]);
				res[0] = -1;
			} else if (k > 0) {
				if (im_buf_append(out, chunk, (size_t)k))
					ret = -ENOMEM;
				else if (o->max_text && out->len > o->max_text)
					ret = IM_XF_OUTPUT;
			}
		}
	}
	if (timed_out || ret)
		kill(-pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ret)
		goto out;
	if (timed_out)
		ret = IM_XF_TIMEOUT;
	else if (WIFSIGNALED(status))
		ret = WTERMSIG(status) == SIGXCPU || WTERMSIG(status) == SIGKILL
			      ? IM_XF_CPU
			      : IM_XF_CRASH;
	else if (WEXITSTATUS(status))
		ret = IM_XF_FILTER;
out:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (res[i] >= 0)
			close(res[i]);
	}
	if (ret)
		out->len = 0;
	return ret;
}
