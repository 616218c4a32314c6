#!/usr/bin/env python3
"""Document formats through a real mount (issue 8): office files and PDFs
join the clusters of the view, hostile files cost one helper each and leave
the daemon serving, every failure is counted with its reason in status.

    test_formats.py IMATCHFS IMATCH [TEST...]
    test_formats.py --list
"""

import ctypes
import ctypes.util
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (VALGRIND, Skip, by_doc_path, check, cluster_sets,  # noqa: E402
                  live_when, poll, read_status, run_tests, status_int)

TESTS = {}
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'data')


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def fill(src, names):
    """The named fixtures under office/, and the demo licences (but for the
    two the fixtures are made of) as the rest of the share."""
    os.makedirs(os.path.join(src, 'office'), exist_ok=True)
    for n in names:
        shutil.copy(os.path.join(FIXTURES, 'formats', n), os.path.join(src, 'office', n))
    lic = os.path.join(FIXTURES, 'demo', 'licenses')
    for n in sorted(os.listdir(lic)):
        if n not in ('CC0-1.0', 'Artistic'):
            shutil.copy(os.path.join(lic, n), os.path.join(src, n))


settled = live_when


def cluster_with(mnt, rel):
    for c in cluster_sets(mnt):
        if rel in c:
            return c
    return frozenset()


@test
def test_docx_and_pdf_share_a_cluster(w):
    """A docx and the PDF and .doc LibreOffice made of it, and an edited
    copy, are one cluster; the same programs' output for another text is
    not in it; status counts each format."""
    fill(w.src, ['cc0.docx', 'cc0.pdf', 'cc0.doc', 'cc0-edited.pdf', 'artistic.docx',
                 'artistic.pdf'])
    w.daemon()
    st = settled(w, lambda st: status_int(st, 'format_pdf') == 3, 'the PDFs to be read')
    check(status_int(st, 'format_docx') == 2 and status_int(st, 'format_doc') == 1
          and status_int(st, 'failed') == 0, 'per-format counts in status: %s' % st)
    want = {'office/cc0.docx', 'office/cc0.pdf', 'office/cc0.doc', 'office/cc0-edited.pdf'}
    poll(lambda: (cluster_with(w.mnt, 'office/cc0.docx') == want,
                  cluster_sets(w.mnt)), 'the docx, its PDF and .doc and the edited PDF in one cluster')
    check(not cluster_with(w.mnt, 'office/cc0.docx') & {'office/artistic.docx',
                                                        'office/artistic.pdf'},
          'another document of the same producer joined: %s' % cluster_sets(w.mnt))
    check(os.path.isdir(by_doc_path(w.mnt, 'office/cc0.pdf', 'dupes')), 'by-doc of the PDF')


@test
def test_zip_bomb_leaves_the_daemon_serving(w):
    """A zip bomb, an entity bomb, nested XML and broken PDFs each fail with
    their reason; the daemon goes on serving and follows changes; identical
    binary files are exact copies in clusters/."""
    fill(w.src, ['cc0.docx', 'bomb.docx', 'bomb.txt.bz2', 'entities.docx', 'nested.docx',
                 'truncated.pdf', 'garbage.pdf'])
    blob = os.urandom(8000)
    for n in ('a.bin', 'a-copy.bin'):
        with open(os.path.join(w.src, n), 'wb') as f:
            f.write(blob)
    d = w.daemon()
    st = settled(w, lambda st: status_int(st, 'failed') == 6, 'six failures')
    for key, n in (('failed_expansion', 2), ('failed_entities', 1),
                   ('failed_nesting', 1), ('failed_corrupt', 2), ('format_binary', 2)):
        check(status_int(st, key) == n, '%s: %s, want %d: %s' % (key, status_int(st, key), n, st))
    poll(lambda: (frozenset({'a.bin', 'a-copy.bin'}) in cluster_sets(w.mnt),
                  cluster_sets(w.mnt)), 'identical binary files as a cluster')
    check(not os.path.lexists(by_doc_path(w.mnt, 'office/bomb.docx')),
          'a failed file has no by-doc entry')
    shutil.copy(os.path.join(FIXTURES, 'formats', 'cc0.odt'), os.path.join(w.src, 'after.odt'))
    poll(lambda: ('after.odt' in cluster_with(w.mnt, 'office/cc0.docx'),
                  cluster_sets(w.mnt)), 'a new ODT after the bombs joins the docx')
    d.umount()
    d.check_log()


@test
def test_copied_folder_extracted_once_per_worker(w):
    """A folder of PDFs and office files copied into a mounted share: every
    copy joins its original as an exact copy, and each of the two workers
    extracts each text at most once however many copies come (status:
    copies_reused); the rest are read and hashed only."""
    names = ['cc0.pdf', 'artistic.pdf', 'cc0.docx']
    fill(w.src, names)
    d = w.daemon(opts=['threads=2'])
    st = settled(w, lambda st: status_int(st, 'format_pdf') == 2, 'the first scan')
    base = status_int(st, 'documents')
    copies = 12
    os.makedirs(os.path.join(w.src, 'backup'))
    for i in range(copies):
        for n in names:
            shutil.copy(os.path.join(w.src, 'office', n),
                        os.path.join(w.src, 'backup', '%02d-%s' % (i, n)))
    total = copies * len(names)
    settled(w, lambda st: status_int(st, 'documents') == base + total,
            'the %d copies to be documents' % total)
    st = read_status(w.mnt)  # a worker counts a copy before applying it
    reused = status_int(st, 'copies_reused')
    check(reused >= total - 2 * len(names),
          '%d of %d copies reused a result, want at least %d: %s'
          % (reused, total, total - 2 * len(names), st))
    for n in ('cc0.pdf', 'artistic.pdf'):
        want = {'office/' + n} | {'backup/%02d-%s' % (i, n) for i in range(copies)}
        poll(lambda: (want <= cluster_with(w.mnt, 'office/' + n), cluster_sets(w.mnt)),
             'the copies of %s in its cluster' % n)
        check(os.path.isdir(by_doc_path(w.mnt, 'backup/00-' + n, 'dupes')),
              'by-doc of a copy')
    d.umount()
    d.check_log()



@test
def test_backup_of_signed_documents_not_extracted_again(w):
    """A folder copied as a backup long after its documents were signed (by
    the first scan, then by another run of the daemon): each copy takes the
    result the index holds for its original and is not extracted again
    (status: copies_reused), and joins its original's cluster."""
    names = ['cc0.pdf', 'artistic.pdf', 'cc0.docx', 'artistic.docx']
    fill(w.src, names)

    def backup(d, to, pdfs):
        st = settled(w, lambda st: status_int(st, 'format_pdf') == pdfs, 'the scan')
        base = status_int(st, 'documents')
        # Copied beside the share and moved in whole: each copy is read
        # once, complete (a copy written in place can be read half-written
        # and again, and a second read finds the worker's own result).
        outside = os.path.join(os.path.dirname(w.src), to)
        shutil.copytree(os.path.join(w.src, 'office'), outside)
        os.rename(outside, os.path.join(w.src, to))
        settled(w, lambda st: status_int(st, 'documents') == base + len(names),
                'the copies in %s to be documents' % to)
        # Read after they showed: a worker counts a copy before applying it.
        st = read_status(w.mnt)
        reused = status_int(st, 'copies_reused')
        check(reused >= len(names),
              '%d of the %d copies in %s took their original\'s result: %s'
              % (reused, len(names), to, st))
        for n in names:
            poll(lambda: ('%s/%s' % (to, n) in cluster_with(w.mnt, 'office/' + n),
                          cluster_sets(w.mnt)), 'the copy of %s in its cluster' % n)
        d.umount()
        d.check_log()

    # Signed by this run's first scan (whole signatures in memory)...
    backup(w.daemon(opts=['threads=2']), 'backup1', 2)
    # ... and by the last run (in the state cache it saved).
    backup(w.daemon(opts=['threads=2']), 'backup2', 4)



@test
def test_filter_text_not_lent_to_a_copy_under_another_name(w):
    """An -o filter reads files by their name: a ZIP named *.xyz is a text
    through it, the same bytes named *.zip a binary file. A copy moved in
    under the other name is read as what it is, not given the text."""
    fill(w.src, [])
    lic = os.path.join(FIXTURES, 'demo', 'licenses', 'Artistic')
    z = os.path.join(w.top, 'a.xyz')
    with zipfile.ZipFile(z, 'w', zipfile.ZIP_STORED) as zf:
        with open(lic) as f:
            zf.writestr('notes.dat', f.read())
    shutil.copy(z, os.path.join(w.src, 'a.xyz'))
    d = w.daemon(opts=["filter=xyz:tr -c A-Za-z ' '", 'threads=2'])
    st = settled(w, lambda st: status_int(st, 'format_filter') == 1, 'the first scan')
    check(status_int(st, 'format_binary') == 0, 'no binary file yet: %s' % st)
    os.rename(z, os.path.join(w.src, 'a.zip'))
    st = settled(w, lambda st: status_int(st, 'format_binary') +
                 status_int(st, 'format_filter') == 2, 'the copy')
    check(status_int(st, 'format_binary') == 1 and status_int(st, 'copies_reused') == 0,
          'the copy named .zip is a binary file, not the filter\'s text: %s' % st)
    d.umount()
    d.check_log()


def rss_kib(pid, field='VmRSS'):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise AssertionError('no %s in /proc/%d/status' % (field, pid))


def random_words(path, n, seed):
    """@n words of 8 random letters, all but distinct (a word list, random
    data), written in a fraction of a second."""
    letters = bytes(97 + b % 26 for b in range(256))
    buf = bytearray(random.Random(seed).randbytes(9 * n).translate(letters))
    buf[8::9] = b' ' * n
    with open(path, 'wb') as f:
        f.write(buf)
    return buf


@test
def test_huge_word_lists_memory_bounded(w):
    """Word lists of 6 million random words (54 MB each, under max_size),
    one in the share when it is mounted and its near-duplicate added while
    mounted: the daemon's peak stays bounded (a text keeps at most 2^20
    terms; one such list took it to 1.75 GB, 290 bytes a word), and the two
    are still found alike."""
    if VALGRIND:
        raise Skip('resident memory means nothing under valgrind')
    fill(w.src, [])
    n = 6000000
    words = random_words(os.path.join(w.src, 'words.txt'), n, 1)
    d = w.daemon(opts=['threads=2'])
    st = settled(w, lambda st: status_int(st, 'documents') > 0, 'the first scan')
    base = status_int(st, 'documents')
    first = rss_kib(d.proc.pid, 'VmHWM')
    tail = n // 50 * 9
    words[-tail:] = random_words(os.path.join(w.top, 'tail'), n // 50, 2)
    outside = os.path.join(w.top, 'copy.txt')
    with open(outside, 'wb') as f:
        f.write(words)
    del words
    os.rename(outside, os.path.join(w.src, 'copy.txt'))
    settled(w, lambda st: status_int(st, 'documents') == base + 1, 'the copy')
    peak = rss_kib(d.proc.pid, 'VmHWM')
    # A worker holds the file read (54 MB) and at most 2^20 terms (about
    # 110 MB); the first scan the tree's term counts besides. 204 MB
    # measured; 1.75 GB before the cap.
    check(first < 350 * 1024 and peak < 350 * 1024,
          'the daemon peaked at %d MB in its first scan, %d MB in all'
          % (first // 1024, peak // 1024))
    poll(lambda: 'copy.txt' in cluster_with(w.mnt, 'words.txt'),
         'the two word lists in one cluster')
    d.umount()
    d.check_log()


def scan_sampled(w):
    """The `sampled:` count of `imatch scan -v` on the share (0 when it
    prints none)."""
    r = subprocess.run([w.imatch, 'scan', '-v', w.src], capture_output=True)
    check(r.returncode == 0, 'imatch scan -v failed (%d)' % r.returncode)
    m = re.search(r'^sampled: (\d+)', r.stderr.decode(errors='replace'), re.M)
    return int(m.group(1)) if m else 0


@test
def test_sampled_texts_counted(w):
    """A text of more than 2^20 unique terms (a word list) is signed from a
    sample of them. `imatch scan -v` counts such texts (`sampled:`); the
    mount's `status` said nothing of them. It counts them too, those its
    scan read and those read while mounted, as `imatch scan -v` does."""
    fill(w.src, [])
    n = 1200000  # past 2^20 words, 11 MB
    random_words(os.path.join(w.src, 'words.txt'), n, 1)
    d = w.daemon(opts=['threads=2'])
    st = settled(w, lambda st: status_int(st, 'documents') > 0, 'the first scan')
    base = status_int(st, 'documents')
    check(status_int(st, 'sampled') == 1,
          'status counts %s sampled texts after the first scan, not 1'
          % st.get('sampled'))
    outside = os.path.join(w.top, 'more.txt')
    random_words(outside, n, 2)
    os.rename(outside, os.path.join(w.src, 'more.txt'))
    st = settled(w, lambda st: status_int(st, 'documents') == base + 1, 'the second list')
    check(status_int(st, 'sampled') == 2 == scan_sampled(w),
          'status counts %s sampled texts, imatch scan -v %d, not 2'
          % (st.get('sampled'), scan_sampled(w)))
    d.umount()
    d.check_log()


@test
def test_huge_text_memory_given_back(w):
    """A text of 3 million distinct words (a word list, an export), under
    max_size: once it is signed the daemon gives back the memory its term
    set took, instead of keeping some 450 MB with its worker for good."""
    if VALGRIND:
        raise Skip('resident memory means nothing under valgrind')
    fill(w.src, [])
    d = w.daemon(opts=['threads=1'])
    st = settled(w, lambda st: status_int(st, 'documents') > 0, 'the first scan')
    base = status_int(st, 'documents')
    before = rss_kib(d.proc.pid)
    letters = 'abcdefghijklmnopqrstuvwxyz'
    outside = os.path.join(w.top, 'words.txt')
    with open(outside, 'w') as f:
        for i in range(3000000):
            word = ''.join(letters[i // 26 ** j % 26] for j in range(5))
            f.write('q' + word + ('\n' if i % 10 == 9 else ' '))
    os.rename(outside, os.path.join(w.src, 'words.txt'))
    settled(w, lambda st: status_int(st, 'documents') == base + 1, 'the word list')
    grown = rss_kib(d.proc.pid) - before
    check(grown < 100 * 1024, 'the daemon keeps %d MB more after signing the word list'
          % (grown // 1024))
    d.umount()
    d.check_log()


# The sigcache's layout (core/state/state.h): header, then per entry the
# fixed fields after its path, the sketch record, numbers and signatures.
STATE_HEAD = struct.Struct('<8sIIQQQ')
STATE_ENTRY = struct.Struct('<QqQIBBBIII16s')
SKETCH_RECORD = 4 + 24 + 104


def xxh3_64(data):
    lib = ctypes.util.find_library('xxhash')
    if not lib:
        raise Skip('no libxxhash to checksum a state file with')
    f = ctypes.CDLL(lib).XXH3_64bits
    f.restype = ctypes.c_uint64
    f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return f(bytes(data), len(data))


def state_patch(path, rel, fn):
    """Rewrite the entry of @rel in the sigcache at @path: @fn gets its
    fields (a list, in STATE_ENTRY's order) and its signatures (a bytearray)
    to change in place. The checksum is made again."""
    with open(path, 'rb') as f:
        b = bytearray(f.read())
    count = STATE_HEAD.unpack_from(b)[5]
    off = STATE_HEAD.size
    for _ in range(count):
        plen = struct.unpack_from('<I', b, off)[0]
        name = bytes(b[off + 4:off + 4 + plen]).decode()
        at = off + 4 + plen
        e = list(STATE_ENTRY.unpack_from(b, at))
        sigs_at = at + STATE_ENTRY.size + SKETCH_RECORD + 8
        nsigs = 20 * bin(e[8]).count('1')
        if name == rel:
            sigs = b[sigs_at:sigs_at + nsigs]
            fn(e, sigs)
            STATE_ENTRY.pack_into(b, at, *e)
            b[sigs_at:sigs_at + nsigs] = sigs
        off = sigs_at + nsigs
    check(off + 8 == len(b), 'the sigcache parsed to %d of %d bytes' % (off + 8, len(b)))
    struct.pack_into('<Q', b, off, xxh3_64(b[:off]))
    with open(path, 'wb') as f:
        f.write(b)


@test
def test_cache_of_more_terms_than_kept_read_again(w):
    """A cache entry with more unique terms than a document now keeps
    (2^20) was signed from all of them by an earlier version, so its
    signatures are not what a read gives now: the file is read again at
    the next start (made here by rewriting a licence's entry as such a
    version left a word list's), the other entries are still used."""
    fill(w.src, [])
    d = w.daemon()
    st = settled(w, lambda st: status_int(st, 'documents') > 0, 'the first scan')
    every = status_int(st, 'documents')
    sigs = os.path.join(by_doc_path(w.mnt, 'GPL-3'), 'signatures')
    with open(sigs) as f:
        fresh = f.read()
    d.umount()
    d.check_log()

    def older(e, s):
        e[9] = (1 << 20) + 1  # unique_terms
        s[0] ^= 0xff

    state_patch(os.path.join(w.state, 'sigcache'), 'GPL-3', older)
    d = w.daemon()
    st = settled(w, lambda st: status_int(st, 'documents') == every, 'the restart')
    with open(sigs) as f:
        shown = f.read()
    check(shown == fresh, 'GPL-3 shows the older entry\'s signatures:\n%s\nnot '
          'those read:\n%s' % (shown, fresh))
    check(status_int(st, 'cached_files') == every - 1,
          'cached_files: %s, wanted %d (all but GPL-3)'
          % (st.get('cached_files'), every - 1))
    d.umount()
    d.check_log()



@test
def test_status_keys_documented(w):
    """Every format_<name> and failed_<reason> line of status is named in
    the README's list of them (Formats, Visibility), and every name there
    is in status: a user reading a count there can look it up."""
    fill(w.src, ['cc0.docx'])
    w.daemon()
    st = settled(w, lambda st: status_int(st, 'format_docx') == 1, 'the docx to be read')
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                           'README.md')) as f:
        para = f.read().split('**Visibility.**', 1)[1].split('\n\n', 1)[0]
    for kind, after in (('format', 'for every format'), ('failed', 'for every reason')):
        listed = set(re.findall(r'`([a-z]+)`', para.split(after, 1)[1].split(')', 1)[0]))
        shown = {k[len(kind) + 1:] for k in st if k.startswith(kind + '_')}
        check(listed == shown, '%s_<name>: in status, not in the README: %s; in the'
              ' README, not in status: %s' % (kind, sorted(shown - listed),
                                               sorted(listed - shown)))

if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
