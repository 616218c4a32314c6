#!/usr/bin/env python3
"""What `imatch dedupe` plans next to rmlint, jdupes and fdupes, on one share.

Usage: tools/eval/dedupe_compare.py [--imatch PATH] [--keep DIR]

Builds a share from the real licence texts in tests/data/demo/ (python3
stdlib only, fixed seed) with planted, labelled redundancy:

  originals/      one file per text, the oldest of its family
  exact copies    byte-identical copies under archive/, mail/, "backup (1)/"
                  (newer; archive/ sorts before originals/, as in the issue)
  near variants   the same text re-wrapped with CRLF line ends, as HTML, or
                  with one line edited (a year, a name): no byte tool can
                  see them
  binary copies   byte-identical PNG-like blobs (imatch plans documents only)
  empty files     several (not documents; jdupes skips them without -z)
  a hard link     of one original (frees nothing when removed)

then runs each tool in "report only" mode and prints, side by side, what it
finds and what it would remove, per planted category, and whether each group
keeps its original. The tools: imatch dedupe (exact), imatch dedupe --near,
rmlint -T df (its JSON: is_original false = would remove), jdupes -r and
fdupes -r (groups; -dN would keep the first of each). fclones is not
packaged in Debian 12 and is left out. Install the others with
`apt-get install rmlint jdupes fdupes`; a missing one is reported and
skipped.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
DEMO = os.path.join(SRC, "tests", "data", "demo")


def texts():
    """The demo texts, leaving out each whose words are 80% those of one
    already taken (the demo has families of near-identical licences), so
    that the only redundancy in the share is the planted one."""
    out, sets = [], []
    for d, _, names in sorted(os.walk(DEMO)):
        for n in sorted(names):
            p = os.path.join(d, n)
            if n == "README":
                continue
            with open(p, "rb") as f:
                data = f.read()
            words = set(data.lower().split())
            if len(data) < 400 or any(
                    len(words & w) > 0.8 * len(words | w) for w in sets):
                continue
            sets.append(words)
            out.append((os.path.relpath(p, DEMO).replace("/", "-"), data))
    return out


def build(root, seed=1):
    """Write the share; return {absolute path: (category, family)}."""
    rng = random.Random(seed)
    label = {}

    def put(rel, data, mtime, cat, fam):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.utime(p, (mtime, mtime))
        label[p] = (cat, fam)
        return p

    t0 = 1_500_000_000
    docs = texts()
    for i, (name, data) in enumerate(docs):
        put("originals/%s.txt" % name, data, t0 + i, "original", name)
    rng.shuffle(docs)
    n = len(docs)
    # Exact copies of 60% of the texts, 1 to 3 each, newer than the
    # original.
    for i, (name, data) in enumerate(docs[:n * 6 // 10]):
        places = ["archive/2019/%s.txt" % name, "mail/att-%d.txt" % i,
                  "backup (1)/%s.txt" % name]
        for j in range(1 + i % 3):
            put(places[j], data, t0 + 10_000 + 100 * i + j, "exact", name)
    # Near variants of 40% (some also copied exactly).
    for i, (name, data) in enumerate(docs[n // 2:n * 9 // 10]):
        text = data.decode("utf-8", "replace")
        how = i % 3
        if how == 0:
            words = text.split()
            lines, line = [], []
            for w in words:
                line.append(w)
                if len(line) == 9:
                    lines.append(" ".join(line))
                    line = []
            lines.append(" ".join(line))
            var = ("\r\n".join(lines) + "\r\n").encode()
            rel = "drafts/%s-rewrapped.txt" % name
        elif how == 1:
            paras = [p for p in text.split("\n\n") if p.strip()]
            var = ("<html><body>\n" + "".join("<p>%s</p>\n" % p
                                              for p in paras) +
                   "</body></html>\n").encode()
            rel = "web/%s.html" % name
        else:
            lines = text.split("\n")
            k = len(lines) // 3
            lines[k] = lines[k] + " Copyright 2024 Example Corp."
            var = "\n".join(lines).encode()
            rel = "drafts/%s-edited.txt" % name
        put(rel, var, t0 + 20_000 + i, "near", name)
    # Binary copies and empty files.
    for i in range(5):
        blob = b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256)
                                              for _ in range(3000))
        put("images/img%d.png" % i, blob, t0 + 30_000 + i, "binary-orig",
            "img%d" % i)
        put("images/copy/img%d.png" % i, blob, t0 + 31_000 + i, "binary",
            "img%d" % i)
    for i in range(4):
        put("empty/e%d.txt" % i, b"", t0 + 40_000 + i, "empty", "empty")
    # A hard link of one original.
    first = os.path.join(root, "originals/%s.txt" % texts()[0][0])
    link = os.path.join(root, "links/hardlink.txt")
    os.makedirs(os.path.dirname(link))
    os.link(first, link)
    label[link] = ("hardlink", texts()[0][0])
    return label


# ---- The tools: each returns (groups, [(removed, kept)]) --------------------

def imatch(binary, root, near):
    args = [binary, "dedupe"] + (["--near"] if near else []) + [root]
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    return (len({l["keeper"] for l in lines}),
            [(l["path"], l["keeper"]) for l in lines])


def rmlint(root, tmp):
    out = os.path.join(tmp, "rmlint.json")
    subprocess.run(["rmlint", "-T", "df", "-o", "json:" + out, root],
                   capture_output=True, check=True, cwd=tmp)
    with open(out) as f:
        items = [x for x in json.load(f)
                 if x.get("type") == "duplicate_file"]
    by = {}
    for x in items:
        # Hard links of one inode come without a checksum.
        key = x.get("checksum") or ("inode", x["disk_id"], x["inode"])
        by.setdefault(key, []).append(x)
    pairs = []
    for g in by.values():
        kept = [x["path"] for x in g if x["is_original"]]
        pairs += [(x["path"], kept[0]) for x in g if not x["is_original"]]
    return len(by), pairs


def groups_tool(cmd, root):
    r = subprocess.run(cmd + [root], capture_output=True, text=True,
                       check=True)
    groups = [g.split("\n") for g in r.stdout.strip().split("\n\n") if g]
    pairs = []
    for g in groups:
        g = [os.path.abspath(os.path.join(root, p)) for p in g]
        pairs += [(p, g[0]) for p in g[1:]]
    return len(groups), pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--imatch", default=os.path.join(SRC, "build", "tools",
                                                     "imatch"))
    ap.add_argument("--keep", help="build the share in DIR and keep it")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dedupe-compare-")
    root = os.path.abspath(a.keep) if a.keep else os.path.join(tmp, "share")
    if a.keep and os.path.exists(root):
        shutil.rmtree(root)
    label = build(root)
    cats = ["exact", "near", "binary", "empty", "hardlink"]
    planted = {c: sum(1 for v in label.values() if v[0] == c) for c in cats}
    tools = [("imatch dedupe", lambda: imatch(a.imatch, root, False)),
             ("imatch --near", lambda: imatch(a.imatch, root, True)),
             ("rmlint -T df", lambda: rmlint(root, tmp)),
             ("jdupes -r", lambda: groups_tool(["jdupes", "-r", "-q"], root)),
             ("fdupes -r", lambda: groups_tool(["fdupes", "-r", "-q"], root))]
    rows = []
    for name, fn in tools:
        exe = name.split()[0]
        if exe != "imatch" and not shutil.which(exe):
            print("%s: not installed, skipped" % exe, file=sys.stderr)
            continue
        t = time.monotonic()
        ngroups, pairs = fn()
        secs = time.monotonic() - t
        by = {c: 0 for c in cats + ["original", "binary-orig"]}
        for p, _ in pairs:
            by[label.get(p, ("?", ""))[0]] = by.get(
                label.get(p, ("?", ""))[0], 0) + 1
        # Each family with a planted copy removed: is its original kept?
        removed = {p for p, _ in pairs}
        fams = {label[p][1] for p in removed
                if label.get(p, ("", ""))[0] in ("exact", "near")}
        ok = sum(1 for f in fams
                 if os.path.join(root, "originals/%s.txt" % f) not in removed)
        not_same = sum(1 for p, k in pairs
                       if open(p, "rb").read() != open(k, "rb").read())
        nbytes = sum(os.path.getsize(p) for p, _ in pairs)
        rows.append((name, ngroups, len(pairs), nbytes, by, ok, len(fams),
                     not_same, secs))
    shutil.rmtree(tmp, ignore_errors=True)

    print("share: %d files: %d originals, %s" % (
        len(label), sum(1 for v in label.values() if v[0] == "original"),
        ", ".join("%d %s" % (planted[c], c) for c in cats)))
    head = ("tool", "groups", "remove", "bytes", "exact", "near", "binary",
            "empty", "hardlnk", "orig!", "orig kept", "not same", "secs")
    print("%-14s %6s %6s %7s %5s %4s %6s %5s %7s %5s %9s %8s %5s" % head)
    for name, ng, nr, nb, by, ok, fams, ns, secs in rows:
        print("%-14s %6d %6d %7d %5d %4d %6d %5d %7d %5d %9s %8d %5.2f" % (
            name, ng, nr, nb, by["exact"], by["near"], by["binary"],
            by["empty"], by["hardlink"], by["original"],
            "%d/%d" % (ok, fams), ns, secs))
    print("\nremove: files it would remove; exact/near/binary/empty/hardlnk: "
          "of those, planted\ncopies of each kind; orig!: originals it "
          "would remove (a copy kept instead);\norig kept: families with a "
          "copy removed whose original stays; not same: files\nremoved whose "
          "kept file has other bytes (near-duplicates: by design, with\n"
          "their similarity in the plan).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
