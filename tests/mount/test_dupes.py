#!/usr/bin/env python3
"""A mount's by-doc/PATH/dupes/ and by-doc/PATH/similarity against
`imatch dupes` of the same tree (DESIGN §2: one relation, one code path).

    test_dupes.py IMATCHFS IMATCH [TEST...]
    test_dupes.py --list
"""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (by_doc_documents, by_doc_path, check, decode_member,  # noqa: E402
                  make_tree, poll, read_dupes, read_status, run_tests,
                  status_int, write)
from test_mount import settled, state_lexicon  # noqa: E402

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def cli_dupes(w):
    """{path: {dupe: (similarity, kind)}} from `imatch dupes --json` with the
    lexicon the daemon saved."""
    r = subprocess.run([w.imatch, 'dupes', '--json', '--lexicon',
                        state_lexicon(w), w.src], capture_output=True)
    check(r.returncode == 0, 'imatch dupes failed: %s' % r.stderr.decode())
    return {d['path']: {x['path']: (x['similarity'], x['kind'])
                        for x in d['dupes']}
            for d in json.loads(r.stdout)['documents']}


def unescape(field):
    """A member name as the text formats write it: \\t, \\n, \\\\ and \\xHH."""
    def one(m):
        e = m.group(1)
        return chr(int(e[1:], 16)) if e[0] == 'x' else {'t': '\t', 'n': '\n'}.get(e, e)
    return re.sub(r'\\(x[0-9a-f]{2}|.)', one, field)


def read_similarity(mnt, rel):
    """{dupe: (similarity, kind)} from by-doc/REL/similarity, checking the
    line format and the order (by member name, as written)."""
    with open(by_doc_path(mnt, rel, 'similarity'), 'rb') as f:
        lines = os.fsdecode(f.read()).split('\n')
    check(lines[-1] == '', '%s/similarity does not end with a newline' % rel)
    out, names = {}, []
    for line in lines[:-1]:
        f = line.split('\t')
        check(len(f) == 3 and f[1] in ('exact', 'near'),
              '%s/similarity: bad line %r' % (rel, line))
        check(re.fullmatch(r'([^\\\x00-\x1f\x7f]|\\[tn\\]|\\x[0-9a-f]{2})*', f[2]),
              '%s/similarity: a lone backslash or a control byte in %r' % (rel, f[2]))
        s = float(f[0])
        check(0 < s <= 1, '%s/similarity: score %r' % (rel, f[0]))
        names.append(f[2])
        out[decode_member(unescape(f[2]))] = (s, f[1])
    check(names == sorted(names), '%s/similarity is not sorted' % rel)
    return out


def view_equals_cli(w, docs):
    want = cli_dupes(w)

    def ok():
        bad = [r for r in docs if read_dupes(w.mnt, r) != set(want.get(r, {}))]
        return not bad, bad
    poll(ok, 'every dupes/ to equal imatch dupes')
    for rel in docs:
        sims = read_similarity(w.mnt, rel)
        cli = want.get(rel, {})
        check(set(sims) == set(cli), '%s: similarity lists %s, imatch dupes %s'
              % (rel, sorted(sims), sorted(cli)))
        for d, (s, kind) in sims.items():
            check(kind == cli[d][1] and abs(s - cli[d][0]) < 1e-4,
                  '%s ~ %s: mount says %.4f %s, imatch dupes %.4f %s'
                  % (rel, d, s, kind, cli[d][0], cli[d][1]))
    return want


@test
def test_dupes_equal_imatch_dupes(w):
    """Every document's dupes/ and similarity equal `imatch dupes`; the
    byte-identical notes are exact at 1.0000; short texts with the same
    terms in other bytes are near."""
    _, docs, _ = make_tree(w.src, w.corpus)
    words = w.corpus.words[:14]
    write(os.path.join(w.src, 'notes/short-a.txt'), ' '.join(words) + '\n')
    write(os.path.join(w.src, 'notes/short-b.txt'),
          ' '.join(reversed(words)).upper() + '.\n')
    docs += ['notes/short-a.txt', 'notes/short-b.txt']
    d = w.daemon()
    settled(w, d, len(docs))
    check(by_doc_documents(w.mnt) == set(docs), 'by-doc lacks documents')
    want = view_equals_cli(w, docs)
    check(want.get('notes/todo.txt', {}).get('archive/todo-old.txt') ==
          (1.0, 'exact'), 'identical notes: %r' % want.get('notes/todo.txt'))
    check(want.get('notes/short-a.txt', {}).get('notes/short-b.txt', (0, ''))[1]
          == 'near', 'short texts with the same 14 terms are not near: %r'
          % want.get('notes/short-a.txt'))
    d.umount()
    d.check_log()


@test
def test_dupes_follow_a_new_copy(w):
    """A near-duplicate written while mounted appears in its original's
    dupes/ and similarity, and the view still equals `imatch dupes`."""
    _, docs, fams = make_tree(w.src, w.corpus)
    d = w.daemon()
    settled(w, d, len(docs))
    orig = fams['family0'][0]
    with open(os.path.join(w.src, orig)) as f:
        text = f.read()
    new = 'reports/family0-late.txt'
    write(os.path.join(w.src, new), w.corpus.near_duplicate(text))
    docs.append(new)
    poll(lambda: new in read_dupes(w.mnt, orig), 'the new copy in dupes/')
    settled(w, d, len(docs))
    view_equals_cli(w, docs)
    check(new in read_similarity(w.mnt, orig), 'the new copy not in similarity')
    d.umount()
    d.check_log()


def write_big_family(w, n):
    """big/doc000.txt ...: @n near-duplicates, one text of 200 words and a
    word of its own each (more than the 64 holders a key compares with
    all). Returns their paths, in name order."""
    text = w.corpus.document(words=200)
    big = ['big/doc%03d.txt' % i for i in range(n)]
    for i, rel in enumerate(big):
        own = 'zq' + ''.join(chr(97 + int(c)) for c in '%03d' % i)
        write(os.path.join(w.src, rel), '%s %s\n' % (text, own))
    return big


@test
def test_dupes_follow_a_burst_of_removals(w):
    """One `rm` of most of a big family of near-duplicates (each the same
    text plus a word of its own: more than the 64 holders a key compares
    with all), in name order, as a cleanup script does: once settled,
    every dupes/ and similarity the kernel had cached equals `imatch dupes`
    of what is left."""
    _, docs, _ = make_tree(w.src, w.corpus)
    big = write_big_family(w, 100)
    docs += big
    d = w.daemon()
    settled(w, d, len(docs))
    before = view_equals_cli(w, docs)
    # The first holders of a key are compared with all the others.
    check(len(before.get('big/doc000.txt', {})) == 99,
          'the family is not one: %r' % sorted(before.get('big/doc000.txt', {})))
    gone = big[:70]
    subprocess.run(['rm', '--'] + [os.path.join(w.src, g) for g in gone],
                   check=True)
    docs = [r for r in docs if r not in gone]
    settled(w, d, len(docs))
    after = view_equals_cli(w, docs)
    check(set(after.get('big/doc099.txt', {})) == set(big[70:99]),
          'dupes of the last: %r' % sorted(after.get('big/doc099.txt', {})))
    d.umount()
    d.check_log()


@test
def test_dupes_follow_a_lexicon_rebuild(w):
    """A big family of near-duplicates (the same text, a word of its own
    each: more than the 64 holders a key compares with all) copied into a
    small mounted tree makes it outgrow its lexicon; once the lexicon is
    built again and every document signed again (their records replaced
    in batches), every dupes/ and similarity equals `imatch dupes` with
    the new lexicon."""
    _, docs, _ = make_tree(w.src, w.corpus)
    d = w.daemon()
    settled(w, d, len(docs))
    before = status_int(read_status(w.mnt), 'relexicons') or 0
    big = write_big_family(w, 150)
    docs += big
    settled(w, d, len(docs))
    poll(lambda: ((status_int(read_status(w.mnt), 'relexicons') or 0) > before,
                  read_status(w.mnt).get('relexicons')),
         'the lexicon to be built again')
    settled(w, d, len(docs))
    after = view_equals_cli(w, docs)
    check(len(after.get('big/doc000.txt', {})) == 149,
          'the family is not one: %d dupes of the first'
          % len(after.get('big/doc000.txt', {})))
    d.umount()
    d.check_log()


@test
def test_similarity_escapes_names(w):
    """Member names in similarity are escaped as `imatch dupes` writes
    paths (\\t, \\n, \\\\, \\xHH): a name with a newline, a TAB or an ESC
    stays in one record of three fields, and reads back exactly."""
    text = w.corpus.document()
    odd = ['new\nline.txt', 'tab\there.txt', 'back\\slash.txt', 'dir\n/x.txt',
           'esc\x1b[31m.txt']
    for p in ['plain.txt'] + odd:
        write(os.path.join(w.src, p), text)
    d = w.daemon()
    settled(w, d, 1 + len(odd))
    poll(lambda: (len(read_dupes(w.mnt, 'plain.txt')) == len(odd),
                  read_dupes(w.mnt, 'plain.txt')), 'the copies in dupes/')
    with open(by_doc_path(w.mnt, 'plain.txt', 'similarity'), 'rb') as f:
        raw = f.read()
    check(raw.count(b'\n') == len(odd), 'similarity holds %d lines, not %d:\n%r'
          % (raw.count(b'\n'), len(odd), raw))
    sims = read_similarity(w.mnt, 'plain.txt')
    check(sims == {p: (1.0, 'exact') for p in odd}, 'similarity reads back as %r' % sims)
    check(b'new\\nline.txt' in raw and b'back\\\\slash.txt' in raw and
          b'esc\\x1b[31m.txt' in raw,
          'not escaped as imatch dupes does: %r' % raw)
    # `imatch dupes` writes the same escapes.
    r = subprocess.run([w.imatch, 'dupes', '--lexicon', state_lexicon(w), w.src],
                       capture_output=True)
    check(r.returncode == 0 and b'new\\nline.txt' in r.stdout,
          'imatch dupes: %r' % r.stdout)
    view_equals_cli(w, ['plain.txt'] + odd)
    d.umount()
    d.check_log()


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
