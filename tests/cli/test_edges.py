#!/usr/bin/env python3
"""Black-box tests of the imatch command line at its edges: trees too small
for a lexicon, files that are not documents, odd names, bad values.

Usage: test_edges.py IMATCH CASE
"""
import functools
import json
import os
import sys
import tempfile

import test_cli  # its run(), shared
from test_cli import Failure, check

run = functools.partial(test_cli.run, text=True)

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
    for near in ([], ["--near"]):
        out, err = run("dedupe", *near, root)
        plan = [json.loads(l) for l in out.splitlines()]
        check([(os.path.basename(p["path"]), os.path.basename(p["keeper"]))
               for p in plan] == [("e2", "e1")],
              "dedupe %s: %r %s" % (near, plan, err))


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
    check(got["bytes"] == "identical" and
          got["sketch"].startswith("none for a and b") and
          got["linked"].startswith("yes, exact"), "binaries: %r" % got)
    got = explain("t1", "e1")
    check(got["bytes"].startswith("different") and
          got["sketch"].startswith("none for b"), "text, empty: %r" % got)
    got = explain("t1", "t2")
    check(got["bytes"] == "different" and " bins agree" in got["sketch"],
          "two texts: %r" % got)


CASES = {
    "few_documents": case_few_documents,
    "dupes_documents_only": case_dupes_documents_only,
    "explain_no_terms": case_explain_no_terms,
}


def main():
    test_cli.IMATCH = sys.argv[1]
    case = CASES[sys.argv[2]]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            case(tmp)
        except Failure as e:
            print("FAIL %s: %s" % (sys.argv[2], e))
            return 1
    print("ok", sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
