#!/usr/bin/env python3
"""Mounting the way an administrator does (issue 10, DESIGN §5): through
mount(8) and mount.fuse3 as an fstab line passes it, refusing a second mount
on the same mountpoint in one line, and --version.

    test_ops.py IMATCHFS IMATCH [TEST...]
    test_ops.py --list
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (DEADLINE, Skip, check, cluster_sets, in_proc_mounts,  # noqa: E402
                  is_mounted, make_tree, poll, read_status, run_tests,
                  status_int)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def settled_clusters(w, docs, want):
    def ok():
        st = read_status(w.mnt)
        done = (status_int(st, 'pending') == 0 and st.get('phase') == 'live'
                and (status_int(st, 'signed') or 0) + (status_int(st, 'rejected') or 0) == docs)
        return done and cluster_sets(w.mnt) == want, st
    poll(ok, 'the view of the tree')


def unmount(w):
    r = subprocess.run(['umount', w.mnt], capture_output=True)
    if r.returncode:
        r = subprocess.run(['fusermount3', '-u', w.mnt], capture_output=True)
    check(r.returncode == 0, 'unmounting failed: %s' % r.stderr.decode(errors='replace'))
    poll(lambda: not in_proc_mounts(w.mnt), 'the mount to go away')


def need(*tools):
    if os.geteuid() != 0:
        raise Skip('mount(8) of a fuse type needs root here')
    for t in tools:
        if not shutil.which(t):
            raise Skip('%s is not installed' % t)


@test
def test_fstab_line(w):
    """An fstab line mounts with `mount MOUNTPOINT`: mount(8) runs mount.fuse3,
    which runs imatchfs SOURCE MOUNTPOINT -o ro,state=...,dev,suid (the options
    after the paths, as it passes them) and returns once mounted. The line
    names the program as PROGRAM#SOURCE with type fuse, so that the test needs
    no installed imatchfs; an installed one is `SOURCE MNT fuse.imatchfs ...`."""
    need('mount', 'mount.fuse3', 'umount')
    want, docs, _ = make_tree(w.src, w.corpus)
    fstab = os.path.join(w.top, 'fstab')
    with open(fstab, 'w') as f:
        f.write('# a test fstab\n%s#%s %s fuse ro,noauto,state=%s 0 0\n'
                % (w.imatchfs, w.src, w.mnt, w.state))
    try:
        r = subprocess.run(['mount', '-T', fstab, w.mnt], capture_output=True,
                           timeout=DEADLINE)
        check(r.returncode == 0, 'mount -T fstab failed (%d): %s'
              % (r.returncode, r.stderr.decode(errors='replace')))
        check(is_mounted(w.mnt), 'not mounted after mount(8) returned')
        settled_clusters(w, len(docs), want)
        types = [l.split()[2] for l in open('/proc/self/mounts') if l.split()[1] == w.mnt]
        check(types == ['fuse.imatchfs'], 'mounted as %s' % types)
        opts = [l.split()[3] for l in open('/proc/self/mounts') if l.split()[1] == w.mnt][0]
        check(opts.split(',')[0] == 'ro', 'not read-only: %s' % opts)
    finally:
        if in_proc_mounts(w.mnt):
            unmount(w)


@test
def test_mount_helper_form(w):
    """`mount -t fuse.imatchfs SOURCE MOUNTPOINT -o ro,...` runs
    `mount.fuse3 SOURCE MOUNTPOINT -t imatchfs -o ...`, which finds imatchfs
    on PATH: the same call, made here with the build directory on PATH."""
    need('mount.fuse3')
    want, docs, _ = make_tree(w.src, w.corpus)
    env = dict(os.environ, PATH=os.path.dirname(w.imatchfs) + ':' + os.environ.get('PATH', ''))
    try:
        r = subprocess.run(['mount.fuse3', w.src, w.mnt, '-t', 'imatchfs', '-o',
                            'ro,state=' + w.state], capture_output=True, env=env,
                           timeout=DEADLINE)
        check(r.returncode == 0, 'mount.fuse3 failed (%d): %s'
              % (r.returncode, r.stderr.decode(errors='replace')))
        settled_clusters(w, len(docs), want)
    finally:
        if in_proc_mounts(w.mnt):
            unmount(w)


@test
def test_second_mount_refused(w):
    """A second imatchfs on a mountpoint that already is one is refused with
    one line saying so, and the first mount keeps serving."""
    want, docs, _ = make_tree(w.src, w.corpus)
    d = w.daemon()
    settled_clusters(w, len(docs), want)
    r = subprocess.run([w.imatchfs, '-f', '-o', 'state=' + os.path.join(w.top, 'state2'),
                        w.src, w.mnt], capture_output=True, timeout=DEADLINE)
    lines = [l for l in r.stderr.decode(errors='replace').splitlines() if l.strip()]
    check(r.returncode != 0, 'the second mount exited 0')
    check(len(lines) == 1 and 'already an imatchfs mount' in lines[0],
          'wanted one line saying it is already an imatchfs mount: %r' % lines)
    check(len([l for l in open('/proc/self/mounts') if l.split()[1] == w.mnt]) == 1,
          'mounted twice')
    check(cluster_sets(w.mnt) == want, 'the first mount stopped serving')
    d.umount()
    d.check_log()


@test
def test_version(w):
    """--version names the project's version (meson.build)."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(top, 'meson.build')) as f:
        version = re.search(r"version:\s*'([^']+)'", f.read()).group(1)
    r = subprocess.run([w.imatchfs, '--version'], capture_output=True)
    check(r.returncode == 0 and r.stdout.decode().startswith('imatchfs %s ' % version),
          'imatchfs --version: %r, wanted imatchfs %s' % (r.stdout, version))


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
