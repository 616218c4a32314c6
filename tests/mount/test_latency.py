#!/usr/bin/env python3
"""`ls` over the mount as fast as over a disk: what a reader of the mount
waits for while the daemon works on a large tree. Each test failed on the
daemon before its fix, by ten times its bound or more.

    test_latency.py IMATCHFS IMATCH [TEST...]
    test_latency.py --list

Same habits as test_mount.py (tests/mount/util.py). The trees are of many
short near-duplicates, which make the removal plan costly; the bounds are
generous (a loaded host must not fail them), and mean nothing under
valgrind, where the tests skip.
"""

import contextlib
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (VALGRIND, Fail, Skip, check, make_tree, poll,  # noqa: E402
                  read_status, run_tests, status_int)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def short_near_duplicates(src, n, family=200, figures=False):
    """@n texts of 25 made-up words, in families of @family that differ by
    one word, 1000 per directory (dNNN/nNNNNN.txt). With @figures each
    also ends with an amount of its own, as payslips do: near-duplicates
    of each other, none of them redundant (the removal plan keeps a text
    whose figures differ from its keeper's)."""
    rng = random.Random(7)
    sy, vo = 'bcdfghklmnprstvz', 'aeiou'
    vocab = sorted({''.join(rng.choice(sy) + rng.choice(vo)
                            for _ in range(rng.randint(2, 4))) for _ in range(6000)})
    base = None
    for i in range(n):
        if i % family == 0:
            base = rng.sample(vocab, 25)
        words = list(base)
        words[rng.randrange(len(words))] = rng.choice(vocab)
        if figures:
            words += ['total', '%d.%02d' % (i, i % 100)]
        d = os.path.join(src, 'd%03d' % (i // 1000))
        if i % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'n%06d.txt' % i), 'w') as f:
            f.write(' '.join(words) + '\n')


@contextlib.contextmanager
def source_in_memory(w):
    """SOURCE on a tmpfs where we may mount one (root): 20,000 files took
    9 to 13 s to write to this host's disk, 2 s to a tmpfs. Unmounted after
    the test's daemons."""
    mounted = os.geteuid() == 0 and subprocess.run(
        ['mount', '-t', 'tmpfs', '-o', 'size=256m', 'tmpfs', w.src],
        capture_output=True).returncode == 0
    try:
        yield
    finally:
        if mounted:
            for d in w.daemons:
                d.cleanup()
            subprocess.run(['umount', w.src])


def converged(w, docs):
    def ok():
        st = read_status(w.mnt)
        return (st.get('converged') == 'yes' and status_int(st, 'documents') == docs,
                st)
    return poll(ok, 'status to say converged: yes with %d documents' % docs,
                timeout=120)


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def read_file(path):
    with open(path) as f:
        return f.read()


class HeldInGdb:
    """The daemon under gdb, non-stop, one thread held at @p breakpoint (gdb
    lines) until release(): what a test needs to make a lock's holder stay
    put every time. Skips where gdb is missing, cannot trace, or lacks
    Python when @p python is set ($_any_caller_matches)."""

    def __init__(self, w, breakpoint, python=False):
        self.gdb = shutil.which('gdb')
        if not self.gdb:
            raise Skip('gdb is not installed (tools/deps.sh installs it)')
        if VALGRIND:
            raise Skip('the daemon runs under gdb here')
        if python and subprocess.run(
                [self.gdb, '-q', '-nx', '-batch', '-ex', 'python print(1)'],
                capture_output=True).stdout.strip() != b'1':
            raise Skip('gdb without Python ($_any_caller_matches)')
        self.w = w
        self.held = os.path.join(w.top, 'held')
        cmds = os.path.join(w.top, 'gdb.cmds')
        with open(cmds, 'w') as f:
            f.write('set non-stop on\nset pagination off\nset confirm off\n'
                    '%s\ncommands 1\nshell touch %s\nend\nrun &\n'
                    % (breakpoint, self.held))
        self.d = w.daemon(wrap=[self.gdb, '-q', '-nx', '-x', cmds, '--args'],
                          stdin=subprocess.PIPE, start=False)
        self.released = False

    def wait_held(self, what):
        try:
            poll(lambda: (os.path.exists(self.held), None), what + ' held in gdb')
        except Fail:
            if 'ptrace' in self.d.log_text():
                raise Skip('gdb may not trace here: %s'
                           % self.d.log_text()[-300:])
            raise

    def release(self):
        if not self.released and self.d.proc.poll() is None:
            self.released = True
            self.d.proc.stdin.write(b'delete\ncontinue -a\n')
            self.d.proc.stdin.flush()

    def unmount(self):
        subprocess.run(['fusermount3', '-u', self.w.mnt], check=True)
        self.d.proc.stdin.close()
        self.d.wait_exit(0, 'gdb after the unmount')


def lookup(w, name):
    """A lookup of by-doc/NAME on a thread of its own: (thread, done event)."""
    done = threading.Event()
    p = os.path.join(w.mnt, 'by-doc', name)
    t = threading.Thread(target=lambda: (os.path.exists(p), done.set()))
    t.start()
    return t, done


def lookup_waited(g, name):
    """Whether a lookup waited 2 s and more while g holds its thread; g is
    released either way."""
    t, done = lookup(g.w, name)
    waited = not done.wait(2)
    g.release()
    t.join()
    return waited


@test
def test_status_quick_after_a_change(w):
    """`cat status` after one new document in a tree of 20,000 short
    near-duplicates: the removal plan it counts was made again from every
    document's links, each verified again against the sketches, where only
    its keepers' decide anything (2.0 s here, now 0.06 s)."""
    if VALGRIND:
        raise Skip('a bound in seconds means nothing under valgrind')
    with source_in_memory(w):
        n = 20000
        short_near_duplicates(w.src, n)
        d = w.daemon()
        converged(w, n)
        new = os.path.join(w.src, 'd000', 'new.txt')
        with open(os.path.join(w.src, 'd000', 'n000001.txt')) as f:
            text = f.read()
        with open(new, 'w') as f:
            f.write(text.replace(' ', ' extra ', 1))
        worst = 0.0
        end = time.monotonic() + 60
        while time.monotonic() < end:
            t = time.monotonic()
            st = read_status(w.mnt)
            worst = max(worst, time.monotonic() - t)
            if st.get('converged') == 'yes' and status_int(st, 'documents') == n + 1:
                break
            time.sleep(0.05)
        print('worst status read %.3f s' % worst)
        check(status_int(st, 'documents') == n + 1, 'the new document never came: %s' % st)
        check(worst < 0.5, 'a read of status took %.2f s after one new document '
              'among %d short near-duplicates' % (worst, n))
        d.umount()


@test
def test_lookups_never_wait_on_status(w):
    """While status is read in a loop and documents come in, no lookup or
    listing of the mount waits more than half a second. The removal plan
    that status counts takes seconds on 20,000 short payslips (each is a
    keeper: their figures differ); made under the tree's lock, held shared,
    it made the first writer queued for that lock (the watcher adding a
    document, a save) wait, and every lookup behind that writer (1.9 s
    here, now 0.05 s)."""
    if VALGRIND:
        raise Skip('a bound in seconds means nothing under valgrind')
    with source_in_memory(w):
        n = 20000
        short_near_duplicates(w.src, n, figures=True)
        d = w.daemon()
        converged(w, n)
        with open(os.path.join(w.src, 'd000', 'n000001.txt')) as f:
            text = f.read()
        stop = time.monotonic() + 4
        status_worst = [0.0]

        def reader():
            while time.monotonic() < stop:
                status_worst[0] = max(status_worst[0], timed(
                    lambda: read_file(os.path.join(w.mnt, 'status'))))

        def writer():
            i = 0
            while time.monotonic() < stop:
                with open(os.path.join(w.src, 'd000', 'new%03d.txt' % i), 'w') as f:
                    f.write(text.replace(' ', ' extra%d ' % i, 1))
                i += 1
                time.sleep(0.3)

        threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
        for t in threads:
            t.start()
        dirs = sorted(os.listdir(os.path.join(w.mnt, 'by-doc')))
        worst, what, i = 0.0, None, 0
        try:
            while time.monotonic() < stop:
                # A name never looked up, and a listing not yet cached: each
                # is asked of the daemon.
                p = os.path.join(w.mnt, 'by-doc', 'missing%d' % i)
                dt = timed(lambda: os.path.exists(p))
                if dt > worst:
                    worst, what = dt, 'a lookup of ' + p
                p = os.path.join(w.mnt, 'by-doc', dirs[i % len(dirs)])
                dt = timed(lambda: os.listdir(p))
                if dt > worst:
                    worst, what = dt, 'a listing of ' + p
                i += 1
                time.sleep(0.02)
        finally:
            for t in threads:
                t.join()
        print('worst wait %.3f s (%s) in %d rounds; worst status read %.2f s'
              % (worst, what, i, status_worst[0]))
        check(worst < 0.5, '%s waited %.2f s while status was read (a read took up to '
              '%.2f s)' % (what, worst, status_worst[0]))
        d.umount()


@test
def test_lookups_never_wait_on_a_save(w):
    """A lookup while the daemon saves its state and a new document comes
    in. The save reads every node under the tree's lock, held shared (some
    200 ms at 100,000 documents); the watcher, come to add the document,
    queued for the lock behind it, and every lookup queued behind the
    watcher (0.07 to 0.26 s at 60,000 to 100,000 documents). The daemon
    runs under gdb, non-stop, its save held at the first entry it writes,
    so that this happens every time: the lookup waited for as long as the
    save was held; now it does not, and the document comes after the
    save."""
    g = HeldInGdb(w, 'break im_state_writer_add')
    n = 200
    short_near_duplicates(w.src, n)
    try:
        g.d.start()
        g.wait_held('the save')
        t, done = lookup(w, 'missing0')
        check(done.wait(5), 'a lookup waited on the held save with no update queued')
        t.join()
        with open(os.path.join(w.src, 'new.txt'), 'w') as f:
            f.write('a new document at the top of the tree, come during a save\n')
        time.sleep(0.5)  # the watcher reads the event and asks for the lock
        check(not lookup_waited(g, 'missing1'),
              'a lookup waited (2 s and more) for a held save, behind the '
              'watcher come to add a document')
    finally:
        g.release()
    converged(w, n + 1)
    g.unmount()


@test
def test_lookups_never_wait_on_adopting_a_save(w):
    """A lookup while the daemon takes the state it just saved as its cache
    of whole signatures (fullsigs.h): it lets go of the documents signed
    since the last save that the file now holds, each looked up in it.
    That was done under the tree's lock held exclusively: 0.3 s with every
    reader waiting after the first scan of 100,000 documents. The daemon
    runs under gdb, non-stop, held at the first of those lookups, so that
    this happens every time: the lookup waited for as long as it was held;
    now it does not."""
    g = HeldInGdb(w, 'break im_state_find if '
                  '$_any_caller_matches("^fullsigs_(adopt|mark)$", 3)',
                  python=True)
    _, docs, _ = make_tree(w.src, w.corpus)
    try:
        g.d.start()
        g.wait_held('the adoption')
        check(not lookup_waited(g, 'missing'),
              'a lookup waited (2 s and more) for the cache of a save being '
              'taken')
    finally:
        g.release()
    converged(w, len(docs))
    g.unmount()


@test
def test_lookups_never_wait_on_a_deep_look(w):
    """A lookup while the watcher takes in a directory moved into SOURCE.
    Such a directory (or one whose names changed during a scan, read again
    after it: SOURCE itself if they changed there) is looked at whole, and
    what the tree holds below it that the look did not find leaves. That
    search reads every node below; it ran under the tree's lock held
    exclusively (116 ms of 176 ms with every reader waiting, the root of
    100,000 documents read again after a scan). The daemon runs under gdb,
    non-stop, held in that search, so that this happens every time: the
    lookup waited for as long as it was held; now it does not."""
    g = HeldInGdb(w, 'break tree_path if '
                  '$_any_caller_matches("^(sweep_below|find_gone)$", 2)',
                  python=True)
    _, docs, _ = make_tree(w.src, w.corpus)
    try:
        g.d.start()
        converged(w, len(docs))
        incoming = os.path.join(w.top, 'incoming')
        os.mkdir(incoming)
        for i in range(2):
            with open(os.path.join(incoming, 'moved%d.txt' % i), 'w') as f:
                f.write(w.corpus.document())
        os.rename(incoming, os.path.join(w.src, 'incoming'))
        g.wait_held('the deep look')
        check(not lookup_waited(g, 'missing'),
              'a lookup waited (2 s and more) for the search below a '
              'directory moved in')
    finally:
        g.release()
    converged(w, len(docs) + 2)
    g.unmount()


def lookup_waits_on_the_plan(w, ask, what):
    """Whether a lookup waited while ask(n000002's by-doc directory) made
    the removal plan again after a change, with a new document coming in.
    The daemon runs under gdb, non-stop, held as that plan is made (the
    second time: the first is of a first listing), so that this happens
    every time."""
    g = HeldInGdb(w, 'break im_plan_from_index if $_any_caller_matches('
                  '"^(redundant_find|redundant_foreach|redundant_prepare)$", 4)'
                  '\nignore 1 1', python=True)
    n = 200
    short_near_duplicates(w.src, n, figures=True)
    by_doc = os.path.join(w.mnt, 'by-doc')
    with open(os.path.join(w.src, 'd000', 'n000001.txt')) as f:
        text = f.read()

    def add(i):
        with open(os.path.join(w.src, 'd000', 'new%d.txt' % i), 'w') as f:
            f.write(text.replace(' ', ' extra%d ' % i, 1))
    try:
        g.d.start()
        converged(w, n)
        check('keeper' not in os.listdir(os.path.join(by_doc, 'd000', 'n000001.txt')),
              'a payslip has a keeper')
        # A change, then the plan found old; status is not read, which
        # would make the plan outside the lock.
        add(1)
        poll(lambda: os.path.exists(os.path.join(by_doc, 'd000', 'new1.txt')),
             'the first new document in by-doc/')
        t = threading.Thread(target=ask, args=(
            os.path.join(by_doc, 'd000', 'n000002.txt'),))
        t.start()
        g.wait_held('the plan, for %s after a change' % what)
        add(2)
        time.sleep(0.5)  # the watcher reads the event and asks for the lock
        waited = lookup_waited(g, 'missing')
        t.join()
    finally:
        g.release()
    converged(w, n + 2)
    g.unmount()
    return waited


@test
def test_lookups_never_wait_on_a_keeper(w):
    """A lookup while a document's by-doc directory is listed after a change
    and a new document comes in. Its keeper is looked up in the removal
    plan, which the change made old: it was made again under the tree's
    lock held shared (4.9 s on 20,000 short payslips, each a keeper), the
    watcher, come to add the document, queued behind it, and every lookup
    behind the watcher. The lookup waited for as long as the plan was held
    in gdb; now it does not."""
    check(not lookup_waits_on_the_plan(w, os.listdir, 'a listing of a document'),
          'a lookup waited (2 s and more) for the removal plan made for a '
          'listing of a document, behind the watcher come to add one')


@test
def test_lookups_never_wait_on_redundant(w):
    """The same with a listing of redundant/ (each of its entries is in the
    plan)."""
    def ask(doc):
        os.listdir(os.path.join(w.mnt, 'redundant'))
    check(not lookup_waits_on_the_plan(w, ask, 'a listing of redundant/'),
          'a lookup waited (2 s and more) for the removal plan made for a '
          'listing of redundant/, behind the watcher come to add a document')


@test
def test_lookups_never_wait_on_a_keeper_xattr(w):
    """The same with getfattr -n user.imatch.keeper of a document's by-doc
    directory."""
    def ask(doc):
        with contextlib.suppress(OSError):  # no keeper: ENODATA
            os.getxattr(doc, 'user.imatch.keeper')
    check(not lookup_waits_on_the_plan(w, ask, 'user.imatch.keeper'),
          'a lookup waited (2 s and more) for the removal plan made for '
          'user.imatch.keeper, behind the watcher come to add a document')


@test
def test_lookups_never_wait_on_listing_xattrs(w):
    """The same with getfattr -d (listxattr) of a document's by-doc
    directory: whether user.imatch.keeper and .similarity exist is asked of
    the plan too."""
    def ask(doc):
        os.listxattr(doc)
    check(not lookup_waits_on_the_plan(w, ask, 'listxattr'),
          'a lookup waited (2 s and more) for the removal plan made for '
          'listxattr of a document, behind the watcher come to add one')



def plan_made_under_the_lock(w, ask, what):
    """Whether a lookup waited while ask(n000002's by-doc directory) made
    the removal plan again, under the tree's lock, because a change landed
    while it was first made for that operation. The daemon runs under gdb,
    non-stop, held at each plan made for an operation (after the first
    listing's): at the first, a document comes in, and the test goes on
    once it is in the index or its writer waits apart from the lock; at a
    second one, another comes in and a lookup is made once that writer has
    asked for the lock. Markers say where each writer is, so that no step
    waits on a guess. (redundant_prepare() made the plan before the tree's
    lock was taken, until the plan was made under the lock held long.)"""
    gated = os.path.join(w.top, 'gated')
    asked = os.path.join(w.top, 'asked')
    g = HeldInGdb(
        w, 'break im_plan_from_index if $_any_caller_matches('
        '"^(redundant_find|redundant_foreach|redundant_prepare)$", 4)\n'
        'ignore 1 1\nset breakpoint pending on\n'
        'break pthread_cond_wait if $_any_caller_matches("^tree_wrlock$", 4)\n'
        'commands 2\nsilent\nshell touch %s\ncontinue\nend\n'
        'break pthread_rwlock_wrlock if $_any_caller_matches("^tree_wrlock$", 4)\n'
        'commands 3\nsilent\nshell touch %s\ncontinue\nend' % (gated, asked),
        python=True)
    n = 200
    short_near_duplicates(w.src, n, figures=True)
    by_doc = os.path.join(w.mnt, 'by-doc')
    with open(os.path.join(w.src, 'd000', 'n000001.txt')) as f:
        text = f.read()

    def add(i):
        for m in (gated, asked):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(m)
        with open(os.path.join(w.src, 'd000', 'new%d.txt' % i), 'w') as f:
            f.write(text.replace(' ', ' extra%d ' % i, 1))
    try:
        g.d.start()
        converged(w, n)
        check('keeper' not in os.listdir(os.path.join(by_doc, 'd000', 'n000001.txt')),
              'a payslip has a keeper')
        # Status is not read: it would make the plan outside the operation.
        add(1)
        poll(lambda: (os.path.lexists(os.path.join(by_doc, 'd000', 'new1.txt', 'cluster')),
                      None), 'the first new document in the index')
        done = threading.Event()
        t = threading.Thread(target=lambda: (
            ask(os.path.join(by_doc, 'd000', 'n000002.txt')), done.set()))
        t.start()
        g.wait_held('the plan, for %s' % what)
        add(2)
        poll(lambda: (os.path.lexists(os.path.join(by_doc, 'd000', 'new2.txt', 'cluster'))
                      or os.path.exists(gated), None),
             'the second new document in the index, or its writer waiting apart')
        os.unlink(g.held)
        g.d.proc.stdin.write(b'continue -a\n')
        g.d.proc.stdin.flush()
        poll(lambda: (done.is_set() or os.path.exists(g.held), None),
             'the answer to %s, or the plan made again' % what)
        waited = False
        if not done.is_set():
            add(3)
            poll(lambda: (os.path.exists(gated) or os.path.exists(asked), None),
                 'the writer of a third document asking for the lock')
            waited = lookup_waited(g, 'missing')
        t.join()
    finally:
        g.release()
    converged(w, n + 3 if waited else n + 2)
    g.unmount()
    return waited


@test
def test_lookups_never_wait_on_a_keeper_made_again(w):
    """A lookup while a document's by-doc directory is listed and changes
    keep landing: its keeper asks for the removal plan, which was made
    outside the tree's lock and, a change having landed meanwhile, made
    again under it (held shared), with the watcher queued behind it and
    every lookup behind the watcher (under a change every 10 ms on 3,700
    documents: listings up to 4.5 s, readlink of keeper up to 6.8 s). Now
    the plan is made under the lock held as a long reader, which no change
    can pass, so it is made once and lookups go on."""
    check(not plan_made_under_the_lock(w, os.listdir, 'a listing of a document'),
          'a lookup waited (2 s and more) for the removal plan made again '
          'under the lock for a listing of a document, a change having '
          'landed while it was made')


@test
def test_lookups_never_wait_on_a_keeper_link_made_again(w):
    """The same with readlink of by-doc/DOC/keeper."""
    def ask(doc):
        with contextlib.suppress(OSError):  # a payslip: no keeper
            os.readlink(os.path.join(doc, 'keeper'))
    check(not plan_made_under_the_lock(w, ask, 'readlink of keeper'),
          'a lookup waited (2 s and more) for the removal plan made again '
          'under the lock for readlink of keeper, a change having landed '
          'while it was made')


@test
def test_lookups_never_wait_on_redundant_made_again(w):
    """The same with a listing of redundant/."""
    def ask(doc):
        os.listdir(os.path.join(w.mnt, 'redundant'))
    check(not plan_made_under_the_lock(w, ask, 'a listing of redundant/'),
          'a lookup waited (2 s and more) for the removal plan made again '
          'under the lock for a listing of redundant/, a change having '
          'landed while it was made')


@test
def test_plan_waits_for_the_watchers_run_of_changes(w):
    """A document's by-doc directory listed while the watcher is applying a
    run of changes, after one of them made the removal plan old. The
    watcher lets the tree's lock go between two changes (to look at the
    disk), and the listing made the plan there, under the lock held long:
    the watcher then waited for that plan before its next change, and for
    another one before the one after, as long as operations asking for the
    plan kept coming (scripts looping on keeper links while 100 files a
    second changed on 3,700 documents: new files took 4-8 s to show in
    by-doc/, against 0.2 s). Now such an operation first waits for the run
    to end (a while at most). The daemon runs under gdb, non-stop, the
    watcher held as it looks at a new file; gdb writes down, in order,
    whether the listing waited for the watcher and when it made the plan."""
    order = os.path.join(w.top, 'order')
    g = HeldInGdb(
        w, 'break im_open_beneath if $_any_caller_matches("^(look|look_and_apply)$", 3)\n'
        'break im_plan_from_index if $_any_caller_matches('
        '"^(redundant_find|redundant_foreach)$", 4)\n'
        'commands 2\nsilent\nshell echo planned >> %s\ncontinue\nend\n'
        'set breakpoint pending on\nbreak tree_wait_batch\n'
        'commands 3\nsilent\nshell echo waited >> %s\ncontinue\nend' % (order, order),
        python=True)
    n = 200
    short_near_duplicates(w.src, n, figures=True)
    by_doc = os.path.join(w.mnt, 'by-doc')
    doc = os.path.join(by_doc, 'd000', 'n000002.txt')
    with open(os.path.join(w.src, 'd000', 'n000001.txt')) as f:
        text = f.read()

    def said():
        with contextlib.suppress(FileNotFoundError):
            with open(order) as f:
                return f.read().split()
        return []
    try:
        g.d.start()
        converged(w, n)
        os.listdir(doc)  # the plan made, and kept from now on
        # A change the plan is made of; status is not read, which would
        # make the plan outside the lock.
        os.unlink(os.path.join(w.src, 'd000', 'n000003.txt'))
        poll(lambda: (not os.path.lexists(os.path.join(by_doc, 'd000', 'n000003.txt')),
                      None), 'the removed document gone from by-doc/')
        with contextlib.suppress(FileNotFoundError):
            os.unlink(order)
        with open(os.path.join(w.src, 'd000', 'new.txt'), 'w') as f:
            f.write(text.replace(' ', ' extra ', 1))
        g.wait_held('the watcher looking at a new file')
        t = threading.Thread(target=os.listdir, args=(doc,))
        t.start()
        poll(lambda: (said(), None), 'the listing to make the plan or wait for the watcher')
        first = said()[0]
        g.release()
        t.join()
        poll(lambda: (os.path.lexists(os.path.join(by_doc, 'd000', 'new.txt', 'file')),
                      None), 'the new document in by-doc/')
    finally:
        g.release()
    converged(w, n)
    g.unmount()
    check(first == 'waited', 'a listing of a document made the removal plan while '
          'the watcher was between two changes of one run, without waiting for the '
          'run to end: the watcher waits for a plan per change')


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
