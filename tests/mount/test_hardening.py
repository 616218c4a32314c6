#!/usr/bin/env python3
"""Never wrong, never leaking: the daemon under renames, swaps, other users,
odd files and restarts (issue 12). One test per defect the issue lists; each
failed on the daemon before the fix.

    test_hardening.py IMATCHFS IMATCH [TEST...]
    test_hardening.py --list

Same habits as test_mount.py (tests/mount/util.py): real mounts in the
foreground with auto_unmount, polling with a deadline, always unmounting.
Tests that act as another user or remount read-only need root and skip
otherwise; the other user is created for the test (useradd) when missing.
"""

import ctypes
import ctypes.util
import errno
import grp
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (DEADLINE, Fail, Skip, by_doc_documents, by_doc_path, check,  # noqa: E402
                  expect_errno, fusermount,
                  cluster_sets, encode_member, fmt_clusters, in_proc_mounts,
                  is_mounted, make_tree, poll, read_status, run_tests, scan, status_int,
                  write)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


# ---- Shared steps -----------------------------------------------------------------

def documents_in(src):
    out = set()
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith('.')]
        for f in files:
            p = os.path.join(root, f)
            if not f.startswith('.') and os.path.isfile(p) and not os.path.islink(p):
                out.add(os.path.relpath(p, src))
    return out


def converged(w, what):
    """Poll until status says `converged: yes`; then, at once (no more
    polling), the view must hold exactly the tree's documents and the clusters
    `imatch scan` prints: "converged" must mean it."""
    poll(lambda: (read_status(w.mnt).get('converged') == 'yes', read_status(w.mnt)),
         'status to say converged: yes ' + what)
    want_docs = documents_in(w.src)
    docs = by_doc_documents(w.mnt)
    have = cluster_sets(w.mnt)
    want = scan(w.imatch, w.src, ['--lexicon', os.path.join(w.state, 'lexicon')])
    missing, extra = sorted(want_docs - docs), sorted(docs - want_docs)
    check(not missing and not extra,
          'status says converged %s, but by-doc/ misses %d documents (%s) and has %d '
          'extra (%s)' % (what, len(missing), missing[:3], len(extra), extra[:3]))
    check(have == want, 'status says converged %s, but the view has\n%s\nand imatch scan\n%s'
          % (what, fmt_clusters(have), fmt_clusters(want)))


def wait_converged_view(w, what):
    """Poll until by-doc/ and clusters/ equal the truth (no status involved)."""
    want = scan(w.imatch, w.src, ['--lexicon', os.path.join(w.state, 'lexicon')])
    want_docs = documents_in(w.src)

    def ok():
        docs = by_doc_documents(w.mnt)
        have = cluster_sets(w.mnt)
        return docs == want_docs and have == want, (len(docs), len(want_docs), len(have),
                                                     len(want))
    poll(ok, 'the view to equal the tree and imatch scan ' + what)


def family(w, rel_a, rel_b, seed_text=None):
    """Write a document and a reformatted near-duplicate of it."""
    text = seed_text or w.corpus.document()
    write(os.path.join(w.src, rel_a), text)
    write(os.path.join(w.src, rel_b), w.corpus.near_duplicate(text))
    return frozenset([rel_a, rel_b])


def live(w, d=None, docs=None):
    def ok():
        st = read_status(w.mnt)
        done = status_int(st, 'pending') == 0 and st.get('phase') == 'live'
        if docs is not None:
            done = done and status_int(st, 'documents') == docs
        return done, st
    return poll(ok, 'the daemon to be live')


def cluster_targets(w):
    """Clusters as frozensets of their symlinks' targets, relative to SOURCE."""
    out = set()
    top = os.path.join(w.mnt, 'clusters')
    for sig in os.listdir(top):
        targets = []
        for m in os.listdir(os.path.join(top, sig)):
            try:
                targets.append(os.path.relpath(os.readlink(os.path.join(top, sig, m)),
                                               w.src))
            except OSError:
                targets.append(m)  # a target longer than PATH_MAX cannot be read
        out.add(frozenset(targets))
    return out


def in_cluster(w, rel):
    return any(rel in c for c in cluster_sets(w.mnt))


# ---- 1. Renames right after writes; "converged" means it ---------------------------

@test
def test_rename_right_after_writes(w):
    """Directories filled with documents and renamed at once, their parents
    moved between depths right after: every document appears under its final
    name, and `converged: yes` in status means the view equals imatch scan."""
    make_tree(w.src, w.corpus)
    fam = family(w, 'base/a.txt', 'base/b.txt')
    texts = [w.corpus.document(words=80).encode() for _ in range(100)]
    d = w.daemon()
    live(w, d)
    src = w.src
    for p in ('p0', 'p1', 'p2'):
        os.mkdir(os.path.join(src, p))
    parents = ['p0', 'p1', 'p2']
    for r in range(12):
        tmp = os.path.join(src, 'incoming%d' % r)
        os.mkdir(tmp)
        for i, t in enumerate(texts[:50]):
            with open(os.path.join(tmp, 'n%02d-%d.txt' % (i, r)), 'wb') as f:
                f.write(t)
        k = r % 3
        os.rename(tmp, os.path.join(src, parents[k], 'batch%d' % r))
        new = os.path.join('q%d' % r, parents[k].replace('/', '_'))
        os.mkdir(os.path.join(src, 'q%d' % r))
        os.rename(os.path.join(src, parents[k]), os.path.join(src, new))
        parents[k] = new
    wait_converged_view(w, 'after 600 documents written into directories renamed at once')
    converged(w, 'after the renames')
    check(fam in cluster_sets(w.mnt), 'the base family left the view')
    d.umount()
    d.check_log()


@test
def test_renames_during_a_rescan_chain_none(w):
    """Files renamed all the time while the daemon rescans (for a new
    .imatchignore here; also after a lexicon rebuild): a rescan that saw
    names change asked for another, which saw them change too, so the
    daemon walked the whole tree again and again for as long as the renames
    went on (tools/stress/churn.py --short: 2 to 19 rescans). The
    directories where names changed are read again instead, in order with
    the events: one rescan, and the view equals imatch scan after."""
    make_tree(w.src, w.corpus)
    # Enough files for a rescan to take a moment: renames meet every one.
    for k in range(20):
        os.mkdir(os.path.join(w.src, 'many%d' % k))
        for i in range(100):
            write(os.path.join(w.src, 'many%d' % k, 's%d.txt' % i), w.corpus.short())
    spin = os.path.join(w.src, 'spin')
    os.mkdir(spin)
    names = []
    for i in range(20):
        names.append('f%d.txt' % i)
        write(os.path.join(spin, names[-1]), w.corpus.document(words=80))
    d = w.daemon()
    live(w, d)
    write(os.path.join(w.src, '.imatchignore'), '# nothing left out\n')
    serial = 0
    start = time.monotonic()
    while time.monotonic() < start + 3:
        # 2,000 a second: more overflowed the inotify queue (a rescan, rightly).
        if serial > (time.monotonic() - start) * 2000:
            time.sleep(0.001)
            continue
        i = serial % len(names)
        serial += 1
        new = 'f%d.txt' % (serial + len(names))
        os.rename(os.path.join(spin, names[i]), os.path.join(spin, new))
        names[i] = new
    converged(w, 'after %d renames' % serial)
    st = read_status(w.mnt)
    check(status_int(st, 'rescans') <= 2,
          '%s rescans for one .imatchignore while files were renamed'
          % st.get('rescans'))
    d.umount()
    d.check_log()


@test
def test_converged_not_while_events_are_applied(w):
    """A directory of 6,000 files moved into SOURCE from outside: the
    watcher reads the event, then walks the directory before it applies
    what it found. Meanwhile the event was no longer in the kernel's queue
    and nothing counted it as waiting, so status said `converged: yes`
    while by-doc/ lacked every file of the directory."""
    make_tree(w.src, w.corpus)
    big = os.path.join(w.top, 'outside', 'big')
    os.makedirs(big)
    for k in range(60):
        os.mkdir(os.path.join(big, 'd%d' % k))
        for i in range(100):
            write(os.path.join(big, 'd%d' % k, 's%d.txt' % i), w.corpus.short())
    d = w.daemon()
    live(w, d)
    os.rename(big, os.path.join(w.src, 'big'))
    # As fast as a script polls: the window is the walk of the directory.
    start = time.monotonic()
    while read_status(w.mnt).get('converged') != 'yes':
        check(time.monotonic() < start + DEADLINE,
              'status never said converged after the move')
    missing = documents_in(w.src) - by_doc_documents(w.mnt)
    check(not missing, 'status said converged: yes %.3f s after the move, but by-doc/ '
          'missed %d documents (%s)' % (time.monotonic() - start, len(missing),
                                        sorted(missing)[:3]))
    converged(w, 'after the move')
    d.umount()
    d.check_log()


# ---- 2. Escape through a swapped symlink --------------------------------------------

AT_FDCWD = -100
RENAME_EXCHANGE = 2


@test
def test_symlink_swap_never_escapes(w):
    """race/ is exchanged with a symlink to a directory outside SOURCE while
    its files change: no file outside is ever opened (inotify on it), no
    outside file shows as a near-duplicate of its twin inside, and the view
    ends equal to imatch scan."""
    libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
    outside = os.path.join(w.top, 'outside')
    race, lnk = os.path.join(w.src, 'race'), os.path.join(w.src, 'race.lnk')
    os.mkdir(outside)
    names = ['f%02d.txt' % i for i in range(10)]
    inside = {}
    for n in names:
        inside[n] = w.corpus.document().encode()
        write(os.path.join(race, n), inside[n])
        secret = w.corpus.document()
        write(os.path.join(outside, n), secret)
        write(os.path.join(w.src, 'twins', n), secret)
    os.symlink(outside, lnk)
    make_tree(w.src, w.corpus)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    check(fd >= 0 and libc.inotify_add_watch(fd, os.fsencode(outside), 0x1 | 0x20) >= 0,
          'inotify on the outside directory')
    d = w.daemon()
    live(w, d)
    real = race
    end = time.monotonic() + 4
    seen = []
    swaps = 0
    while time.monotonic() < end:
        if libc.renameat2(AT_FDCWD, os.fsencode(race), AT_FDCWD, os.fsencode(lnk),
                          RENAME_EXCHANGE):
            raise Skip('renameat2(RENAME_EXCHANGE) is not supported here')
        swaps += 1
        real = lnk if real == race else race
        for n in names[swaps % 3::3]:
            write(os.path.join(real, n), inside[n])
        if swaps % 200 == 0:
            seen += [t for t in names
                     if os.listdir(os.path.join(w.mnt, 'by-doc', 'twins', t, 'dupes'))]
    if real != race:
        libc.renameat2(AT_FDCWD, os.fsencode(race), AT_FDCWD, os.fsencode(lnk),
                       RENAME_EXCHANGE)
    try:
        opened = os.read(fd, 65536)
    except BlockingIOError:
        opened = b''
    os.close(fd)
    check(not opened, 'the daemon opened files outside SOURCE (%d bytes of inotify events '
          'in %d swaps)' % (len(opened), swaps))
    check(not seen, 'the view showed outside files as near-duplicates of twins/%s' % seen[:3])
    wait_converged_view(w, 'after %d swaps' % swaps)
    d.umount()
    d.check_log()


@test
def test_exchange_keeps_both_names(w):
    """Two documents swapped by renameat2(RENAME_EXCHANGE) (as `imatch apply
    --action hardlink` puts a link in a file's place): both names stay in
    by-doc/, each with the other's near-duplicate now, and the view equals
    imatch scan. The second name used to leave the view until a restart."""
    libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
    family(w, 'x.txt', 'copies/x-copy.txt')
    family(w, 'y.txt', 'copies/y-copy.txt')
    make_tree(w.src, w.corpus)
    w.daemon()
    live(w)
    wait_converged_view(w, 'before the swap')
    x, y = os.path.join(w.src, 'x.txt'), os.path.join(w.src, 'y.txt')
    if libc.renameat2(AT_FDCWD, os.fsencode(x), AT_FDCWD, os.fsencode(y),
                      RENAME_EXCHANGE):
        raise Skip('renameat2(RENAME_EXCHANGE) is not supported here')
    wait_converged_view(w, 'after x.txt and y.txt were swapped')
    poll(lambda: os.listdir(by_doc_path(w.mnt, 'x.txt', 'dupes')) ==
         [encode_member('copies/y-copy.txt')],
         'x.txt to hold y.txt\'s text, and its near-duplicate')


# ---- 3. Other users ---------------------------------------------------------------------

USER = 'imatchfs-test'
GROUP = 'imatchfs-test-g'


def test_user():
    """(uid, gid, extra gid) of an unprivileged user made for these tests."""
    if os.geteuid() != 0:
        raise Skip('needs root to create and act as another user')
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        r = subprocess.run(['groupadd', '-r', GROUP], capture_output=True, text=True)
        if r.returncode != 0:
            raise Skip('groupadd %s failed: %s' % (GROUP, r.stderr.strip()))
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        r = subprocess.run(['useradd', '-r', '-M', '-s', '/usr/sbin/nologin', USER],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Skip('useradd %s failed: %s' % (USER, r.stderr.strip()))
        pw = pwd.getpwnam(USER)
    return pw.pw_uid, pw.pw_gid, grp.getgrnam(GROUP).gr_gid


WALK = r'''
import os, sys, json
m = sys.argv[1]
seen = []
def walk(p, depth=0):
    try:
        names = os.listdir(p)
    except OSError as e:
        return
    for n in names:
        q = os.path.join(p, n)
        seen.append(os.path.relpath(q, m))
        if os.path.islink(q):
            try:
                seen.append('-> ' + os.readlink(q))
            except OSError:
                pass
        elif os.path.isdir(q):
            try:
                for x in os.listxattr(q):
                    seen.append('xattr %s %s' % (x, os.getxattr(q, x).decode()))
            except OSError:
                pass
            walk(q, depth + 1)
        elif n in ('similarity', 'signatures'):
            try:
                seen.append(open(q, errors='replace').read())
            except OSError:
                pass
clusters = {}
try:
    for c in os.listdir(os.path.join(m, 'clusters')):
        try:
            clusters[c] = sorted(os.listdir(os.path.join(m, 'clusters', c)))
        except OSError as e:
            clusters[c] = 'error ' + e.strerror
except OSError as e:
    clusters = 'error ' + e.strerror
walk(m)
print(json.dumps({'seen': seen, 'clusters': clusters}))
'''


def as_user(uid, gid, groups, code, *args):
    import json

    def drop():
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)
    r = subprocess.run(['/usr/bin/python3', '-c', code] + list(args), preexec_fn=drop,
                       capture_output=True, timeout=DEADLINE * 2)
    check(r.returncode == 0, 'as uid %d: %s' % (uid, r.stderr.decode(errors='replace')))
    return json.loads(r.stdout)


@test
def test_other_users_see_only_what_they_could_reach(w):
    """With allow_other (with and without default_permissions), a user who
    cannot enter priv/ learns no name below it through clusters/, by-doc/,
    dupes/, dup-dirs/, similarity or a symlink target; clusters and groups of
    folders with fewer than two members they could read are hidden. A member of the group that may enter
    team/ (a supplementary group) sees team/'s members."""
    uid, gid, team_gid = test_user()
    os.chmod(w.top, 0o755)
    os.chmod(w.src, 0o755)
    base, _, _ = make_tree(os.path.join(w.src, 'pub'), w.corpus)
    base = {frozenset('pub/' + m for m in c) for c in base}
    pub = family(w, 'pub/a.txt', 'pub/a-copy.txt')                 # visible to all
    family(w, 'pub/b.txt', 'priv/b-secret-name.txt')               # 1 visible member
    family(w, 'priv/c1-secret.txt', 'priv/c2-secret.txt')          # 0 visible members
    team = family(w, 'pub/t.txt', 'team/t-team.txt')               # visible to the group
    fam_closed = family(w, 'pub/d.txt', 'pub/d-closed.txt')        # one file 0600
    # A copied folder (dup-dirs/) with one copy out of reach.
    family(w, 'pub/proj/x.txt', 'priv/proj-secret/x.txt')
    family(w, 'pub/proj/y.txt', 'priv/proj-secret/y.txt')
    for root, dirs, files in os.walk(w.src):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
        for n in files:
            os.chmod(os.path.join(root, n), 0o644)
    os.chmod(os.path.join(w.src, 'priv'), 0o700)
    os.chown(os.path.join(w.src, 'team'), 0, team_gid)
    os.chmod(os.path.join(w.src, 'team'), 0o750)
    os.chmod(os.path.join(w.src, 'pub/d-closed.txt'), 0o600)
    # The hidden copy is the keeper of the visible one: by-doc/pub/b.txt's
    # keeper and its user.imatch.keeper must not name it.
    os.utime(os.path.join(w.src, 'priv/b-secret-name.txt'), (1_500_000_000, 1_500_000_000))
    for opts in (['allow_other'], ['allow_other', 'default_permissions']):
        d = w.daemon(opts=opts)
        live(w, d)
        root_view = cluster_sets(w.mnt)
        check(len(root_view) == 7 + len(base), 'root sees %d clusters with %s, not:\n%s'
              % (7 + len(base), opts, fmt_clusters(root_view)))
        check(os.listdir(os.path.join(w.mnt, 'dup-dirs')) == ['priv%2Fproj-secret'],
              'root sees the copied folder in dup-dirs/: %s'
              % os.listdir(os.path.join(w.mnt, 'dup-dirs')))
        for groups, want in (([], {pub} | base), ([team_gid], {pub, team} | base)):
            got = as_user(uid, gid, groups, WALK, w.mnt)
            # SOURCE is readable: the names of priv/ and team/ are no
            # secret (ls SOURCE shows them), but nothing below them is.
            known = ('by-doc/priv', 'by-doc/team')
            leaks = [s for s in got['seen']
                     if ('priv' in s or 'secret' in s) and s not in known]
            if not groups:
                leaks += [s for s in got['seen'] if 'team' in s and s not in known]
            # pub/ is readable: the name of its 0600 file is no secret
            # (ls pub shows it), but nothing of or about the file is.
            leaks += [s for s in got['seen']
                      if 'd-closed' in s and s != 'by-doc/pub/d-closed.txt']
            check(not leaks, 'with -o %s, user %s (groups %s) learns private names: %s'
                  % (','.join(opts), USER, groups, leaks[:5]))
            # One folder of the group alone would tell of the hidden copy.
            groups_seen = [s for s in got['seen'] if s.startswith('dup-dirs/')]
            check(not groups_seen, 'with -o %s, user %s sees groups of folders it '
                  'cannot reach: %s' % (','.join(opts), USER, groups_seen))
            check(isinstance(got['clusters'], dict), 'clusters/ as the user: %s'
                  % got['clusters'])
            seen = {frozenset(m.replace('%2F', '/') for m in ms)
                    for ms in got['clusters'].values() if isinstance(ms, list)}
            check(seen == want, 'with -o %s, user %s (groups %s) sees clusters\n%s\nwanted\n%s'
                  % (','.join(opts), USER, groups, fmt_clusters(seen), fmt_clusters(want)))
        d.umount()
        d.check_log()
    del fam_closed


DOC_VIEW = r'''
import errno, json, os, sys
m, rel = sys.argv[1], sys.argv[2]
d = os.path.join(m, 'by-doc', rel)
out = {'names': sorted(os.listdir(d))}
try:
    out['cluster'] = os.readlink(os.path.join(d, 'cluster'))
except OSError as e:
    out['cluster'] = errno.errorcode[e.errno]
p = os.path.join(d, 'similarity')
out['sims_size'] = os.stat(p).st_size
with open(p, 'rb') as f:
    out['sims'] = f.read().decode()
out['sims_lstat'] = os.lstat(p).st_size
try:
    out['xattr'] = os.getxattr(d, 'user.imatch.cluster').decode()
except OSError as e:
    out['xattr'] = errno.errorcode[e.errno]
out['redundant'] = sorted(os.listdir(os.path.join(m, 'redundant')))
try:
    out['planned'] = os.readlink(os.path.join(m, 'redundant', rel.replace('/', '%2F')))
except OSError as e:
    out['planned'] = errno.errorcode[e.errno]
print(json.dumps(out))
'''


@test
def test_hidden_cluster_not_linked_from_by_doc(w):
    """With allow_other (with and without default_permissions), a user to
    whom a document's cluster is hidden (its copy is unreadable to them)
    finds no by-doc/.../cluster (ENOENT, not listed), the size of
    similarity is what they read, and the document is not in redundant/
    (its keeper is the copy they cannot read); a cluster they may see is
    linked, and root (the owner's view) sees both."""
    uid, gid, _ = test_user()
    os.chmod(w.top, 0o755)
    text = w.corpus.document()
    write(os.path.join(w.src, 'man/ls.txt'), text, mode=0o644)
    write(os.path.join(w.src, 'docs/unreadable.txt'), text, mode=0)
    # The oldest is kept: the unreadable copy, so man/ls.txt is planned.
    os.utime(os.path.join(w.src, 'docs/unreadable.txt'), (1_500_000_000, 1_500_000_000))
    family(w, 'man/cp.txt', 'docs/cp-copy.txt')
    for root, dirs, files in os.walk(w.src):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
        for n in files:
            if n != 'unreadable.txt':
                os.chmod(os.path.join(root, n), 0o644)
    os.chmod(w.src, 0o755)
    for opts in (['allow_other'], ['allow_other', 'default_permissions']):
        d = w.daemon(opts=opts)
        live(w, d, 4)
        poll(lambda: (len(cluster_sets(w.mnt)) == 2, cluster_sets(w.mnt)), 'two clusters')
        what = ', '.join(opts)
        for rel, hidden in (('man/ls.txt', True), ('man/cp.txt', False)):
            mine = json.loads(subprocess.run(
                ['/usr/bin/python3', '-c', DOC_VIEW, w.mnt, rel],
                capture_output=True, check=True).stdout)
            check(mine['cluster'].startswith('../../../clusters/') and
                  'cluster' in mine['names'] and mine['sims'] and
                  (not hidden or mine['planned'] == os.path.join(w.src, rel)) and
                  mine['sims_size'] == len(mine['sims'].encode()),
                  '-o %s: root sees by-doc/%s as %s' % (what, rel, mine))
            theirs = as_user(uid, gid, [], DOC_VIEW, w.mnt, rel)
            sizes_ok = theirs['sims_size'] == theirs['sims_lstat'] == \
                len(theirs['sims'].encode())
            check(sizes_ok, '-o %s: %s stats by-doc/%s/similarity at %d bytes '
                  'and reads %d: %r' % (what, USER, rel, theirs['sims_size'],
                                        len(theirs['sims'].encode()), theirs))
            if hidden:
                check(theirs['cluster'] == 'ENOENT' and 'cluster' not in theirs['names']
                      and theirs['sims'] == '' and theirs['xattr'] == 'ENODATA'
                      and theirs['planned'] == 'ENOENT'
                      and 'man%2Fls.txt' not in theirs['redundant'],
                      '-o %s: %s learns of the hidden copy of %s: %s'
                      % (what, USER, rel, theirs))
            else:
                check(theirs['redundant'] == ['docs%2Fcp-copy.txt'] and
                      mine['redundant'] == ['docs%2Fcp-copy.txt', 'man%2Fls.txt'],
                      '-o %s: redundant/ is %s for %s, %s for root'
                      % (what, theirs['redundant'], USER, mine['redundant']))
                del theirs['redundant'], mine['redundant']
                check(theirs == mine, '-o %s: %s sees by-doc/%s as %s, root as %s'
                      % (what, USER, rel, theirs, mine))
        d.umount()
        d.check_log()


USER_VIEW = r'''
import os, sys, json
m = sys.argv[1]
st = {}
try:
    for line in open(os.path.join(m, 'status')):
        k, _, v = line.rstrip('\n').partition(': ')
        st[k] = v
except OSError as e:
    st = {'error': e.strerror}
try:
    closed = sorted(os.listdir(os.path.join(m, 'by-doc', 'closed')))
except OSError as e:
    closed = 'error ' + e.strerror
clusters = []
try:
    for c in os.listdir(os.path.join(m, 'clusters')):
        clusters.append(sorted(os.listdir(os.path.join(m, 'clusters', c))))
except OSError:
    pass
print(json.dumps({'status': st, 'closed': closed, 'clusters': clusters}))
'''


@test
def test_unreadable_dir_later_readable(w):
    """A daemon run by an unprivileged user counts a directory it cannot read
    (walk_errors), and when the directory is made readable while mounted,
    its documents appear in the view and join their clusters."""
    uid, gid, _ = test_user()
    if not shutil.which('setpriv'):
        raise Skip('setpriv (util-linux) is needed to run the daemon as another user')
    fuse_mode = os.stat('/dev/fuse').st_mode & 0o777
    os.chmod(w.top, 0o755)
    docs = [w.corpus.document() for _ in range(6)]
    for i, text in enumerate(docs):
        write(os.path.join(w.src, 'open/doc%d.txt' % i), text)
    pair = family(w, 'open/report.txt', 'closed/report-copy.txt')
    for d in (w.src, w.mnt, w.state):
        for root, dirs, files in os.walk(d):
            for n in dirs + files:
                os.chown(os.path.join(root, n), uid, gid)
        os.chown(d, uid, gid)
    closed = os.path.join(w.src, 'closed')
    os.chown(closed, 0, 0)
    os.chmod(closed, 0o700)
    try:
        # Where /dev/fuse is root's only (containers), let the user open it.
        if fuse_mode & 0o006 != 0o006:
            os.chmod('/dev/fuse', fuse_mode | 0o006)
        d = w.daemon(wrap=['setpriv', '--reuid=%d' % uid, '--regid=%d' % gid,
                           '--clear-groups'], start=False)
        # Root cannot stat another user's mount: watch mountinfo instead.
        d.start(wait=False)
        poll(lambda: in_proc_mounts(w.mnt) or d.proc.poll() is not None,
             'the mount by %s' % USER)
        check(d.proc.poll() is None, 'imatchfs run by %s exited: %s' % (USER, d.log_text()))

        def seen():
            return as_user(uid, gid, [], USER_VIEW, w.mnt)

        def counted():
            v = seen()
            st = v['status']
            return (st.get('phase') == 'live' and st.get('pending') == '0' and
                    int(st.get('walk_errors', 0)) >= 1 and
                    int(st.get('documents', 0)) == 7), v
        v = poll(counted, 'the unreadable directory to be counted in status')
        check(v['closed'] in ([], 'error No such file or directory'),
              'by-doc/closed lists %r while unreadable' % v['closed'])
        os.chmod(closed, 0o755)
        want = sorted(m.replace('/', '%2F') for m in pair)

        def appeared():
            v = seen()
            return want in v['clusters'], v
        poll(appeared, 'the documents of a directory made readable to join the view')
        d.umount()
        d.check_log(allow=[r'closed'])
    finally:
        os.chmod('/dev/fuse', fuse_mode)


# ---- 4. Type changes ---------------------------------------------------------------------

@test
def test_type_changes_leave_at_once(w):
    """A FIFO, a socket and a symlink renamed over documents take them out of
    the view; the daemon keeps serving changes afterwards (no worker blocks
    on the FIFO)."""
    make_tree(w.src, w.corpus)
    fams = [family(w, 'x/%s.txt' % k, 'x/%s-copy.txt' % k) for k in ('fifo', 'sock', 'link')]
    d = w.daemon()
    live(w, d)
    for f in fams:
        poll(lambda: f in cluster_sets(w.mnt), 'cluster %s' % sorted(f))
    tmp = os.path.join(w.src, 'x', 'tmp')
    os.mkfifo(tmp)
    os.rename(tmp, os.path.join(w.src, 'x', 'fifo-copy.txt'))
    s = socket.socket(socket.AF_UNIX)
    s.bind(tmp)
    os.rename(tmp, os.path.join(w.src, 'x', 'sock-copy.txt'))
    os.symlink('link.txt', tmp)
    os.rename(tmp, os.path.join(w.src, 'x', 'link-copy.txt'))
    for k in ('fifo', 'sock', 'link'):
        poll(lambda: 'x/%s-copy.txt' % k not in by_doc_documents(w.mnt),
             'x/%s-copy.txt (now a %s) to leave by-doc/' % (k, k))
        poll(lambda: not in_cluster(w, 'x/%s.txt' % k), 'the %s cluster to go' % k)
    after = family(w, 'y/after.txt', 'y/after-copy.txt')
    poll(lambda: after in cluster_sets(w.mnt), 'a family written after the FIFO')
    s.close()
    wait_converged_view(w, 'after the type changes')
    d.umount()
    d.check_log()


# ---- 5. Nothing left out silently ----------------------------------------------------------

@test
def test_long_names_and_deep_paths(w):
    """A document whose member name is over 1,024 bytes and one under a
    directory whose path is over 8 KiB (made after mounting) are shown, each
    in a cluster with its near-duplicate; the deep one's symlink, whose
    target no symlink can hold, answers ENAMETOOLONG."""
    make_tree(w.src, w.corpus)
    d = w.daemon()
    live(w, d)
    long_dir = '/'.join(['L' * 250] * 5)
    fam_long = family(w, long_dir + '/' + 'n' * 200 + '.txt', 'short.txt')
    deep = os.path.join(*(['D' * 200] * 45))  # 9,045 bytes
    # Made step by step below SOURCE (paths over PATH_MAX need dir fds).
    fd = os.open(w.src, os.O_RDONLY | os.O_DIRECTORY)
    for comp in deep.split('/'):
        os.mkdir(comp, dir_fd=fd)
        nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    text = w.corpus.document()
    with open(os.open('deep.txt', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), 'w') as f:
        f.write(text)
    os.close(fd)
    write(os.path.join(w.src, 'shallow.txt'), w.corpus.near_duplicate(text))
    # Member names over 255 bytes are shortened (DESIGN §2): compare the
    # symlinks' targets, or for the deep one (over PATH_MAX) the name's end.
    poll(lambda: fam_long in cluster_targets(w), 'the document with a 1,270-byte member name')

    def deep_shown():
        for sig in os.listdir(os.path.join(w.mnt, 'clusters')):
            names = os.listdir(os.path.join(w.mnt, 'clusters', sig))
            if 'shallow.txt' in names and len(names) == 2:
                return [n for n in names if n != 'shallow.txt'][0].endswith('deep.txt')
        return False
    poll(deep_shown, 'the document below a 9 KiB path in a cluster with its copy')
    # Its symlink cannot hold a 9 KiB target: readlink says so (not EIO).
    for sig in os.listdir(os.path.join(w.mnt, 'clusters')):
        for n in os.listdir(os.path.join(w.mnt, 'clusters', sig)):
            if n.endswith('deep.txt'):
                expect_errno(lambda: os.readlink(os.path.join(w.mnt, 'clusters', sig, n)),
                             errno.ENAMETOOLONG, 'readlink of a member over PATH_MAX')
    d.umount()
    d.check_log()


# ---- 6. Operations ---------------------------------------------------------------------------

def ro_bind(path):
    """Make @path read-only by a read-only bind mount of itself (root)."""
    if os.geteuid() != 0:
        raise Skip('needs root for a read-only bind mount')
    r = subprocess.run(['mount', '--bind', path, path], capture_output=True, text=True)
    if r.returncode:
        raise Skip('mount --bind: %s' % r.stderr.strip())
    r = subprocess.run(['mount', '-o', 'remount,ro,bind', path], capture_output=True, text=True)
    if r.returncode:
        subprocess.run(['umount', path])
        raise Skip('remount,ro,bind: %s' % r.stderr.strip())


def run_refused(w, args, what, timeout=10):
    """imatchfs -f ARGS must exit non-zero within @timeout s with one line."""
    try:
        r = subprocess.run([w.imatchfs, '-f'] + args, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail('%s: still running after %d s' % (what, timeout))
    lines = [l for l in r.stderr.decode(errors='replace').splitlines() if l.strip()]
    check(r.returncode != 0, '%s: exit status 0' % what)
    check(len(lines) == 1, '%s: wanted one line on stderr, got %d:\n%s'
          % (what, len(lines), '\n'.join(lines)))
    return r.returncode, lines[0]


@test
def test_threads_capped(w):
    """-o threads past 256 is refused with one line before anything starts
    (100,000 used up the machine's process ids, and the watcher could not
    start); 256 itself mounts."""
    make_tree(w.src, w.corpus)
    rc, line = run_refused(w, ['-o', 'auto_unmount,threads=100000', w.src, w.mnt],
                           'threads=100000')
    check('threads' in line, 'the refusal does not name the option: %s' % line)
    d = w.daemon(opts=['threads=256'])
    live(w, d)
    d.umount()
    d.check_log()


@test
def test_read_only_state_dir_refused_at_once(w):
    """A read-only state directory is refused at once with one line naming
    it (it used to mount, never serve and rebuild the lexicon every 5 s)."""
    make_tree(w.src, w.corpus)
    ro_bind(w.state)
    try:
        rc, line = run_refused(w, ['-o', 'auto_unmount,state=' + w.state, w.src, w.mnt],
                               'a read-only state directory')
        check(w.state in line, 'the line does not name the state directory: %s' % line)
        check(not in_proc_mounts(w.mnt), 'mounted with a read-only state directory')
    finally:
        subprocess.run(['umount', w.state])


EXIT_STATE_CORRUPT = 3


@test
def test_corrupt_cache_exit_code(w):
    """A corrupt signature cache is refused with exit status 3, which the
    systemd unit lists in RestartPreventExitStatus (Restart=on-failure looped
    on it)."""
    make_tree(w.src, w.corpus)
    d = w.daemon()
    live(w, d)
    d.umount()
    cache = os.path.join(w.state, 'sigcache')
    data = bytearray(open(cache, 'rb').read())
    data[len(data) // 2] ^= 0xff
    open(cache, 'wb').write(bytes(data))
    rc, line = run_refused(w, ['-o', 'auto_unmount,state=' + w.state, w.src, w.mnt],
                           'a corrupt cache')
    check(rc == EXIT_STATE_CORRUPT, 'a corrupt cache exits %d, not %d: %s'
          % (rc, EXIT_STATE_CORRUPT, line))
    # A directory where the lexicon goes will not go away by itself
    # either: it exited 1, and the unit restarted the daemon every 5 s.
    os.rename(cache, cache + '.away')
    lexicon = os.path.join(w.state, 'lexicon')
    os.rename(lexicon, lexicon + '.away')
    os.mkdir(lexicon)
    rc, line = run_refused(w, ['-o', 'auto_unmount,state=' + w.state, w.src, w.mnt],
                           'a directory as the lexicon')
    check(rc == EXIT_STATE_CORRUPT, 'a directory as the lexicon exits %d, not %d: %s'
          % (rc, EXIT_STATE_CORRUPT, line))
    unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                        'packaging', 'imatchfs@.service.in')
    text = open(unit).read()
    check(re.search(r'^RestartPreventExitStatus=.*\b%d\b' % EXIT_STATE_CORRUPT, text, re.M),
          'the unit does not prevent restarts on exit status %d' % EXIT_STATE_CORRUPT)


def read_every_signature(w):
    """Read each document's `signatures` file with the cache cut short
    under the daemon; it must serve on (status readable) after each."""
    for rel in sorted(by_doc_documents(w.mnt)):
        try:
            with open(os.path.join(w.mnt, 'by-doc', rel, 'signatures')) as f:
                f.read()
        except OSError:
            pass  # its whole signatures were only in the cache
        try:
            read_status(w.mnt)
        except OSError as e:
            raise Fail('the daemon died reading %s/signatures: %s' % (rel, e))


@test
def test_cache_truncated_while_mounted(w):
    """The daemon keeps its signature cache mapped; another program cutting
    the file short in place (`: > sigcache`) took its pages away, and the
    next read of one (a document's `signatures`) killed the daemon with
    SIGBUS. Now the cache reads as empty: the daemon serves on, and its
    final save writes a sound cache that the next mount loads."""
    make_tree(w.src, w.corpus)
    d = w.daemon()
    live(w, d)
    before = cluster_sets(w.mnt)
    d.umount()
    d2 = w.daemon()
    st = live(w, d2)
    check(status_int(st, 'cached') > 0, 'nothing served from the cache: %s' % st)
    with open(os.path.join(w.state, 'sigcache'), 'r+b') as f:
        f.truncate(0)
    read_every_signature(w)
    check(cluster_sets(w.mnt) == before, 'the view changed with the cache cut')
    d2.umount()
    d3 = w.daemon()
    live(w, d3)
    check(cluster_sets(w.mnt) == before, 'the view after a restart: %s'
          % fmt_clusters(cluster_sets(w.mnt)))
    d3.umount()


@test
def test_cache_truncated_after_an_ignored_sigbus(w):
    """A daemon started with SIGBUS ignored (`trap '' BUS` in the script
    that starts it) lives through a `kill -BUS`, as it always did. That
    SIGBUS put the disposition from before the cache's handler back for
    good, so a cache cut short afterwards killed the daemon on the next
    read of it, as if it had no handler."""
    make_tree(w.src, w.corpus)
    d = w.daemon()
    live(w, d)
    before = cluster_sets(w.mnt)
    d.umount()
    d2 = w.daemon(wrap=['sh', '-c', 'trap "" BUS; exec "$0" "$@"'])
    st = live(w, d2)
    check(status_int(st, 'cached') > 0, 'nothing served from the cache: %s' % st)
    d2.kill(signal.SIGBUS)
    time.sleep(0.2)
    check(d2.proc.poll() is None, 'an ignored SIGBUS killed the daemon')
    with open(os.path.join(w.state, 'sigcache'), 'r+b') as f:
        f.truncate(0)
    read_every_signature(w)
    check(cluster_sets(w.mnt) == before, 'the view changed with the cache cut')
    d2.umount()


@test
def test_older_cache_is_signed_afresh(w):
    """A signature cache an older imatchfs wrote (its version lower) is out
    of date, not corrupt: the upgraded daemon mounts, signs afresh, says so
    and saves its own. It refused to mount with exit 3 ("corrupt
    (unsupported version 3); refusing to replace it"), so every upgrade
    that changed the format stopped every mount until the user moved the
    file away. A newer version's cache stays refused."""
    _, docs, _ = make_tree(w.src, w.corpus)
    d = w.daemon()
    live(w, d)
    d.umount()
    cache = os.path.join(w.state, 'sigcache')
    data = bytearray(open(cache, 'rb').read())
    version = int.from_bytes(data[8:12], 'little')
    data[8:12] = (version - 1).to_bytes(4, 'little')
    open(cache, 'wb').write(bytes(data))
    d = w.daemon()
    st = live(w, d)
    check(status_int(st, 'cached') == 0 and
          status_int(st, 'signed') + status_int(st, 'rejected') == len(docs),
          'an older cache was used, or documents are missing: %s' % st)
    check(d.log_text().count('older imatchfs') == 1,
          'the log does not say once why it signs afresh: %s' % d.log_text())
    d.umount()
    d.check_log()
    check(int.from_bytes(open(cache, 'rb').read()[8:12], 'little') == version,
          'the cache was not saved again in the current version')

    data = bytearray(open(cache, 'rb').read())
    data[8:12] = (version + 1).to_bytes(4, 'little')
    open(cache, 'wb').write(bytes(data))
    rc, line = run_refused(w, ['-o', 'auto_unmount,state=' + w.state, w.src, w.mnt],
                           'a cache of a newer version')
    check(rc == EXIT_STATE_CORRUPT, 'a newer cache exits %d, not %d: %s'
          % (rc, EXIT_STATE_CORRUPT, line))


@test
def test_systemd_unit_mounts_its_instance(w):
    """The unit's ExecStart, with systemd's specifiers filled in as systemd
    fills them for the instance `systemd-escape -p SOURCE` (the README's
    command), mounts SOURCE: %f is the unescaped path with its leading '/'
    (%I, used before, is the same path without it, relative to wherever
    the service starts). Run from the test's own directory, where that
    relative path leads nowhere."""
    for tool in ('systemd-escape', '/sbin/mount.fuse3'):
        if not shutil.which(tool):
            raise Skip('%s is missing' % tool)
    make_tree(w.src, w.corpus)
    unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                        'packaging', 'imatchfs@.service.in')
    line = next(l for l in open(unit).read().splitlines() if l.startswith('ExecStart='))
    inst = subprocess.run(['systemd-escape', '-p', w.src], capture_output=True,
                          text=True, check=True).stdout.strip()
    spec = {'%f': subprocess.run(['systemd-escape', '-u', '-p', inst], capture_output=True,
                                 text=True, check=True).stdout.strip(),
            '%I': subprocess.run(['systemd-escape', '-u', inst], capture_output=True,
                                 text=True, check=True).stdout.strip(),
            '%i': inst, '%C': os.path.join(w.top, 'cache')}
    argv = re.sub(r'%[fIiC]', lambda m: spec[m.group(0)], line[len('ExecStart='):])
    argv = argv.replace('@BINDIR@/imatchfs', w.imatchfs)
    argv = argv.replace('${IMATCHFS_OPTS}', 'ro,state=' + w.state).split()
    mnt = os.path.join(spec['%C'], 'imatchfs', inst)
    os.makedirs(mnt)
    r = subprocess.run(argv, cwd=w.top, capture_output=True, text=True)
    try:
        check(r.returncode == 0, '%s: exit %d: %s' % (' '.join(argv), r.returncode, r.stderr))
        poll(lambda: (os.path.exists(os.path.join(mnt, 'status')), mnt),
             'the unit\'s mount at %s' % mnt)
        with open(os.path.join(mnt, 'status')) as f:
            check('source: %s\n' % os.path.realpath(w.src) in f.read(),
                  'the unit mounted another source')
    finally:
        subprocess.run(['fusermount3', '-u', mnt], capture_output=True)


@test
def test_failed_final_save_exits_nonzero(w):
    """When the state directory turns read-only under a running daemon, the
    final save fails: the daemon exits non-zero and names the directory."""
    make_tree(w.src, w.corpus)
    d = w.daemon()
    live(w, d)
    ro_bind(w.state)
    try:
        family(w, 'c.txt', 'd.txt')
        poll(lambda: in_cluster(w, 'c.txt'), 'the new family')
        subprocess.run(['fusermount3', '-u', w.mnt], check=True)
        rc = d.wait_exit(None, 'after a failed final save')
        check(rc != 0, 'the daemon exited 0 though its final save failed')
        check(w.state in d.log_text(), 'the log does not name the state directory:\n%s'
              % d.log_text())
    finally:
        subprocess.run(['umount', w.state])


@test
def test_mount_twice_refused(w):
    """A second daemon on a mountpoint that already holds the view is refused
    with one line, and the first mount keeps serving."""
    make_tree(w.src, w.corpus)
    fam = family(w, 'a.txt', 'b.txt')
    d = w.daemon()
    live(w, d)
    poll(lambda: fam in cluster_sets(w.mnt), 'the family')
    other_state = os.path.join(w.top, 'state2')
    os.mkdir(other_state)
    run_refused(w, ['-o', 'auto_unmount,state=' + other_state, w.src, w.mnt],
                'a second mount on the same mountpoint')
    check(fam in cluster_sets(w.mnt), 'the first mount stopped serving')
    n = sum(1 for line in open('/proc/self/mountinfo') if (' %s ' % w.mnt) in line)
    check(n == 1, '%d mounts stacked on %s' % (n, w.mnt))
    d.umount()
    d.check_log()


@test
def test_dead_mount_named(w):
    """A daemon killed outright, its mount left behind dead (no auto_unmount
    here; fusermount3's sometimes leaves one too): a new daemon on that
    mountpoint says in one line that the mount is dead and how to clear it."""
    make_tree(w.src, w.corpus)
    d = w.daemon(auto_unmount=False)
    live(w, d)
    d.kill()
    d.proc.wait(timeout=30)
    # statvfs is never answered from the kernel's caches.
    expect_errno(lambda: os.statvfs(w.mnt), errno.ENOTCONN, 'the dead mount')
    _, line = run_refused(w, [w.src, w.mnt], 'a mount over a dead one')
    check('dead imatchfs mount' in line and 'fusermount3 -u -z' in line,
          'the line names the dead mount and the cure: %s' % line)
    r = subprocess.run([fusermount(), '-u', '-z', w.mnt], capture_output=True)
    check(r.returncode == 0, 'fusermount3 -u -z: %s' % r.stderr)
    d2 = w.daemon()
    live(w, d2)
    d2.umount()
    d2.check_log()


@test
def test_imatchfs_mounts_inside_source_skipped(w):
    """An imatchfs view mounted inside SOURCE is not read, neither by imatch
    scan nor by a daemon of SOURCE: its symlinks and files are not SOURCE's."""
    want, docs, _ = make_tree(w.src, w.corpus)
    other = os.path.join(w.top, 'other')
    inner = os.path.join(w.src, 'view')
    os.mkdir(inner)
    make_tree(other, w.corpus)
    os.makedirs(os.path.join(w.top, 'state-in'))
    d_in = w.daemon(source=other, mnt=inner, state=os.path.join(w.top, 'state-in'))
    poll(lambda: len(cluster_sets(inner)) == len(want), 'the inner view')
    sc = scan(w.imatch, w.src)
    check(sc == want, 'imatch scan read the imatchfs mount inside SOURCE:\n%s'
          % fmt_clusters(sc))
    d = w.daemon()
    live(w, d)
    have = by_doc_documents(w.mnt)
    check(have == set(docs), 'the daemon read the imatchfs mount inside SOURCE: %s'
          % sorted(have - set(docs))[:5])
    d.umount()
    d_in.umount()


# ---- 7. One daemon per state directory; the save before letting go ---------------------------

@test
def test_state_dir_locked(w):
    """A second daemon on the same state directory (another mountpoint) is
    refused with one line naming the first one's pid."""
    make_tree(w.src, w.corpus)
    d = w.daemon()
    live(w, d)
    mnt2 = os.path.join(w.top, 'mnt2')
    os.mkdir(mnt2)
    # It waits a few seconds (a daemon may still be saving on its way out).
    rc, line = run_refused(w, ['-o', 'auto_unmount,state=' + w.state, w.src, mnt2],
                           'a second daemon on one state directory', timeout=30)
    check(str(d.proc.pid) in line, 'the line does not name pid %d: %s' % (d.proc.pid, line))
    d.umount()
    d.check_log()


@test
def test_remount_sees_the_final_save(w):
    """fusermount3 -u and an immediate remount on the same state directory:
    the new daemon starts from the state the old one saved last (every
    document cached), never from a half-written one."""
    _, docs, _ = make_tree(w.src, w.corpus)
    d = w.daemon()
    live(w, d)
    os.mkdir(os.path.join(w.src, 'late'))
    for i in range(1000):
        write(os.path.join(w.src, 'late', 'n%04d.txt' % i), w.corpus.document(words=60))
    n = len(docs) + 1000
    # A tree twice its lexicon's documents has it rebuilt (scanner.c,
    # lexicon_outgrown()); a daemon stopped during that saves nothing, by
    # design, so the unmount waits for the rebuild and its signing.
    poll(lambda: status_int(read_status(w.mnt), 'relexicons') >= 1,
         'the lexicon of %d documents to be rebuilt' % len(docs))
    live(w, d, docs=n)
    subprocess.run(['fusermount3', '-u', w.mnt], check=True)
    d2 = w.daemon()
    st = live(w, d2, docs=n)
    check(status_int(st, 'cached') == n, 'the remount found %s of %d documents in the '
          'cache the first daemon saved' % (st.get('cached'), n))
    check(d.proc.wait(timeout=DEADLINE) == 0, 'the first daemon exited non-zero')
    d2.umount()


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
