#!/usr/bin/env python3
"""Document formats through the imatch command line (issue 8).

Usage: test_formats.py IMATCH CASE SRCDIR

The fixtures are real files in tests/data/formats (tests/make_format_fixtures.sh
made them with pandoc and LibreOffice); a share is built in a temporary
directory from them and the licence texts of tests/data/demo as background.
"""
import functools
import json
import os
import shutil
import sys
import tempfile

import test_cli  # its run(), shared
from test_cli import Failure, check

SRC = None

run = functools.partial(test_cli.run, text=True)


def share(tmp, names):
    """A tree of the named fixtures plus the background licences (without
    the two texts the fixtures are made of)."""
    root = os.path.join(tmp, "share")
    os.makedirs(os.path.join(root, "office"))
    for n in names:
        shutil.copy(os.path.join(SRC, "tests/data/formats", n),
                    os.path.join(root, "office", n))
    lic = os.path.join(SRC, "tests/data/demo/licenses")
    for n in sorted(os.listdir(lic)):
        if n not in ("CC0-1.0", "Artistic"):
            shutil.copy(os.path.join(lic, n), os.path.join(root, n))
    return root


def clusters_of(root):
    """imatch scan --json -v: the document, its clusters as sets, and the
    summary printed on stderr."""
    out, err = run("scan", "--json", "-v", root)
    doc = json.loads(out)
    return doc, [set(c["members"]) for c in doc["clusters"]], err


SAME = ["cc0.txt", "cc0-utf16.txt", "cc0.txt.gz", "cc0.html", "cc0.docx",
        "cc0.odt", "cc0.epub", "cc0.pdf"]
EDITED = ["cc0-edited.docx", "cc0-edited.pdf"]
OTHER = ["artistic.docx", "artistic.odt", "artistic.pdf"]


def case_one_cluster(tmp):
    """The same text as txt, UTF-16, gzip, html, docx, odt, epub and pdf, and
    an edited copy, are one cluster; another text made by the same programs
    (pandoc's docx template, LibreOffice's PDF) is not in it."""
    root = share(tmp, SAME + EDITED + OTHER)
    doc, cl, err = clusters_of(root)
    want = {"office/" + n for n in SAME + EDITED}
    mine = [c for c in cl if "office/cc0.txt" in c]
    check(len(mine) == 1 and mine[0] == want,
          "one cluster of every format and the edited copy: %s" % cl)
    for c in cl:
        check(not (c & want and c & {"office/" + n for n in OTHER}),
              "an unrelated document by the same producer joined: %s" % c)
    for line in ("format_pdf: 3", "format_docx: 3", "format_epub: 1",
                 "format_odt: 2", "format_html: 1", "failed: 0"):
        check(line + "\n" in err, "summary has %r: %s" % (line, err))


def case_failed_and_binary(tmp):
    """Hostile files are counted as failed with their reason and the scan
    goes on; byte-identical binary files are exact copies of each other."""
    root = share(tmp, ["cc0.txt", "bomb.docx", "bomb.txt.bz2",
                       "entities.docx", "nested.docx", "truncated.pdf",
                       "garbage.pdf"])
    blob = os.urandom(6000)
    for n in ("a.bin", "copy-of-a.dat"):
        with open(os.path.join(root, n), "wb") as f:
            f.write(blob)
    with open(os.path.join(root, "b.bin"), "wb") as f:
        f.write(os.urandom(6000))
    shutil.copy(os.path.join(root, "office/garbage.pdf"),
                os.path.join(root, "garbage-copy.pdf"))
    doc, cl, err = clusters_of(root)
    for line in ("failed: 7", "failed_expansion: 2", "failed_entities: 1",
                 "failed_nesting: 1", "failed_corrupt: 3", "format_binary: 3"):
        check(line + "\n" in err, "summary has %r: %s" % (line, err))
    check({"a.bin", "copy-of-a.dat"} in cl,
          "identical binary files cluster: %s" % cl)
    check({"garbage-copy.pdf", "office/garbage.pdf"} in cl,
          "identical failed files are exact copies too: %s" % cl)
    check(not any("b.bin" in c for c in cl), "a unique binary stands alone")


def case_explain(tmp):
    root = share(tmp, ["cc0.pdf", "nested.docx"])
    lex = os.path.join(tmp, "lex")
    run("lexicon", "build", "-o", lex, root)
    out, _ = run("explain", "--lexicon", lex,
                 os.path.join(root, "office/cc0.pdf"))
    check("format: pdf" in out and "unique terms: 310" in out
          and "text:\n  Creative Commons Legal Code\n" in out,
          "explain names the format, the term count and the text: %s" % out)
    out, _ = run("explain", "--lexicon", lex,
                 os.path.join(root, "office/nested.docx"))
    check("format: docx" in out and "status: failed" in out
          and "extraction failed: nesting" in out, "a failure: %s" % out)


CASES = {"one_cluster": case_one_cluster,
         "failed_and_binary": case_failed_and_binary,
         "explain": case_explain}


def main():
    global SRC
    test_cli.IMATCH, case, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            CASES[case](tmp)
        except Failure as e:
            print("FAIL:", e)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
