"""What the stress tools share: a mounted world, the expected view, and the
convergence check.

The mount helpers are tests/mount/util.py's (the real-mount tests' habits:
foreground with auto_unmount, poll with a deadline, always unmount). The
expected view of a tree is what `imatch scan --lexicon STATE/lexicon` prints
for it, plus every document of the tree in by-doc/; the view has converged
when both are equal. A tool reports the daemon's own `status` beside it, so a
daemon that says it is done while the view is still wrong shows as such.
"""

import ctypes
import errno
import ctypes.util
import os
import random
import re
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'mount'))

import util  # noqa: E402
from util import (Corpus, Daemon, Fail, Skip, by_doc_documents,  # noqa: E402,F401
                  check_fuse, cluster_sets, fmt_clusters, in_proc_mounts,
                  is_mounted, read_status, scan, status_int)

SKIP = util.SKIP


def log(msg):
    print('[%7.2f] %s' % (time.monotonic() - START, msg), flush=True)


START = time.monotonic()


class Pool:
    """Texts to write: @n distinct documents and, for each, a reformatted
    near-duplicate, made once (generating is slower than writing). A file
    written from the pool gets one more line naming it, so no two files are
    byte-identical by accident; files of one family still share their terms
    and cluster."""

    def __init__(self, n, seed=7):
        corpus = Corpus(seed=seed)
        rng = random.Random(seed)
        self.texts = []
        for _ in range(n):
            t = corpus.document(rng, words=rng.randint(60, 120))
            self.texts.append((t, corpus.near_duplicate(t, rng)))

    def text(self, rng, serial):
        a, b = rng.choice(self.texts)
        return ((a if rng.random() < 0.5 else b) + 'serial %d\n' % serial).encode()


def documents_in(src):
    """Relative paths of the regular files under @src, hidden names left out
    (every file the tools write is a text document)."""
    out = set()
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith('.')]
        for f in files:
            if f.startswith('.'):
                continue
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p):
                out.add(os.path.relpath(p, src))
    return out


def state_lexicon(state):
    p = os.path.join(state, 'lexicon')
    if not os.path.exists(p):
        raise Fail('no lexicon in the state directory %s: %s' % (state, os.listdir(state)))
    return p


def summary_of(st):
    keys = ('phase', 'documents', 'pending', 'errors', 'converged', 'rescans',
            'events', 'watches', 'walk_errors', 'unplaced', 'lost', 'copies_reused',
            'relexicons')
    return ', '.join('%s %s' % (k, st[k]) for k in keys if k in st)


def converge(imatch, src, mnt, state, deadline, what='the view'):
    """Poll until MOUNT shows exactly the documents of SOURCE and the clusters
    `imatch scan --lexicon STATE/lexicon SOURCE` prints. Returns the seconds
    it took; raises Fail with the difference (and what `status` claimed) at
    the deadline."""
    t0 = time.monotonic()
    want_docs = documents_in(src)
    # A daemon restarted before any lexicon was saved builds one first.
    while not os.path.exists(os.path.join(state, 'lexicon')) and \
            time.monotonic() - t0 < deadline:
        time.sleep(0.1)
    want = scan(imatch, src, ['--lexicon', state_lexicon(state)])
    last = None
    claimed_done = None
    while True:
        try:
            st = read_status(mnt)
            docs = by_doc_documents(mnt)
            have = cluster_sets(mnt)
        except OSError as e:
            last = 'OSError %s' % e
        else:
            if docs == want_docs and have == want:
                return time.monotonic() - t0
            last = (st, docs, have)
            settled = status_int(st, 'pending') == 0 and st.get('phase') == 'live'
            if settled and claimed_done is None:
                claimed_done = time.monotonic() - t0
        if time.monotonic() - t0 > deadline:
            break
        time.sleep(0.5)
    if isinstance(last, str):
        raise Fail('%s did not converge in %d s: %s' % (what, deadline, last))
    st, docs, have = last
    missing, extra = sorted(want_docs - docs), sorted(docs - want_docs)
    lines = ['%s did not converge in %d s (status: %s)' % (what, deadline, summary_of(st))]
    if claimed_done is not None:
        lines.append('status said pending 0 / phase live from %.1f s on, while the view '
                     'was still wrong' % claimed_done)
    lines.append('documents: %d in the tree, %d in by-doc/; %d missing, %d extra'
                 % (len(want_docs), len(docs), len(missing), len(extra)))
    for m in missing[:5]:
        lines.append('  missing %s' % m)
    for m in extra[:5]:
        lines.append('  extra   %s' % m)
    only_view, only_scan = have - want, want - have
    lines.append('clusters: %d in the view, %d by imatch scan; %d only in the view, '
                 '%d only in the scan' % (len(have), len(want), len(only_view), len(only_scan)))
    where_view = {m: c for c in have for m in c}
    where_scan = {m: c for c in want for m in c}
    moved = sorted(m for m in set(where_view) | set(where_scan)
                   if where_view.get(m) != where_scan.get(m))
    lines.append('documents clustered differently: %d' % len(moved))
    for m in moved[:5]:
        lines.append('  %s: %d-member cluster in the view, %d-member in the scan'
                     % (m, len(where_view.get(m, ())), len(where_scan.get(m, ()))))
    raise Fail('\n'.join(lines))


DEAD_MOUNTS = []


def wait_unmounted(mnt, timeout=30):
    """Wait for auto_unmount to take the mount of a dead daemon away.

    A daemon killed while fusermount3 mounts for it sometimes leaves a dead
    mount (ENOTCONN) that no helper will remove: once no fusermount3 works
    on @mnt any more, such a mount is unmounted lazily here and recorded in
    DEAD_MOUNTS (fusermount3's doing, not the daemon's). Returns False if
    the mount could not be removed within @timeout."""
    end = time.monotonic() + timeout

    def helper_running():
        # Killed while mounting, the daemon leaves fusermount3 to finish the
        # mount and its auto_unmount helper to take it away again.
        r = subprocess.run(['pgrep', '-f', 'fusermount3.*' + re.escape(mnt)],
                           capture_output=True)
        return r.returncode == 0
    while in_proc_mounts(mnt) or helper_running():
        if not helper_running() and in_proc_mounts(mnt):
            # statvfs, not stat: the kernel answers a stat (and a listing)
            # of a dead mount from its caches, which our long timeouts keep
            # full, but always asks the daemon for statfs (as fs/main.c
            # checks a mountpoint). With stat a dead mount looked alive and
            # was waited on for the whole timeout.
            try:
                os.statvfs(mnt)
            except OSError as e:
                if e.errno == errno.ENOTCONN:
                    DEAD_MOUNTS.append(mnt)
                    subprocess.run(['fusermount3', '-u', '-z', mnt], capture_output=True)
                    continue
        if time.monotonic() > end:
            log('warning: %s still mounted %d s after its daemon died; unmounting lazily'
                % (mnt, timeout))
            subprocess.run(['fusermount3', '-u', '-z', mnt], capture_output=True)
            return False
        time.sleep(0.02)
    return True


class World:
    """top/{src,mnt,state}, daemons started in it, cleaned up by close()."""

    def __init__(self, imatchfs, imatch, name, top=None):
        import tempfile
        self.imatchfs, self.imatch = imatchfs, imatch
        self.top = top or tempfile.mkdtemp(prefix='imatchfs-stress-%s-' % name)
        self.src = os.path.join(self.top, 'src')
        self.mnt = os.path.join(self.top, 'mnt')
        self.state = os.path.join(self.top, 'state')
        for d in (self.src, self.mnt, self.state):
            os.makedirs(d, exist_ok=True)
        self.daemons = []

    def daemon(self, opts=(), start=True, state=None, auto_unmount=None):
        d = Daemon(self.imatchfs, self.src, self.mnt, opts=opts, state=state or self.state,
                   log=os.path.join(self.top, 'daemon-%d.log' % len(self.daemons)),
                   auto_unmount=auto_unmount)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def close(self, keep=False):
        for d in self.daemons:
            d.cleanup()
        if keep or any(in_proc_mounts(d.mnt) for d in self.daemons):
            log('kept %s' % self.top)
        else:
            import shutil
            shutil.rmtree(self.top, ignore_errors=True)


def settle(mnt, timeout=120):
    """Wait until status says live with nothing pending."""
    end = time.monotonic() + timeout
    while True:
        try:
            st = read_status(mnt)
            if status_int(st, 'pending') == 0 and st.get('phase') == 'live':
                return st
        except OSError:
            pass
        if time.monotonic() > end:
            raise Fail('status did not settle in %d s' % timeout)
        time.sleep(0.1)


def run_main(fn, argv, name):
    """Run a tool: exit 0 passed, 1 failed, 77 skipped (no FUSE)."""
    try:
        check_fuse()
    except Skip as e:
        print('SKIP: %s' % e)
        return SKIP
    try:
        fn(argv)
    except Skip as e:
        print('SKIP %s: %s' % (name, e))
        return SKIP
    except Fail as e:
        print('FAIL %s: %s' % (name, e))
        return 1
    print('PASS %s' % name)
    return 0


# ---- inotify, for evidence that nobody opened a file ------------------------

IN_ACCESS, IN_OPEN = 0x1, 0x20


class Inotify:
    """A minimal inotify reader (ctypes): counts IN_OPEN / IN_ACCESS on the
    files of one directory, whoever opens them."""

    def __init__(self, path, mask=IN_OPEN | IN_ACCESS):
        libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), 'inotify_init1')
        wd = libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), 'inotify_add_watch %s' % path)
        self.events = []

    def poll(self):
        """Read what is queued; return the list of (mask, name) seen so far."""
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            i = 0
            while i < len(buf):
                wd, mask, cookie, ln = struct.unpack_from('iIII', buf, i)
                name = buf[i + 16:i + 16 + ln].rstrip(b'\0').decode(errors='replace')
                self.events.append((mask, name))
                i += 16 + ln
        return self.events

    def close(self):
        os.close(self.fd)
