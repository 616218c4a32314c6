"""Helpers for the tests that mount imatchfs for real, and for tools/bench/.

Python standard library only. The habits are sshfs's test/util.py: skip with
exit code 77 when FUSE is unavailable; mount in the foreground with
auto_unmount; wait until the mountpoint's st_dev differs from its parent's,
failing at once if the daemon died; poll for changes until a generous
deadline and never assert a time; always unmount, lazily and then by signal
if a clean unmount fails; read the daemon's log for unexpected errors.

Documents are generated from a seeded random pseudo-English vocabulary, so a
run is the same on every machine.
"""

import errno
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77

VALGRIND = os.environ.get('TEST_WITH_VALGRIND', '') not in ('', '0')
# Daemons mount with -o auto_unmount unless TEST_AUTO_UNMOUNT=0: without it
# the kernel opens directories alone (no_opendir, fs/ops.c), the mode of a
# plain `imatchfs SRC MNT`; tests that kill a daemon need auto_unmount.
AUTO_UNMOUNT = os.environ.get('TEST_AUTO_UNMOUNT', '1') != '0'
# Valgrind slows the daemon down by an order of magnitude: give it room.
SLOW = 10 if VALGRIND else 1
DEADLINE = 30 * SLOW

# Randomized lexicons at the defaults (core/params.c im_params_init()).
DEFAULT_K = 4
# A test still running after this long has a syscall stuck in a mount that
# no daemon thread answers: the runner then aborts the FUSE connections.
# Keep it below meson's timeout (tests/mount/meson.build; x5 under valgrind).
WATCHDOG = 180 * (5 if VALGRIND else 1)


class Skip(Exception):
    """The test cannot run here (no FUSE, mounting not permitted, ...)."""


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def fusermount():
    return shutil.which('fusermount3')


def check_fuse():
    """Raise Skip unless /dev/fuse can be opened and fusermount3 exists."""
    if not os.path.exists('/dev/fuse'):
        raise Skip('/dev/fuse does not exist')
    try:
        fd = os.open('/dev/fuse', os.O_RDWR)
        os.close(fd)
    except OSError as e:
        raise Skip('cannot open /dev/fuse: %s' % e.strerror)
    if not fusermount():
        raise Skip('fusermount3 is not installed')


# ---- Polling -----------------------------------------------------------------

def poll(fn, what, timeout=None, interval=0.05):
    """Call fn() until it returns a true value; return that value.

    On timeout raise Fail naming @what and the last value seen (fn may
    return a (ok, value) pair: then the value is shown)."""
    end = time.monotonic() + (timeout or DEADLINE)
    last = None
    while True:
        try:
            r = fn()
        except OSError as e:
            r, last = None, 'OSError: %s' % e
        if isinstance(r, tuple):
            ok, last = r
            if ok:
                return last
        elif r:
            return r
        elif r is not None:
            last = r
        if time.monotonic() > end:
            raise Fail('timed out after %ds waiting for %s; last seen: %r'
                       % (timeout or DEADLINE, what, last))
        time.sleep(interval)


def is_mounted(mnt):
    try:
        st = os.stat(mnt)
        pst = os.stat(os.path.dirname(os.path.abspath(mnt)) or '/')
    except OSError:
        return False
    return st.st_dev != pst.st_dev


def mount_minor(mnt):
    """The minor device number of the mount on @mnt (its FUSE connection
    number), from /proc/self/mountinfo: no request to the mount itself.
    None if nothing is mounted there."""
    mnt = os.path.abspath(mnt)
    found = None
    with open('/proc/self/mountinfo', 'rb') as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4:
                p = fields[4].decode('utf-8', 'surrogateescape')
                p = re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), p)
                if p == mnt:
                    found = int(fields[2].split(b':')[1])
    return found


def in_proc_mounts(mnt):
    return mount_minor(mnt) is not None


# ---- The daemon --------------------------------------------------------------

# Lines of a daemon's log that mean "mounting is not permitted here": skip.
NOT_PERMITTED = re.compile(r'fuse: device not found|fusermount3?: .*(Operation not'
                           r' permitted|Permission denied)|mount failed: Operation'
                           r' not permitted|failed to open /dev/fuse', re.I)


class Daemon:
    """One foreground imatchfs process and its log.

    The log (stdout and stderr together) is kept in a file beside the test's
    tree; check_log() fails on lines containing "error" or "warning" that the
    test did not expect."""

    def __init__(self, exe, source, mnt, opts=(), state=None, args=(),
                 wrap=(), log=None, foreground=True, auto_unmount=None, cwd=None,
                 stdin=subprocess.DEVNULL):
        self.exe = exe
        self.stdin = stdin
        self.cwd = cwd
        self.source = source
        self.mnt = mnt
        self.proc = None
        self.conn = None
        if auto_unmount is None:
            auto_unmount = AUTO_UNMOUNT
        o = ['auto_unmount'] if foreground and auto_unmount else []
        if state:
            o.append('state=' + state)
        o += list(opts)
        self.cmd = list(wrap)
        if VALGRIND:
            supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'valgrind.supp')
            # fuse-compatible: a thread blocked in a syscall into our own
            # mount must not hold valgrind's lock (mount inside SOURCE).
            self.cmd += ['valgrind', '--quiet', '--error-exitcode=99',
                         '--sim-hints=fuse-compatible',
                         # The cache's SIGBUS handler resumes the read it
                         # stopped (core/state/state.c): exact registers.
                         '--vex-iropt-register-updates=allregs-at-mem-access',
                         '--suppressions=' + supp,
                         '--leak-check=full', '--show-leak-kinds=definite',
                         '--errors-for-leak-kinds=definite']
        self.cmd += [exe] + (['-f'] if foreground else [])
        if o:
            self.cmd += ['-o', ','.join(o)]
        # With cwd, SOURCE and MOUNTPOINT are given relative to it, as a
        # user in that directory would type them.
        rel = (lambda p: os.path.relpath(p, cwd)) if cwd else (lambda p: p)
        self.cmd += list(args) + [rel(source), rel(mnt)]
        self.log = log or tempfile.mktemp(prefix='imatchfs-log-')
        self.foreground = foreground

    def start(self, wait=True):
        self.logf = open(self.log, 'ab')
        self.logf.write(('$ %s\n' % ' '.join(self.cmd)).encode('utf-8', 'surrogateescape'))
        self.logf.flush()
        self.proc = subprocess.Popen(self.cmd, stdin=self.stdin, cwd=self.cwd,
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        if wait:
            self.wait_mounted()
        return self

    def log_text(self):
        try:
            with open(self.log, 'rb') as f:
                return f.read().decode('utf-8', 'replace')
        except OSError:
            return ''

    def wait_mounted(self):
        end = time.monotonic() + DEADLINE
        while not is_mounted(self.mnt):
            self.conn = mount_minor(self.mnt)
            rc = self.proc.poll()
            if rc is not None and (self.foreground or rc != 0):
                text = self.log_text()
                if NOT_PERMITTED.search(text):
                    raise Skip('mounting is not permitted here:\n' + text)
                raise Fail('imatchfs exited with status %d before mounting; '
                           'its log:\n%s' % (rc, text))
            if time.monotonic() > end:
                raise Fail('not mounted after %ds; log:\n%s' % (DEADLINE, self.log_text()))
            time.sleep(0.02)

    def abort_connection(self):
        """Abort our FUSE connection (fusectl), for a daemon stuck in a
        request to its own mount that no thread will answer."""
        ctl = '/sys/fs/fuse/connections'
        self.conn = mount_minor(self.mnt) or self.conn
        if self.conn is None:
            return
        if not os.path.isdir(os.path.join(ctl, str(self.conn))):
            subprocess.run(['mount', '-t', 'fusectl', 'none', ctl], capture_output=True)
        try:
            with open(os.path.join(ctl, str(self.conn), 'abort'), 'w') as f:
                f.write('1')
            print('warning: aborted FUSE connection %d of %s' % (self.conn, self.mnt))
        except OSError:
            pass

    def umount(self):
        """Unmount with fusermount3 -u and require a clean exit of both."""
        r = subprocess.run([fusermount(), '-u', self.mnt], capture_output=True)
        check(r.returncode == 0, 'fusermount3 -u %s failed (%d): %s'
              % (self.mnt, r.returncode, r.stderr.decode(errors='replace')))
        self.wait_exit(0, 'after fusermount3 -u')

    def wait_exit(self, want=0, when=''):
        if self.proc is None or not self.foreground:
            poll(lambda: not in_proc_mounts(self.mnt), 'the mount to go away ' + when)
            return None
        try:
            rc = self.proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            raise Fail('imatchfs still running %ds %s; log:\n%s'
                       % (DEADLINE, when, self.log_text()))
        if want is not None:
            check(rc == want, 'imatchfs exited with status %d %s (wanted %d); log:\n%s'
                  % (rc, when, want, self.log_text()))
        return rc

    def kill(self, sig=signal.SIGKILL):
        self.proc.send_signal(sig)

    def cleanup(self):
        """Last resort, from a finally: never leave a mount or a process."""
        if is_mounted(self.mnt) or in_proc_mounts(self.mnt):
            subprocess.run([fusermount(), '-u', self.mnt], capture_output=True)
        if is_mounted(self.mnt) or in_proc_mounts(self.mnt):
            subprocess.run([fusermount(), '-u', '-z', self.mnt], capture_output=True)
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5 * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.abort_connection()
                    self.proc.wait()
        if getattr(self, 'logf', None):
            self.logf.close()
            self.logf = None

    def check_log(self, allow=()):
        """Fail on log lines with "error" or "warning" not matched by @allow."""
        bad = []
        for line in self.log_text().splitlines():
            if line.startswith('$ '):
                continue
            # Valgrind's notes about itself ("--PID-- WARNING: unhandled
            # syscall 437": openat2, which the daemon then does without);
            # its errors are "==PID==" lines and exit status 99.
            if VALGRIND and re.match(r'--\d+-- ', line):
                continue
            if re.search(r'error|warning', line, re.I) and \
               not any(re.search(a, line) for a in allow):
                bad.append(line)
        check(not bad, 'unexpected lines in the daemon log:\n  ' + '\n  '.join(bad))


def requests(d, start):
    """FUSE requests the daemon (run with -d) logged past byte @start, by
    opcode: {'LOOKUP': n, ...}."""
    with open(d.log, 'rb') as f:
        f.seek(start)
        text = f.read().decode('utf-8', 'replace')
    out = {}
    for op in re.findall(r'opcode: ([A-Z_]+)', text):
        out[op] = out.get(op, 0) + 1
    return out


# ---- The view ------------------------------------------------------------------

def encode_member(rel):
    return rel.replace('%', '%25').replace('/', '%2F')


def decode_member(name):
    return re.sub(r'%(25|2F)', lambda m: '%' if m.group(1) == '25' else '/', name)


def read_status(mnt):
    with open(os.path.join(mnt, 'status'), 'r', errors='surrogateescape') as f:
        text = f.read()
    st = {}
    for line in text.splitlines():
        k, sep, v = line.partition(':')
        if sep:
            st[k.strip()] = v.strip()
    return st


def status_int(st, key):
    v = st.get(key)
    try:
        return int(v.split()[0])
    except (AttributeError, ValueError, IndexError):
        return None


def live_when(w, pred, what):
    """Poll until the view is live, nothing is pending and pred(status) is
    true; return the status."""
    def ok():
        st = read_status(w.mnt)
        return (st.get('phase') == 'live' and status_int(st, 'pending') == 0
                and pred(st)), st
    return poll(ok, what)


def read_clusters(mnt):
    """{sig: frozenset(relative paths)} from MOUNT/clusters/."""
    out = {}
    top = os.path.join(mnt, 'clusters')
    for sig in os.listdir(top):
        members = os.listdir(os.path.join(top, sig))
        out[sig] = frozenset(decode_member(m) for m in members)
    return out


def cluster_sets(mnt):
    return set(read_clusters(mnt).values())


def by_doc_path(mnt, rel, *more):
    return os.path.join(mnt, 'by-doc', rel, *more)


def read_dupes(mnt, rel):
    d = by_doc_path(mnt, rel, 'dupes')
    return frozenset(decode_member(m) for m in os.listdir(d))


def by_doc_documents(mnt):
    """Relative paths of every document under MOUNT/by-doc/: a directory is a
    document when it holds a symlink named `file`."""
    docs = set()
    top = os.path.join(mnt, 'by-doc')

    def walk(rel):
        path = os.path.join(top, rel) if rel else top
        for name in os.listdir(path):
            r = os.path.join(rel, name) if rel else name
            p = os.path.join(top, r)
            if os.path.islink(os.path.join(p, 'file')):
                docs.add(r)
            elif os.path.isdir(p) and not os.path.islink(p):
                walk(r)
    walk('')
    return docs


def scan(imatch, src, args=()):
    """`imatch scan` clusters as a set of frozensets of relative paths
    (TAB, newline and backslash in paths come escaped as \\t, \\n, \\\\)."""
    r = subprocess.run([imatch, 'scan'] + list(args) + [src], capture_output=True)
    check(r.returncode == 0, 'imatch scan %s failed (%d): %s'
          % (src, r.returncode, r.stderr.decode(errors='replace')))
    out = set()
    unesc = {'t': '\t', 'n': '\n', '\\': '\\'}
    for line in os.fsdecode(r.stdout).split('\n'):
        if line.strip():
            out.add(frozenset(re.sub(r'\\(.)', lambda m: unesc.get(m.group(1), m.group(0)), f)
                              for f in line.split('\t')))
    return out


def fmt_clusters(cs):
    return '\n'.join('  ' + ' | '.join(sorted(c)) for c in
                     sorted(cs, key=lambda c: sorted(c))) or '  (none)'


def check_view_invariants(mnt, src):
    """What must hold of any settled view, whatever the tree (DESIGN §2)."""
    clusters = read_clusters(mnt)
    seen = {}
    src = os.path.abspath(src)
    for sig, members in clusters.items():
        check(re.fullmatch(r'[0-9a-f]{40}', sig), 'cluster name %r is not 40 hex digits' % sig)
        check(len(members) >= 2, 'cluster %s has %d member(s)' % (sig, len(members)))
        for m in members:
            check(m not in seen, '%r is in clusters %s and %s' % (m, seen.get(m), sig))
            seen[m] = sig
            link = os.path.join(mnt, 'clusters', sig, encode_member(m))
            target = os.readlink(link)
            check(target == os.path.join(src, m),
                  'clusters/%s/%s points to %r, not %r' % (sig, encode_member(m),
                                                          target, os.path.join(src, m)))
    for sig, members in clusters.items():
        # Binary files have no by-doc/ entry (README, exact copies), and
        # only bytes equal to theirs, binary too, share their cluster.
        docs = {m for m in members if os.path.isdir(by_doc_path(mnt, m))}
        check(not docs or docs == members,
              'cluster %s mixes documents %s with files that have no by-doc/ entry %s'
              % (sig, sorted(docs), sorted(members - docs)))
        for m in docs:
            dupes = read_dupes(mnt, m)
            check(dupes, '%r is in cluster %s but its dupes/ is empty' % (m, sig))
            check(m not in dupes, '%r lists itself in dupes/' % m)
            check(dupes <= members, 'dupes of %r (%s) leave its cluster %s'
                  % (m, sorted(dupes), sig))
            for d in dupes:
                check(m in read_dupes(mnt, d),
                      '%r lists %r in dupes/ but not the other way round' % (m, d))
    return clusters


# ---- Documents -----------------------------------------------------------------

FUNCTION_WORDS = ['the', 'a', 'of', 'and', 'to', 'in', 'is', 'it', 'on', 'for',
                  'as', 'was', 'at', 'by', 'an', 'be', 'or', 'we', 'but', 'not']
ONSETS = ['b', 'c', 'd', 'f', 'g', 'h', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v',
          'w', 'br', 'ch', 'cl', 'dr', 'gr', 'pl', 'pr', 'sh', 'st', 'tr', 'th']
NUCLEI = ['a', 'e', 'i', 'o', 'u', 'ai', 'ea', 'io', 'ou']
CODAS = ['', '', 'n', 'r', 's', 't', 'l', 'nd', 'st', 'rk', 'ng']


class Corpus:
    """Pseudo-English documents from a seeded vocabulary.

    Words are drawn from a Zipf distribution over the vocabulary, and each
    document also has its own topic words, so unrelated documents share only
    common words while a near-duplicate shares its original's term set."""

    def __init__(self, seed=1, vocab=6000):
        rng = random.Random(seed)
        words = set()
        while len(words) < vocab:
            w = ''.join(rng.choice(ONSETS) + rng.choice(NUCLEI)
                        for _ in range(rng.randint(2, 3))) + rng.choice(CODAS)
            if len(w) >= 4:
                words.add(w)
        self.words = sorted(words)
        rng.shuffle(self.words)
        acc, self.cum = 0.0, []
        for i in range(len(self.words)):
            acc += 1.0 / (i + 1)
            self.cum.append(acc)
        self.rng = random.Random(seed * 7919 + 1)

    def document(self, rng=None, words=None):
        rng = rng or self.rng
        n = words or rng.randint(120, 260)
        topic = rng.sample(self.words[200:], 40)
        out, line = [], []
        title = ' '.join(w.capitalize() for w in rng.sample(topic, 3))
        out.append(title)
        out.append('')
        sentence = []
        for _ in range(n):
            r = rng.random()
            if r < 0.35:
                w = rng.choice(FUNCTION_WORDS)
            elif r < 0.6:
                w = rng.choice(topic)
            else:
                w = rng.choices(self.words, cum_weights=self.cum)[0]
            sentence.append(w)
            if len(sentence) >= rng.randint(8, 16):
                out.append(self._sentence(sentence))
                sentence = []
        if sentence:
            out.append(self._sentence(sentence))
        return self._wrap(out, 72)

    @staticmethod
    def _sentence(ws):
        s = ' '.join(ws)
        return s[0].upper() + s[1:] + '.'

    @staticmethod
    def _wrap(parts, width):
        lines = [parts[0], '']
        line = ''
        for s in parts[2:]:
            for w in s.split(' '):
                if line and len(line) + 1 + len(w) > width:
                    lines.append(line)
                    line = w
                else:
                    line = line + ' ' + w if line else w
        if line:
            lines.append(line)
        return '\n'.join(lines) + '\n'

    def near_duplicate(self, text, rng=None):
        """A reformatted copy of @text: different bytes, the same term set
        (line breaks moved, short function words changed, one word repeated),
        so it has the same signatures as @text in every coordinate."""
        rng = rng or self.rng
        lines = text.split('\n')
        title, body = lines[0], ' '.join(l for l in lines[2:] if l)
        ws = body.split(' ')
        for i, w in enumerate(ws):
            bare = w.rstrip('.').lower()
            if bare in FUNCTION_WORDS and rng.random() < 0.3:
                ws[i] = rng.choice(FUNCTION_WORDS) + ('.' if w.endswith('.') else '')
        i = rng.randrange(len(ws))
        ws.insert(i, ws[i].rstrip('.').lower())
        text2 = self._wrap([title.upper(), ''] + [' '.join(ws)], rng.randint(50, 90))
        if text2 == text:
            text2 += 'the end\n'
        return text2

    def short(self, rng=None):
        """Too few terms to be signed: rejected in every coordinate."""
        rng = rng or self.rng
        return 'Note: %s %s.\n' % (rng.choice(self.words), rng.choice(FUNCTION_WORDS))


def write(path, text, mode=None):
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    data = text if isinstance(text, bytes) else text.encode()
    with open(path, 'wb') as f:
        f.write(data)
    if mode is not None:
        os.chmod(path, mode)


def make_tree(root, corpus, groups=3, unrelated=12, dirs=('reports', 'notes',
              'archive/2024')):
    """A small realistic tree: @groups near-duplicate families (an original
    and one or two reformatted copies, in different directories), @unrelated
    single documents, two byte-identical short notes, one short note alone.

    Returns (expected clusters as a set of frozensets, list of all document
    paths, {name: path} of notable files)."""
    rng = random.Random(42)
    docs, clusters, names = [], set(), {}
    for g in range(groups):
        text = corpus.document(rng)
        fam = ['%s/family%d.txt' % (dirs[g % len(dirs)], g)]
        for c in range(1 + g % 2):
            fam.append('%s/family%d-copy%d.txt' % (dirs[(g + c + 1) % len(dirs)], g, c))
        write(os.path.join(root, fam[0]), text)
        for p in fam[1:]:
            write(os.path.join(root, p), corpus.near_duplicate(text, rng))
        clusters.add(frozenset(fam))
        docs += fam
        names['family%d' % g] = fam
    for i in range(unrelated):
        p = '%s/doc%02d.txt' % (dirs[i % len(dirs)], i)
        write(os.path.join(root, p), corpus.document(rng))
        docs.append(p)
    note = corpus.short(rng)
    for p in ('notes/todo.txt', 'archive/todo-old.txt'):
        write(os.path.join(root, p), note)
        docs.append(p)
    clusters.add(frozenset(['notes/todo.txt', 'archive/todo-old.txt']))
    p = 'notes/lonely.txt'
    write(os.path.join(root, p), corpus.short(rng))
    docs.append(p)
    return clusters, docs, names


# ---- A test's world ------------------------------------------------------------

class World:
    """A tmp directory with src/, mnt/ and state/; the daemons started in it
    are cleaned up by close()."""

    def __init__(self, imatchfs, imatch, name='t'):
        self.imatchfs = imatchfs
        self.imatch = imatch
        self.top = tempfile.mkdtemp(prefix='imatchfs-%s-' % name)
        self.src = os.path.join(self.top, 'src')
        self.mnt = os.path.join(self.top, 'mnt')
        self.state = os.path.join(self.top, 'state')
        for d in (self.src, self.mnt, self.state):
            os.mkdir(d)
        self.daemons = []
        self.corpus = Corpus(seed=1)

    def daemon(self, opts=(), source=None, mnt=None, state=True, start=True, **kw):
        d = Daemon(self.imatchfs, source or self.src, mnt or self.mnt, opts=opts,
                   state=self.state if state is True else state,
                   log=os.path.join(self.top, 'daemon-%d.log' % len(self.daemons)),
                   **kw)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def report(self):
        """What a failure shows: each daemon's log, and the status of
        those still mounted (what the daemon believes: pending, converged,
        rescans, events)."""
        for d in self.daemons:
            print('--- log of %s\n%s' % (' '.join(d.cmd), d.log_text()))
            if not in_proc_mounts(d.mnt):
                continue
            try:
                with open(os.path.join(d.mnt, 'status')) as f:
                    print('--- status of %s\n%s' % (d.mnt, f.read()))
            except OSError as e:
                print('--- status of %s: %s' % (d.mnt, e))

    def abort(self):
        print('FAIL: still running after %d s: aborting the FUSE connections' % WATCHDOG)
        sys.stdout.flush()
        for d in self.daemons:
            d.abort_connection()

    def close(self, ok):
        for d in self.daemons:
            d.cleanup()
        still = [d.mnt for d in self.daemons if in_proc_mounts(d.mnt)]
        if still:
            print('warning: still mounted, leaving %s in place: %s' % (self.top, still))
        elif ok and not os.environ.get('KEEP_TMP'):
            shutil.rmtree(self.top, ignore_errors=True)
        else:
            print('kept %s' % self.top)


def expect_errno(fn, want, what):
    try:
        fn()
    except OSError as e:
        check(e.errno == want, '%s: got %s, wanted %s'
              % (what, errno.errorcode.get(e.errno, e.errno), errno.errorcode[want]))
        return
    raise Fail('%s succeeded; wanted %s' % (what, errno.errorcode[want]))


def run_tests(tests, argv):
    """A small runner: argv = [imatchfs, imatch, test names...]. Exit 0 when
    all pass, 77 when every one was skipped, 1 otherwise."""
    if len(argv) >= 1 and argv[0] == '--list':
        print('\n'.join(tests))
        return 0
    if len(argv) < 2:
        print('usage: %s IMATCHFS IMATCH [TEST...]' % sys.argv[0], file=sys.stderr)
        return 2
    imatchfs, imatch = (os.path.abspath(a) for a in argv[:2])
    names = argv[2:] or list(tests)
    try:
        check_fuse()
    except Skip as e:
        print('SKIP: %s' % e)
        return SKIP
    failed = skipped = 0
    for name in names:
        world = World(imatchfs, imatch, name)
        ok = False
        dog = threading.Timer(WATCHDOG, world.abort)
        dog.daemon = True
        dog.start()
        try:
            tests[name](world)
            ok = True
            print('PASS %s' % name)
        except Skip as e:
            ok = True
            skipped += 1
            print('SKIP %s: %s' % (name, e))
        except Fail as e:
            failed += 1
            print('FAIL %s: %s' % (name, e))
            world.report()
        except Exception:
            failed += 1
            import traceback
            print('FAIL %s (exception):' % name)
            traceback.print_exc(file=sys.stdout)
            world.report()
        finally:
            dog.cancel()
            world.close(ok)
        sys.stdout.flush()
    if failed:
        return 1
    return SKIP if skipped == len(names) else 0
