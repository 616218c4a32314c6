#!/usr/bin/env python3
"""Scoping in a real mount (issue 8 item 4): -o exclude / -o include and
.imatchignore files leave paths out of the view, live: a file created later
under an excluded path never enters it, and adding, editing or removing a
.imatchignore while mounted takes effect.

    test_scope.py IMATCHFS IMATCH [TEST...]
    test_scope.py --list
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (by_doc_path, check, read_status, run_tests,  # noqa: E402
                  scan, status_int, write)
from test_mount import settled, standard, state_lexicon, wait_clusters  # noqa: E402

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def copy_of(w, rel):
    with open(os.path.join(w.src, rel)) as f:
        return w.corpus.near_duplicate(f.read())


@test
def test_exclude_and_imatchignore_live(w):
    want, docs, names = standard(w)
    fam = names['family0']
    # Copies of family0 where the scope leaves them out: under build/
    # (-o exclude), as *.bak (-o exclude), under scratch/ (.imatchignore).
    for rel in ('build/out/copy.txt', 'reports/copy.bak', 'scratch/copy.txt'):
        write(os.path.join(w.src, rel), copy_of(w, fam[0]))
    write(os.path.join(w.src, '.imatchignore'), '# not documents\nscratch/\n')
    d = w.daemon(opts=['exclude=build/,exclude=*.bak'])
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want, 'a view without the excluded copies')
    st = read_status(w.mnt)
    check(status_int(st, 'excluded') == 3, 'status counts build/, the .bak and '
          'scratch/: %s' % st.get('excluded'))
    check(not os.path.lexists(by_doc_path(w.mnt, '.imatchignore')),
          'the .imatchignore is no document')

    # Created later under excluded paths (a new directory too), then a file
    # that is in: once that one is in the view, the events before it were
    # handled, and none of them may have entered.
    for rel in ('build/later.txt', 'build/new/deeper.txt', 'scratch/new/x.txt',
                'notes/later.bak'):
        write(os.path.join(w.src, rel), copy_of(w, fam[0]))
    write(os.path.join(w.src, 'notes/in.txt'), copy_of(w, fam[0]))
    grown = set(want - {frozenset(fam)}) | {frozenset(fam + ['notes/in.txt'])}
    wait_clusters(w.mnt, grown, 'only the new copy that is in scope')

    # A .imatchignore added while mounted: notes/ leaves family files out.
    write(os.path.join(w.src, 'notes/.imatchignore'), 'in.txt\n')
    wait_clusters(w.mnt, want, 'notes/.imatchignore added')
    check(not os.path.lexists(by_doc_path(w.mnt, 'notes/in.txt')),
          'notes/in.txt left by-doc/')
    # Edited: a negation instead, so notes/in.txt is back.
    write(os.path.join(w.src, 'notes/.imatchignore'), '# edited\n!in.txt\n')
    wait_clusters(w.mnt, grown, 'notes/.imatchignore edited')
    # Removed at the root: scratch/ comes in, with what was created there.
    os.unlink(os.path.join(w.src, '.imatchignore'))
    more = frozenset(fam + ['notes/in.txt', 'scratch/copy.txt', 'scratch/new/x.txt'])
    wait_clusters(w.mnt, set(want - {frozenset(fam)}) | {more},
                  'the root .imatchignore removed')

    # The view equals imatch scan with the same options (DESIGN §4).
    settled(w, d)
    cli = scan(w.imatch, w.src, ['--lexicon', state_lexicon(w), '--exclude', 'build/',
                                 '--exclude', '*.bak'])
    wait_clusters(w.mnt, cli, 'the view to equal imatch scan --exclude ...')
    d.umount()
    d.check_log()


@test
def test_renamed_directory_rescoped(w):
    """A directory renamed while mounted is scoped under its new name at
    once, not at the next rescan: its files leave when a pattern now
    matches them and come back when none does."""
    want, docs, names = standard(w)
    fam = names['family0']
    write(os.path.join(w.src, '.imatchignore'), 'drafts/*.txt\n')
    write(os.path.join(w.src, 'work/copy.txt'), copy_of(w, fam[0]))
    d = w.daemon()
    settled(w, d, len(docs) + 1)
    with_copy = set(want - {frozenset(fam)}) | {frozenset(fam + ['work/copy.txt'])}
    wait_clusters(w.mnt, with_copy, 'work/copy.txt with its family')
    rescans = status_int(read_status(w.mnt), 'rescans')

    os.rename(os.path.join(w.src, 'work'), os.path.join(w.src, 'drafts'))
    wait_clusters(w.mnt, want, 'drafts/copy.txt out of scope after the rename')
    check(not os.path.lexists(by_doc_path(w.mnt, 'drafts/copy.txt')),
          'drafts/copy.txt left by-doc/')
    os.rename(os.path.join(w.src, 'drafts'), os.path.join(w.src, 'final'))
    back = set(want - {frozenset(fam)}) | {frozenset(fam + ['final/copy.txt'])}
    wait_clusters(w.mnt, back, 'final/copy.txt back in scope after the rename')
    check(status_int(read_status(w.mnt), 'rescans') == rescans,
          'the renames were followed without a rescan')
    d.umount()
    d.check_log()


@test
def test_include_option(w):
    want, docs, names = standard(w)
    # The lexicon of the whole tree, so that the few documents of reports/
    # are signed as they are without the option.
    lex = os.path.join(w.top, 'lexicon')
    r = subprocess.run([w.imatch, 'lexicon', 'build', '-o', lex, w.src],
                       capture_output=True)
    check(r.returncode == 0, 'lexicon build: %s' % r.stderr)
    # Only reports/ is read: the clusters are the parts of each family
    # inside it.
    d = w.daemon(opts=['include=/reports', 'lexicon=' + lex])
    settled(w, d)
    inside = {frozenset(p for p in c if p.startswith('reports/')) for c in want}
    inside = {c for c in inside if len(c) > 1}
    wait_clusters(w.mnt, inside, 'only reports/')
    check(not os.path.lexists(by_doc_path(w.mnt, 'notes/doc01.txt')),
          'notes/doc01.txt is not in by-doc')
    check(os.path.lexists(by_doc_path(w.mnt, 'reports/doc00.txt')),
          'reports/doc00.txt is in by-doc')
    cli = scan(w.imatch, w.src, ['--lexicon', lex, '--include', '/reports'])
    check(cli == inside, 'imatch scan --include agrees: %s' % cli)
    d.umount()
    d.check_log()


@test
def test_exclude_keeps_cache_entries(w):
    """QA 4/5: what a mount leaves out by its options (-o exclude, hidden
    names without -o hidden) keeps its entries in the signature cache, so
    the next mount without them reads none of those files again, only the
    one that changed meanwhile. They are not in the view while left out."""
    want, docs, names = standard(w)
    fam = names['family0']
    left_out = ['build/b%d.txt' % i for i in range(6)] + ['build/copy.txt',
                                                          'notes/.draft.txt']
    for rel in left_out[:6] + left_out[7:]:
        write(os.path.join(w.src, rel), w.corpus.document())
    write(os.path.join(w.src, 'build/copy.txt'), copy_of(w, fam[0]))
    every = len(docs) + len(left_out)
    whole = set(want - {frozenset(fam)}) | {frozenset(fam + ['build/copy.txt'])}

    d = w.daemon(opts=['hidden'])
    settled(w, d, every)
    wait_clusters(w.mnt, whole, 'everything, hidden names too')
    d.umount()
    d.check_log()

    d = w.daemon(opts=['exclude=build/'])
    st = settled(w, d, len(docs))
    wait_clusters(w.mnt, want, 'a view without build/ and the hidden draft')
    check(status_int(st, 'cached') == len(docs),
          'cached: %s with the exclude, wanted %d' % (st.get('cached'), len(docs)))
    for rel in left_out:
        check(not os.path.lexists(by_doc_path(w.mnt, rel)), '%s is in by-doc/' % rel)
    # Changed while left out: its entry no longer fits.
    changed = left_out[0]
    write(os.path.join(w.src, changed), w.corpus.document())
    d.umount()
    d.check_log()

    d = w.daemon(opts=['hidden'])
    st = settled(w, d, every)
    wait_clusters(w.mnt, whole, 'everything again')
    check(status_int(st, 'cached') == every - 1 and
          status_int(st, 'cached_files') == every - 1,
          'cached: %s, cached_files: %s after the exclude, wanted %d each (all '
          'but %s)' % (st.get('cached'), st.get('cached_files'), every - 1, changed))
    d.umount()
    d.check_log()

@test
def test_excluded_entries_kept_only_under_their_key(w):
    """The entries a mount leaves out are kept only while its cache's key
    lets them be used: a mount with other signing options (k=5) and
    -o exclude keeps the binary file's entry (no signing option changes it)
    but not the documents' (signed with the other options), so a mount
    with those options and without the exclude reads the documents and
    takes the binary file from the cache."""
    want, docs, names = standard(w)
    left_out = ['build/b%d.txt' % i for i in range(4)]
    for rel in left_out:
        write(os.path.join(w.src, rel), w.corpus.document())
    write(os.path.join(w.src, 'build/blob.bin'), bytes(range(256)) * 16)
    d = w.daemon()
    settled(w, d, len(docs) + len(left_out))
    d.umount()
    d.check_log()

    d = w.daemon(opts=['exclude=build/', 'k=5'])
    settled(w, d, len(docs))
    d.umount()
    d.check_log()

    d = w.daemon(opts=['k=5'])
    st = settled(w, d, len(docs) + len(left_out))
    check(status_int(st, 'cached') == len(docs) and
          status_int(st, 'cached_files') == len(docs) + 1,
          'cached: %s, cached_files: %s, wanted %d and %d (build/ read again but '
          'for the binary file)' % (st.get('cached'), st.get('cached_files'),
                                    len(docs), len(docs) + 1))
    d.umount()
    d.check_log()

@test
def test_max_size_change_keeps_cache(w):
    """A new -o max_size reads only the file it moves across the limit: the
    cache's keys leave the limit out and each entry is checked against it.
    Raised, the file that was too big is read and joins its family, every
    other document comes from the cache; lowered again, the file is too big
    at once (its signed entry is not used) and the rest is cached."""
    want, docs, names = standard(w)
    fam = names['family0']
    sizes = [os.path.getsize(os.path.join(w.src, rel)) for rel in docs]
    low = max(sizes)
    with open(os.path.join(w.src, fam[0])) as f:
        text = f.read()
    # The same unique terms as fam[0], over the limit: a near-duplicate.
    big, body = 'notes/big.txt', text
    while len(body.encode()) <= low:
        body += text
    write(os.path.join(w.src, big), body)
    grown = set(want - {frozenset(fam)}) | {frozenset(fam + [big])}

    d = w.daemon(opts=['max_size=%d' % low])
    st = settled(w, d, len(docs))
    check(status_int(st, 'too_big') == 1, 'too_big: %s, wanted 1' % st.get('too_big'))
    wait_clusters(w.mnt, want, 'the view without the big file')
    d.umount()
    d.check_log()

    d = w.daemon(opts=['max_size=%d' % (4 * len(body.encode()))])
    st = settled(w, d, len(docs) + 1)
    wait_clusters(w.mnt, grown, 'the big file with its family')
    check(status_int(st, 'cached') == len(docs) and status_int(st, 'too_big') == 0,
          'cached: %s, too_big: %s with the limit raised, wanted %d and 0 (only '
          '%s read)' % (st.get('cached'), st.get('too_big'), len(docs), big))
    d.umount()
    d.check_log()

    d = w.daemon(opts=['max_size=%d' % low])
    st = settled(w, d, len(docs))
    wait_clusters(w.mnt, want, 'the view without the big file again')
    check(status_int(st, 'cached') == len(docs) and status_int(st, 'too_big') == 1,
          'cached: %s, too_big: %s with the limit lowered, wanted %d and 1'
          % (st.get('cached'), st.get('too_big'), len(docs)))
    d.umount()
    d.check_log()


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
