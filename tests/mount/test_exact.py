#!/usr/bin/env python3
"""The exact-copy tier, size first (issue 8 item 1), in a real mount: a
binary file whose size no other file has is read only as far as sniffing
needs; a later file of the same size makes the daemon hash both, and
identical ones form a cluster. Bytes read are the daemon's own
(/proc/PID/io rchar), compared after the view has settled.

    test_exact.py IMATCHFS IMATCH [TEST...]
    test_exact.py --list
"""

import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (Fail, check, poll, read_status, run_tests,  # noqa: E402
                  status_int, write)
from test_mount import settled, standard, wait_clusters  # noqa: E402
from test_hardening import as_user, test_user  # noqa: E402

TESTS = {}
MB = 1 << 20


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def rchar(d):
    with open('/proc/%d/io' % d.proc.pid) as f:
        for line in f:
            if line.startswith('rchar:'):
                return int(line.split()[1])
    raise AssertionError('no rchar in /proc/%d/io' % d.proc.pid)


def blob(path, size, seed):
    """@size bytes, binary from the first byte (a NUL), from @seed."""
    rng = random.Random(seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(b'\0' + rng.randbytes(size - 1))


def binaries(w, n):
    def ok():
        st = read_status(w.mnt)
        return status_int(st, 'binary') == n and status_int(st, 'pending') == 0, st
    poll(ok, '%d binary files counted, nothing pending' % n)


@test
def test_binary_hashed_only_when_its_size_is_shared(w):
    want, docs, _ = standard(w)
    blob(os.path.join(w.src, 'media/a.bin'), 24 * MB, 1)
    d = w.daemon()
    settled(w, d, len(docs))
    binaries(w, 1)
    wait_clusters(w.mnt, want, 'a.bin alone, in no cluster')

    # Another binary of another size, live: sniffed, not read.
    before = rchar(d)
    blob(os.path.join(w.src, 'media/b.bin'), 20 * MB, 2)
    binaries(w, 2)
    read = rchar(d) - before
    check(read < 2 * MB, 'the daemon read %.1f MB for a 20 MB binary of a '
          'size no other file has' % (read / MB))

    # A copy of a.bin: the copy and a.bin are hashed, and are one cluster.
    before = rchar(d)
    shutil.copyfile(os.path.join(w.src, 'media/a.bin'),
                    os.path.join(w.src, 'media/a-copy.bin'))
    wait_clusters(w.mnt, want | {frozenset(['media/a.bin', 'media/a-copy.bin'])},
                  'a.bin and its copy as a cluster')
    binaries(w, 3)
    read = rchar(d) - before
    check(read >= 48 * MB, 'both files of the shared size read whole: %.1f MB'
          % (read / MB))

    # Another file of that size with other bytes: hashed, linked to nothing.
    blob(os.path.join(w.src, 'media/a-other.bin'), 24 * MB, 3)
    binaries(w, 4)
    wait_clusters(w.mnt, want | {frozenset(['media/a.bin', 'media/a-copy.bin'])},
                  'the same clusters')

    # A restart from the cache keeps the links and reads neither file.
    d.umount()
    d.check_log()
    d2 = w.daemon()
    settled(w, d2, len(docs))
    binaries(w, 4)
    wait_clusters(w.mnt, want | {frozenset(['media/a.bin', 'media/a-copy.bin'])},
                  'the cluster after a restart')
    d2.umount()
    d2.check_log()


def waiting(w, what):
    """Poll until the tree, without a lexicon, is converged."""
    def ok():
        st = read_status(w.mnt)
        return (st.get('phase') == 'waiting-for-documents'
                and st.get('converged') == 'yes' and status_int(st, 'pending') == 0), st
    poll(ok, 'waiting-for-documents, converged: ' + what)


@test
def test_binary_share_is_hashed_once(w):
    """A share of binaries (one text: no lexicon) keeps its state: a restart
    reads none of the copies it hashed before (it read them all again, every
    mount), a copy added while unmounted is the only file read whole, one
    changed while unmounted leaves its cluster, and when texts arrive and
    the lexicon is built, the binaries are not read again either."""
    write(os.path.join(w.src, 'readme.txt'), w.corpus.document())
    for rel in ('a.bin', 'old/a-copy.bin', 'old/b.bin', 'b-copy.bin'):
        blob(os.path.join(w.src, rel), 6 * MB, 1 if 'a' in rel else 2)
    blob(os.path.join(w.src, 'c.bin'), 5 * MB, 3)
    pairs = {frozenset(['a.bin', 'old/a-copy.bin']), frozenset(['old/b.bin', 'b-copy.bin'])}
    d = w.daemon()
    waiting(w, 'the first mount')
    wait_clusters(w.mnt, pairs, 'the two pairs of copies')
    read = rchar(d)
    check(read >= 24 * MB, 'the first mount read only %.1f MB of four 6 MB copies'
          % (read / MB))
    d.umount()
    d.check_log()

    d = w.daemon()
    waiting(w, 'a restart')
    wait_clusters(w.mnt, pairs, 'the pairs after a restart')
    read = rchar(d)
    check(read < 2 * MB, 'a restart read %.1f MB: the copies were hashed again'
          % (read / MB))
    st = read_status(w.mnt)
    check(status_int(st, 'cached_files') == 5, 'status says cached_files %s, not '
          'the 5 binaries (cached, documents only: %s)'
          % (st.get('cached_files'), st.get('cached')))
    d.umount()
    d.check_log()

    shutil.copyfile(os.path.join(w.src, 'a.bin'), os.path.join(w.src, 'a-copy2.bin'))
    blob(os.path.join(w.src, 'b-copy.bin'), 6 * MB, 4)
    pairs = {frozenset(['a.bin', 'old/a-copy.bin', 'a-copy2.bin'])}
    d = w.daemon()
    waiting(w, 'a restart after changes')
    wait_clusters(w.mnt, pairs, 'a new copy joined, a changed one left')
    read = rchar(d)
    check(6 * MB <= read < 14 * MB, 'a restart after a copy was added and one '
          'changed read %.1f MB, not the two of them (12 MB)' % (read / MB))

    before = rchar(d)
    text = w.corpus.document()
    write(os.path.join(w.src, 'notes/one.txt'), text)
    write(os.path.join(w.src, 'notes/two.txt'), text)
    pairs |= {frozenset(['notes/one.txt', 'notes/two.txt'])}
    wait_clusters(w.mnt, pairs, 'the texts joined the view')

    # The two texts are exact copies, in the view before any lexicon: wait
    # for the build their arrival starts (a status read once, right after
    # they showed, could still be the waiting phase's or the build's).
    def signed_with_a_lexicon():
        st = read_status(w.mnt)
        return (st.get('phase') == 'live' and status_int(st, 'pending') == 0
                and status_int(st, 'signed') == 3), st
    poll(signed_with_a_lexicon, 'a lexicon built from the three texts, '
         'all three signed')
    read = rchar(d) - before
    check(read < 2 * MB, 'building the lexicon read %.1f MB: the binaries '
          'again' % (read / MB))
    d.umount()
    d.check_log()


def clusters_links(mnt):
    """{clusters/SIG/MEMBER: its target} of every entry under clusters/;
    readlink failing is a failure."""
    out = {}
    top = os.path.join(mnt, 'clusters')
    for sig in sorted(os.listdir(top)):
        for m in sorted(os.listdir(os.path.join(top, sig))):
            rel = os.path.join('clusters', sig, m)
            try:
                out[rel] = os.readlink(os.path.join(mnt, rel))
            except OSError as e:
                raise Fail('readlink %s: %s' % (rel, e.strerror))
    return out


@test
def test_binary_and_failed_members_are_links(w):
    """Members of clusters of binary files and of files an extractor failed
    on are symlinks like a document's: readlink gives the absolute source
    path, stat follows it, and cp -a and tar copy the whole view (each
    failed with ENOENT on such a link)."""
    text = w.corpus.document()
    write(os.path.join(w.src, 't1'), text)
    write(os.path.join(w.src, 't2'), text)
    blob(os.path.join(w.src, 'bin/b1'), 3000, 7)
    shutil.copyfile(os.path.join(w.src, 'bin/b1'), os.path.join(w.src, 'b2'))
    pdf = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'data',
                       'formats', 'truncated.pdf')
    for p in ('f1.pdf', 'bin/f2.pdf'):
        shutil.copyfile(pdf, os.path.join(w.src, p))
    want = {frozenset(['t1', 't2']), frozenset(['bin/b1', 'b2']),
            frozenset(['f1.pdf', 'bin/f2.pdf'])}
    d = w.daemon()
    settled(w, d, 2)
    wait_clusters(w.mnt, want, 'the text, binary and failed pairs as clusters')
    st = read_status(w.mnt)
    check(status_int(st, 'failed') == 2, 'the PDFs are not counted failed: %s' % st)
    links = clusters_links(w.mnt)
    check(len(links) == 6, 'clusters/ holds %d links, not 6: %s' % (len(links), links))
    for rel, target in links.items():
        src = os.path.join(w.src, *rel.split('/')[2:]).replace('%2F', '/')
        check(target == src, '%s points to %r, not %r' % (rel, target, src))
        check(os.stat(os.path.join(w.mnt, rel)).st_size == os.stat(src).st_size,
              'stat -L %s is not its source file' % rel)
        check(os.lstat(os.path.join(w.mnt, rel)).st_size == len(src),
              'the size of %s is not its target\'s length' % rel)
    out = os.path.join(w.top, 'copies')
    os.mkdir(out)
    for cmd in (['cp', '-a', w.mnt + '/.', os.path.join(out, 'cp')],
                ['tar', '-cf', os.path.join(out, 'view.tar'), '-C', w.mnt, '.']):
        r = subprocess.run(cmd, capture_output=True)
        check(r.returncode == 0, '%s failed (%d): %s' % (
            ' '.join(cmd[:2]), r.returncode, r.stderr.decode(errors='replace')[-2000:]))
    copied = clusters_links(os.path.join(out, 'cp'))
    check(copied == links, 'cp -a copied other links:\n%s\nnot\n%s' % (copied, links))
    d.umount()
    d.check_log()

    # With allow_other, another user who may read both copies sees their
    # cluster too (members were counted only if they were documents).
    if os.geteuid() != 0:
        return
    uid, gid, _ = test_user()
    os.chmod(w.top, 0o755)
    for root, dirs, files in os.walk(w.src):
        for n in dirs + files:
            os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
    os.chmod(w.src, 0o755)
    d = w.daemon(opts=['allow_other'])
    settled(w, d, 2)
    got = as_user(uid, gid, [], LIST_CLUSTERS, w.mnt)
    check(got == sorted(sorted(links[rel] for rel in links if rel.split('/')[1] == sig)
                        for sig in {rel.split('/')[1] for rel in links}),
          'another user sees the clusters %s, not all three' % got)
    d.umount()
    d.check_log()


LIST_CLUSTERS = r'''
import json, os, sys
top = os.path.join(sys.argv[1], 'clusters')
print(json.dumps(sorted(sorted(os.readlink(os.path.join(top, c, m))
                               for m in os.listdir(os.path.join(top, c)))
                        for c in os.listdir(top))))
'''


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
