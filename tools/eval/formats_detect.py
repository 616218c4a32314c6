#!/usr/bin/env python3
"""Near-duplicate detection across formats: the same (or a lightly edited)
text saved as .txt, .docx, .odt, .epub, .html and .pdf, in one mixed tree,
against the cosine >= 0.9 truth of the SOURCE texts. Prints markdown tables;
asserts nothing.

  tools/eval/formats_detect.py --imatch PATH [--work DIR] [--seed N]
        [--edit-fraction F] [--edit-rate F] [--jobs N] [--examples N]
        LICENCES_DIR

LICENCES_DIR is CACHE/corpus/licences of tools/eval/fetch_licences.sh; WORK
defaults to /tmp/imatch-eval/formats. Needs pandoc (docx, odt, epub, html;
`apt-get install pandoc`, 2.17 on Debian 12) and groff with gropdf (pdf;
`groff -k -Tpdf`, package groff); neither is needed by the build or CI.
python3 stdlib only. Idempotent: generated files are reused (a seed's layout
is a pure function of the seed and the corpus; files the layout no longer
names are removed from the share).

Sources. One file per distinct content (sha1) of LICENCES_DIR, named after
its package ("libelf1/copyright" -> libelf1; "common-licenses/GPL-3" ->
common-licenses_GPL-3), copied to WORK/src/NAME.txt.

Layout (WORK/share-sSEED/FORMAT/NAME.EXT). Each source is written in 2 or 3
formats drawn at random (random.Random("SEED:NAME")). With probability
--edit-fraction (0.5) a lightly edited copy is added too: --edit-rate (3%)
of its words (tokens with two letters or more) replaced by words drawn from
the whole corpus, written as WORK/src/NAME.edit-sSEED.txt and saved, under
the same name, in one more format the source is not in (a document edited
and saved again in another program).

Writers. txt: the text's bytes. docx, odt, epub, html: pandoc from a JSON
AST built here (a paragraph per run of non-blank lines, a line break per
line, one Str per whitespace-separated word), so no word is read as markup
(a line starting with '#', '*', '>', '1.' or a '|' table stays words);
html is standalone with <title> NAME (`--metadata pagetitle`), epub has
title NAME (`--metadata title`, which pandoc's EPUB writer needs; it makes a
title page in the spine), docx and odt have no title. pdf: groff -k -Tpdf
(preconv reads UTF-8; a line starting with '.' or "'" gets \\&, a backslash
is \\e); groff fills and justifies paragraphs and hyphenates at line ends,
as a word processor's PDF export does; a glyph its fonts lack (CJK, ...) is
dropped with a warning.

Truth, from the sources, not from our extraction: U(s) = `imatch terms` of
the plain source (or of its edited text); two files are a truth pair when
they come from the same text (cosine 1: the same text in two formats) or
from texts whose cosine |U_a & U_b| / sqrt(|U_a| |U_b|) is >= 0.9.

Found: `imatch dupes --json` over the share (default options, lexicon built
from the share); every link is a flagged pair.

Printed:
  corpus          sources, edited copies, files per format
  detection       recall over all truth pairs, over the same-text
                  cross-format pairs, over pairs with source cosine < 1;
                  pair precision (flagged pairs with source cosine >= 0.9,
                  >= 0.8); time of `imatch dupes`
  control         the same measures on the same tree with every file
                  replaced by its plain source text (WORK/control-sSEED,
                  hard links): the sketch's share of the misses, without
                  any format
  format pairs    recall of the same-text pairs and of the cos < 1 pairs
                  for each unordered pair of formats (and the control's)
  extraction      per format: files, format as sniffed (`imatch scan -v`
                  over the format's directory), failed, no terms, files
                  whose extracted terms equal their source's, mean terms
                  extracted but not in the source / in the source but not
                  extracted, and the commonest of each
  misses          missed truth pairs (and how many the control missed
                  too) by cause: "extraction" when the
                  extracted term sets (`imatch terms` of the two files)
                  have cosine < 0.9, i.e. no sketch could link them;
                  "sketch" when they are >= 0.9 and the candidates or the
                  estimate missed; with --examples N of each
  false links     flagged pairs with source cosine < 0.9, by the same
                  split (extracted cosine >= 0.9: the extraction made them
                  alike; < 0.9: the estimate)
"""

import argparse
import collections
import concurrent.futures
import hashlib
import itertools
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evallib as ev  # noqa: E402

FORMATS = ["txt", "docx", "odt", "epub", "html", "pdf"]
T = 0.9


def cosine(a, b):
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))


# ---- sources and layout ----------------------------------------------------

def sources(root):
    """[(name, path)] one per distinct content, first path in sorted order."""
    seen, out, names = set(), [], set()
    for p in ev.list_files(root):
        with open(p, "rb") as fh:
            h = hashlib.sha1(fh.read()).hexdigest()
        if h in seen:
            continue
        seen.add(h)
        rel = os.path.relpath(p, root)
        d, base = os.path.split(rel)
        name = d if base == "copyright" and d else rel
        name = re.sub(r"[^A-Za-z0-9._+-]", "_", name)
        while name in names:
            name += "_"
        names.add(name)
        out.append((name, p))
    return out


def read_text(path):
    with open(path, "rb") as fh:
        b = fh.read()
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("cp1252", errors="replace")  # as imatch reads it


WORD = re.compile(r"\S+")
LETTERS = re.compile(r"[^\W\d_]{2,}")


def edit(text, rate, rng, pool):
    """text with round(rate * words) of its words replaced by pool words."""
    toks = [m for m in WORD.finditer(text) if LETTERS.search(m.group())]
    n = max(1, round(rate * len(toks)))
    pick = sorted(rng.sample(range(len(toks)), min(n, len(toks))))
    out, last = [], 0
    for i in pick:
        m = toks[i]
        out.append(text[last:m.start()])
        out.append(rng.choice(pool))
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def plan(srcs, seed, edit_fraction, edit_rate, work):
    """[(file relpath in share, fmt, text id, text path, name)], writing
    the source and edited texts into WORK/src."""
    srcdir = os.path.join(work, "src")
    os.makedirs(srcdir, exist_ok=True)
    texts = {}
    pool = set()
    for name, p in srcs:
        t = read_text(p)
        texts[name] = t
        pool.update(w for w in re.findall(r"[A-Za-z]{4,}", t))
    pool = sorted(pool)
    rows = []
    for name, p in srcs:
        sp = os.path.join(srcdir, name + ".txt")
        if not os.path.exists(sp):
            shutil.copyfile(p, sp)
        rng = random.Random(f"{seed}:{name}")
        fmts = rng.sample(FORMATS, rng.choice((2, 3)))
        for f in fmts:
            rows.append((f"{f}/{name}.{f}", f, name, sp, name))
        if rng.random() < edit_fraction:
            f = rng.choice([x for x in FORMATS if x not in fmts])
            ep = os.path.join(srcdir, f"{name}.edit-s{seed}.txt")
            et = edit(texts[name], edit_rate, rng, pool)
            if not os.path.exists(ep):
                write_atomic(ep, et.encode("utf-8"))
            rows.append((f"{f}/{name}.{f}", f, name + "~edit", ep, name))
    return rows


# ---- writers -----------------------------------------------------------------

def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def pandoc_ast(text, api):
    blocks = []
    for para in re.split(r"\n[ \t\r\f\v]*\n", text):
        lines = [l for l in para.split("\n") if l.strip()]
        inl = []
        for i, line in enumerate(lines):
            if i:
                inl.append({"t": "LineBreak"})
            for j, w in enumerate(line.split()):
                if j:
                    inl.append({"t": "Space"})
                inl.append({"t": "Str", "c": w})
        if inl:
            blocks.append({"t": "Para", "c": inl})
    return json.dumps({"pandoc-api-version": api, "meta": {},
                       "blocks": blocks})


def groff_input(text):
    out = []
    for line in text.split("\n"):
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out) + "\n"


def make(out, fmt, text_path, name, api):
    """Write one file; returns a warning string (or "")."""
    if fmt == "txt":
        shutil.copyfile(text_path, out + ".tmp")
        os.replace(out + ".tmp", out)
        return ""
    text = read_text(text_path)
    nice = ["nice", "-n", "10"]
    if fmt == "pdf":
        r = subprocess.run(nice + ["groff", "-k", "-Tpdf"],
                           input=groff_input(text).encode("utf-8"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0 or not r.stdout:
            ev.die(f"groff failed on {text_path}: {r.stderr[:300]!r}")
        write_atomic(out, r.stdout)
        return r.stderr.decode("utf-8", "replace").strip()
    cmd = nice + ["pandoc", "-f", "json", "-t", fmt, "-o", out + ".tmp"]
    if fmt == "html":
        cmd += ["-s", "--metadata", "pagetitle=" + name]
    elif fmt == "epub":
        cmd += ["--metadata", "title=" + name]
    r = subprocess.run(cmd, input=pandoc_ast(text, api).encode("utf-8"),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        ev.die(f"pandoc failed on {text_path}: {r.stderr[:300]!r}")
    os.replace(out + ".tmp", out)
    return r.stderr.decode("utf-8", "replace").strip()


def generate(share, rows, jobs):
    """Make the files of rows that are missing; remove others. Returns
    (made, reused, warnings {relpath: text})."""
    need = [r for r in rows if not os.path.exists(os.path.join(share, r[0]))]
    want = {r[0] for r in rows}
    for p in ev.list_files(share):
        if os.path.relpath(p, share) not in want:
            os.unlink(p)
    if any(r[1] != "txt" and r[1] != "pdf" for r in need):
        r = subprocess.run(["pandoc", "-f", "markdown", "-t", "json"],
                           input=b"", stdout=subprocess.PIPE, check=True)
        api = json.loads(r.stdout)["pandoc-api-version"]
    else:
        api = None
    for f in FORMATS:
        os.makedirs(os.path.join(share, f), exist_ok=True)
    warns = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futs = {pool.submit(make, os.path.join(share, r[0]), r[1], r[3],
                            r[4], api): r[0] for r in need}
        for fu in concurrent.futures.as_completed(futs):
            w = fu.result()
            if w:
                warns[futs[fu]] = w
    return len(need), len(rows) - len(need), warns


# ---- measuring -----------------------------------------------------------------

def sniffed(imatch, d):
    """{key: value} of `imatch scan -v DIR`'s summary (format_*, failed)."""
    r = ev.run(["nice", "-n", "10", imatch, "scan", "-v", d], check=False)
    out = {}
    for line in r.stderr.split("\n"):
        m = re.match(r"(format_\w+|failed|binary|errors): (\d+)$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def dupes(imatch, root, name):
    """({(a, b): similarity} with a < b, paths under root mapped by name()
    from the relative path and made absolute in root, seconds)."""
    t0 = time.time()
    r = ev.run(["nice", "-n", "10", imatch, "dupes", "--json", root])
    took = time.time() - t0
    out = {}
    for d in json.loads(r.stdout)["documents"]:
        x = name(d["path"])
        for y in d["dupes"]:
            out[tuple(sorted((x, name(y["path"]))))] = y.get("similarity")
    return {tuple(os.path.join(root, x) for x in p): v
            for p, v in out.items()}, took


def fmt_counter(c, n=4):
    return ", ".join(f"{k} ({v})" for k, v in c.most_common(n)) or "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--imatch", required=True)
    ap.add_argument("--work", default="/tmp/imatch-eval/formats")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--edit-fraction", type=float, default=0.5)
    ap.add_argument("--edit-rate", type=float, default=0.03)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("licences")
    a = ap.parse_args()
    imatch = os.path.abspath(a.imatch)
    work = os.path.abspath(a.work)
    share = os.path.join(work, f"share-s{a.seed}")
    t_all = time.time()

    srcs = sources(os.path.abspath(a.licences))
    if not srcs:
        ev.die(f"no files under {a.licences}")
    rows = plan(srcs, a.seed, a.edit_fraction, a.edit_rate, work)
    t0 = time.time()
    made, reused, warns = generate(share, rows, a.jobs)
    t_gen = time.time() - t0

    # Truth from the source texts.
    tpath = {}
    for r in rows:
        tpath[r[2]] = r[3]
    U_src = ev.terms(imatch, sorted(set(tpath.values())))
    U_text = {tid: U_src[p] for tid, p in tpath.items()}
    files = {os.path.join(share, r[0]): r for r in rows}
    text_of = {p: r[2] for p, r in files.items()}
    fmt_of = {p: r[1] for p, r in files.items()}

    tids = sorted(U_text, key=lambda x: (len(U_text[x]), x))
    tcos = {}
    for i, x in enumerate(tids):
        ux = U_text[x]
        lim = len(ux) / (T * T)
        for y in tids[i + 1:]:
            if len(U_text[y]) > lim:
                break
            c = cosine(ux, U_text[y])
            if c >= T - 1e-9:
                tcos[frozenset((x, y))] = c
    by_text = collections.defaultdict(list)
    for p, tid in text_of.items():
        by_text[tid].append(p)

    def src_cos(p, q):
        x, y = text_of[p], text_of[q]
        if x == y:
            return 1.0
        c = tcos.get(frozenset((x, y)))
        return c if c is not None else cosine(U_text[x], U_text[y])

    truth = {}
    for tid, ps in by_text.items():
        for p, q in itertools.combinations(sorted(ps), 2):
            truth[(p, q)] = 1.0
    for k, c in tcos.items():
        x, y = sorted(k)
        for p in by_text[x]:
            for q in by_text[y]:
                truth[tuple(sorted((p, q)))] = c

    # Detection, and the control: the same tree with every file replaced
    # by (a hard link to) its plain text, named FILE.txt.
    flagged, t_dupes = dupes(imatch, share, lambda rel: rel)
    control = os.path.join(work, f"control-s{a.seed}")
    cwant = set()
    for rel, f, tid, tp, name in rows:
        c = os.path.join(control, rel + ".txt")
        cwant.add(c)
        if not os.path.exists(c):
            os.makedirs(os.path.dirname(c), exist_ok=True)
            try:
                os.link(tp, c)
            except OSError:
                shutil.copyfile(tp, c)
    for c in ev.list_files(control):
        if c not in cwant:
            os.unlink(c)
    cflagged, t_control = dupes(imatch, control, lambda rel: rel[:-4])
    cflagged = {tuple(sorted(os.path.join(share, os.path.relpath(x, control))
                             for x in p)): v for p, v in cflagged.items()}

    # Extraction.
    t0 = time.time()
    U_file = ev.terms(imatch, sorted(files))
    sniff = {f: sniffed(imatch, os.path.join(share, f)) for f in FORMATS}
    t_extract = time.time() - t0

    def ext_cos(p, q):
        return cosine(U_file.get(p, frozenset()), U_file.get(q, frozenset()))

    # ---- report -----------------------------------------------------------
    n_edit = sum(1 for r in rows if r[2].endswith("~edit"))
    same = [p for p in truth if text_of[p[0]] == text_of[p[1]]]
    lt1 = [p for p, c in truth.items() if c < 1 - 1e-9]
    eq_other = [p for p, c in truth.items()
                if c >= 1 - 1e-9 and text_of[p[0]] != text_of[p[1]]]
    hit = lambda ps: sum(p in flagged for p in ps)  # noqa: E731
    rec = lambda ps: f"{hit(ps) / len(ps):.3f}" if ps else "-"  # noqa: E731
    # (det_row below has its own, for the control)

    print(f"## Detection across formats (seed {a.seed})")
    print()
    print(f"{len(srcs)} source texts (distinct contents of {a.licences}), "
          f"{n_edit} edited copies ({a.edit_rate:.0%} of the words replaced); "
          f"{len(files)} files in {share} ({made} made, {reused} reused, "
          f"{t_gen:.0f} s). Truth: {len(truth)} pairs: {len(same)} the same "
          f"text in two formats, {len(eq_other)} other texts with equal term "
          f"sets, {len(lt1)} with source cosine < 1.")
    print()
    edits = [p for p in truth if text_of[p[0]] + "~edit" == text_of[p[1]]
             or text_of[p[1]] + "~edit" == text_of[p[0]]]
    n_edit_lt = sum(1 for r in rows if r[2].endswith("~edit")
                    and cosine(U_text[r[2]], U_text[r[4]]) < T - 1e-9)

    def det_row(label, fl, took):
        hit = lambda ps: sum(p in fl for p in ps)  # noqa: E731
        rec = lambda ps: f"{hit(ps) / len(ps):.3f}" if ps else "-"  # noqa: E731
        cf = [src_cos(*p) for p in fl]
        p9 = sum(c >= T - 1e-9 for c in cf) / len(cf) if cf else float("nan")
        p8 = sum(c >= 0.8 - 1e-9 for c in cf) / len(cf) if cf else float("nan")
        return [label, rec(list(truth)), rec(same), rec(lt1), rec(edits),
                f"{p9:.3f} / {p8:.3f}", len(fl), f"{took:.1f} s"]
    print("\n".join(ev.md_table(
        ["tree", "recall", "recall, same text", "recall, source cos < 1",
         "recall, edited copy ~ its original",
         "pair precision (src cos >= 0.9 / >= 0.8)", "flagged",
         "time (imatch dupes)"],
        [det_row("formats", flagged, t_dupes),
         det_row("control: every file as its plain text", cflagged,
                 t_control)])))
    print()
    print(f"Edited copy ~ its original: {len(edits)} truth pairs (the "
          f"{n_edit} edited copies times their original's formats; "
          f"{n_edit_lt} edited copies fell below cosine 0.9 and pair with "
          f"nothing of their original). The control links the same text "
          f"as exact copies (hard links), so its same-text recall is 1 by "
          f"construction; its other columns are the sketch's on the same "
          f"pairs without any format.")
    print()

    print("### By format pair")
    print()
    fp_rows = []
    for f, g in itertools.combinations_with_replacement(FORMATS, 2):
        def k(p):
            return tuple(sorted((fmt_of[p[0]], fmt_of[p[1]]),
                                key=FORMATS.index)) == (f, g)
        s = [p for p in same if k(p)]
        l = [p for p in lt1 if k(p)]
        if not s and not l:
            continue
        cr = f"{sum(p in cflagged for p in l) / len(l):.3f}" if l else "-"
        fp_rows.append([f"{f}-{g}", len(s), rec(s), len(l), rec(l), cr])
    print("\n".join(ev.md_table(
        ["formats", "same-text pairs", "recall", "pairs cos < 1",
         "recall", "recall, control"], fp_rows)))
    print()

    print("### Extraction by format (terms of the file vs its source)")
    print()
    ex_rows = []
    for f in FORMATS:
        ps = [p for p in files if fmt_of[p] == f]
        if not ps:
            continue
        s = sniff[f]
        as_ = ", ".join(f"{k[7:]} {v}" for k, v in sorted(s.items())
                        if k.startswith("format_"))
        none = sum(1 for p in ps if not U_file.get(p))
        equal = sum(1 for p in ps if U_file.get(p) == U_text[text_of[p]])
        extra, missing = collections.Counter(), collections.Counter()
        ne = nm = 0
        for p in ps:
            u, su = U_file.get(p, frozenset()), U_text[text_of[p]]
            ne += len(u - su)
            nm += len(su - u)
            extra.update(u - su)
            missing.update(su - u)
        ex_rows.append([f, len(ps), as_ or "-", s.get("failed", 0), none,
                        equal, f"{ne / len(ps):.2f}", f"{nm / len(ps):.2f}",
                        fmt_counter(extra), fmt_counter(missing)])
    print("\n".join(ev.md_table(
        ["format", "files", "sniffed as", "failed", "no terms",
         "terms = source", "extra/file", "missing/file",
         "commonest extra (files)", "commonest missing (files)"], ex_rows)))
    if warns:
        wf = collections.Counter(x.split("/")[0] for x in warns)
        print()
        print(f"Writers warned on {len(warns)} files made in this run "
              f"({', '.join(f'{k} {v}' for k, v in sorted(wf.items()))}); "
              f"first: {next(iter(sorted(warns.items())))[1][:200]!r}")
    print()

    missed = [p for p in truth if p not in flagged]
    false = [p for p in flagged if src_cos(*p) < T - 1e-9]
    m_ex = [p for p in missed if ext_cos(*p) < T - 1e-9]
    m_sk = [p for p in missed if ext_cos(*p) >= T - 1e-9]
    f_ex = [p for p in false if ext_cos(*p) >= T - 1e-9]
    f_sk = [p for p in false if ext_cos(*p) < T - 1e-9]
    def tp(ps):  # distinct pairs of texts
        return len({frozenset((text_of[p], text_of[q])) for p, q in ps})

    def cell(ps, other, missed_side):
        if missed_side:  # also missed in the control
            o = sum(1 for p in ps if p not in other)
        else:  # also flagged in the control
            o = sum(1 for p in ps if p in other)
        return f"{len(ps)} ({tp(ps)}; {o})"
    print("### Misses and false links")
    print()
    print("File pairs (distinct text pairs; of them, as missed / flagged "
          "in the control). Extraction: the extracted term sets' cosine is "
          "< 0.9 for a miss (no estimate could link them), >= 0.9 for a "
          "false link; otherwise the sketch (candidates or estimate).")
    print()
    print("\n".join(ev.md_table(
        ["", "pairs", "extraction", "sketch or candidates"],
        [["missed truth pairs", cell(missed, cflagged, True),
          cell(m_ex, cflagged, True), cell(m_sk, cflagged, True)],
         ["false links (src cos < 0.9)", cell(false, cflagged, False),
          cell(f_ex, cflagged, False), cell(f_sk, cflagged, False)]])))
    if a.examples:
        def show(title, ps, rev=False):
            if not ps:
                return
            print()
            print(f"{title}:")
            ps = sorted(ps, key=lambda p: ((-1 if rev else 1) * ext_cos(*p),
                                           p))[:a.examples]
            for p, q in ps:
                up, uq = U_file.get(p, frozenset()), U_file.get(q, frozenset())
                sp, sq = U_text[text_of[p]], U_text[text_of[q]]
                est = flagged.get((p, q))
                print(f"- {os.path.relpath(p, share)} ~ "
                      f"{os.path.relpath(q, share)}: source cos "
                      f"{src_cos(p, q):.3f}, extracted cos "
                      f"{ext_cos(p, q):.3f}"
                      + (f", estimate {est:.3f}" if est is not None else "")
                      + f"; |U| {len(up)} / {len(uq)} (sources {len(sp)} / "
                      f"{len(sq)}); extra {sorted(up - sp)[:6]} / "
                      f"{sorted(uq - sq)[:6]}; missing {sorted(sp - up)[:6]}"
                      f" / {sorted(sq - uq)[:6]}")
        show("Missed, extraction", m_ex)
        show("Missed, sketch (highest extracted cosine first)", m_sk, True)
        show("False links, extraction", f_ex)
        show("False links, sketch (lowest extracted cosine first)", f_sk)
    print()
    print(f"<!-- generation {t_gen:.0f} s, imatch dupes {t_dupes:.1f} s "
          f"(control {t_control:.1f} s), "
          f"terms and scans {t_extract:.1f} s, total "
          f"{time.time() - t_all:.0f} s -->")


if __name__ == "__main__":
    main()
