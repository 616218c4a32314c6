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
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import check, poll, read_status, run_tests, status_int  # noqa: E402
from test_mount import settled, standard, wait_clusters  # noqa: E402

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


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
