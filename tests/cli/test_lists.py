#!/usr/bin/env python3
"""Numbered lists through the imatch command line: a list's numbers are
text in every format that shows them.

Usage: test_lists.py IMATCH CASE SRCDIR

A .txt types its list's numbers ("1."); its docx, odt and html (pandoc's,
tests/make_format_fixtures.sh) number them automatically (docx
numbering.xml, odt list styles, html <ol>), and Word, LibreOffice and a
browser show them: their figures are the text's.
"""
import functools
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile

import test_cli  # its run(), shared
from test_cli import Failure, check

SRC = None

run = functools.partial(test_cli.run, text=True)

RULES = ["rules.txt", "rules.docx", "rules.odt", "rules.html"]


def case_dedupe_plans_exports(tmp):
    """imatch dedupe --near plans a numbered text's docx, odt and html
    beside it: their figures are its figures (the list numbers). Before,
    the three had no numbers, so their figures differed from the text's
    ("kept: its figures differ from its keeper's") and the docx kept the
    odt and html instead."""
    root = os.path.join(tmp, "share")
    os.makedirs(root)
    for n in RULES:
        shutil.copy(os.path.join(SRC, "tests/data/formats", n), root)
    out, err = run("dedupe", "--near", "-v", root)
    plans = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    planned = {os.path.basename(p["path"]): os.path.basename(p["keeper"])
               for p in plans}
    check(planned == {"rules.docx": "rules.txt", "rules.odt": "rules.txt",
                      "rules.html": "rules.txt"},
          "the exports planned beside the text: %s\n%s" % (planned, err))
    check("figures differ" not in err, "no figures differ: %s" % err)


def case_chapters_not_copies(tmp):
    """Two reports the same but for their chapter numbers (LibreOffice's
    outline numbering, from 1 and from 4), each as odt and docx: imatch
    dedupe --near plans each docx beside its own odt, never one report
    beside the other. Before, an odt's headings had no numbers, so the
    two odt had the same text and one was planned for removal."""
    names = ["chapters.odt", "chapters.docx", "chapters-4.odt",
             "chapters-4.docx"]
    root = os.path.join(tmp, "share")
    os.makedirs(root)
    for n in names:
        shutil.copy(os.path.join(SRC, "tests/data/formats", n), root)
    out, err = run("dedupe", "--near", "-v", root)
    plans = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    report = lambda n: n.split(".")[0]
    pairs = sorted((os.path.basename(p["path"]), os.path.basename(p["keeper"]))
                   for p in plans)
    check(len(pairs) == 2 and all(report(a) == report(b) for a, b in pairs),
          "each report's docx and odt planned together, not the two "
          "reports: %s\n%s" % (pairs, err))


def case_slides_not_copies(tmp):
    """Two agendas the same but for the numbers of their second slide's
    list (from 4 and from 6), each as odp and pptx: imatch dedupe
    --near plans each pptx beside its own odp, never one agenda beside
    the other. Before, neither odp nor pptx had its list numbers, so the
    two agendas had the same text."""
    names = ["agenda.odp", "agenda.pptx", "agenda-6.odp", "agenda-6.pptx"]
    root = os.path.join(tmp, "share")
    os.makedirs(root)
    for n in names:
        shutil.copy(os.path.join(SRC, "tests/data/formats", n), root)
    out, err = run("dedupe", "--near", "-v", root)
    plans = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    agenda = lambda n: n.split(".")[0]
    pairs = sorted((os.path.basename(p["path"]), os.path.basename(p["keeper"]))
                   for p in plans)
    check(len(pairs) == 2 and all(agenda(a) == agenda(b) for a, b in pairs),
          "each agenda's odp and pptx planned together, not the two "
          "agendas: %s\n%s" % (pairs, err))


def docx_of(path, numbering, styles, body):
    """A docx of @body (w:body's content), @numbering and @styles."""
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    ct = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.'
          'openxmlformats.org/package/2006/content-types"><Override PartName='
          '"/word/document.xml" ContentType="application/vnd.openxmlformats-'
          'officedocument.wordprocessingml.document.main+xml"/></Types>')
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", ct)
        z.writestr("word/numbering.xml",
                   "<w:numbering %s>%s</w:numbering>" % (w, numbering))
        z.writestr("word/styles.xml", "<w:styles %s>%s</w:styles>" % (w, styles))
        z.writestr("word/document.xml", "<w:document %s><w:body>%s</w:body>"
                   "</w:document>" % (w, body))


def case_hostile_numbering(tmp):
    """A docx whose numbering.xml defines 100,000 lists of 20 levels, with
    labels of every level at the largest start Word takes, in letters;
    styles that name one another's numbering in a loop; 100,000 numbered
    paragraphs: read in a moment, each with a label of bounded length."""
    n = 100000
    lvl = "".join('<w:lvl w:ilvl="%d"><w:start w:val="99999999999"/>'
                  '<w:numFmt w:val="lowerLetter"/><w:lvlText w:val="'
                  '%%1%%2%%3%%4%%5%%6%%7%%8%%9%%1%%2%%3%%4%%5%%6%%7%%8%%9"/>'
                  '</w:lvl>' % k for k in range(20))
    numbering = ("".join('<w:abstractNum w:abstractNumId="%d">%s</w:abstractNum>'
                         % (i, lvl if i < 50 else "") for i in range(n))
                 + "".join('<w:num w:numId="%d"><w:abstractNumId w:val="%d"/>'
                           '</w:num>' % (i + 1, i % 50) for i in range(n)))
    styles = ('<w:style w:type="paragraph" w:styleId="A"><w:basedOn w:val="B"/>'
              '</w:style><w:style w:type="paragraph" w:styleId="B">'
              '<w:basedOn w:val="A"/></w:style>')
    body = "".join('<w:p><w:pPr><w:pStyle w:val="A"/><w:numPr><w:ilvl w:val="%d"/>'
                   '<w:numId w:val="%d"/></w:numPr></w:pPr><w:r><w:t>harbour'
                   '</w:t></w:r></w:p>' % (i % 12, i % 40 + 1) for i in range(n))
    path = os.path.join(tmp, "hostile.docx")
    docx_of(path, numbering, styles, body)
    t = time.monotonic()
    out, _ = run("terms", path)
    took = time.monotonic() - t
    check("harbour" in out.rstrip("\n").split("\t"),
          "the text is read: %s" % out[:200])
    check(took < 20, "read in %.1f s" % took)
    print("read in %.2f s" % took)


CASES = {"dedupe_plans_exports": case_dedupe_plans_exports,
         "chapters_not_copies": case_chapters_not_copies,
         "slides_not_copies": case_slides_not_copies,
         "hostile_numbering": case_hostile_numbering}


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
