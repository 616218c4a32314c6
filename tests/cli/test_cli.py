#!/usr/bin/env python3
"""Black-box tests of the imatch command line.

Usage: test_cli.py IMATCH CASE [SRCDIR]

Each CASE builds a small generated tree of near-duplicates in a temporary
directory, runs the built binary and checks what a user would: clusters,
formats, exit codes and messages. Python standard library only.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

# Randomized lexicons at the defaults (core/params.c im_params_init()).
DEFAULT_K = 4

IMATCH = None
SRCDIR = None


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def run(*args, code=0, stdin=None, text=False):
    """Run imatch with @stdin (bytes) as its input; check its exit code;
    return (stdout, stderr str), stdout as bytes or, with @text, str.
    The other test scripts share it (and IMATCH, which their main sets)."""
    p = subprocess.run([IMATCH, *map(str, args)], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == code,
          "imatch %s: exit %d, expected %d; stderr: %s"
          % (" ".join(map(str, args)), p.returncode, code, err.strip()))
    return (p.stdout.decode("utf-8", "replace") if text else p.stdout), err


# ---- The generated tree ---------------------------------------------------

def vocabulary(rng, n=3000):
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz")
                          for _ in range(rng.randint(4, 10))))
    return sorted(words)


def document(rng, vocab, nsent=30):
    """Sentences of Zipf-distributed words: frequent words are shared by many
    documents, rare ones by few, as in real text."""
    sents = []
    for _ in range(nsent):
        n = rng.randint(6, 14)
        words = [vocab[min(int(rng.paretovariate(0.9)) - 1, len(vocab) - 1)
                       if rng.random() < 0.5 else rng.randrange(len(vocab))]
                 for _ in range(n)]
        sents.append(" ".join(words).capitalize() + ".")
    return sents


def variant(rng, sents, how):
    """A near-duplicate with the same set of terms: a copy a user would call
    the same document (reordered, reformatted, re-cased, in HTML)."""
    s = list(sents)
    if how == "reorder":
        rng.shuffle(s)
        return "\n".join(s) + "\n"
    if how == "reflow":
        return "  ".join(s).replace(". ", ".\n\n") + "\n\n"
    if how == "upper":
        return "\n".join(x.upper() for x in s) + "\n"
    if how == "repeat":
        return "\n".join(s + s[:3]) + "\n"
    if how == "html":
        body = "".join("<p>%s</p>\n" % x for x in s)
        return ("<!DOCTYPE html>\n<html><head><title>%s</title>"
                "<style>p { color: red }</style></head>\n<body>\n%s"
                "<script>var x = 1;</script></body></html>\n"
                % (s[0].split()[0], body))
    raise ValueError(how)


# name -> list of (relative path as bytes, how)
FAMILIES = [
    [(b"reports/q1.txt", None), (b"reports/q1-copy.txt", "reorder"),
     (b"archive/2023/q1-old.txt", "reflow"), (b"mail/q1.html", "html")],
    [(b"notes/alpha.txt", None), (b"notes/alpha (1).txt", "upper"),
     (b"odd/tab\tname.txt", "repeat")],
    [(b"notes/beta.txt", None), (b"odd/new\nline.txt", "reorder"),
     (b"odd/bytes-\xff\xfe.txt", "reflow")],
    [(b"deep/a/b/c/d/e/gamma.txt", None), (b"gamma-100%.txt", "repeat")],
]


def payslip(month, job="harbour pilot"):
    """One month's payslip: the same twelve lines of words every month,
    other amounts and dates (what the word rules drop: each has more than
    one digit)."""
    m = month
    return ("Employee: Jane Marlowe, %s\n"
            "Employer: Northern Estuary Port Authority\n"
            "Basic salary: %d.49\n"
            "Overtime allowance: %d.20\n"
            "Night shift supplement: %d.75\n"
            "Pension contribution: %d.33\n"
            "Income tax withheld: %d.10\n"
            "National insurance: %d.60\n"
            "Student loan repayment: %d.00\n"
            "Net payment: %d.91\n"
            "Bank account ending: 4471\n"
            "Payment date: 2024-%02d-01\n"
            % (job, 2910 + m, 400 + 7 * m, 105 + 10 * m, 201 + m,
               604 + 3 * m, 208 + m, 9 + m, 2401 + 11 * m, m))


def make_tree(root, seed=7, singles=30):
    """Write the tree; return the expected clusters as a set of frozensets of
    relative paths (bytes)."""
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    rootb = os.fsencode(root)

    def put(rel, text):
        path = os.path.join(rootb, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(text.encode("utf-8"))

    expected = set()
    for fam in FAMILIES:
        base = document(rng, vocab)
        for rel, how in fam:
            put(rel, "\n".join(base) + "\n" if how is None
                else variant(rng, base, how))
        expected.add(frozenset(rel for rel, _ in fam))
    for i in range(singles):
        put(b"misc/single%02d.txt" % i, "\n".join(document(rng, vocab)) + "\n")
    # Not documents, or not read: a binary file, an empty file, a hidden
    # near-duplicate (skipped without --hidden) and a symlink to a member.
    with open(os.path.join(rootb, b"misc/blob.bin"), "wb") as f:
        f.write(b"\x00\x01binary\x00" * 100)
    put(b"misc/empty.txt", "")
    put(b".hidden/q1.txt", open(os.path.join(rootb, b"reports/q1.txt"),
                                encoding="utf-8").read())
    os.symlink("../reports/q1.txt", os.path.join(rootb, b"misc/link.txt"))
    return expected


def unescape(field):
    """Undo the text format's escaping of \\t, \\n, \\\\ and \\xHH (bytes)."""
    out, i = bytearray(), 0
    while i < len(field):
        c = field[i:i + 1]
        if c == b"\\" and field[i + 1:i + 2] == b"x":
            out.append(int(field[i + 2:i + 4], 16))
            i += 4
        elif c == b"\\" and i + 1 < len(field):
            nxt = field[i + 1:i + 2]
            out += {b"t": b"\t", b"n": b"\n", b"\\": b"\\"}[nxt]
            i += 2
        else:
            out += c
            i += 1
    return bytes(out)


def parse_scan(out):
    lines = out.split(b"\n")
    check(lines[-1] == b"", "scan output ends with a newline")
    return [[unescape(f) for f in line.split(b"\t")] for line in lines[:-1]]


# ---- Cases -----------------------------------------------------------------

def case_scan_clusters(tmp):
    tree = os.path.join(tmp, "tree")
    expected = make_tree(tree)
    out, _ = run("scan", tree)
    clusters = parse_scan(out)
    got = set(frozenset(c) for c in clusters)
    check(got == expected,
          "clusters found:\n  %s\nexpected:\n  %s"
          % (sorted(map(sorted, got)), sorted(map(sorted, expected))))
    for c in clusters:
        check(c == sorted(c), "members sorted within a line: %r" % c)
    keys = [(-len(c), c[0]) for c in clusters]
    check(keys == sorted(keys),
          "largest cluster first, ties by first member: %r" % clusters)
    check(all(not p.startswith(b"/") and not p.startswith(b"./")
              for c in clusters for p in c),
          "paths are relative to DIR")
    # A raw look at the escaping of the TAB and newline names.
    check(b"odd/tab\\tname.txt" in out and b"odd/new\\nline.txt" in out,
          "TAB and newline in names are written \\t and \\n")


def case_scan_deterministic(tmp):
    tree = os.path.join(tmp, "tree")
    make_tree(tree)
    a, _ = run("scan", "-j", "1", tree)
    b, _ = run("scan", "-j", "4", tree)
    c, _ = run("scan", "--jobs", "4", tree)
    check(a == b, "-j1 and -j4 print the same clusters")
    check(b == c, "two runs print the same clusters")
    check(a.count(b"\n") == len(FAMILIES), "one line per cluster")


def case_scan_json(tmp):
    tree = os.path.join(tmp, "tree")
    expected = make_tree(tree)
    out, err = run("scan", "--json", "-v", tree)
    doc = json.loads(out.decode("utf-8"))
    check(set(doc) >= {"root", "lexicon", "params", "counts", "clusters"},
          "JSON keys: %s" % sorted(doc))
    got = set()
    for cl in doc["clusters"]:
        check(len(cl["name"]) == 40 and
              all(ch in "0123456789abcdef" for ch in cl["name"]),
              "cluster name is 40 lowercase hex digits: %r" % cl["name"])
        check(cl["size"] == len(cl["members"]) >= 2, "size matches members")
        # Non-UTF-8 bytes come back through surrogateescape.
        got.add(frozenset(m.encode("utf-8", "surrogateescape")
                          for m in cl["members"]))
    check(got == expected, "JSON clusters equal the expected ones: %s"
          % sorted(map(sorted, got)))
    n = doc["counts"]
    nfiles = sum(len(f) for f in FAMILIES) + 30 + 2
    check(n["files"] == nfiles,
          "files counted: %d, expected %d" % (n["files"], nfiles))
    check(n["documents"] == n["signed"] + n["rejected"] and
          n["documents"] == nfiles - n["binary"] - n["too_big"] - n["errors"],
          "documents are the texts read: %r" % n)
    check(n["binary"] == 1, "one binary file counted")
    check(n["hidden"] == 1 and n["other"] == 1,
          "one hidden directory and one symlink skipped: %r" % n)
    check(n["clusters"] == len(FAMILIES), "cluster count")
    for key in ("documents", "signed", "rejected", "binary", "errors",
                "clusters", "MB/s"):
        check(key in err, "-v summary mentions %s: %s" % (key, err))
    text, _ = run("scan", tree)
    check(len(parse_scan(text)) == len(doc["clusters"]),
          "text and JSON agree")
    # --hidden reads the hidden copy: it joins its family.
    out, _ = run("scan", "--hidden", tree)
    check(b".hidden/q1.txt" in out, "--hidden includes dot-names")


def case_sign_format(tmp):
    tree = os.path.join(tmp, "tree")
    make_tree(tree)
    lex = os.path.join(tmp, "tree.lex")
    _, err = run("lexicon", "build", "-o", lex, tree)
    check("documents" in err and "primary" in err and "secondary" in err,
          "lexicon build prints a summary: %s" % err)
    fam = [os.path.join(tree, rel.decode()) for rel, _ in FAMILIES[0]]
    for k in (None, "3", "0"):
        args = ["sign", "--lexicon", lex] + (["-k", k] if k else []) + fam
        out, _ = run(*args)
        lines = out.decode().splitlines()
        check(len(lines) == len(fam), "one line per file")
        ncols = (DEFAULT_K if k is None else int(k)) + 2
        rows = [line.split("\t") for line in lines]
        for path, row in zip(fam, rows):
            check(row[0] == path, "first column is the path as given")
            check(len(row) == ncols,
                  "K+1 signature columns (-k %s): got %d" % (k, len(row) - 1))
            for s in row[1:]:
                check(s == "-" or (len(s) == 40 and
                                   all(c in "0123456789abcdef" for c in s)),
                      "a signature is 40 hex digits or '-': %r" % s)
        # The family shares its signatures (same terms).
        check(all(r[1:] == rows[0][1:] for r in rows),
              "near-duplicates with the same terms sign alike")
        check(any(s != "-" for s in rows[0][1:]), "the family is signed")
    # Without --lexicon, sign takes $IMATCH_LEXICON, and says what is
    # missing when neither is there.
    env = dict(os.environ, IMATCH_LEXICON=lex)
    p = subprocess.run([IMATCH, "sign", fam[0]], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with_flag, _ = run("sign", "--lexicon", lex, fam[0])
    check(p.returncode == 0 and p.stdout == with_flag,
          "sign with IMATCH_LEXICON equals sign --lexicon")
    env.pop("IMATCH_LEXICON")
    p = subprocess.run([IMATCH, "sign", fam[0]], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(p.returncode == 2 and b"--lexicon" in p.stderr
          and b"STATE_DIR/lexicon" in p.stderr,
          "sign without a lexicon is a usage error naming --lexicon and "
          "where a mount keeps its lexicon")
    # scan with the saved lexicon gives the same clusters as without.
    a, _ = run("scan", tree)
    b, _ = run("scan", "--lexicon", lex, tree)
    check(a == b, "scan --lexicon (built from DIR) equals scan DIR")
    out, _ = run("terms", fam[0])
    row = out.decode().rstrip("\n").split("\t")
    check(row[0] == fam[0] and len(row) > 20 and row[1:] == sorted(row[1:]),
          "terms: path then its sorted unique terms")
    check(all(len(t) >= 4 for t in row[1:]), "terms have 4+ characters")


def case_explain(tmp):
    tree = os.path.join(tmp, "tree")
    make_tree(tree)
    lex = os.path.join(tmp, "tree.lex")
    run("lexicon", "build", "-o", lex, tree)
    tiny = os.path.join(tmp, "tiny.txt")
    with open(tiny, "w") as f:
        f.write("only three words\n")
    out, _ = run("explain", "--lexicon", lex, tiny)
    text = out.decode()
    check("rejected" in text, "explain says the tiny file is rejected")
    check("unique terms: 3" in text, "explain shows |U|: %s" % text)
    member = os.path.join(tree, "reports/q1.txt")
    out, _ = run("explain", "--lexicon", lex, "-v", member)
    text = out.decode()
    check("format: text" in text and "status: signed" in text,
          "explain shows format and status: %s" % text[:300])
    rows = [l for l in text.splitlines() if l[:1].isdigit()]
    check(len(rows) == DEFAULT_K + 1,
          "one row per coordinate (K=%d): %d" % (DEFAULT_K, len(rows)))
    check("S[0]:" in text, "-v lists the terms of S")
    out, _ = run("explain", "--lexicon", lex,
                 os.path.join(tree, "mail/q1.html"))
    check("format: html" in out.decode(), "HTML is detected")
    out, _ = run("explain", "--lexicon", lex,
                 os.path.join(tree, "misc/blob.bin"))
    check("binary" in out.decode(), "a binary file is explained as binary")
    # A directory, alone or as one of a pair: one error, in the same words.
    _, one = run("explain", "--lexicon", lex, tree, code=1)
    _, pair = run("explain", "--lexicon", lex, member, tree, code=1)
    check(one.replace(tree, "DIR") == pair.replace(tree, "DIR"),
          "explain DIR and explain FILE DIR say it differently: %r, %r" % (one, pair))


def case_errors(tmp):
    tree = os.path.join(tmp, "tree")
    make_tree(tree, singles=5)
    lex = os.path.join(tmp, "good.lex")
    run("lexicon", "build", "-o", lex, tree)
    data = open(lex, "rb").read()

    bad = os.path.join(tmp, "corrupt.lex")
    with open(bad, "wb") as f:
        f.write(data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0xff])
                + data[len(data) // 2 + 1:])
    _, err = run("scan", "--lexicon", bad, tree, code=1)
    check(err.startswith("imatch: ") and "corrupt.lex" in err
          and err.count("\n") == 1,
          "a corrupt lexicon: one line naming it: %r" % err)
    trunc = os.path.join(tmp, "truncated.lex")
    with open(trunc, "wb") as f:
        f.write(data[:len(data) // 3])
    _, err = run("sign", "--lexicon", trunc, os.path.join(tree, "reports/q1.txt"),
                 code=1)
    check("truncated.lex" in err, "a truncated lexicon is refused: %r" % err)
    _, err = run("scan", "--lexicon", os.path.join(tmp, "absent.lex"), tree,
                 code=1)
    check("absent.lex" in err, "a missing lexicon is named: %r" % err)

    _, err = run("scan", os.path.join(tmp, "no-such-dir"), code=1)
    check(err.startswith("imatch: ") and "no-such-dir" in err,
          "missing DIR: %r" % err)
    _, err = run("scan", os.path.join(tree, "reports/q1.txt"), code=1)
    check("Not a directory" in err, "a file is not a DIR: %r" % err)
    _, err = run("sign", "--lexicon", lex, os.path.join(tmp, "nope.txt"),
                 code=1)
    check("nope.txt" in err, "missing FILE: %r" % err)

    _, err = run("scan", "--no-such-option", tree, code=2)
    check(err.startswith("imatch: ") and "--no-such-option" in err,
          "unknown option: %r" % err)
    run("frobnicate", code=2)
    run(code=2)
    run("scan", code=2)
    run("scan", "-k", "99", tree, code=2)
    run("scan", "--nidf", "0.9:0.1", tree, code=2)
    run("scan", "--keep", "abc", tree, code=2)
    run("sign", os.path.join(tree, "reports/q1.txt"), code=2)
    run("lexicon", "build", tree, code=2)
    out, _ = run("--help")
    check(b"scan" in out and b"lexicon build" in out, "--help lists commands")
    for cmd in (["scan"], ["sign"], ["explain"], ["terms"],
                ["lexicon", "build"]):
        out, _ = run(*cmd, "--help")
        check(out.startswith(b"Usage: imatch"), "%s --help" % cmd)
    out, _ = run("--version")
    check(out.startswith(b"imatch "), "--version")


def case_demo(tmp):
    demo = os.path.join(SRCDIR, "tests", "data", "demo")
    out, _ = run("scan", demo)
    clusters = parse_scan(out)
    check(len(clusters) >= 2, "the demo tree shows clusters: %r" % clusters)
    apache = [c for c in clusters if b"licenses/Apache-2.0" in c]
    check(apache and b"npm/sigstore/LICENSE" in apache[0],
          "Apache 2.0 copies cluster together: %r" % clusters)
    for c in clusters:
        check(b"licenses/GPL-2" not in c and b"licenses/GPL-3" not in c,
              "different licences stay apart: %r" % c)


def case_start_libraries(tmp):
    # Libraries for what a run may never read are loaded on first use
    # (core/dl.h): each one linked cost every start about 60 us of CPU,
    # a tenth of `imatch --version`.
    env = dict(os.environ, LD_DEBUG="libs")
    p = subprocess.run([IMATCH, "--version"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=60)
    check(p.returncode == 0, "--version: exit %d" % p.returncode)
    inits = [line.split("calling init:")[1].strip()
             for line in p.stderr.decode("utf-8", "replace").splitlines()
             if "calling init:" in line]
    if not inits:
        print("skip: the dynamic linker does not list what it loads "
              "(LD_DEBUG)", file=sys.stderr)
        sys.exit(77)
    for lib in ("libseccomp", "libexpat", "libpoppler", "libarchive",
                "libcrypto"):
        check(not any(lib in i for i in inits),
              "imatch --version loads %s: %r" % (lib, inits))


CASES = {name[5:]: fn for name, fn in globals().items()
         if name.startswith("case_")}


def main():
    global IMATCH, SRCDIR
    if len(sys.argv) < 3 or sys.argv[2] not in CASES:
        print("usage: test_cli.py IMATCH CASE [SRCDIR]; cases: %s"
              % " ".join(sorted(CASES)), file=sys.stderr)
        return 2
    IMATCH = os.path.abspath(sys.argv[1])
    SRCDIR = sys.argv[3] if len(sys.argv) > 3 else "."
    tmp = tempfile.mkdtemp(prefix="imatch-cli-")
    try:
        CASES[sys.argv[2]](tmp)
    except Failure as e:
        print("FAIL %s: %s" % (sys.argv[2], e), file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok %s" % sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
