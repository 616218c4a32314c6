#!/usr/bin/env python3
"""redundant/ and by-doc/.../keeper and cluster in a real mount (issue 11):
the view lists exactly what `imatch dedupe --near` with the same keep options
and lexicon plans, and follows changes in the source; dup-dirs/ lists what
`imatch scan --dirs` does.

    test_redundant.py IMATCHFS IMATCH [TEST...]
    test_redundant.py --list
"""

import json
import os
import random
import re
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (by_doc_documents, by_doc_path, check,  # noqa: E402
                  decode_member, encode_member, make_tree, poll, read_status,
                  requests, run_tests, status_int, write)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def settle(w, n):
    def ok():
        st = read_status(w.mnt)
        done = (status_int(st, 'pending') == 0 and st.get('phase') == 'live'
                and (status_int(st, 'signed') or 0) +
                (status_int(st, 'rejected') or 0) == n)
        return done, st
    poll(ok, 'status to settle with %d documents' % n)


def state_lexicon(w):
    names = [n for n in os.listdir(w.state) if 'lexicon' in n and '.tmp' not in n]
    check(names, 'no lexicon in the state directory: %s' % os.listdir(w.state))
    return os.path.join(w.state, sorted(names)[0])


def plan(w, args):
    """{relative path: relative keeper} of `imatch dedupe --near`."""
    r = subprocess.run([w.imatch, 'dedupe', '--near', '--lexicon',
                        state_lexicon(w)] + args + [w.src], capture_output=True)
    check(r.returncode == 0, 'imatch dedupe failed: %s' % r.stderr.decode())
    out = {}
    for line in r.stdout.decode('utf-8', 'surrogateescape').splitlines():
        l = json.loads(line)
        out[os.path.relpath(l['path'], w.src)] = os.path.relpath(l['keeper'], w.src)
    return out


def view(w):
    """{relative path: relative keeper} as the mount shows it: redundant/,
    each member's target and its by-doc/.../keeper."""
    out = {}
    for name in os.listdir(os.path.join(w.mnt, 'redundant')):
        rel = decode_member(name)
        target = os.readlink(os.path.join(w.mnt, 'redundant', name))
        check(target == os.path.join(w.src, rel),
              'redundant/%s points to %r' % (name, target))
        keeper = os.readlink(by_doc_path(w.mnt, rel, 'keeper'))
        out[rel] = os.path.relpath(keeper, w.src)
    return out


def make_share(w):
    """make_tree's near-duplicate families plus exact copies, some of them
    in a directory to protect, with distinct mtimes."""
    clusters, docs, names = make_tree(w.src, w.corpus)
    rng = random.Random(7)
    for i, fam in enumerate(sorted(names.values())):
        with open(os.path.join(w.src, fam[0]), 'rb') as f:
            data = f.read()
        for j, d in enumerate(('backup', 'originals')[:1 + i % 2]):
            p = '%s/%s-%d.txt' % (d, os.path.basename(fam[0])[:-4], j)
            write(os.path.join(w.src, p), data)
            docs.append(p)
    t = 1_600_000_000
    for i, p in enumerate(sorted(docs, key=lambda p: rng.random())):
        os.utime(os.path.join(w.src, p), (t + i, t + i))
    return docs


@test
def test_redundant_equals_dedupe_plan(w):
    """redundant/ lists exactly the plan of `imatch dedupe --near` with the
    mount's keep_rule and protect; each keeper symlink names the plan's
    keeper; non-redundant documents have no keeper entry; cluster links lead
    to the document's cluster; status counts them."""
    docs = make_share(w)
    w.daemon(opts=['protect=' + os.path.join(w.src, 'originals'),
                   'keep_rule=protect:newest:name'])
    settle(w, len(docs))
    want = plan(w, ['--protect', os.path.join(w.src, 'originals'),
                    '--keep', 'protect,newest,name'])
    check(len(want) >= 5 and any(k.startswith('originals/') for k in want.values()),
          'the share plans too little to test: %r' % want)
    # Nothing listed the plan yet: status counts it without keeping it.
    check(status_int(read_status(w.mnt), 'redundant') == len(want),
          'status redundant before a listing: %r' % read_status(w.mnt).get('redundant'))
    got = view(w)
    check(got == want, 'redundant/ and keepers differ from imatch dedupe:\n'
          'view: %r\nplan: %r' % (got, want))
    check(status_int(read_status(w.mnt), 'redundant') == len(want),
          'status redundant: %r' % read_status(w.mnt).get('redundant'))
    for rel in docs:
        names = os.listdir(by_doc_path(w.mnt, rel))
        check(('keeper' in names) == (rel in want),
              'by-doc/%s lists %r' % (rel, names))
        # The same as extended attributes of the document's directory.
        d = by_doc_path(w.mnt, rel)
        attrs = os.listxattr(d)
        check(('user.imatch.keeper' in attrs) == (rel in want) and
              ('user.imatch.cluster' in attrs) == ('cluster' in names),
              'by-doc/%s has the attributes %r' % (rel, attrs))
        if rel in want:
            check(os.getxattr(d, 'user.imatch.keeper').decode() ==
                  os.path.join(w.src, want[rel]) and
                  float(os.getxattr(d, 'user.imatch.similarity')) >= 0.9,
                  'user.imatch.* of %s' % rel)
        if 'cluster' in names:
            check(os.getxattr(d, 'user.imatch.cluster').decode() ==
                  os.path.basename(os.readlink(by_doc_path(w.mnt, rel,
                                                           'cluster'))),
                  'user.imatch.cluster of %s' % rel)
        if 'cluster' in names:
            link = by_doc_path(w.mnt, rel, 'cluster')
            members = {decode_member(n) for n in os.listdir(link)}
            check(rel in members, 'by-doc/%s/cluster -> %s does not hold it'
                  % (rel, os.readlink(link)))


@test
def test_redundant_follows_the_source(w):
    """After `ls -lR` (every cache filled): removing a keeper makes the next
    keeper take over, a new copy appears in redundant/, and removing a
    planned file takes it out, each time equal to the new plan."""
    docs = make_share(w)
    w.daemon()
    settle(w, len(docs))
    subprocess.run(['ls', '-lR', w.mnt], capture_output=True)
    want = plan(w, [])
    got = view(w)
    check(got == want, 'view %r\nplan %r' % (got, want))
    keeper = sorted(set(want.values()))[0]
    os.unlink(os.path.join(w.src, keeper))
    docs.remove(keeper)
    gone = sorted(want)[0] if sorted(want)[0] != keeper else sorted(want)[1]
    os.unlink(os.path.join(w.src, gone))
    docs.remove(gone)
    copy = 'late/copy-of-' + os.path.basename(keeper)
    src_of = next(p for p, k in want.items() if k == keeper and p != gone)
    with open(os.path.join(w.src, src_of), 'rb') as f:
        write(os.path.join(w.src, copy), f.read())
    docs.append(copy)
    settle(w, len(docs))
    want = plan(w, [])
    check(gone not in want and keeper not in want.values() and copy in want,
          'the new plan reflects the changes: %r' % want)
    poll(lambda: (view(w) == want, view(w)), 'redundant/ to equal the new plan')
    check(not os.path.lexists(os.path.join(w.mnt, 'redundant', encode_member(gone))),
          'a removed file is gone from redundant/')


@test
def test_redundant_plans_binary_copies(w):
    """Byte-identical binary files are exact copies like any other:
    redundant/ lists those `imatch dedupe` plans, linked to the source (a
    binary has no by-doc/ entry, so no keeper link), and follows the keeper's
    removal, after which the next oldest copy keeps."""
    docs = make_share(w)
    blob = b'\x89PNG\r\n\x1a\n\x00' + bytes(range(256)) * 12
    bins = ['img/a.png', 'img/old/a.png', 'backup/a.png']
    for i, rel in enumerate(bins):
        write(os.path.join(w.src, rel), blob)
        os.utime(os.path.join(w.src, rel), (1_500_000_000 + i,) * 2)
    write(os.path.join(w.src, 'img/b.png'), blob + b'\0')
    w.daemon()
    settle(w, len(docs))

    def listed():
        names = {decode_member(n) for n in os.listdir(os.path.join(w.mnt, 'redundant'))}
        for rel in names:
            target = os.readlink(os.path.join(w.mnt, 'redundant', encode_member(rel)))
            check(target == os.path.join(w.src, rel), 'redundant/%s points to %r' % (rel, target))
        return names

    want = plan(w, [])
    check(want.get('img/old/a.png') == 'img/a.png' and want.get('backup/a.png') == 'img/a.png'
          and 'img/b.png' not in want, 'the plan of the binary copies: %r' % want)
    got = listed()
    check(got == set(want), 'redundant/ %s\nplan %s' % (sorted(got), sorted(want)))
    check(not os.path.lexists(by_doc_path(w.mnt, 'backup/a.png')), 'a binary file has a by-doc/ entry')
    os.unlink(os.path.join(w.src, 'img/a.png'))
    poll(lambda: (plan(w, []).get('backup/a.png') == 'img/old/a.png', plan(w, [])),
         'imatch dedupe to plan the next oldest copy')
    want = plan(w, [])
    poll(lambda: (listed() == set(want), listed()), 'redundant/ to follow the removed keeper')
    check('img/old/a.png' not in listed(), 'the new keeper is still listed')


@test
def test_redundant_follows_a_rewrite_with_the_same_bytes(w):
    """keep_rule=newest: a planned file written again with the same bytes
    (the same signatures, only a newer mtime) becomes its group's keeper in
    redundant/, as in the new plan of `imatch dedupe` (the index keeps no
    mtime; the plan follows the nodes')."""
    docs = make_share(w)
    w.daemon(opts=['keep_rule=newest:name'])
    settle(w, len(docs))
    want = plan(w, ['--keep', 'newest,name'])
    got = view(w)
    check(got == want, 'view %r\nplan %r' % (got, want))
    planned = sorted(want)[0]
    path = os.path.join(w.src, planned)
    with open(path, 'rb') as f:
        data = f.read()
    write(path, data)
    os.utime(path, (2_000_000_000, 2_000_000_000))
    want = plan(w, ['--keep', 'newest,name'])
    check(planned not in want and planned in want.values(),
          'the rewritten file keeps its group in the new plan: %r' % want)
    poll(lambda: (view(w) == want, view(w)), 'redundant/ to equal the new plan')


@test
def test_apply_hardlink_keeps_every_name_in_the_view(w):
    """`imatch apply` of a --action hardlink plan puts a link to the keeper
    at each copy's name by exchanging it with a temporary name
    (RENAME_EXCHANGE): every name is still a document afterwards, so by-doc/
    must still list each one, and redundant/ equal the new plan."""
    docs = make_share(w)
    w.daemon()
    settle(w, len(docs))
    r = subprocess.run([w.imatch, 'dedupe', '--action', 'hardlink', '--lexicon',
                        state_lexicon(w), w.src], capture_output=True)
    check(r.returncode == 0 and r.stdout.count(b'\n') >= 3,
          'imatch dedupe --action hardlink planned too little: %r' % r.stderr)
    r = subprocess.run([w.imatch, 'apply', '-'], input=r.stdout,
                       capture_output=True)
    check(r.returncode == 0, 'imatch apply failed: %s' % r.stderr.decode())
    def listed():
        got = by_doc_documents(w.mnt)
        return got == set(docs), ('missing', sorted(set(docs) - got),
                                  'extra', sorted(got - set(docs)))
    poll(listed, 'by-doc/ to list every name after the hard links')
    settle(w, len(docs))
    want = plan(w, [])
    poll(lambda: (view(w) == want, view(w)), 'redundant/ to equal the new plan')


@test
def test_redundant_keeps_payslips(w):
    """Three months' payslips (the same words, other amounts and dates) are
    near-duplicates of each other but none is redundant: redundant/ lists
    none of them and they have no keeper, as imatch dedupe plans; an edited
    copy of one with its figures is listed, kept by that month's."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    os.pardir, 'cli'))
    from test_cli import payslip
    docs = make_share(w)
    for m in (1, 2, 3):
        rel = 'pay/payslip-2024-%02d.txt' % m
        write(os.path.join(w.src, rel), payslip(m).encode())
        os.utime(os.path.join(w.src, rel), (1_700_000_000 + m,) * 2)
        docs.append(rel)
    w.daemon()
    settle(w, len(docs))
    want = plan(w, [])
    got = view(w)
    check(got == want, 'view %r\nplan %r' % (got, want))
    check(not [p for p in got if p.startswith('pay/')],
          'redundant/ lists payslips: %r' % got)
    for m in (1, 2, 3):
        names = os.listdir(by_doc_path(w.mnt, 'pay/payslip-2024-%02d.txt' % m))
        check('keeper' not in names and 'cluster' in names,
              'payslip %d: a near-duplicate without a keeper: %r' % (m, names))
    edited = 'pay/payslip-2024-01-edited.txt'
    write(os.path.join(w.src, edited), payslip(1, 'river pilot').encode())
    docs.append(edited)
    settle(w, len(docs))
    want = plan(w, [])
    check({p: k for p, k in want.items() if p.startswith('pay/')} ==
          {edited: 'pay/payslip-2024-01.txt'},
          'the edited copy is planned, kept by January: %r' % want)
    poll(lambda: (view(w) == want, view(w)), 'redundant/ to equal the new plan')


def readme_review(mnt):
    """The commands of the README's review of redundant/ ("In the mount"),
    as a user at MOUNT types them: /mnt/dupes is MOUNT."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                           'README.md')) as f:
        bullet = f.read().split('- **In the mount.**', 1)[1].split('\n- **', 1)[0]
    check('```sh\n' in bullet, 'no ```sh block in the README\'s "In the mount"')
    block = textwrap.dedent(bullet.split('```sh\n', 1)[1].split('```', 1)[0])
    check('/mnt/dupes' in block, 'the README\'s review names no /mnt/dupes:\n' + block)
    return block.replace('/mnt/dupes', mnt)


@test
def test_readme_review_names_every_keeper(w):
    """The README's review of redundant/, run as written in sh, prints one
    line per listed file with the file kept in its place, whatever the
    names: a newline (also at the end), a TAB, a leading dash, spaces, a
    backslash, '*', '%' and '/', a leading '.', a name too long for the
    view (shortened), and a binary copy (no by-doc/ entry) named there."""
    rng = random.Random(11)
    pairs = [('new\nline.txt', 'orig/new.txt'), ('tab\there.txt', 'keep\tme.txt'),
             ('-dash.txt', 'orig/dash.txt'), (' two  spaces .txt', 'orig/spaces.txt'),
             ('ends in a newline\n', 'orig/newline.txt'), ('back\\slash', 'orig/back'),
             ('star*', 'orig/star'), ('50%/of.txt', 'orig/50%.txt'),
             ('.hidden.txt', 'orig/hidden.txt'),
             ('deep/' + 'x' * 250 + '.txt', 'orig/deep.txt')]
    near = ('draft\nv2.txt', 'orig/draft.txt')
    binary = ('img/photo\ncopy.png', 'img/photo.png')
    for i, (copy, orig) in enumerate(pairs + [near, binary]):
        if (copy, orig) == binary:
            text = b'\x89PNG\r\n\x1a\n\x00' + rng.randbytes(3000)
        else:
            text = w.corpus.document(rng).encode()
        write(os.path.join(w.src, orig), text)
        write(os.path.join(w.src, copy),
              w.corpus.near_duplicate(text.decode(), rng).encode()
              if (copy, orig) == near else text)
        os.utime(os.path.join(w.src, orig), (1_500_000_000 + i,) * 2)
        os.utime(os.path.join(w.src, copy), (1_600_000_000 + i,) * 2)
    w.daemon(opts=['hidden'])
    settle(w, 2 * len(pairs) + 2)
    every = pairs + [near, binary]
    poll(lambda: (len(os.listdir(os.path.join(w.mnt, 'redundant'))) == len(every),
                  os.listdir(os.path.join(w.mnt, 'redundant'))),
         'redundant/ to list every copy')

    def esc(rel):
        path = os.path.join(w.src, rel)
        return path.replace('\\', '\\\\').replace('\t', '\\t').replace('\n', '\\n')
    want = sorted('%s\t->\t%s' % (esc(c), esc(o)) for c, o in every)
    for shell in ('sh', 'bash'):
        r = subprocess.run([shell, '-c', readme_review(w.mnt)], capture_output=True,
                           cwd=w.top)
        out = os.fsdecode(r.stdout).split('\n')
        check(r.returncode == 0 and not r.stderr, '%s: the review failed (%d): %s'
              % (shell, r.returncode, os.fsdecode(r.stderr)))
        check(out[-1] == '', '%s: the review\'s output does not end in a newline' % shell)
        got = sorted(l for l in out[:-1] if '\t' in l)
        check(got == want, '%s: the review printed:\n  %s\nnot:\n  %s'
              % (shell, '\n  '.join(map(repr, got)), '\n  '.join(map(repr, want))))
        listed = [l for l in out[:-1] if '\t' not in l]
        check(len(listed) == len(every), '%s: `ls` of redundant/ printed %d lines for %d'
              ' files: %r' % (shell, len(listed), len(every), listed))


def cluster_named(mnt, rel):
    """The name of the directory of clusters/ that lists @rel."""
    top = os.path.join(mnt, 'clusters')
    for name in os.listdir(top):
        if encode_member(rel) in os.listdir(os.path.join(top, name)):
            return name
    return None


@test
def test_plan_cached_and_invalidated(w):
    """redundant/, by-doc/.../keeper and cluster are cached by the kernel
    like the rest of the view: a second `ls -lR` of them asks the daemon
    for no lookup, listing or link. A change still shows at once: removing
    the member that names a cluster renames it, and every other member's
    cached cluster link follows; removing a keeper moves its group's
    keeper links and redundant/ to the new plan."""
    docs = make_share(w)
    d = w.daemon(args=['-d'])
    settle(w, len(docs))
    parts = [os.path.join(w.mnt, p) for p in ('redundant', 'by-doc')]
    asked = []
    for _ in range(3):
        start = os.path.getsize(d.log)
        r = subprocess.run(['ls', '-lR'] + parts, capture_output=True)
        check(r.returncode == 0, 'ls -lR: %s' % r.stderr.decode())
        got = requests(d, start)
        asked.append(sum(got.get(op, 0) for op in
                         ('LOOKUP', 'READDIR', 'READDIRPLUS', 'READLINK', 'GETATTR')))
    # A late event of the first scan may still drop an entry or two; before
    # these were cached, every walk asked for each listing again.
    check(asked[2] * 10 <= asked[0],
          'a warm ls -lR of redundant/ and by-doc/ asked the daemon for '
          'about as much as a cold one (lookups, listings, links and '
          'attributes per walk: %r)' % asked)

    # A cluster renamed: a new member holding a smaller signature than its
    # name (the original with one more word, tried word after word), and
    # every other member's cached cluster link must follow.
    first = next(m for m in docs if os.path.lexists(by_doc_path(w.mnt, m, 'cluster')))
    name = os.path.basename(os.readlink(by_doc_path(w.mnt, first, 'cluster')))
    members = [m for m in docs if os.path.lexists(by_doc_path(w.mnt, m, 'cluster'))
               and os.readlink(by_doc_path(w.mnt, m, 'cluster')).endswith(name)]
    with open(os.path.join(w.src, members[0])) as f:
        text = f.read()
    words = sorted({x for p in docs for x in re.findall(r'[a-z]{6,}', open(
        os.path.join(w.src, p)).read())} - set(re.findall(r'[a-z]+', text)))
    tries = os.path.join(w.top, 'tries')
    os.makedirs(tries)
    for i, word in enumerate(words[:400]):
        write(os.path.join(tries, '%d.txt' % i), text + '\n' + word + '\n')
    r = subprocess.run([w.imatch, 'sign', '--lexicon', state_lexicon(w)] +
                       [os.path.join(tries, '%d.txt' % i) for i in range(min(400, len(words)))],
                       capture_output=True, text=True)
    check(r.returncode == 0, 'imatch sign: %s' % r.stderr)
    smaller = [l.split('\t')[0] for l in r.stdout.splitlines()
               if min(x for x in l.split('\t')[1:] if x != '-') < name]
    check(smaller, 'no added word gives a signature below %s' % name)
    added = 'late/' + os.path.basename(members[0])
    with open(smaller[0], 'rb') as f:
        write(os.path.join(w.src, added), f.read())
    docs.append(added)
    settle(w, len(docs))
    others = [m for m in members if m != added]

    def renamed():
        got = {m: os.path.basename(os.readlink(by_doc_path(w.mnt, m, 'cluster')))
               for m in others}
        want = {m: cluster_named(w.mnt, m) for m in others}
        return got == want and name not in got.values(), (got, want)
    poll(renamed, 'the cached cluster links of a renamed cluster')

    want = plan(w, [])
    subprocess.run(['ls', '-lR'] + parts, capture_output=True)
    keeper = sorted(set(want.values()))[0]
    os.unlink(os.path.join(w.src, keeper))
    docs.remove(keeper)
    settle(w, len(docs))
    want = plan(w, [])
    check(keeper not in want.values(), 'the new plan keeps %s' % keeper)
    poll(lambda: (view(w) == want, view(w)), 'cached keepers and redundant/ to follow')


def scan_dirs(w):
    """The groups of `imatch scan --dirs --json`: a set of frozensets of
    relative directories."""
    r = subprocess.run([w.imatch, 'scan', '--dirs', '--json', '--lexicon',
                        state_lexicon(w), w.src], capture_output=True)
    check(r.returncode == 0, 'imatch scan --dirs failed: %s' % r.stderr.decode())
    return {frozenset(g['dirs']) for g in json.loads(r.stdout)['dir_groups']}


def view_dirs(w):
    """The groups of dup-dirs/, each group named after its first directory
    and holding a symlink to each of its directories."""
    top = os.path.join(w.mnt, 'dup-dirs')
    out = set()
    for name in os.listdir(top):
        members = sorted(decode_member(n) for n in os.listdir(os.path.join(top, name)))
        check(members and members[0] == decode_member(name),
              'dup-dirs/%s is not named after its first directory: %r' % (name, members))
        for m in members:
            target = os.readlink(os.path.join(top, name, encode_member(m)))
            check(target == os.path.join(w.src, m),
                  'dup-dirs/%s/%s points to %r' % (name, encode_member(m), target))
        out.add(frozenset(members))
    return out


@test
def test_dup_dirs_follow_the_source(w):
    """A folder copied twice (one copy with a re-saved document) is one group
    of dup-dirs/, equal to `imatch scan --dirs`; after `ls -lR`, a document
    removed from one copy takes that copy out of the group, and a renamed
    copy is listed under its new name."""
    make_tree(w.src, w.corpus)
    rng = random.Random(3)
    texts = [w.corpus.document(rng) for _ in range(4)]
    for i, t in enumerate(texts):
        write(os.path.join(w.src, 'project/ch%d.txt' % i), t)
        write(os.path.join(w.src, 'project/old/ch%d.txt' % i), t)
        write(os.path.join(w.src, 'backup/project (2)/ch%d.txt' % i), t)
        write(os.path.join(w.src, 'backup/project (2)/old/ch%d.txt' % i), t)
        write(os.path.join(w.src, 'usb/project/ch%d.txt' % i),
              w.corpus.near_duplicate(t, rng) if i == 0 else t)
        write(os.path.join(w.src, 'usb/project/old/ch%d.txt' % i), t)
    # Not only the copy: the copy is a group, not its parent.
    write(os.path.join(w.src, 'backup/index.txt'), w.corpus.document(rng))
    write(os.path.join(w.src, 'usb/readme.txt'), w.corpus.document(rng))
    w.daemon()
    docs = sum(len(f) for _, _, f in os.walk(w.src))
    settle(w, docs)
    want = scan_dirs(w)
    check(frozenset(['project', 'backup/project (2)', 'usb/project']) in want,
          'imatch scan --dirs misses the copied folder: %r' % want)
    check(view_dirs(w) == want, 'dup-dirs/ %r\nscan --dirs %r' % (view_dirs(w), want))
    check(status_int(read_status(w.mnt), 'dup_dirs') == len(want),
          'status dup_dirs: %r' % read_status(w.mnt).get('dup_dirs'))
    subprocess.run(['ls', '-lR', w.mnt], capture_output=True)
    os.unlink(os.path.join(w.src, 'backup/project (2)/old/ch3.txt'))
    os.rename(os.path.join(w.src, 'usb'), os.path.join(w.src, 'stick'))
    settle(w, docs - 1)
    want = scan_dirs(w)
    check(not any('backup/project (2)' in g for g in want) and
          any('stick/project' in g for g in want),
          'the new groups reflect the changes: %r' % want)
    poll(lambda: (view_dirs(w) == want, view_dirs(w)), 'dup-dirs/ to equal scan --dirs')


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
