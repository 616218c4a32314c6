#!/usr/bin/env python3
"""Black-box tests of the imatch command line at its edges: trees too small
for a lexicon, files that are not documents, odd names, bad values.

Usage: test_edges.py IMATCH CASE [SRCDIR]
"""
import functools
import io
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import zipfile

import test_cli  # its run(), shared
from test_cli import Failure, check

run = functools.partial(test_cli.run, text=True)

SRC = None  # the source tree, for the man page (docs)

BINARY = bytes(range(256)) * 12  # a NUL in the first block: binary


def write(root, files):
    for rel, body in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(body if isinstance(body, bytes) else body.encode())


def scan_lines(root):
    out, _ = run("scan", root)
    return sorted(out.splitlines())


def case_few_documents(tmp):
    """Fewer than two texts with terms make no lexicon; exact copies are
    still found: binaries, failed extractions and texts without terms."""
    root = os.path.join(tmp, "s")
    write(root, {"b1": BINARY, "b2": BINARY})
    got = scan_lines(root)
    check(got == ["b1\tb2"], "scan, binaries alone: %r" % got)
    doc = json.loads(run("scan", "--json", root)[0])
    check([c["members"] for c in doc["clusters"]] == [["b1", "b2"]],
          "scan --json, binaries alone: %r" % doc["clusters"])
    write(root, {"t1.pdf": "%PDF-1.4 broken\n", "t2.pdf": "%PDF-1.4 broken\n",
                 "t3": "one text file with several words inside\n",
                 "e1": "a b c\n", "e2": "a b c\n"})
    got = scan_lines(root)
    check(got == ["b1\tb2", "e1\te2", "t1.pdf\tt2.pdf"],
          "scan, one text with terms: %r" % got)
    doc = json.loads(run("scan", "--json", root)[0])
    check(sorted(c["members"] for c in doc["clusters"]) ==
          [["b1", "b2"], ["e1", "e2"], ["t1.pdf", "t2.pdf"]],
          "scan --json: %r" % doc["clusters"])
    check(doc["counts"]["files"] == 7 and doc["counts"]["binary"] == 2,
          "scan --json counts: %r" % doc["counts"])
    out, _ = run("dupes", root)
    check("e1\te2" in out.splitlines() and "e2\te1" in out.splitlines(),
          "dupes: %r" % out)
    # Every exact copy is planned: binaries and failed extractions too.
    for near in ([], ["--near"]):
        out, err = run("dedupe", *near, root)
        plan = [json.loads(l) for l in out.splitlines()]
        check(sorted((os.path.basename(p["path"]),
                      os.path.basename(p["keeper"])) for p in plan) ==
              [("b2", "b1"), ("e2", "e1"), ("t2.pdf", "t1.pdf")],
              "dedupe %s: %r %s" % (near, plan, err))


def case_verbose_names_failures(tmp):
    """scan -v names each file whose extraction failed, with the reason
    the summary counts it under, besides the files that cannot be read."""
    root = os.path.join(tmp, "s")
    data = os.path.join(SRC, "tests", "data", "formats")
    with open(os.path.join(data, "garbage.pdf"), "rb") as f:
        garbage = f.read()
    with open(os.path.join(data, "bomb.docx"), "rb") as f:
        bomb = f.read()
    # An EPUB whose package names a file that is not in it, and no page.
    book = io.BytesIO()
    with zipfile.ZipFile(book, "w") as z:
        z.writestr("mimetype", "application/epub+zip")
        z.writestr("META-INF/container.xml",
                   '<container><rootfiles><rootfile full-path='
                   '"../../../../etc/passwd"/></rootfiles></container>')
    write(root, {"sub/garbage.pdf": garbage, "bomb.docx": bomb,
                 "nobook.epub": book.getvalue(),
                 "a.txt": "one text file with several words inside\n",
                 "b.txt": "another text with some different words\n"})
    write(root, {"big.txt": "a text larger than the limit given\n" * 100})
    _, err = run("scan", "-v", "--max-size", "3400", root)
    lines = err.splitlines()
    for want in ("imatch: not read big.txt: 3500 bytes, larger than "
                 "--max-size", "too_big: 1",
                 "imatch: no text from sub/garbage.pdf: extraction failed: "
                 "corrupt",
                 "imatch: no text from bomb.docx: extraction failed: "
                 "expansion",
                 "imatch: no text from nobook.epub: extraction failed: "
                 "corrupt",
                 "failed_corrupt: 2", "failed_expansion: 1"):
        check(want in lines, "scan -v says %r: %s" % (want, err))
    _, err = run("scan", root)
    check("no text from" not in err, "only with -v: %s" % err)


class Skipped(Exception):
    pass


def run_as_nobody(*args):
    """Run imatch ARGS as nobody when root (who reads anything, so that
    permissions would test nothing), else as is; check that it exits 0 and
    return (stdout, stderr str). The caller makes the tree reachable."""
    as_nobody = None
    if os.geteuid() == 0:
        def as_nobody():
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
    try:
        p = subprocess.run([test_cli.IMATCH] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=300, preexec_fn=as_nobody)
    except PermissionError:
        p = None
    if p is None or (as_nobody and p.returncode == 126):
        raise Skipped("nobody cannot run %s" % test_cli.IMATCH)
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == 0, "%s: exit %d: %s" % (args, p.returncode, err))
    return p.stdout.decode(), err


def case_verbose_names_unreadable(tmp):
    """scan -v names a directory it could not open as it names a file it
    could not read; the summary counts both in errors. dedupe -v, with or
    without --near, names them too. Root reads anything: as root imatch
    runs as nobody."""
    root = os.path.join(tmp, "s")
    text = "several words of one text file, enough of them to count\n"
    write(root, {"a.txt": text, "b.txt": text, "locked/c.txt": text,
                 "locked/deeper/d.txt": text, "noread.txt": text,
                 "ig/.imatchignore": "*.log\n", "ig/e.log": "a log\n"})
    os.chmod(tmp, 0o711)
    os.chmod(os.path.join(root, "locked"), 0)
    os.chmod(os.path.join(root, "noread.txt"), 0)
    os.chmod(os.path.join(root, "ig", ".imatchignore"), 0)
    unreadable = ["imatch: cannot read locked: Permission denied",
                  "imatch: cannot read noread.txt: Permission denied",
                  "imatch: cannot read ig/.imatchignore: Permission denied"]
    out, err = run_as_nobody("scan", "-v", root)
    for want in unreadable + ["errors: 3"]:
        check(want in err.splitlines(), "scan -v says %r: %s" % (want, err))
    check(out == "a.txt\tb.txt\n", "clusters: %r" % out)
    for near in ([], ["--near"]):
        out, err = run_as_nobody("dedupe", "-v", *near, root)
        for want in unreadable:
            check(want in err.splitlines(),
                  "dedupe -v %s says %r: %s" % (near, want, err))
        check([os.path.relpath(json.loads(l)["path"], root)
               for l in out.splitlines()] ==
              ["b.txt"], "dedupe %s plan: %r" % (near, out))


def case_unsearchable_counts(tmp):
    """A directory that can be read but not searched lists names that
    cannot be stat'ed nor opened: each is an error and no file, whether
    one thread reads each file as the walk finds it or several read what
    it queues, in a first scan as with --lexicon; a file that can be
    stat'ed but not read is a file and an error; a fifo (never opened: it
    would block) and a symlink are other."""
    root = os.path.join(tmp, "s")
    text = "several words of one text file, enough of them to count\n"
    write(root, {"a.txt": text, "b.txt": text,
                 "c.txt": "other words in a third text file, not a copy\n",
                 "noread.txt": text, "rnox/x.txt": text,
                 "rnox/y.txt": text, "rnox/sub/z.txt": text})
    os.mkfifo(os.path.join(root, "fifo"))
    os.symlink("a.txt", os.path.join(root, "link.txt"))
    lex = os.path.join(tmp, "lex")
    run("lexicon", "build", "-o", lex, root)
    os.chmod(tmp, 0o711)
    os.chmod(os.path.join(root, "noread.txt"), 0)
    os.chmod(os.path.join(root, "rnox"), 0o444)
    want = {"files": 4, "errors": 4, "directories": 2, "other": 2,
            "hidden": 0, "documents": 3}
    named = ["imatch: cannot read noread.txt: Permission denied",
             "imatch: cannot read rnox/sub: Permission denied",
             "imatch: cannot read rnox/x.txt: Permission denied",
             "imatch: cannot read rnox/y.txt: Permission denied"]
    for lexicon in ([], ["--lexicon", lex]):
        got = {}
        for jobs in ("1", "2"):
            out, err = run_as_nobody("scan", "-v", "--json", "-j", jobs,
                                     *lexicon, root)
            counts = json.loads(out)["counts"]
            got[jobs] = counts
            check({k: counts[k] for k in want} == want,
                  "scan -j %s %s counts %r" % (jobs, lexicon, counts))
            check(sorted(l for l in err.splitlines()
                         if l.startswith("imatch: cannot read")) == named,
                  "scan -j %s %s -v names: %s" % (jobs, lexicon, err))
        check(got["1"] == got["2"], "-j 1 and -j 2 count alike: %r" % got)


def case_dupes_documents_only(tmp):
    """dupes prints what a mount's by-doc/ holds: documents only, so two
    identical binaries are no line of their own (they are in scan's
    clusters); identical texts are."""
    root = os.path.join(tmp, "s")
    text = "the same words in both files, several of them, enough\n"
    write(root, {"bin1": BINARY, "bin2": BINARY, "a.txt": text,
                 "b.txt": text, "c.txt": "something else entirely here\n"})
    got = scan_lines(root)
    check(got == ["a.txt\tb.txt", "bin1\tbin2"], "scan: %r" % got)
    out, _ = run("dupes", root)
    check(out.splitlines() == ["a.txt\tb.txt", "b.txt\ta.txt"],
          "dupes: %r" % out)
    doc = json.loads(run("dupes", "--json", root)[0])
    check([d["path"] for d in doc["documents"]] == ["a.txt", "b.txt"],
          "dupes --json: %r" % doc["documents"])
    out, _ = run("dupes", "--csv", root)
    check(out.splitlines()[1:] == ["a.txt,b.txt,1.0000,exact",
                                   "b.txt,a.txt,1.0000,exact"],
          "dupes --csv: %r" % out)


def case_explain_no_terms(tmp):
    """explain A B says what is true of files without terms: two empty
    files have the same bytes (and are still not linked), and a file
    without terms has no sketch to compare."""
    root = os.path.join(tmp, "s")
    write(root, {"e1": "", "e2": "", "b1": BINARY, "b2": BINARY,
                 "t1": "alpha bravo charlie delta echo foxtrot golf\n",
                 "t2": "hotel india juliet kilo lima mike november\n",
                 "t3": "oscar papa quebec romeo sierra tango uniform\n"})
    lex = os.path.join(tmp, "lex")
    run("lexicon", "build", "-o", lex, root)

    def explain(a, b):
        out, _ = run("explain", "--lexicon", lex, os.path.join(root, a),
                     os.path.join(root, b))
        return {l.split(":", 1)[0]: l.split(":", 1)[1].strip()
                for l in out.splitlines() if ":" in l}

    got = explain("e1", "e2")
    check(got["bytes"].startswith("identical"), "empty files: %r" % got)
    check(got["sketch"].startswith("none for a and b"),
          "empty files' sketch: %r" % got)
    check(got["linked"].startswith("no"), "empty files linked: %r" % got)
    got = explain("b1", "b2")
    check("binary (no known format), 0 unique terms" in
          [l.strip() for l in run("explain", "--lexicon", lex,
                                  os.path.join(root, "b1"),
                                  os.path.join(root, "t1"))[0].splitlines()],
          "a binary is called so, as scan and status call it")
    check(got["bytes"] == "identical" and
          got["sketch"].startswith("none for a and b") and
          got["linked"].startswith("yes, exact"), "binaries: %r" % got)
    got = explain("t1", "e1")
    check(got["bytes"].startswith("different") and
          got["sketch"].startswith("none for b"), "text, empty: %r" % got)
    got = explain("t1", "t2")
    check(got["bytes"] == "different" and " bins agree" in got["sketch"],
          "two texts: %r" % got)


def raw_control(s):
    """The control bytes in @s but none that ends a line of it."""
    return [c for c in s if (ord(c) < 0x20 or ord(c) == 0x7f) and
            c not in "\t\n"]


def case_names_escaped(tmp):
    """Names with a newline or an ESC: the text outputs (scan, dedupe
    --format text and sh, apply) and every message on stderr write them
    escaped, as scan always wrote \\n, \\t and \\\\; control bytes as \\xHH."""
    root = os.path.join(tmp, "s")
    text = "the same words in both files, several of them, enough\n"
    write(root, {"a\nb": text, "c\x1bd\x7f": text, "e\\x1b": text,
                 "other": "something else entirely here and more\n"})
    out, _ = run("scan", root)
    check(out == "a\\nb\tc\\x1bd\\x7f\te\\\\x1b\n", "scan: %r" % out)
    names = [test_cli.unescape(f.encode()) for f in out[:-1].split("\t")]
    check(names == [b"a\nb", b"c\x1bd\x7f", b"e\\x1b"],
          "scan's names do not unescape: %r" % names)
    out, _ = run("dupes", root)
    check(not raw_control(out) and len(out.splitlines()) == 3,
          "dupes: %r" % out)
    out, _ = run("dedupe", "--format", "text", root)
    check(not raw_control(out) and "c\\x1bd\\x7f" in out,
          "dedupe --format text: %r" % out)
    out, _ = run("dedupe", "--format", "sh", root)
    check(not raw_control(out) and "/a\\nb\n" in out,
          "dedupe --format sh: %r" % out)
    plan, _ = run("dedupe", root)
    check("\\u001bd\\u007f" in plan, "dedupe JSON unchanged: %r" % plan)
    out, err = run("apply", "--dry-run", "-", stdin=plan.encode())
    check(not raw_control(out) and "\\x1b" in out, "apply: %r" % out)
    # Messages: one line each, no control byte.
    bad = os.path.join(tmp, "no\nsuch\x1bdir")
    _, err = run("scan", bad, code=1)
    check(err.count("\n") == 1 and not raw_control(err) and
          "no\\nsuch\\x1bdir" in err, "scan error: %r" % err)
    _, err = run("dedupe", "--protect", bad, root, code=2)
    check(err.splitlines()[0].endswith(
        "no\\nsuch\\x1bdir: No such file or directory") and
          not raw_control(err), "dedupe error: %r" % err)
    lex = os.path.join(tmp, "lex")
    run("lexicon", "build", "-o", lex, root)
    _, err = run("explain", "--lexicon", lex, bad, code=1)
    check(err.count("\n") == 1 and not raw_control(err),
          "explain error: %r" % err)
    bad_lex = os.path.join(tmp, "lex\x1b\n")
    _, err = run("scan", "--lexicon", bad_lex, root, code=1)
    check(err.count("\n") == 1 and "lex\\x1b\\n" in err,
          "lexicon error: %r" % err)


def case_usage_hint(tmp):
    """Every usage error (exit 2) says what is wrong, then points to
    --help: bad values as well as unknown options and missing operands."""
    root = os.path.join(tmp, "s")
    write(root, {"a": "some words for a text file\n"})
    for args in (["scan", "-k", "99", root],
                 ["scan", "--nidf", "0.9:0.1", root],
                 ["scan", "--keep", "2", root],
                 ["dupes", "--similarity", "7", root],
                 ["dedupe", "--keep", "bogus", root],
                 ["dedupe", "--action", "bogus", root],
                 ["dedupe", "--format", "bogus", root],
                 ["dedupe", "--near", "--action", "hardlink", root],
                 ["scan", "--jobs", "x", root],
                 ["scan", "--bogus", root],
                 ["scan"],
                 ["lexicon", "build", root]):
        _, err = run(*args, code=2)
        lines = err.splitlines()
        check(lines[0].startswith("imatch: ") and
              lines[-1] == "Try 'imatch %s --help'."
              % ("lexicon build" if args[0] == "lexicon" else args[0]),
              "imatch %s: %r" % (" ".join(args), err))
    _, err = run("lexicon", "bogus", code=2)
    check(err.splitlines()[-1] == "Try 'imatch --help'.",
          "imatch lexicon bogus: %r" % err)
    # A missing operand shows the synopsis too, before the hint.
    _, err = run("dupes", code=2)
    check(err.splitlines() == ["imatch: dupes: missing operand",
                               "Usage: imatch dupes [OPTIONS] DIR",
                               "Try 'imatch dupes --help'."],
          "imatch dupes: %r" % err)
    # An option that builds a lexicon does nothing beside a given one:
    # said, not an error (scripts pass both).
    lex = os.path.join(tmp, "lex")
    write(root, {"b": "other words for another text file\n"})
    run("lexicon", "build", "-o", lex, root)
    for opt in (["--nidf", "0.3:0.5"], ["--secondary-cap", "10"]):
        _, err = run("scan", "--lexicon", lex, *opt, root)
        check(err == "imatch: scan: %s is ignored: the lexicon given "
              "(--lexicon) fixes it\n" % opt[0], "scan %s: %r" % (opt, err))
    _, err = run("scan", "--lexicon", lex, root)
    check(err == "", "scan --lexicon alone says nothing: %r" % err)
    out, _ = run("scan", "--json", "--lexicon", lex, "--nidf", "0.3:0.5",
                 root)
    check(json.loads(out)["params"]["nidf"] == [0.2, 0.8],
          "--json shows the lexicon's own window: %s" % out)


def random_words(path, n, seed):
    """@n words of 8 random letters (a word list, random data: all but
    distinct), written in a fraction of a second."""
    letters = bytes(97 + b % 26 for b in range(256))
    rnd = random.Random(seed)
    buf = bytearray(rnd.randbytes(9 * n).translate(letters))
    buf[8::9] = b" " * n
    with open(path, "wb") as f:
        f.write(buf)
    return buf


def peak_kib(*args):
    """Run imatch with @args; check it exits 0; return its peak resident
    memory (KiB), its stdout and its stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([test_cli.IMATCH, *args], stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        msg = err.read().decode()
        check(p.returncode == 0, "imatch %s: exit %d: %s" % (
            " ".join(args), p.returncode, msg[-500:]))
        out.seek(0)
        return usage.ru_maxrss, out.read().decode(), msg


def sanitized():
    """Whether imatch is built with a sanitizer, whose shadow memory and
    quarantine make its resident size no measure of ours."""
    p = subprocess.run(["ldd", test_cli.IMATCH], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return any(lib in p.stdout for lib in ("libasan", "libtsan"))


def case_huge_word_lists(tmp):
    """Two word lists of 6 million random words each (54 MB, under
    max_size), one a near-duplicate of the other: scanning them takes a
    bounded memory whatever their number of distinct words (it took 1.3 GB
    for 4 million, 150 bytes a word and more), with one worker or two, and
    they are still found alike from the sample of their terms."""
    root = os.path.join(tmp, "s")
    os.makedirs(root)
    n = 6000000
    words = random_words(os.path.join(root, "words.txt"), n, 1)
    # A near-duplicate: its last 2% of words replaced.
    tail = n // 50 * 9
    words[-tail:] = random_words(os.path.join(tmp, "tail"), n // 50, 2)
    with open(os.path.join(root, "copy.txt"), "wb") as f:
        f.write(words)
    del words
    write(root, {"notes.txt": "a short note with a few words in it\n"})
    for j in ("1", "2"):
        kib, out, err = peak_kib("scan", "-v", "-j", j, root)
        # Per worker: the file read (54 MB) and at most 2^20 terms (about
        # 110 MB); besides, the tree's term counts (2 x 2^20 terms). 278
        # and 492 to 622 MB measured; 2.0 and 3.1 GB before the cap.
        check(sanitized() or kib < 350 * int(j) * 1024,
              "scan -j %s of two word lists: %d MB resident at its peak"
              % (j, kib // 1024))
        check(out.splitlines() == ["copy.txt\twords.txt"],
              "scan -j %s: the word lists not found alike: %r" % (j, out))
        check("\nsampled: 2 " in err,
              "scan -v -j %s does not count the two word lists sampled: %s"
              % (j, err))


def heap_kib(pid):
    """The size of process @pid's heap (brk), in KiB."""
    kib = 0
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            if line.rstrip().endswith("[heap]"):
                lo, hi = line.split()[0].split("-")
                kib += (int(hi, 16) - int(lo, 16)) // 1024
    return kib


def case_memory_limit_no_heap_reserve(tmp):
    """Under a limit on its address space or its data (ulimit -v, -d) imatch
    keeps glibc's heap as it is: a reserve taken for huge pages counts in
    both, and its tables' own mappings then lacked it (ulimit -v 45000: a
    scan needing 25 MB failed). Seen while it blocks reading a plan."""
    if sanitized():
        raise Skipped("a sanitizer's allocator has no brk heap of ours")
    for res, name in ((resource.RLIMIT_AS, "-v"), (resource.RLIMIT_DATA, "-d")):
        def limit(res=res):
            resource.setrlimit(res, (1 << 40, 1 << 40))
        p = subprocess.Popen([test_cli.IMATCH, "apply", "--dry-run", "-"],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, preexec_fn=limit)
        try:
            # Asleep twice in a row: blocked on the plan, main() has run.
            asleep, deadline = 0, time.monotonic() + 10
            while asleep < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
                with open("/proc/%d/stat" % p.pid) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                asleep = asleep + 1 if state == "S" else 0
            check(asleep == 2, "imatch apply - never waited for its plan")
            kib = heap_kib(p.pid)
        finally:
            p.kill()
            p.wait()
        check(kib < 16 * 1024, "under ulimit %s imatch has a heap of %d KiB"
              % (name, kib))


def case_docs(tmp):
    """--help and imatch(1) say what the commands do: dedupe --json is JSON
    lines; the man page has dupes and explain's two-file form, the formats
    beyond text, HTML and e-mail, and binary files as exact copies."""
    out, _ = run("dedupe", "--help")
    json_help = [l for l in out.splitlines() if "--json" in l]
    check(len(json_help) == 1 and "JSON lines" in json_help[0],
          "dedupe --help: %r" % json_help)
    out, _ = run("scan", "--help")
    check("a JSON document" in out and "\\xHH" in out,
          "scan --help: %r" % out)
    if not SRC:
        return
    with open(os.path.join(SRC, "packaging/imatch.1.rst")) as f:
        man = f.read()
    synopsis = man.split("DESCRIPTION")[0]
    check("**imatch dupes**" in synopsis and
          "*FILE* [*OTHER*]" in synopsis, "man SYNOPSIS: %s" % synopsis)
    check("\n**dupes** *DIR*\n" in man and
          "\n**explain** *FILE* [*OTHER*]\n" in man, "man COMMANDS")
    desc = man.split("\nDESCRIPTION\n")[1].split("\nSCOPE\n")[0]
    check("PDF" in desc and "docx" in desc and "odt" in desc and
          "EPUB" in desc and "skipped." not in desc and
          "exact-copy tier" in desc, "man DESCRIPTION: %s" % desc)


CASES = {
    "few_documents": case_few_documents,
    "dupes_documents_only": case_dupes_documents_only,
    "explain_no_terms": case_explain_no_terms,
    "names_escaped": case_names_escaped,
    "usage_hint": case_usage_hint,
    "docs": case_docs,
    "huge_word_lists": case_huge_word_lists,
    "memory_limit_no_heap_reserve": case_memory_limit_no_heap_reserve,
    "verbose_names_failures": case_verbose_names_failures,
    "verbose_names_unreadable": case_verbose_names_unreadable,
    "unsearchable_counts": case_unsearchable_counts,
}


def main():
    global SRC
    test_cli.IMATCH = sys.argv[1]
    case = CASES[sys.argv[2]]
    SRC = sys.argv[3] if len(sys.argv) > 3 else None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            case(tmp)
        except Skipped as e:
            print("SKIP %s: %s" % (sys.argv[2], e))
            return 77
        except Failure as e:
            print("FAIL %s: %s" % (sys.argv[2], e))
            return 1
    print("ok", sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
