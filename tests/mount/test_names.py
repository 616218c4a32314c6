#!/usr/bin/env python3
"""Long names (issue 10, DESIGN §2): every name in the view is at most 255
bytes, a member name too long is shortened keeping its end, and the whole
view copies with cp -a, tar and rsync -a.

    test_names.py IMATCHFS IMATCH [TEST...]
    test_names.py --list
"""

import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (Skip, check, cluster_sets, decode_member,  # noqa: E402
                  encode_member, poll, read_status, run_tests, status_int,
                  write)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def settle(w, n, mnt=None):
    mnt = mnt or w.mnt

    def ok():
        st = read_status(mnt)
        done = (status_int(st, 'pending') == 0 and st.get('phase') == 'live'
                and (status_int(st, 'signed') or 0) + (status_int(st, 'rejected') or 0) == n)
        return done, st
    poll(ok, 'status to settle with %d documents' % n)


def view_names(mnt):
    """Every name in the view, walked relative to directory fds (a by-doc
    path may be longer than PATH_MAX)."""
    names = []
    for _, dirs, files, _ in os.fwalk(mnt):
        names += dirs + files
    return names


def family(w, paths):
    """Near-duplicate copies of one text at @paths (relative to SOURCE)."""
    text = w.corpus.document()
    write(os.path.join(w.src, paths[0]), text)
    for p in paths[1:]:
        write(os.path.join(w.src, p), w.corpus.near_duplicate(text))


def members(mnt):
    out = {}
    for sig in os.listdir(os.path.join(mnt, 'clusters')):
        for m in os.listdir(os.path.join(mnt, 'clusters', sig)):
            out[m] = os.readlink(os.path.join(mnt, 'clusters', sig, m))
    return out


@test
def test_long_member_names(w):
    """Members whose encoded paths are 300 bytes and 4 KiB get names of at
    most 255 bytes that keep the file name, differ from each other, resolve
    to the right files and stay the same across a remount."""
    long_dir = 'd' * 120
    p300 = [long_dir + '/' + 'n' * (170 - len(s)) + s for s in ('-a.txt', '-b.txt')]
    # About 4 KiB of relative path, the whole absolute path below PATH_MAX.
    room = 4000 - len(os.path.abspath(w.src))
    deep = '/'.join(['x' * 200] * (room // 201))
    p4k = [deep + '/report-%d.txt' % i for i in (1, 2)]
    family(w, p300)
    family(w, p4k)
    family(w, ['short/one.txt', 'short/two.txt'])
    d = w.daemon()
    settle(w, 6)
    poll(lambda: (len(cluster_sets(w.mnt)) == 3, cluster_sets(w.mnt)), 'three clusters')
    longest = max(len(os.fsencode(n)) for n in view_names(w.mnt))
    check(longest <= 255, 'a name in the view has %d bytes' % longest)
    got = members(w.mnt)
    want = {os.path.join(w.src, p) for p in p300 + p4k + ['short/one.txt', 'short/two.txt']}
    check(set(got.values()) == want, 'member targets %s' % sorted(got.values()))
    for name, target in got.items():
        check(os.path.isfile(os.path.join(w.mnt, 'clusters',
                                          [s for s in os.listdir(os.path.join(w.mnt, 'clusters'))
                                           if name in os.listdir(os.path.join(w.mnt, 'clusters', s))][0],
                                          name)),
              'member %r does not resolve' % name)
        rel = os.path.relpath(target, w.src)
        if len(encode_member(rel)) <= 255:
            check(name == encode_member(rel), 'a short path is named %r' % name)
        else:
            check(name.endswith(os.path.basename(rel)) and name.startswith('%~'),
                  'a shortened name %r does not keep the file name %r' % (name, os.path.basename(rel)))
    # dupes/ of a 300-byte path, through by-doc.
    dupes = os.listdir(os.path.join(w.mnt, 'by-doc', p300[0], 'dupes'))
    check(len(dupes) == 1 and dupes[0] in got and got[dupes[0]] == os.path.join(w.src, p300[1]),
          'dupes of a 300-byte path: %s' % dupes)
    d.umount()
    d.check_log()
    d2 = w.daemon()
    settle(w, 6)
    poll(lambda: (members(w.mnt) == got, sorted(members(w.mnt))), 'the same names after a remount')
    d2.umount()
    d2.check_log()


def copy_ok(cmd, what):
    r = subprocess.run(cmd, capture_output=True)
    check(r.returncode == 0, '%s failed (%d): %s' % (what, r.returncode,
                                                     r.stderr.decode(errors='replace')[-2000:]))


@test
def test_copy_whole_view(w):
    """cp -a, tar and rsync -a of the whole view succeed with 300-byte member
    names, and the copies hold the same symlinks."""
    long_dir = 'd' * 120
    family(w, [long_dir + '/' + 'n' * 170 + '-%d.txt' % i for i in range(3)])
    family(w, ['a/one.txt', 'b/two.txt'])
    d = w.daemon()
    settle(w, 5)
    poll(lambda: (len(cluster_sets(w.mnt)) == 2, cluster_sets(w.mnt)), 'two clusters')
    want = members(w.mnt)
    out = os.path.join(w.top, 'copies')
    os.mkdir(out)
    copy_ok(['cp', '-a', w.mnt + '/.', os.path.join(out, 'cp')], 'cp -a')
    tarball = os.path.join(out, 'view.tar')
    copy_ok(['tar', '-cf', tarball, '-C', w.mnt, '.'], 'tar -c')
    os.mkdir(os.path.join(out, 'tar'))
    copy_ok(['tar', '-xf', tarball, '-C', os.path.join(out, 'tar')], 'tar -x')
    copies = ['cp', 'tar']
    if shutil.which('rsync'):
        copy_ok(['rsync', '-a', w.mnt + '/', os.path.join(out, 'rsync')], 'rsync -a')
        copies.append('rsync')
    for c in copies:
        check(members(os.path.join(out, c)) == want, 'the %s copy holds other members' % c)
    d.umount()
    d.check_log()
    if 'rsync' not in copies:
        raise Skip('rsync is not installed (cp -a and tar passed)')


def random_words(rng, n, prefix=''):
    out = set()
    while len(out) < n:
        out.add(prefix + ''.join(rng.choice('abcdefghijklmnopqrstuvwxyz')
                                 for _ in range(rng.randint(5, 9))))
    return sorted(out)


def view_by_name(mnt):
    """{cluster name: sorted members} as a user's ls shows them, read
    through the kernel's caches (entries, attributes, listings)."""
    top = os.path.join(mnt, 'clusters')
    return {sig: sorted(decode_member(m)
                        for m in os.listdir(os.path.join(top, sig)))
            for sig in os.listdir(top)}


def scan_by_name(w, lex):
    r = subprocess.run([w.imatch, 'scan', '--json', '--lexicon', lex, w.src],
                       capture_output=True, check=True)
    return {c['name']: sorted(c['members'])
            for c in json.loads(r.stdout)['clusters']}


@test
def test_shared_name_moves(w):
    """Two clusters share their smallest signature (equal coordinates,
    verification keeps them apart; -o lexicon from another tree): the one
    with the smallest member path keeps the name, the other adds 1
    (index.h). A new file that gives the second the smallest path swaps the
    names without touching the first: what the kernel cached for both
    names must go, or ls shows the old members under the swapped name."""
    rng = random.Random(5)
    vocab = random_words(rng, 300)
    lexdir = os.path.join(w.top, 'lexicon-tree')
    for i in range(30):
        write(os.path.join(lexdir, 'd%02d.txt' % i),
              ' '.join(x for x in vocab if rng.random() < 0.5) + '\n')
    lex = os.path.join(w.top, 'other.lex')
    subprocess.run([w.imatch, 'lexicon', 'build', '-o', lex, lexdir],
                   check=True, capture_output=True)
    shared = ' '.join(vocab[:120])
    a = shared + ' ' + ' '.join(random_words(rng, 60, 'qa')) + '\n'
    b = shared + ' ' + ' '.join(random_words(rng, 60, 'qb')) + '\n'
    for rel, body in (('a/one.txt', a), ('a/two.txt', a), ('b/one.txt', b),
                      ('b/two.txt', b)):
        write(os.path.join(w.src, rel), body)
    before = scan_by_name(w, lex)
    check(len(before) == 2 and len({n[:32] for n in before}) == 1,
          'the two clusters do not share a name: %r' % before)
    d = w.daemon(['lexicon=' + lex])
    settle(w, 4)
    poll(lambda: (view_by_name(w.mnt) == before, view_by_name(w.mnt)),
         'the view to show both clusters under the names imatch scan gives')
    # Everything cached: entries, member attributes, listings.
    for sig, ms in before.items():
        for m in ms:
            os.lstat(os.path.join(w.mnt, 'clusters', sig, encode_member(m)))
    write(os.path.join(w.src, '0.txt'), b)
    after = scan_by_name(w, lex)
    check(set(after) == set(before) and after != before,
          'the names did not swap: %r then %r' % (before, after))
    settle(w, 5)
    poll(lambda: (view_by_name(w.mnt) == after, view_by_name(w.mnt)),
         'the swapped names to show their new members (imatch scan: %r)' % after)
    for sig, ms in after.items():
        for m in ms:
            p = os.path.join(w.mnt, 'clusters', sig, encode_member(m))
            check(os.readlink(p).endswith('/' + m), '%s leads to %s'
                  % (p, os.readlink(p)))
        # A path the kernel cached under this name before the swap.
        for m in set(before[sig]) - set(ms):
            p = os.path.join(w.mnt, 'clusters', sig, encode_member(m))
            check(not os.path.lexists(p), '%s is still there (%s is in %s)'
                  % (p, m, [n for n, x in after.items() if m in x]))
    d.umount()


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
