#!/usr/bin/env python3
"""Roff man page (gzipped or not) to plain text, for the evaluation corpus.

  man2text.py SRC_DIR DST_DIR     every file of SRC_DIR, *.gz decompressed

pod2man pages open with ~70 lines of roff preamble (comments and macro
definitions) that are the same in every page; left in, they would make the
short pages cosine-similar to each other through formatting alone (papers/000
§7.1.1). Kept: text lines and the arguments of the text-bearing macros (SH,
SS, IP, TP, B, I and their alternations); dropped: comments, macro definitions,
ignore blocks, other requests and inline escapes.
"""

import gzip
import os
import re
import sys

TEXT_MACROS = {"SH", "SS", "IP", "TP", "B", "I", "BR", "IR", "BI", "RB", "IB", "RI", "SM"}
ESC = re.compile(r"\\(f\(..|f\[[^]]*\]|f.|\*\(..|\*\[[^]]*\]|\*.|\(..|\[[^]]*\]|s[+-]?\d|.)")
SIMPLE = {"-": "-", "e": "\\", " ": " ", "~": " ", "&": "", "|": "", "^": "", "0": " ", "c": ""}


def unescape(s):
    def rep(m):
        e = m.group(1)
        if e[0] in "f*(s[" and len(e) > 1:
            if e[0] in "fs":
                return ""
            # pod2man's strings and the usual specials; anything else becomes
            # a space so that it never glues two words together.
            return {"(em": " -- ", "(en": "-", "(bu": "*", "*(--": " -- ", "*(Aq": "'",
                    "*(L\"": '"', "*(R\"": '"', "*(C+": "C++", "*(C`": '"', "*(C'": '"',
                    "(aq": "'", "(dq": '"', "(lq": '"', "(rq": '"'}.get(e, " ")
        return SIMPLE.get(e, e)
    return ESC.sub(rep, s)


def convert(text):
    out, skip_to = [], None
    for line in text.split("\n"):
        if skip_to:
            if line.startswith(skip_to):
                skip_to = None
            continue
        if line[:1] in (".", "'"):
            req = line[1:].strip().split(None, 1)
            name = req[0] if req else ""
            if name in ("de", "de1", "am", "ig"):
                skip_to = ".."
            elif name in TEXT_MACROS and len(req) > 1:
                out.append(unescape(req[1].replace('"', "")))
            continue
        out.append(unescape(line))
    return "\n".join(out)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    for f in sorted(os.listdir(src)):
        p = os.path.join(src, f)
        data = gzip.open(p).read() if f.endswith(".gz") else open(p, "rb").read()
        name = f[:-3] if f.endswith(".gz") else f
        with open(os.path.join(dst, name), "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(convert(data.decode("utf-8", errors="surrogateescape")))


if __name__ == "__main__":
    main()
