#!/usr/bin/env python3
"""Black-box tests of `imatch dedupe` and `imatch apply` on real files.

Usage: test_dedupe.py IMATCH CASE

Each CASE writes a tree with planted groups of copies, plans with the built
binary, changes the tree the way a user or another program might between plan
and apply, applies, and checks what is left on disk. Python standard library
only; helpers shared with test_cli.py.
"""
import csv
import errno
import io
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import test_cli
from test_cli import Failure, check, document, run, vocabulary


def put(root, rel, data, mtime=None):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def make_groups(root, seed=11, sizes=(2, 3, 4, 5), singles=12):
    """Groups of byte-identical copies, with distinct mtimes (the first copy
    oldest), plus a near-duplicate of each group (not an exact copy) and
    unrelated singles. Returns [[absolute paths, oldest first]]."""
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    groups = []
    dirs = ["archive", "reports/2024", "mail", "deep/a/b", "x"]
    for g, n in enumerate(sizes):
        sents = document(rng, vocab)
        data = ("\n".join(sents) + "\n").encode()
        members = []
        for i in range(n):
            rel = "%s/g%d-copy%d.txt" % (dirs[(g + i) % len(dirs)], g, i)
            members.append(put(root, rel, data, mtime=1_600_000_000 + i))
        # Same terms, other bytes: a near-duplicate, never an exact copy.
        put(root, "near/g%d.txt" % g, ("\n".join(reversed(sents)) +
                                       "\n").encode(), mtime=1_500_000_000)
        groups.append(members)
    for i in range(singles):
        put(root, "misc/s%02d.txt" % i,
            ("\n".join(document(rng, vocab)) + "\n").encode())
    return groups


def plan_lines(out):
    lines = [json.loads(l) for l in out.decode("utf-8").splitlines()]
    for l in lines:
        check({"action", "kind", "similarity", "path", "keeper", "size",
               "mtime_ns", "hash", "keeper_size", "keeper_mtime_ns",
               "keeper_hash", "root", "cluster"} <= set(l),
              "plan line fields: %s" % sorted(l))
        check(os.path.isabs(l["path"]) and os.path.isabs(l["keeper"]),
              "absolute paths: %r" % l)
    return lines


def fsb(s):
    return os.fsencode(s)


def files_under(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            out.add(os.path.join(d, n))
    return out


def dump(path, lines):
    with open(path, "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")


HEAD = 4096  # IM_EXACT_HEAD


def expected_counts(root):
    """What `dedupe -v` should count for ROOT, from the files themselves:
    non-empty files; those sharing a size (their first HEAD bytes hashed);
    of those, the ones whose head no other file of their size has (told
    apart), and the longer-than-HEAD ones whose head another has (read
    whole); the bytes read; the groups of byte-identical files."""
    paths = [p for p in files_under(root) if os.path.getsize(p)]
    sizes = {}
    for p in paths:
        sizes.setdefault(os.path.getsize(p), []).append(p)
    shared = [p for ps in sizes.values() if len(ps) > 1 for p in ps]
    heads, contents = {}, {}
    for p in shared:
        with open(p, "rb") as f:
            data = f.read()
        heads.setdefault((len(data), data[:HEAD]), []).append(p)
        contents.setdefault(data, []).append(p)
    apart = sum(1 for ps in heads.values() if len(ps) == 1)
    whole = [p for (n, _), ps in heads.items() if len(ps) > 1 and n > HEAD
             for p in ps]
    nbytes = (sum(min(os.path.getsize(p), HEAD) for p in shared) +
              sum(os.path.getsize(p) for p in whole))
    return {"files": len(paths), "hashed": len(shared),
            "mb": "%.1f" % (nbytes / 1e6), "apart": apart,
            "whole": len(whole),
            "groups": sum(1 for ps in contents.values() if len(ps) > 1)}


def verbose_counts(err):
    """The counts of `dedupe -v`'s first line."""
    import re
    m = re.search(r"(\d+) files, (\d+) sharing a size hashed \(([\d.]+) "
                  r"MB\): (\d+) told apart by their first %d bytes, (\d+) "
                  r"read whole after them, (\d+) groups of copies, (\d+) "
                  r"changed" % HEAD, err)
    check(m, "-v line: %s" % err)
    names = ("files", "hashed", "mb", "apart", "whole", "groups", "changed")
    return {k: (m.group(i + 1) if k == "mb" else int(m.group(i + 1)))
            for i, k in enumerate(names)}


# ---- Cases -----------------------------------------------------------------

def case_exact_groups(tmp):
    """Every planted group of n copies loses exactly n-1, keeps its oldest,
    and nothing else is planned; apply leaves exactly the keepers."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root)
    # Identical binary files are exact copies too, planned as jdupes or
    # rmlint would (and as redundant/ lists them); one of another size is
    # not.
    png = b"\x89PNG\r\n\x1a\n\x00" + bytes(range(256)) * 8
    groups.append([put(root, p, png, mtime=1_600_000_000 + i)
                   for i, p in enumerate(("bin/a.png", "bin/copy/a.png",
                                          "x/a-again.png"))])
    put(root, "bin/other.png", png + b"\x00")
    out, err = run("dedupe", root)
    lines = plan_lines(out)
    planned = {l["path"] for l in lines}
    want = {p for g in groups for p in g[1:]}
    check(planned == want, "planned %s\nwant %s" % (sorted(planned),
                                                    sorted(want)))
    for l in lines:
        g = next(g for g in groups if l["path"] in g)
        check(l["keeper"] == g[0], "%s kept for %s, want the oldest %s"
              % (l["keeper"], l["path"], g[0]))
        check(l["kind"] == "exact" and l["similarity"] == 1 and
              l["action"] == "remove", "exact remove lines: %r" % l)
        check(l["size"] == os.path.getsize(l["path"]) and
              l["hash"] == l["keeper_hash"], "size and hash: %r" % l)
        check(l["mtime_ns"] == os.stat(l["path"]).st_mtime_ns,
              "mtime_ns is the file's")
    nbytes = sum(l["size"] for l in lines)
    check("%d files" % len(want) in err and "(%d bytes)" % nbytes in err,
          "summary names files and bytes: %s" % err)
    before = files_under(root)
    out, err = run("apply", "--dry-run", "-", stdin=out)
    check(files_under(root) == before, "--dry-run changes nothing")
    check(out.count(b"would remove ") == len(want), "dry run: %s" % out)
    plan = os.path.join(tmp, "plan.jsonl")
    dump(plan, lines)
    said, _ = run("apply", "-v", "--dry-run", plan)
    for l in lines:
        check(("would remove %s (kept %s, the same %d bytes)"
               % (l["path"], l["keeper"], l["size"])).encode()
              in said.splitlines(), "-v names %r: %s" % (l, said))
    dump(plan, lines)
    out, err = run("apply", plan)
    check(files_under(root) == before - want,
          "apply removed exactly the planned files")
    check(out.count(b"removed ") == len(want) and "%d done" % len(want)
          in err, "one line per action and a summary: %s %s" % (out, err))
    # From the last path down (a mount's index keeps each key's first
    # holders by path: removing them first cost it a search of the whole
    # cluster per file).
    acted = [l[len(b"removed "):] for l in out.splitlines()]
    check(acted == sorted(acted, reverse=True) and
          acted != [os.fsencode(l["path"]) for l in lines],
          "apply acts from the last path down, not in plan order: %s" % out)
    out, _ = run("dedupe", root)
    check(out == b"", "nothing left to plan: %s" % out)


def case_exact_size_first(tmp):
    """Without --near, only files that share their size with another are
    read: their first 4 KiB, and all of them only where another file of
    the size has the same first 4 KiB; -v says how many. The plan is the
    same as with every file read."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root)
    # Same size, other bytes: hashed, never planned.
    put(root, "same-size/a.txt", b"alpha beta gamma delta\n" * 40)
    put(root, "same-size/b.txt", b"alpha beta gamma DELTA\n" * 40)
    # Binary copies: a group, read once, planned like any other.
    for p in ("bin/a.png", "bin/copy/a.png"):
        put(root, p, b"\x89PNG\r\n\x1a\n\x00" + bytes(range(256)) * 8)
    put(root, "empty.txt", b"")
    # A PDF's copies are planned, and so are a broken PDF's (a failed
    # extraction: still exact copies) and UTF-16 text's.
    formats = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                           "data", "formats")
    for name in ("cc0.pdf", "truncated.pdf", "cc0-utf16.txt"):
        with open(os.path.join(formats, name), "rb") as f:
            data = f.read()
        put(root, "formats/" + name, data, mtime=1_400_000_000)
        put(root, "formats/copy/" + name, data, mtime=1_400_000_001)
    want = expected_counts(root)
    out, err = run("dedupe", "-v", root)
    got = verbose_counts(err)
    # Every group is planned as it is: none is read again to learn its
    # format.
    want.update(changed=0)
    check(got == want, "-v counts %s, want %s" % (got, want))
    check(want["apart"] and want["whole"] and want["groups"] > 3,
          "the tree has files told apart by their heads and read whole")
    lines = plan_lines(out)
    planned = {l["path"] for l in lines}
    copies = {os.path.join(root, "formats/copy", n)
              for n in ("cc0.pdf", "truncated.pdf", "cc0-utf16.txt")}
    copies |= {os.path.join(root, p)
               for p in ("bin/a.png", "bin/copy/a.png")} - \
        {min((os.path.join(root, p) for p in ("bin/a.png", "bin/copy/a.png")),
             key=lambda p: (os.stat(p).st_mtime_ns, len(p), p))}
    check(planned == {p for g in groups for p in g[1:]} | copies,
          "planned exactly the copies: %s" % sorted(planned))
    # Without the near variants (which --near would keep in place of the
    # oldest copies; the CC0 PDF and text are near-duplicates too), --near
    # plans the same exact copies, every file read.
    shutil.rmtree(os.path.join(root, "near"))
    shutil.rmtree(os.path.join(root, "formats"))
    out, _ = run("dedupe", root)
    lines = plan_lines(out)
    near, _ = run("dedupe", "--near", root)
    exact_of_near = sorted((l["path"], l["keeper"], l["hash"])
                           for l in plan_lines(near) if l["kind"] == "exact")
    check(sorted((l["path"], l["keeper"], l["hash"]) for l in lines)
          == exact_of_near, "the exact lines of --near: %s" % exact_of_near)


def case_big_files(tmp):
    """Without --near, copies larger than the 64 MiB a document's text may
    come from are found as jdupes finds them (files of any size hashed);
    --max-size still bounds that when given, and the summary says how many
    files it left out. --near leaves them out by its default and says so."""
    root = os.path.join(tmp, "share")
    for rel in ("a/big.img", "b/big.img"):
        path = put(root, rel, b"")
        with open(path, "r+b") as f:
            f.truncate(70 << 20)  # sparse: 70 MiB of zeros, none on disk
            f.seek(-1, 2)
            f.write(b"x")
    out, err = run("dedupe", root)
    check([os.path.relpath(l["path"], root) for l in plan_lines(out)] ==
          ["b/big.img"], "70 MiB copies planned: %s %s" % (out, err))
    for args in (["--max-size", "1M"], ["--near"]):
        out, err = run("dedupe", *args, root)
        check(out == b"" and "2 files over --max-size" in err,
              "%s: %s %s" % (args, out, err))


def case_exact_head(tmp):
    """Same-size files that differ in their first 4 KiB are told apart by
    that alone (-v counts them, and no more of them is read); files that
    share it are read whole, and only the whole decides: two that differ
    after it are not copies. A file of at most 4 KiB is read once. The
    plan and the counts do not depend on -j."""
    root = os.path.join(tmp, "share")
    rng = random.Random(3)
    body = bytes(rng.randrange(32, 127) for _ in range(3 * HEAD + 100))
    # The same first 4 KiB and more, one byte apart near the end.
    put(root, "tail/a.txt", body)
    put(root, "tail/b.txt", body[:-50] + b"#" + body[-49:])
    # One byte apart: the first.
    put(root, "first/a.txt", b"A" + body[1:2 * HEAD])
    put(root, "first/b.txt", b"B" + body[1:2 * HEAD])
    # Copies longer than the head, and of exactly the head and one more.
    for n in (HEAD + 1000, HEAD, HEAD + 1):
        for c in "ab":
            put(root, "copies-%d/%s.txt" % (n, c), body[:n],
                mtime=1_600_000_000 + (c == "b"))
    # Of the head's size plus one, apart in the last byte only.
    put(root, "last/a.txt", body[:HEAD] + b"x")
    put(root, "last/b.txt", body[:HEAD] + b"y")
    # Short files of one size, apart: read once each.
    put(root, "short/a.txt", b"short text one\n")
    put(root, "short/b.txt", b"short text two\n")
    # Copies of 6 MiB: hashed, never read again.
    big = body * (6 * 2**20 // len(body))
    for c in "ab":
        put(root, "long/%s.txt" % c, big, mtime=1_600_000_000 + (c == "b"))
    want = expected_counts(root)
    # Apart: first/ and short/. Whole: tail/, the longer copies, the four
    # files of HEAD + 1 bytes (last/ and its copies' size) and long/.
    check(want["apart"] == 4 and want["whole"] == 10,
          "the tree: 4 files told apart by their heads, 10 read whole: %s"
          % want)
    out, err = run("dedupe", "-v", root)
    got = verbose_counts(err)
    want.update(changed=0)
    check(got == want, "-v counts %s, want %s" % (got, want))
    lines = plan_lines(out)
    check(sorted(l["path"] for l in lines) ==
          sorted([os.path.join(root, "copies-%d/b.txt" % n)
                  for n in (HEAD + 1000, HEAD, HEAD + 1)] +
                 [os.path.join(root, "long/b.txt")]),
          "only the copies planned: %s" % [l["path"] for l in lines])
    shutil.rmtree(os.path.join(root, "long"))
    # Enough files of one size for a pass on several threads: the same
    # plan and counts with one thread as with four.
    # 150 pairs of copies, then 200 files told apart by their first bytes.
    for i in range(300):
        put(root, "many/%03d.txt" % i, b"%03d" % (i % 150) +
            body[3:HEAD + 500], mtime=1_600_000_000 + i // 150)
    for i in range(200):
        put(root, "apart/%03d.txt" % i, b"%03d" % i + body[3:HEAD + 700])
    outs = [run("dedupe", "-v", "-j", j, root) for j in (1, 4)]
    counts = [verbose_counts(e) for _, e in outs]
    want = expected_counts(root)
    want.update(changed=0)
    check(counts[0] == counts[1] == want and want["whole"] == 308 and
          want["apart"] == 204,
          "-j1 and -j4 count alike: %s, want %s" % (counts, want))
    check(outs[0][0] == outs[1][0] and len(plan_lines(outs[0][0])) == 153,
          "-j1 and -j4 plan alike: 153 lines")


def case_protect(tmp):
    """A copy under --protect is never planned and wins as keeper."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(3,), singles=3)
    newest = groups[0][-1]
    prot = os.path.dirname(newest)
    out, _ = run("dedupe", "--protect", prot, root)
    lines = plan_lines(out)
    check({l["path"] for l in lines} == set(groups[0][:-1]) and
          all(l["keeper"] == newest for l in lines),
          "the protected copy is kept: %r" % lines)
    # Without the 'protect' rule it need not win, but is still never planned.
    out, err = run("dedupe", "--protect", prot, "--keep", "oldest", root)
    lines = plan_lines(out)
    check(newest not in {l["path"] for l in lines} and
          {l["keeper"] for l in lines} == {groups[0][0]},
          "protected never planned: %r" % lines)
    check("1 protected" in err, "summary counts the protected file: %s" % err)
    # A file protects itself: the newest copy, named alone, keeps.
    out, _ = run("dedupe", "--protect", newest, root)
    lines = plan_lines(out)
    check({l["path"] for l in lines} == set(groups[0][:-1]) and
          all(l["keeper"] == newest for l in lines),
          "a protected file is kept: %r" % lines)
    # --exclude leaves paths out of the plan: neither planned nor kept.
    rel = os.path.relpath(groups[0][0], root)
    for glob in (rel, os.path.basename(groups[0][0]).replace("copy", "c?py"),
                 os.path.dirname(rel) + "/*"):
        out, _ = run("dedupe", "--exclude", glob, root)
        lines = plan_lines(out)
        check(groups[0][0] not in {l["path"] for l in lines} |
              {l["keeper"] for l in lines} and len(lines) == 1,
              "--exclude %s: %r" % (glob, lines))


def copies(root, name, n, rng, vocab):
    """n byte-identical copies ROOT/NAME/a.txt, b.txt, … (a oldest)."""
    data = ("\n".join(document(rng, vocab)) + "\n").encode()
    return [put(root, "%s/%s.txt" % (name, "abcdefgh"[i]), data,
                mtime=1_600_000_000 + i) for i in range(n)]


def case_apply_reverifies(tmp):
    """Changed file, deleted keeper, symlinked directory, keeper planned
    elsewhere: each line skipped with its reason, nothing else touched."""
    root = os.path.join(tmp, "share")
    rng = random.Random(5)
    vocab = vocabulary(rng)
    changed = copies(root, "changed", 2, rng, vocab)
    gone = copies(root, "gone", 2, rng, vocab)
    swap = copies(root, "swap", 2, rng, vocab)
    os.rename(swap[0], os.path.join(root, "keeper.txt"))
    swap[0] = os.path.join(root, "keeper.txt")
    fine = copies(root, "fine", 3, rng, vocab)
    ok = copies(root, "ok", 2, rng, vocab)
    out, _ = run("dedupe", root)
    lines = plan_lines(out)
    by_path = {l["path"]: l for l in lines}
    check(set(by_path) == {changed[1], gone[1], swap[1], fine[1], fine[2],
                           ok[1]}, "planned: %s" % sorted(by_path))
    # 1. Same size and mtime, other bytes: only the hash can tell.
    st = os.stat(changed[1])
    with open(changed[1], "r+b") as f:
        b = f.read(1)
        f.seek(0)
        f.write(b"X" if b != b"X" else b"Y")
    os.utime(changed[1], ns=(st.st_atime_ns, st.st_mtime_ns))
    # 2. The keeper is deleted.
    os.unlink(gone[0])
    # 3. The planned file's directory is swapped for a symlink to a copy.
    d = os.path.join(root, "swap")
    shutil.copytree(d, d + ".real", copy_function=shutil.copy2)
    shutil.rmtree(d)
    os.symlink("swap.real", d)
    # 4. An edited plan also plans fine/a.txt, the keeper of two lines.
    extra = dict(by_path[fine[1]])
    extra["path"], extra["keeper"] = fine[0], fine[1]
    extra["mtime_ns"], extra["keeper_mtime_ns"] = (extra["keeper_mtime_ns"],
                                                   extra["mtime_ns"])
    plan = os.path.join(tmp, "plan.jsonl")
    dump(plan, lines + [extra])
    out, err = run("apply", plan)
    text = out.decode("utf-8", "replace")
    reasons = {changed[1]: "file's content changed",
               gone[1]: "keeper is gone",
               swap[1]: "symlink",
               fine[0]: "keeper is itself planned",
               fine[1]: "keeper is itself planned",
               fine[2]: "keeper is itself planned"}
    for path, why in reasons.items():
        line = next((l for l in text.splitlines()
                     if l.startswith("skipped " + path + ":")), None)
        check(line is not None and why in line,
              "%s skipped because %s: %s" % (path, why, text))
    check(all(os.path.exists(p) for p in
              (changed[1], gone[1], fine[0], fine[1], fine[2],
               os.path.join(d + ".real", "b.txt"))),
          "skipped files are still there")
    check(not os.path.exists(ok[1]) and os.path.exists(ok[0]),
          "the line that still verifies was applied")
    check(" 6 skipped, 0 failed" in err, "summary: %s" % err)
    # A malformed line is an error (exit 1), and is reported by number.
    with open(plan, "a") as f:
        f.write('{"action": "remove", "path": "/x"\n')
    out, err = run("apply", plan, code=1)
    check(":%d: not a plan line" % (len(lines) + 2) in err,
          "malformed line named: %s" % err)


def case_apply_changed_since_plan(tmp):
    """Each side of a line touched, or grown with its mtime put back, after
    the plan: the line is skipped with the reason that says which, and
    nothing is removed (a touched file is no longer the one the keep rules
    ranked; a grown one holds other bytes)."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2, 2, 2, 2, 2), singles=0)
    out, _ = run("dedupe", root)
    lines = {l["path"]: l for l in plan_lines(out)}
    touched, keeper_touched, grown, keeper_grown, ok = groups
    check(set(lines) == {g[1] for g in groups}, "planned: %s" % sorted(lines))

    def grow(path):
        st = os.stat(path)
        with open(path, "ab") as f:
            f.write(b"one more line\n")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    os.utime(touched[1])
    os.utime(keeper_touched[0])
    grow(grown[1])
    grow(keeper_grown[0])
    plan = os.path.join(tmp, "plan.jsonl")
    dump(plan, lines.values())
    out, err = run("apply", plan, text=True)
    for path, why in ((touched[1], "the file was modified since the plan"),
                      (keeper_touched[1],
                       "the keeper was modified since the plan"),
                      (grown[1], "the file's size changed"),
                      (keeper_grown[1], "the keeper's size changed")):
        check("skipped %s: %s\n" % (path, why) in out,
              "%s: %s: %s" % (path, why, out))
    check(all(os.path.exists(p) for g in groups[:4] for p in g),
          "the changed lines' files are all still there")
    check("removed %s\n" % ok[1] in out and not os.path.exists(ok[1]),
          "the line that still verifies was applied: %s" % out)
    check(" 4 skipped, 0 failed" in err, "summary: %s" % err)


def case_apply_last_copy_kept(tmp):
    """Lines that would leave a text with no copy anywhere are skipped, and
    every file keeps its bytes: the keeper rewritten in place after the
    plan, same size, mtime put back (only its hash can tell), near or
    exact; a near line edited by hand to say "exact" (only comparing the
    bytes can tell), or to replace the file by a symlink (only an exact
    copy may be replaced by a link to its keeper)."""
    from test_cli import variant
    root = os.path.join(tmp, "share")
    rng = random.Random(23)
    vocab = vocabulary(rng)
    near, copy, edited, linked = [], [], [], []
    for i, (pair, how) in enumerate(((near, "reorder"), (copy, None),
                                     (edited, "reorder"),
                                     (linked, "reorder"))):
        sents = document(rng, vocab, nsent=40)
        text = "\n".join(sents) + "\n"
        pair.append(put(root, "keep/%d.txt" % i, text.encode(),
                        mtime=1_500_000_000))
        pair.append(put(root, "other/%d.txt" % i,
                        (variant(rng, sents, how) if how else
                         text).encode(), mtime=1_600_000_000))
    out, _ = run("dedupe", "--near", root)
    lines = {l["path"]: l for l in plan_lines(out)}
    check(set(lines) == {near[1], copy[1], edited[1], linked[1]} and
          lines[near[1]]["kind"] == "near" and
          lines[copy[1]]["kind"] == "exact",
          "planned: %s" % sorted(lines.values(), key=str))
    for keeper in (near[0], copy[0]):
        st = os.stat(keeper)
        with open(keeper, "r+b") as f:
            b = f.read(1)
            f.seek(0)
            f.write(b"X" if b != b"X" else b"Y")
        os.utime(keeper, ns=(st.st_atime_ns, st.st_mtime_ns))
    before = {}
    for path in (edited[1], linked[1]):
        with open(path, "rb") as f:
            before[path] = f.read()
    check(len(before[edited[1]]) == os.path.getsize(edited[0]),
          "a reordered copy has the keeper's size")
    plan = os.path.join(tmp, "plan.jsonl")
    dump(plan, [lines[near[1]], lines[copy[1]],
                dict(lines[edited[1]], kind="exact", action="hardlink"),
                dict(lines[linked[1]], action="symlink")])
    out, err = run("apply", plan, text=True)
    for path, why in ((near[1], "the keeper's content changed"),
                      (copy[1], "the keeper's content changed"),
                      (edited[1], "the file and the keeper differ, though "
                                  "the plan says exact"),
                      (linked[1], "hardlink and symlink replace exact "
                                  "copies only")):
        check("skipped %s: %s\n" % (path, why) in out,
              "%s: %s: %s" % (path, why, out))
    for path, data in before.items():
        with open(path, "rb") as f:
            check(f.read() == data and not os.path.islink(path) and
                  os.stat(path).st_nlink == 1, "%s keeps its bytes" % path)
    check(os.path.exists(near[1]) and os.path.exists(copy[1]),
          "the files whose keeper changed are still there")
    check(" 4 skipped, 0 failed" in err, "summary: %s" % err)


def case_apply_hand_edited(tmp):
    """Plans edited by hand into nonsense: a file that is its own keeper, two
    files each the other's keeper, a line given twice. Each such line is
    skipped with the reason that fits it, and nothing is removed but the
    one line given twice, once."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2, 2, 2), singles=1)
    out, _ = run("dedupe", root)
    lines = {l["path"]: l for l in plan_lines(out)}
    own, pair, twice = (lines[g[1]] for g in groups)
    own = dict(own, keeper=own["path"], keeper_mtime_ns=own["mtime_ns"])
    back = dict(pair, path=pair["keeper"], keeper=pair["path"],
                mtime_ns=pair["keeper_mtime_ns"],
                keeper_mtime_ns=pair["mtime_ns"])
    plan = os.path.join(tmp, "plan.jsonl")
    dump(plan, [own, pair, back, twice, twice])
    out, err = run("apply", plan, text=True)
    for path, why in ((own["path"], "the file is its own keeper"),
                      (pair["path"], "the keeper is itself planned"),
                      (back["path"], "the keeper is itself planned"),
                      (twice["path"], "the file is planned on an earlier "
                                      "line too")):
        check("skipped %s: %s\n" % (path, why) in out,
              "%s: %s: %s" % (path, why, out))
    check("removed %s\n" % twice["path"] in out and
          not os.path.exists(twice["path"]) and
          all(os.path.exists(p) for g in groups[:2] for p in g),
          "only the line given twice was applied, once: %s" % out)


def case_apply_keeper_other_spelling(tmp):
    """A hand-edited or merged plan names one file by two paths: as the
    keeper of one line, and as the planned file of another. Another
    spelling of a name on a case-insensitive filesystem (vfat,
    ext4 casefold) does that; so does a folder of the share mounted again
    inside it, which this case uses (it runs where the kernel has no
    case-insensitive filesystem). The keeper is itself planned: its line
    is skipped and says so, and the file stays, as when both paths are
    spelled alike; with near-duplicates the file's content would otherwise
    go with nothing close to it left. So it is when the keeper has another
    hard link."""
    if os.geteuid() != 0:
        print("SKIP: needs root to bind-mount")
        sys.exit(77)
    root = os.path.join(tmp, "share")
    rng = random.Random(47)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    keeper = put(root, "keeper.txt", data, mtime=1_600_000_000)
    middle = put(root, "a/middle.txt", data, mtime=1_600_000_001)
    last = put(root, "z.txt", data, mtime=1_600_000_002)
    out, _ = run("dedupe", root)
    lines = {l["path"]: l for l in plan_lines(out)}
    check(set(lines) == {middle, last}, "two lines: %s" % out)
    other = os.path.join(root, "m")
    os.mkdir(other)
    if subprocess.run(["mount", "--bind", os.path.dirname(middle),
                       other]).returncode:
        print("SKIP: cannot bind-mount here")
        sys.exit(77)
    try:
        # z.txt is kept by a/middle.txt, which is planned as m/middle.txt.
        # A hard link of it elsewhere does not make it safe to go: the
        # plan takes every name of its inode but that one.
        os.link(middle, os.path.join(root, "middle-link.txt"))
        m = lines[middle]
        first = dict(lines[last], keeper=middle, keeper_size=m["size"],
                     keeper_mtime_ns=m["mtime_ns"], keeper_hash=m["hash"])
        second = dict(m, path=os.path.join(other, "middle.txt"))
        plan = os.path.join(tmp, "plan.jsonl")
        dump(plan, [first, second])
        out, err = run("apply", plan, text=True)
        check("skipped %s: the keeper is itself planned\n" % last in out and
              os.path.exists(last),
              "the line whose keeper is planned is skipped: %s" % out)
        check("removed %s\n" % second["path"] in out and
              not os.path.exists(middle) and os.path.exists(keeper),
              "the other line is applied: %s" % out)
    finally:
        subprocess.run(["umount", other])


def case_trash(tmp):
    """trash=DIR keeps relative paths, bytes, mode and mtime; never
    overwrites; works across filesystems when /dev/shm is another one."""
    root = os.path.join(tmp, "share")
    os.makedirs(root)
    for trash in (os.path.join(tmp, "trash"),
                  tempfile.mkdtemp(prefix="imatch-trash-", dir="/dev/shm")
                  if os.path.isdir("/dev/shm") else None):
        if trash is None:
            continue
        try:
            shutil.rmtree(root)
            groups = make_groups(root, sizes=(2, 3), singles=2)
            for g in groups:
                os.chmod(g[1], 0o640)
            # Sparse copies of 64 MiB with a little data at each end.
            for rel in ("sparse/a.img", "sparse/copy/a.img"):
                with open(put(root, rel, b"head"), "r+b") as f:
                    f.truncate(64 << 20)
                    f.seek(-4, 2)
                    f.write(b"tail")
            out, _ = run("dedupe", "--action", "trash=" + trash, root)
            lines = plan_lines(out)
            check(all(l["action"] == "trash" and l["trash"] == trash
                      for l in lines), "trash lines: %r" % lines)
            # Something already where one file would go: left alone.
            blocked = next(l["path"] for l in lines
                           if "/sparse/" not in l["path"])
            dest0 = os.path.join(trash, os.path.relpath(blocked, root))
            put(trash, os.path.relpath(blocked, root), b"occupied")
            saved = {l["path"]: (open(l["path"], "rb").read(),
                                 os.stat(l["path"])) for l in lines}
            out, err = run("apply", "-", stdin=out)
            for l in lines:
                dest = os.path.join(trash, os.path.relpath(l["path"], root))
                if l["path"] == blocked:
                    check(open(dest0, "rb").read() == b"occupied" and
                          os.path.exists(blocked),
                          "never overwrites in the trash")
                    continue
                data, st = saved[l["path"]]
                check(not os.path.exists(l["path"]), "moved away")
                check(open(dest, "rb").read() == data,
                      "same bytes at %s" % dest)
                dst = os.stat(dest)
                check(dst.st_mtime_ns == st.st_mtime_ns and
                      dst.st_mode == st.st_mode,
                      "mode and mtime kept at %s" % dest)
                # Holes stay holes, on another filesystem too (as cp).
                check(dst.st_size < (1 << 20) or
                      dst.st_blocks * 512 <= 2 * st.st_blocks * 512 + 65536,
                      "%s: %d bytes on disk for %d in the source"
                      % (dest, dst.st_blocks * 512, st.st_blocks * 512))
            check(b"already at the destination" in out, out)
        finally:
            shutil.rmtree(trash, ignore_errors=True)


def case_trash_keeps_private_folders_private(tmp):
    """The folders trash=DIR makes for a file's path take the share's
    folders' owner, group and permission bits: a copy in a private folder
    (0700) is not readable by everyone in the trash, and the README's undo,
    `cp -a -n DIR/. SHARE/`, leaves the share's folders as they were (they
    were made 0755 and root's, which the undo then copied onto them)."""
    root = os.path.join(tmp, "share")
    trash = os.path.join(tmp, "trash")
    text = b"the same private document in two folders of the share\n" * 40
    put(root, "public/memo.txt", text, mtime=1_500_000_000)
    secret = put(root, "private/hr/memo.txt", text, mtime=1_600_000_000)
    modes = {"private": 0o700, "private/hr": 0o750}
    for rel, mode in modes.items():
        os.chmod(os.path.join(root, rel), mode)
    owner = {}
    if os.geteuid() == 0:
        os.chown(os.path.join(root, "private/hr"), 65534, 65534)
        owner = {"private/hr": (65534, 65534), "private": (0, 0)}
    out, _ = run("dedupe", "--action", "trash=" + trash, root)
    check([l["path"] for l in plan_lines(out)] == [secret],
          "the private copy is planned: %s" % out)
    out, err = run("apply", "-", stdin=out, text=True)
    check(not os.path.exists(secret) and
          os.path.exists(os.path.join(trash, "private/hr/memo.txt")),
          "trashed: %s %s" % (out, err))
    for rel, mode in modes.items():
        st = os.stat(os.path.join(trash, rel))
        check(stat.S_IMODE(st.st_mode) == mode,
              "trash/%s is %o, the share's folder %o"
              % (rel, stat.S_IMODE(st.st_mode), mode))
        if rel in owner:
            check((st.st_uid, st.st_gid) == owner[rel],
                  "trash/%s belongs to %d:%d" % (rel, st.st_uid, st.st_gid))
    subprocess.run(["cp", "-a", "-n", trash + "/.", root + "/"], check=True)
    for rel, mode in modes.items():
        st = os.stat(os.path.join(root, rel))
        check(stat.S_IMODE(st.st_mode) == mode and
              (rel not in owner or (st.st_uid, st.st_gid) == owner[rel]),
              "after the undo, %s is %o %d:%d" % (rel, stat.S_IMODE(st.st_mode),
                                                  st.st_uid, st.st_gid))
    check(open(secret, "rb").read() == text, "the undo put the file back")


def case_links(tmp):
    """hardlink gives equal inodes; symlink points at the keeper; both keep
    the bytes readable at the old path."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(3,), singles=2)
    data = open(groups[0][0], "rb").read()
    out, _ = run("dedupe", "--action", "hardlink", root)
    run("apply", "-", stdin=out)
    ino = {os.stat(p).st_ino for p in groups[0]}
    check(len(ino) == 1, "hardlink: one inode for the group: %s" % ino)
    check(all(open(p, "rb").read() == data for p in groups[0]), "bytes kept")
    out, err = run("dedupe", root)
    check(out == b"" and "2 hard links" in err,
          "hard links of their keeper are not planned again: %s" % out)
    shutil.rmtree(root)
    groups = make_groups(root, sizes=(3,), singles=2)
    out, _ = run("dedupe", "--action", "symlink", root)
    run("apply", "-", stdin=out)
    for p in groups[0][1:]:
        check(os.path.islink(p) and os.readlink(p) == groups[0][0],
              "symlink to the keeper: %s" % p)
        check(open(p, "rb").read() == data, "readable through the link")


def btrfs_mount(tmp):
    """A fresh btrfs in a sparse image, loop-mounted under @tmp (root, the
    kernel's btrfs and mkfs.btrfs are needed: else the case skips).
    Returns the mount point; the caller unmounts it."""
    mnt = os.path.join(tmp, "btrfs")
    image = os.path.join(tmp, "btrfs.img")
    if os.geteuid() != 0 or not shutil.which("mkfs.btrfs"):
        print("SKIP: needs root and mkfs.btrfs (Debian: btrfs-progs)")
        sys.exit(77)
    with open(image, "wb") as f:
        f.truncate(256 << 20)
    os.makedirs(mnt)
    made = subprocess.run(["mkfs.btrfs", "-q", image], capture_output=True)
    mounted = made.returncode == 0 and subprocess.run(
        ["mount", "-o", "loop", image, mnt], capture_output=True).returncode == 0
    if not mounted:
        print("SKIP: cannot make and loop-mount a btrfs here: %s"
              % made.stderr.decode(errors="replace").strip())
        sys.exit(77)
    return mnt


def shares_extents(path):
    """Whether filefrag reports every extent of @path as shared."""
    out = subprocess.run(["filefrag", "-v", path], capture_output=True,
                         check=True).stdout.decode()
    flags = [l.rsplit(None, 1)[-1] for l in out.splitlines()
             if re.match(r"\s*\d+:", l)]
    return bool(flags) and all("shared" in f for f in flags)


def case_reflink(tmp):
    """--action reflink: each copy keeps its name, inode, owner, mode and
    mtime and reads the same bytes, and now shares the keeper's extents
    (filefrag says shared); a copy of another mode is reflinked too (no
    path changes its inode). On a filesystem that cannot share extents
    (ext4) apply skips each line and says why, changing nothing. A near
    plan cannot reflink. apply --dry-run says the same as apply."""
    mnt = btrfs_mount(tmp)
    try:
        root = os.path.join(mnt, "share")
        groups = make_groups(root, sizes=(3,), singles=2)
        big = os.urandom(3 << 20)
        groups.append([put(root, p, big, mtime=1_600_000_000 + i)
                       for i, p in enumerate(("img/a.bin", "old/a.bin"))])
        os.chmod(groups[0][2], 0o600)
        before = {p: os.stat(p) for g in groups for p in g}
        out, err = run("dedupe", "--action", "reflink", root)
        lines = plan_lines(out)
        check(sorted(l["path"] for l in lines) ==
              sorted(p for g in groups for p in g[1:]) and
              all(l["action"] == "reflink" for l in lines),
              "the plan reflinks every copy: %r" % lines)
        plan = out
        out, err = run("apply", "--dry-run", "-", stdin=plan)
        check(out.count(b"would reflink ") == len(lines) and
              not any(shares_extents(p) for g in groups for p in g[1:]),
              "apply --dry-run: %s %s" % (out, err))
        out, err = run("apply", "-", stdin=plan)
        check(out.count(b"reflinked ") == len(lines), "apply: %s %s" % (out, err))
        for g in groups:
            data = open(g[0], "rb").read()
            for p in g:
                st = os.stat(p)
                b = before[p]
                check((st.st_ino, st.st_mode, st.st_uid, st.st_mtime_ns) ==
                      (b.st_ino, b.st_mode, b.st_uid, b.st_mtime_ns),
                      "%s kept its inode, mode, owner and mtime" % p)
                check(open(p, "rb").read() == data, "%s reads the same" % p)
                check(shares_extents(p), "%s shares its extents" % p)
        # Planned again: what is reflinked already is left out, and a line
        # of it that apply meets anyway is skipped, read or not.
        fresh = os.path.join(root, "late/a.bin")
        os.makedirs(os.path.dirname(fresh))
        subprocess.run(["cp", "--reflink=never", groups[1][0], fresh],
                       check=True)
        out, err = run("dedupe", "--action", "reflink", root)
        check([l["path"] for l in plan_lines(out)] == [fresh] and
              "%d exact copies already share" % len(lines) in err,
              "the plan made again: %s %s" % (out, err))
        out, err = run("apply", "-", stdin=plan)
        check(out.count(b"already shares the keeper's extents") ==
              len(lines), "the old plan applied again: %s %s" % (out, err))
        out, err = run("dedupe", "--near", "--action", "reflink", root, code=2)
        check("exact copies only" in err, "--near with reflink: %s" % err)
    finally:
        subprocess.run(["umount", mnt])
    root = os.path.join(tmp, "ext4")
    groups = make_groups(root, sizes=(2,), singles=1)
    out, _ = run("dedupe", "--action", "reflink", root)
    if shares_extents_possible(root):
        return
    plan = out
    # A dry run says so too: it used to say "would reflink".
    out, err = run("apply", "--dry-run", "-", stdin=plan)
    check(b"would reflink" not in out and "cannot share extents" in
          err + out.decode(), "apply --dry-run on %s: %s %s" % (root, out, err))
    out, err = run("apply", "-", stdin=plan)
    check(b"reflinked" not in out and "cannot share extents" in
          err + out.decode(), "apply on %s: %s %s" % (root, out, err))
    check(all(not shares_extents(p) for p in groups[0]), "nothing shared")


def shares_extents_possible(directory):
    """Whether @directory's filesystem can share extents (cp --reflink)."""
    a = os.path.join(directory, ".probe-a")
    b = os.path.join(directory, ".probe-b")
    with open(a, "wb") as f:
        f.write(b"x" * 8192)
    ok = subprocess.run(["cp", "--reflink=always", a, b],
                        capture_output=True).returncode == 0
    for p in (a, b):
        if os.path.exists(p):
            os.unlink(p)
    return ok


def case_hard_link_bytes(tmp):
    """Three planned paths that are hard links of one inode free one file,
    not three: the summary says what the plan frees besides what it lists
    (as rmlint counts); no such line when every planned file is its own."""
    root = os.path.join(tmp, "share")
    data = os.urandom(100_001)
    put(root, "a/x", data, mtime=1_500_000_000)
    other = put(root, "b/x", data, mtime=1_600_000_000)
    for rel in ("c/x", "c/y"):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        os.link(other, os.path.join(root, rel))
    out, err = run("dedupe", root)
    check(len(plan_lines(out)) == 3 and "(300003 bytes) can go" in err and
          "frees 100.0 kB (100001 bytes)" in err,
          "three links of one file: %s" % err)
    os.unlink(os.path.join(root, "c/x"))
    os.unlink(os.path.join(root, "c/y"))
    out, err = run("dedupe", root)
    check("(100001 bytes) can go" in err and "frees" not in err,
          "one copy: %s" % err)


def case_links_keep_owner_and_mode(tmp):
    """A hard link shares the keeper's inode, a symlink reads through to it:
    either would give the replaced path the keeper's owner and mode (a
    private copy made world-readable). apply skips such lines and says
    why; a copy with the keeper's owner and mode is still replaced."""
    root = os.path.join(tmp, "share")
    rng = random.Random(32)
    vocab = vocabulary(rng)
    data = ("\n".join(document(rng, vocab)) + "\n").encode()
    as_root = os.geteuid() == 0
    for action in ("hardlink", "symlink"):
        shutil.rmtree(root, ignore_errors=True)
        public = put(root, "public.txt", data, mtime=1_600_000_000)
        private = put(root, "private.txt", data, mtime=1_600_000_001)
        group = put(root, "group.txt", data, mtime=1_600_000_002)
        same = put(root, "same.txt", data, mtime=1_600_000_003)
        for p in (public, private, group, same):
            os.chmod(p, 0o644)
        os.chmod(private, 0o600)
        if as_root:
            # Only the owner differs: mode equal.
            os.chown(group, 65534, 65534)
        else:
            os.chmod(group, 0o640)
        before = {p: os.stat(p) for p in (private, group)}
        out, _ = run("dedupe", "--action", action, root)
        lines = plan_lines(out)
        check({l["path"] for l in lines} == {private, group, same} and
              all(l["keeper"] == public for l in lines),
              "%s: planned: %r" % (action, lines))
        out, err = run("apply", "--dry-run", "-", stdin=out)
        text = out.decode()
        for p in (private, group):
            check("skipped %s: owner, group or mode differs from the "
                  "keeper's" % p in text, "%s: dry run: %s" % (action, text))
        out, err = run("apply", "-", stdin=b"".join(
            (json.dumps(l) + "\n").encode() for l in lines))
        text = out.decode()
        for p in (private, group):
            check("skipped %s: owner, group or mode differs from the "
                  "keeper's" % p in text, "%s: %s" % (action, text))
            st = os.lstat(p)
            b = before[p]
            check(not os.path.islink(p) and st.st_ino == b.st_ino and
                  st.st_mode == b.st_mode and st.st_uid == b.st_uid and
                  st.st_gid == b.st_gid,
                  "%s: %s keeps its inode, owner and mode" % (action, p))
        if action == "hardlink":
            check(os.stat(same).st_ino == os.stat(public).st_ino,
                  "the copy with the keeper's owner and mode is linked")
        else:
            check(os.readlink(same) == public, "symlinked: %s" % text)
        check(" 1 done" in err and " 2 skipped, 0 failed" in err,
              "%s: summary: %s" % (action, err))


def apply_held(tmp, plan, function, shell, env=None):
    """Run `imatch apply PLAN` under gdb, which runs the @shell command
    when apply first calls @function (a name, or a tuple of names: the
    first of them called), then lets it go on: another program acting at
    that very moment, every time. @shell may be a list: the Nth call of
    @function runs the Nth command. Returns apply's output with gdb's; the
    case skips when gdb is missing or cannot trace here."""
    gdb = shutil.which("gdb")
    if not gdb:
        print("SKIP: gdb is not installed")
        sys.exit(77)
    functions = (function,) if isinstance(function, str) else function
    cmds = os.path.join(tmp, "gdb.cmds")
    with open(cmds, "w") as f:
        f.write("set pagination off\nset confirm off\n"
                "set breakpoint pending on\n")
        if isinstance(shell, list):
            for n, sh in enumerate(shell):
                f.write("tbreak %s\nignore $bpnum %d\ncommands\nshell %s\n"
                        "continue\nend\n" % (function, n, sh))
        else:
            # Each stop deletes the others: @shell runs once.
            for fn in functions:
                f.write("tbreak %s\ncommands\nshell %s\ndelete\n"
                        "continue\nend\n" % (fn, shell))
        f.write("run\n")
    # LeakSanitizer cannot run under ptrace: in an ASan build it would end
    # apply with a fatal error (exit 1) after the line was done.
    env = dict(env or os.environ, ASAN_OPTIONS=":".join(
        o for o in ((env or os.environ).get("ASAN_OPTIONS"),
                    "detect_leaks=0") if o))
    p = subprocess.run([gdb, "-q", "-nx", "-batch", "-x", cmds, "--args",
                        test_cli.IMATCH, "apply", plan],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=300, env=env)
    log = p.stdout.decode("utf-8", "replace")
    if not re.search(r"Temporary breakpoint \d+, ", log):
        print("SKIP: gdb did not stop apply: %s" % log[-300:])
        sys.exit(77)
    return log


def case_links_keeper_replaced_midway(tmp):
    """The keeper is replaced by rename (an editor saving it) after apply
    verified it, just as apply links it (hardlink) or points at it
    (symlink): the file, now the last copy of the keeper's old bytes, stays,
    and no temporary name is left. apply runs under gdb, held at its first
    linkat() or symlinkat() while the rename happens, so the race happens
    every time."""
    root = os.path.join(tmp, "share")
    rng = random.Random(41)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    for action in ("hardlink", "symlink"):
        shutil.rmtree(root, ignore_errors=True)
        keeper = put(root, "a/report.txt", data, mtime=1_600_000_000)
        copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
        out, _ = run("dedupe", "--action", action, root)
        check(len(plan_lines(out)) == 1, "one line: %s" % out)
        plan = os.path.join(tmp, "plan.jsonl")
        with open(plan, "wb") as f:
            f.write(out)
        saved = put(root, "a/.report.txt.swp", b"the keeper, edited\n")
        log = apply_held(tmp, plan,
                         "linkat" if action == "hardlink" else "symlinkat",
                         "mv %s %s" % (saved, keeper))
        check(not os.path.islink(copy) and open(copy, "rb").read() == data,
              "%s: the file keeps the keeper's old bytes: %s" % (action, log))
        check("the keeper changed during verification" in log,
              "%s: the line is skipped and says why: %s" % (action, log))
        check(sorted(os.listdir(os.path.dirname(copy))) == ["report.txt"],
              "%s: no temporary name left: %s"
              % (action, os.listdir(os.path.dirname(copy))))


def check_save_kept(action, copy, trash, edited, log):
    """After an editor saved @edited over @copy while apply held at its act
    (apply_held()'s @log): the new content stays at its name, the line is
    skipped and says why, no temporary name is left, the trash is empty."""
    check(os.path.isfile(copy) and not os.path.islink(copy) and
          open(copy, "rb").read() == edited,
          "%s: the new content stays at its name: %s" % (action, log))
    check("skipped %s: the file changed during verification" % copy
          in log and "exited normally" in log,
          "%s: the line is skipped and says why: %s" % (action, log))
    check(sorted(os.listdir(os.path.dirname(copy))) == ["report.txt"],
          "%s: no temporary name left: %s"
          % (action, os.listdir(os.path.dirname(copy))))
    check(not os.path.exists(trash) or
          not any(files for _, _, files in os.walk(trash)),
          "%s: nothing in the trash" % action)


def case_file_replaced_midway(tmp):
    """The file is replaced by rename (an editor saving it: write a
    temporary, rename it over) after apply verified it, at the very moment
    apply acts on its name: the new content stays at its name, the line is
    skipped and says why, and no temporary name is left, for remove, trash
    and hardlink, even when the new content has the file's size and mtime. apply runs under gdb, held at its first call that acts on
    the file's name (renameat2; unlinkat or renameat in builds that acted
    on the name directly) while the rename happens, every time."""
    root = os.path.join(tmp, "share")
    trash = os.path.join(tmp, "trash")
    rng = random.Random(43)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    edited = b"the copy, edited and saved\n"
    plan = os.path.join(tmp, "plan.jsonl")

    def planned(action):
        """A fresh share of the report and its copy, the plan of @action
        for it written to plan; the copy's path."""
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(trash, ignore_errors=True)
        put(root, "a/report.txt", data, mtime=1_600_000_000)
        copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
        out, _ = run("dedupe", "--action", action, root)
        check([l["path"] for l in plan_lines(out)] == [copy],
              "%s: one line: %s" % (action, out))
        with open(plan, "wb") as f:
            f.write(out)
        return copy

    for action, calls in (("remove", ("unlinkat", "renameat2")),
                          ("trash=" + trash, ("renameat2",)),
                          ("hardlink", ("renameat", "renameat2")),
                          ("symlink", ("renameat", "renameat2"))):
        copy = planned(action)
        saved = put(root, "b/.report.txt.swp", edited)
        log = apply_held(tmp, plan, calls, "mv %s %s" % (saved, copy))
        check_save_kept(action, copy, trash, edited, log)
    # The new content with the file's very size, mtime and mode (a sync
    # tool keeps times): only the inode tells it from what was verified.
    for action in ("remove", "trash=" + trash):
        copy = planned(action)
        same = bytes(reversed(data))
        saved = put(root, "b/.report.txt.swp", same, mtime=1_600_000_001)
        log = apply_held(tmp, plan, "renameat2", "mv %s %s" % (saved, copy))
        check_save_kept(action, copy, trash, same, log)
    # And the name taken again while apply gives it back: nothing is
    # unlinked or overwritten, the line fails and says where the content
    # it had moved is now.
    for action in ("remove", "trash=" + trash):
        copy = planned(action)
        saved = put(root, "b/.report.txt.swp", edited)
        again = put(root, "b/.report.txt.swx", b"saved once more\n")
        log = apply_held(tmp, plan, "renameat2",
                         ["mv %s %s" % (saved, copy),
                          "mv %s %s" % (again, copy)])
        m = re.search(r"failed %s: the file changed during verification, "
                      r"and giving its name back: File exists; it is now "
                      r"at (\S+)\n" % re.escape(copy), log)
        check(m and "exited with code 01" in log,
              "%s: the line fails and says where: %s" % (action, log))
        check(open(copy, "rb").read() == b"saved once more\n" and
              open(m.group(1), "rb").read() == edited,
              "%s: both contents stay: %s" % (action, log))


def case_apply_left_after_folder_renamed(tmp):
    """As in file_replaced_midway, the name is taken again while apply
    gives it back, so the line fails and says where the content it had
    moved is now; and the folder holding that content is renamed at that
    moment too (a user tidying up). The path apply prints is where the
    content is, not where the plan said its folder was."""
    root = os.path.join(tmp, "share")
    trash = os.path.join(tmp, "trash")
    plan = os.path.join(tmp, "plan.jsonl")
    rng = random.Random(71)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    edited = b"the copy, edited and saved\n"
    for action, folder in (("remove", os.path.join(root, "b")),
                           ("trash=" + trash, os.path.join(trash, "b"))):
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(trash, ignore_errors=True)
        put(root, "a/report.txt", data, mtime=1_600_000_000)
        copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
        out, _ = run("dedupe", "--action", action, root)
        with open(plan, "wb") as f:
            f.write(out)
        saved = put(root, "b/.report.txt.swp", edited)
        again = put(root, "b/.report.txt.swx", b"saved once more\n")
        log = apply_held(tmp, plan, "renameat2",
                         ["mv %s %s" % (saved, copy),
                          "mv %s %s; mv %s %s.renamed"
                          % (again, copy, folder, folder)])
        m = re.search(r"failed %s: .* it is now at (\S+)\n"
                      % re.escape(copy), log)
        check(m and m.group(1).startswith(folder + ".renamed/") and
              open(m.group(1), "rb").read() == edited,
              "%s: the printed path holds the content: %s" % (action, log))


NO_RENAME_FLAGS = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
/* renameat2() as NFS, SMB and many FUSE filesystems answer it. */
int renameat2(int od, const char *o, int nd, const char *n, unsigned flags)
{
	if (flags) {
		errno = EINVAL;
		return -1;
	}
	return renameat(od, o, nd, n);
}
"""


def without_rename_flags(tmp):
    """An environment whose renameat2() refuses every flag with EINVAL, as
    filesystems without them do (a preloaded library built here)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("SKIP: no C compiler to build the preloaded library")
        sys.exit(77)
    src, lib = os.path.join(tmp, "noflags.c"), os.path.join(tmp, "noflags.so")
    with open(src, "w") as f:
        f.write(NO_RENAME_FLAGS)
    subprocess.run([cc, "-shared", "-fPIC", "-o", lib, src], check=True)
    # An ASan build wants its runtime first; this library needs none.
    return dict(os.environ, LD_PRELOAD=lib, ASAN_OPTIONS=":".join(
        o for o in (os.environ.get("ASAN_OPTIONS"),
                    "verify_asan_link_order=0") if o))


def case_remove_without_rename_flags(tmp):
    """On a filesystem without RENAME_NOREPLACE (NFS, SMB, many FUSE ones)
    remove still moves the file aside (a plain rename to a free temporary
    name) and checks what it moved: a file replaced by rename at that
    moment keeps its new content, given back by a link; an untouched one
    is removed; no temporary name is left."""
    root = os.path.join(tmp, "share")
    rng = random.Random(59)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    env = without_rename_flags(tmp)
    edited = b"the copy, edited and saved\n"
    put(root, "a/report.txt", data, mtime=1_600_000_000)
    copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
    out, _ = run("dedupe", root)
    plan = os.path.join(tmp, "plan.jsonl")
    with open(plan, "wb") as f:
        f.write(out)
    saved = put(root, "b/.report.txt.swp", edited)
    log = apply_held(tmp, plan, ("renameat", "unlinkat"),
                     "mv %s %s" % (saved, copy),
                     env=env)
    check(os.path.isfile(copy) and open(copy, "rb").read() == edited,
          "the new content stays at its name: %s" % log)
    check("skipped %s: the file changed during verification" % copy in log
          and "exited normally" in log, "skipped, says why: %s" % log)
    check(sorted(os.listdir(os.path.dirname(copy))) == ["report.txt"],
          "no temporary name left: %s" % os.listdir(os.path.dirname(copy)))
    # Untouched, it goes.
    put(root, "b/report.txt", data, mtime=1_600_000_001)
    out, _ = run("dedupe", root)
    p = subprocess.run([test_cli.IMATCH, "apply", "-"], input=out,
                       capture_output=True, env=env, timeout=120)
    check(p.returncode == 0 and p.stdout.decode() == "removed %s\n" % copy
          and os.listdir(os.path.dirname(copy)) == [],
          "removed: %r %r" % (p.stdout, p.stderr))


def case_links_and_trash_without_rename_flags(tmp):
    """On a filesystem without RENAME_NOREPLACE and RENAME_EXCHANGE (NFS,
    SMB, many FUSE ones) trash, hardlink and symlink move the file aside as
    remove does (a plain rename to a free temporary name) and check what
    they moved before the link or the trash takes it: a file replaced by
    rename at that moment (an editor saving) keeps its new content, given
    back by a link; an untouched one is acted on; no temporary name is
    left. apply runs under gdb, held at its first call that acts on the
    file's name (renameat, or unlinkat in builds that linked the file into
    the trash and unlinked its name) while the rename happens."""
    root = os.path.join(tmp, "share")
    trash = os.path.join(tmp, "trash")
    rng = random.Random(61)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    env = without_rename_flags(tmp)
    edited = b"the copy, edited and saved\n"
    plan = os.path.join(tmp, "plan.jsonl")
    for action in ("trash=" + trash, "hardlink", "symlink"):
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(trash, ignore_errors=True)
        keeper = put(root, "a/report.txt", data, mtime=1_600_000_000)
        copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
        out, _ = run("dedupe", "--action", action, root)
        check([l["path"] for l in plan_lines(out)] == [copy],
              "%s: one line: %s" % (action, out))
        with open(plan, "wb") as f:
            f.write(out)
        saved = put(root, "b/.report.txt.swp", edited)
        log = apply_held(tmp, plan, ("renameat", "unlinkat"),
                         "mv %s %s" % (saved, copy), env=env)
        check_save_kept(action, copy, trash, edited, log)
        # Untouched, it is done.
        put(root, "b/report.txt", data, mtime=1_600_000_001)
        out, _ = run("dedupe", "--action", action, root)
        p = subprocess.run([test_cli.IMATCH, "apply", "-"], input=out,
                           capture_output=True, env=env, timeout=120)
        check(p.returncode == 0 and " 1 done" in p.stderr.decode(),
              "%s: done: %r %r" % (action, p.stdout, p.stderr))
        check(sorted(os.listdir(os.path.dirname(copy))) ==
              ([] if action.startswith("trash") else ["report.txt"]),
              "%s: no temporary name left: %s"
              % (action, os.listdir(os.path.dirname(copy))))
        if action == "hardlink":
            check(os.stat(copy).st_ino == os.stat(keeper).st_ino,
                  "hardlinked")
        elif action == "symlink":
            check(os.readlink(copy) == keeper, "symlinked")
        else:
            moved = os.path.join(trash, "b", "report.txt")
            check(open(moved, "rb").read() == data and
                  sorted(os.listdir(os.path.dirname(moved))) ==
                  ["report.txt"], "in the trash, nothing else there")


def case_keeper_gone_midway(tmp):
    """The keeper is removed, or replaced by rename (an editor saving it),
    after apply last checked it, at the very moment apply moves the file
    aside (remove) or exchanges it with the symlink (symlink): the file
    was about to be the last copy of its bytes. It keeps its name and
    bytes, the line is skipped and says why, and no temporary name is
    left. apply runs under gdb, held at renameat2 while the keeper goes."""
    root = os.path.join(tmp, "share")
    rng = random.Random(47)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    for action in ("remove", "symlink"):
        for how in ("rm %s", "printf 'the keeper, edited\\n' > %s.swp; "
                    "mv %s.swp %s"):
            shutil.rmtree(root, ignore_errors=True)
            keeper = put(root, "a/report.txt", data, mtime=1_600_000_000)
            copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
            out, _ = run("dedupe", "--action", action, root)
            plan = os.path.join(tmp, "plan.jsonl")
            with open(plan, "wb") as f:
                f.write(out)
            log = apply_held(tmp, plan, "renameat2",
                             how.replace("%s", keeper))
            check(os.path.isfile(copy) and not os.path.islink(copy) and
                  open(copy, "rb").read() == data,
                  "%s, %s: the file keeps its bytes: %s"
                  % (action, how, log))
            check("skipped %s: the keeper changed during verification"
                  % copy in log and "exited normally" in log,
                  "%s, %s: skipped, says why: %s" % (action, how, log))
            check(sorted(os.listdir(os.path.dirname(copy))) ==
                  ["report.txt"], "%s: no temporary name left: %s"
                  % (action, os.listdir(os.path.dirname(copy))))


def case_keeper_gone_while_hashing(tmp):
    """The keeper is removed while apply reads the two files (a large file
    takes minutes): trash and hardlink check it again before they act
    (remove and symlink do again later: keeper_gone_midway), or the
    trashed file would leave the tree with no copy of its bytes in it.
    apply runs under gdb, held as it ends hashing."""
    root = os.path.join(tmp, "share")
    rng = random.Random(48)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    for action in ("trash=" + os.path.join(tmp, "trash"), "hardlink"):
        shutil.rmtree(root, ignore_errors=True)
        keeper = put(root, "a/report.txt", data, mtime=1_600_000_000)
        copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
        out, _ = run("dedupe", "--action", action, root)
        plan = os.path.join(tmp, "plan.jsonl")
        with open(plan, "wb") as f:
            f.write(out)
        log = apply_held(tmp, plan, "XXH3_freeState", "rm " + keeper)
        check(os.path.isfile(copy) and not os.path.islink(copy) and
              open(copy, "rb").read() == data,
              "%s: the file keeps its bytes: %s" % (action, log))
        check(re.search("skipped %s: the (file or the )?keeper changed "
                        "during verification" % re.escape(copy), log) and
              "exited normally" in log,
              "%s: skipped, says why: %s" % (action, log))


def case_symlink_given_back_not_reused(tmp):
    """symlink: the file is replaced (an editor saving) as apply exchanges
    it with its symlink, so apply exchanges them back; meanwhile another
    program removed the symlink from the name and wrote a new file there.
    The symlink's inode number may go to that new file (ext4 gives it at
    once), which must not make apply take it for its symlink and remove
    it: both contents stay, and the line fails saying where the other is."""
    root = os.path.join(tmp, "share")
    rng = random.Random(53)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    put(root, "a/report.txt", data, mtime=1_600_000_000)
    copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
    out, _ = run("dedupe", "--action", "symlink", root)
    plan = os.path.join(tmp, "plan.jsonl")
    with open(plan, "wb") as f:
        f.write(out)
    saved = put(root, "b/.report.txt.swp", b"the copy, edited and saved\n")
    log = apply_held(tmp, plan, "renameat2",
                     ["mv %s %s" % (saved, copy),
                      "rm %s; printf 'written anew\\n' > %s" % (copy, copy)])
    contents = sorted(open(os.path.join(root, "b", n), "rb").read()
                      for n in os.listdir(os.path.join(root, "b")))
    check(contents == [b"the copy, edited and saved\n", b"written anew\n"],
          "both contents stay: %r %s" % (contents, log))
    check(re.search(r"failed %s: .* it is now at " % re.escape(copy), log)
          and "exited with code 01" in log,
          "the line fails and says where: %s" % log)


def case_apply_concurrent(tmp):
    """Two applies of one plan at once (or a user's rm beside apply): the
    other one acts on the file between this one's last check and its own
    act. A hard link exchanged with a name that already is a link of the
    keeper leaves no temporary name; a file removed (or moved to the
    trash) meanwhile is skipped as gone, not a failure (exit 0)."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2,), singles=1)
    keeper, copy = groups[0]
    plan = os.path.join(tmp, "plan.jsonl")
    out, _ = run("dedupe", "--action", "hardlink", root)
    with open(plan, "wb") as f:
        f.write(out)
    log = apply_held(tmp, plan, "renameat2", "ln -f %s %s" % (keeper, copy))
    check(os.stat(copy).st_ino == os.stat(keeper).st_ino and
          sorted(os.listdir(os.path.dirname(copy))) ==
          [os.path.basename(copy)],
          "hardlink: no temporary name left: %s %s"
          % (os.listdir(os.path.dirname(copy)), log))
    os.unlink(copy)
    put(root, os.path.relpath(copy, root), open(keeper, "rb").read())
    out, _ = run("dedupe", root)
    with open(plan, "wb") as f:
        f.write(out)
    log = apply_held(tmp, plan, "renameat2", "rm %s" % copy)
    check("skipped %s: the file is gone" % copy in log and
          "exited normally" in log and os.path.exists(keeper),
          "remove: skipped, exit 0: %s" % log)
    put(root, os.path.relpath(copy, root), open(keeper, "rb").read())
    trash = os.path.join(tmp, "trash")
    out, _ = run("dedupe", "--action", "trash=" + trash, root)
    with open(plan, "wb") as f:
        f.write(out)
    log = apply_held(tmp, plan, "renameat2", "rm %s" % copy)
    check("skipped %s: the file is gone" % copy in log and
          "exited normally" in log and os.path.exists(keeper),
          "trash: skipped, exit 0: %s" % log)


def case_hardlink_across_mounts(tmp):
    """A folder of the share bind-mounted (one filesystem, two mounts): no
    hard link crosses mounts, so apply skips the line and says why, as for
    another filesystem, and exits 0; the copy stays as it was."""
    if os.geteuid() != 0:
        print("SKIP: needs root to bind-mount")
        sys.exit(77)
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2,), singles=1)
    keeper, copy = groups[0]
    d = os.path.dirname(copy)
    if subprocess.run(["mount", "--bind", d, d]).returncode:
        print("SKIP: cannot bind-mount here")
        sys.exit(77)
    try:
        out, _ = run("dedupe", "--action", "hardlink", root)
        check([l["path"] for l in plan_lines(out)] == [copy],
              "one line: %s" % out)
        out, err = run("apply", "-", stdin=out, text=True)
        check(out == "skipped %s: the keeper is on another mount\n" % copy,
              "skipped: %s %s" % (out, err))
        check(os.stat(copy).st_ino != os.stat(keeper).st_ino and
              sorted(os.listdir(d)) == [os.path.basename(copy)],
              "the copy stays as it was")
    finally:
        subprocess.run(["umount", d])


def case_hardlink_link_limit(tmp):
    """A keeper with as many hard links as its filesystem allows (65,000 on
    ext4) takes no more: apply skips the line and says why, exits 0, and
    the copy stays as it was."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2,), singles=1)
    keeper, copy = groups[0]
    out, _ = run("dedupe", "--action", "hardlink", root)
    check([l["path"] for l in plan_lines(out)] == [copy], "one line: %s" % out)
    many = os.path.join(tmp, "links")
    os.mkdir(many)
    for i in range(1 << 17):
        try:
            os.link(keeper, os.path.join(many, str(i)))
        except OSError as e:
            if e.errno != errno.EMLINK:
                raise
            break
    else:
        print("SKIP: no hard link limit within %d links here" % (1 << 17))
        sys.exit(77)
    out, err = run("apply", "-", stdin=out, text=True)
    check(out == "skipped %s: the keeper has as many hard links as its "
          "filesystem allows\n" % copy, "skipped: %s %s" % (out, err))
    check(os.stat(copy).st_ino != os.stat(keeper).st_ino and
          sorted(os.listdir(os.path.dirname(copy))) ==
          [os.path.basename(copy)], "the copy stays as it was")


def case_hardlink_link_limit_without_rename_flags(tmp):
    """Where renameat2 takes no flags (NFS, SMB, FUSE) the link to the
    keeper is made under a temporary name and then linked at the file's
    name: one link more than the keeper ends with. A keeper one link below
    its filesystem's limit takes the first and not the second: the line is
    skipped and says why, as where the limit is met at once, exit 0, and
    the copy stays as it was with no temporary name beside it."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2,), singles=1)
    keeper, copy = groups[0]
    out, _ = run("dedupe", "--action", "hardlink", root)
    check([l["path"] for l in plan_lines(out)] == [copy], "one line: %s" % out)
    plan = out
    many = os.path.join(tmp, "links")
    os.mkdir(many)
    for i in range(1 << 17):
        try:
            os.link(keeper, os.path.join(many, str(i)))
        except OSError as e:
            if e.errno != errno.EMLINK:
                raise
            break
    else:
        print("SKIP: no hard link limit within %d links here" % (1 << 17))
        sys.exit(77)
    os.unlink(os.path.join(many, "0"))
    ino = os.stat(copy).st_ino
    p = subprocess.run([test_cli.IMATCH, "apply", "-"], input=plan,
                       capture_output=True, env=without_rename_flags(tmp),
                       timeout=120)
    out, err = p.stdout.decode(), p.stderr.decode()
    check(p.returncode == 0 and
          out == "skipped %s: the keeper has as many hard links as its "
          "filesystem allows\n" % copy and " 1 skipped, 0 failed" in err,
          "skipped, exit 0: %d %s %s" % (p.returncode, out, err))
    check(os.stat(copy).st_ino == ino and
          sorted(os.listdir(os.path.dirname(copy))) ==
          [os.path.basename(copy)], "the copy stays as it was: %s"
          % os.listdir(os.path.dirname(copy)))


def case_apply_killed_leaves_no_temporary(tmp):
    """kill (or Ctrl-C, or a closed terminal) while apply has made a hard
    link under a temporary name and not yet renamed it over the file: the
    line is finished first, then apply ends by the signal, and no
    temporary name is left beside the file. apply runs under strace, held
    for seconds after each link is made, so the signal comes in that window
    every time."""
    strace = shutil.which("strace")
    if not strace:
        print("SKIP: strace is not installed")
        sys.exit(77)
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2,), singles=1)
    out, _ = run("dedupe", "--action", "hardlink", root)
    check(len(plan_lines(out)) == 1, "one line: %s" % out)
    plan = os.path.join(tmp, "plan.jsonl")
    with open(plan, "wb") as f:
        f.write(out)
    copy = groups[0][1]
    directory = os.path.dirname(copy)
    p = subprocess.Popen([strace, "-o", os.path.join(tmp, "strace.log"),
                          "-e", "trace=linkat", "-e",
                          "inject=linkat:delay_exit=3000000",
                          test_cli.IMATCH, "apply", plan],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not any(n.startswith(".imatch-") for n in os.listdir(directory)):
            if p.poll() is not None or time.monotonic() > deadline:
                raise Failure("apply made no temporary link: %s"
                              % (p.communicate(),))
            time.sleep(0.01)
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            child = int(f.read().split()[0])
        os.kill(child, signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(sorted(os.listdir(directory)) == [os.path.basename(copy)],
          "no temporary name left: %s" % os.listdir(directory))
    check(os.stat(copy).st_ino == os.stat(groups[0][0]).st_ino,
          "the line was finished: %s %s" % (out, err))


def killed_at(tmp, plan, syscall, env=None, when=None):
    """Run `imatch apply PLAN`, killed by SIGKILL as it first enters
    @syscall (strace injects it, every time), or its @when-th time."""
    strace = shutil.which("strace")
    if not strace:
        print("SKIP: strace is not installed")
        sys.exit(77)
    inject = "inject=%s:signal=SIGKILL" % syscall
    if when is not None:
        inject += ":when=%d" % when
    return subprocess.run([strace, "-f", "-o", os.path.join(tmp, "strace.log"),
                           "-e", "trace=" + syscall, "-e", inject,
                           test_cli.IMATCH, "apply", plan],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=60, env=env)


def case_apply_killed_finishes_on_rerun(tmp):
    """kill -9 in the middle of a line (strace kills apply as it enters the
    call, every time): after remove moved the file aside; after hardlink or
    symlink made its link under a temporary name; after they exchanged it
    with the file; and, where renameat2 takes no flags, after the link took
    the file's name. Run again, apply takes back what it provably left
    (the file, given its name back; its own link to the keeper, removed),
    says so on stderr, then does the line as planned: nothing is lost, no
    temporary name is left, exit 0."""
    root = os.path.join(tmp, "share")
    plan = os.path.join(tmp, "plan.jsonl")
    rng = random.Random(67)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    back = "the file, given its name back"
    swapped = "the file, given its name back from the link that took it"
    plain = without_rename_flags(tmp)
    for action, syscall, env, said in (
            ("remove", "unlinkat", None, [back]),
            ("hardlink", "renameat2", None,
             ["a hard link of the keeper, removed"]),
            ("hardlink", "unlinkat", None, [swapped]),
            ("symlink", "renameat2", None,
             ["a symlink to the keeper, removed"]),
            ("symlink", "unlinkat", None, [swapped]),
            ("remove", "unlinkat", plain, [back]),
            ("hardlink", "unlinkat", plain,
             [swapped, "a hard link of the keeper, removed"]),
            ("symlink", "unlinkat", plain,
             [swapped, "a symlink to the keeper, removed"])):
        what = "%s killed at %s%s" % (action, syscall,
                                      " without rename flags" if env else "")
        shutil.rmtree(root, ignore_errors=True)
        keeper = put(root, "a/report.txt", data, mtime=1_600_000_000)
        copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
        out, _ = run("dedupe", "--action", action, root)
        check([l["path"] for l in plan_lines(out)] == [copy],
              "%s: one line: %s" % (what, out))
        with open(plan, "wb") as f:
            f.write(out)
        p = killed_at(tmp, plan, syscall, env)
        directory = os.path.dirname(copy)
        temps = [n for n in os.listdir(directory) if n.startswith(".imatch-")]
        check(p.returncode and len(temps) == len(said),
              "%s: killed, temporary names left: %s %s"
              % (what, os.listdir(directory), p))
        r = subprocess.run([test_cli.IMATCH, "apply", plan],
                           capture_output=True, text=True, env=env,
                           timeout=120)
        out, err = r.stdout, r.stderr
        taken = sorted(m.group(1) for m in re.finditer(
            r"imatch: apply: %s/(\.imatch-[^:/]*): left by an apply that "
            r"was killed: (?:%s)\n" % (re.escape(directory),
                                       "|".join(map(re.escape, said))), err))
        check(r.returncode == 0 and taken == sorted(temps) and
              all(w in err for w in said),
              "%s: says what it took back: %s" % (what, err))
        verb = {"remove": "removed %s\n", "hardlink": "hardlinked %s -> %s\n",
                "symlink": "symlinked %s -> %s\n"}[action]
        check(out == verb % ((copy,) if action == "remove" else
                             (copy, keeper)) and " 1 done" in err,
              "%s: the line is done: %s %s" % (what, out, err))
        check(sorted(os.listdir(directory)) ==
              ([] if action == "remove" else ["report.txt"]),
              "%s: no temporary name left: %s"
              % (what, os.listdir(directory)))
        check(open(keeper, "rb").read() == data and
              (action == "remove" or open(copy, "rb").read() == data),
              "%s: nothing lost" % what)


def case_apply_killed_twice_finishes(tmp):
    """kill -9 after remove moved the file aside, and again in the run
    that gave it its name back, before that run unlinked the temporary
    name: the file then has two names. A third run removes the temporary
    name and says so, then removes the file: no hidden copy of its bytes
    is left behind a line that says it was removed, exit 0."""
    root = os.path.join(tmp, "share")
    plan = os.path.join(tmp, "plan.jsonl")
    rng = random.Random(89)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    keeper = put(root, "a/report.txt", data, mtime=1_600_000_000)
    copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
    directory = os.path.dirname(copy)
    out, _ = run("dedupe", "--action", "remove", root)
    with open(plan, "wb") as f:
        f.write(out)
    for n in (1, 2):
        p = killed_at(tmp, plan, "unlinkat")
        check(p.returncode, "killed %d: %s" % (n, p))
    temps = [n for n in os.listdir(directory) if n.startswith(".imatch-")]
    check(len(temps) == 1 and os.stat(copy).st_nlink == 2,
          "the file has its name and a temporary one: %s"
          % os.listdir(directory))
    r = subprocess.run([test_cli.IMATCH, "apply", plan],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and "imatch: apply: %s/%s: left by an apply that "
          "was killed: a second name of the file, removed (the file is at "
          "its name)\n" % (directory, temps[0]) in r.stderr and
          r.stdout == "removed %s\n" % copy,
          "says what it took back, then removes: %s %s"
          % (r.stdout, r.stderr))
    check(os.listdir(directory) == [] and
          open(keeper, "rb").read() == data,
          "no name of the file left: %s" % os.listdir(directory))


def case_apply_killed_trash_keeps_names(tmp):
    """Two copies in one folder with the same bytes and mtime (cp -p), to
    be trashed on a filesystem without rename flags, by a plan whose lines
    were reordered (merged, sorted by hand): apply is killed after it
    trashed one and moved the other aside. Run again, the file aside gets
    its own name back, not that of the copy already in the trash, and goes
    into the trash under it: each copy is in the trash by its name."""
    root = os.path.join(tmp, "share")
    trash = os.path.join(tmp, "trash")
    plan = os.path.join(tmp, "plan.jsonl")
    rng = random.Random(71)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    plain = without_rename_flags(tmp)
    strace = shutil.which("strace")
    if not strace:
        print("SKIP: strace is not installed")
        sys.exit(77)
    put(root, "a/keep.txt", data, mtime=1_600_000_000)
    first = put(root, "b/first.txt", data, mtime=1_600_000_001)
    second = put(root, "b/second.txt", data, mtime=1_600_000_001)
    inode = {p: os.stat(p).st_ino for p in (first, second)}
    out, _ = run("dedupe", "--action", "trash=" + trash, root)
    lines = out.decode().splitlines()
    check(sorted(json.loads(l)["path"] for l in lines) == [first, second],
          "two lines: %s" % out)
    with open(plan, "w") as f:
        f.write("\n".join(sorted(lines, reverse=True)) + "\n")
    # apply acts from the last path down: second.txt is trashed (its
    # link into the trash is the first), first.txt moved aside and killed
    # as it is linked into the trash.
    p = subprocess.run([strace, "-f", "-o",
                        os.path.join(tmp, "strace.log"), "-e",
                        "trace=linkat", "-e",
                        "inject=linkat:signal=SIGKILL:when=2",
                        test_cli.IMATCH, "apply", plan],
                       capture_output=True, env=plain, timeout=60)
    directory = os.path.dirname(first)
    check(p.returncode and os.listdir(directory)[0].startswith(".imatch-")
          and len(os.listdir(directory)) == 1,
          "killed with first.txt aside: %s %s" % (os.listdir(directory), p))
    r = subprocess.run([test_cli.IMATCH, "apply", plan], capture_output=True,
                       text=True, env=plain, timeout=120)
    moved = {p: os.path.join(trash, os.path.relpath(p, root))
             for p in (first, second)}
    check(r.returncode == 0 and os.listdir(directory) == [] and
          all(os.stat(moved[p]).st_ino == inode[p] for p in moved),
          "each copy in the trash by its own name: %s %s %s"
          % (r.stdout, r.stderr,
             {p: os.stat(moved[p]).st_ino for p in moved
              if os.path.exists(moved[p])}))


def case_apply_killed_trash_link_taken_back(tmp):
    """Where renameat2 takes no flags (NFS, SMB, FUSE) trash moves the file
    aside, links it into the trash, then unlinks its temporary name;
    kill -9 between the last two leaves that name beside the file, a
    second name of the file in the trash. Run again, apply removes it and
    says so: the trash keeps the file, its bytes and its one name, and no
    temporary name is left, exit 0."""
    root = os.path.join(tmp, "share")
    trash = os.path.join(tmp, "trash")
    plan = os.path.join(tmp, "plan.jsonl")
    rng = random.Random(73)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    plain = without_rename_flags(tmp)
    put(root, "a/report.txt", data, mtime=1_600_000_000)
    copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
    moved = os.path.join(trash, "b", "report.txt")
    out, _ = run("dedupe", "--action", "trash=" + trash, root)
    check([l["path"] for l in plan_lines(out)] == [copy], "one line: %s" % out)
    with open(plan, "wb") as f:
        f.write(out)
    p = killed_at(tmp, plan, "unlinkat", plain)
    directory = os.path.dirname(copy)
    temps = os.listdir(directory)
    check(p.returncode and len(temps) == 1 and
          temps[0].startswith(".imatch-") and
          os.stat(os.path.join(directory, temps[0])).st_ino ==
          os.stat(moved).st_ino,
          "killed with the file in the trash and beside: %s %s" % (temps, p))
    r = subprocess.run([test_cli.IMATCH, "apply", plan], capture_output=True,
                       text=True, env=plain, timeout=120)
    check(r.returncode == 0 and
          "imatch: apply: %s/%s: left by an apply that was killed: a second "
          "name of the file in the trash, removed\n"
          % (directory, temps[0]) in r.stderr,
          "says what it took back: %s %s" % (r.stdout, r.stderr))
    check(os.listdir(directory) == [] and
          open(moved, "rb").read() == data and os.stat(moved).st_nlink == 1,
          "the file in the trash, no temporary name: %s"
          % os.listdir(directory))


def mount_tmpfs(path):
    """A tmpfs at @path (made here), for a trash on another filesystem
    than the share; the caller unmounts it. Skips (77) where it cannot."""
    if os.geteuid() != 0:
        print("SKIP: needs root to mount a tmpfs")
        sys.exit(77)
    os.mkdir(path)
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", path]).returncode:
        print("SKIP: cannot mount a tmpfs here")
        sys.exit(77)


def case_apply_killed_trash_copy_taken_back(tmp):
    """A trash on another filesystem (a tmpfs here) takes a copy, made
    under a temporary name there and linked into place once whole and
    checked. kill -9 part way through the copy, or after the link and
    before the temporary name is unlinked, leaves that name in the trash:
    a half file the user might trust, or a second name of the copy. A dry
    run names it; run again, apply removes it and says so, then does the
    line: the file's bytes are in the trash once, by the file's name, and
    no temporary name is left, exit 0."""
    root = os.path.join(tmp, "share")
    other = os.path.join(tmp, "other")
    trash = os.path.join(other, "trash")
    plan = os.path.join(tmp, "plan.jsonl")
    rng = random.Random(79)
    data = bytes(rng.getrandbits(8) for _ in range(600_000))
    mount_tmpfs(other)
    try:
        for syscall, when, said in (
                ("pwrite64", 2, "an unfinished copy of the file, removed "
                 "(the file is still at its name)"),
                ("unlinkat", 2, "a second name of the copy in the trash, "
                 "removed")):
            what = "killed at %s" % syscall
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(trash, ignore_errors=True)
            put(root, "a/big.bin", data, mtime=1_600_000_000)
            copy = put(root, "b/big.bin", data, mtime=1_600_000_001)
            moved = os.path.join(trash, "b", "big.bin")
            out, _ = run("dedupe", "--action", "trash=" + trash, root)
            check([l["path"] for l in plan_lines(out)] == [copy],
                  "%s: one line: %s" % (what, out))
            with open(plan, "wb") as f:
                f.write(out)
            p = killed_at(tmp, plan, syscall, when=when)
            directory = os.path.dirname(moved)
            temps = [n for n in os.listdir(directory)
                     if n.startswith(".imatch-")]
            check(p.returncode and len(temps) == 1,
                  "%s: a temporary name in the trash: %s %s"
                  % (what, os.listdir(directory), p))
            left = os.path.join(directory, temps[0])
            _, err = run("apply", "--dry-run", plan, text=True)
            check("imatch: apply: %s: a temporary name left by an apply "
                  "that was killed (or is still at work): " % left in err,
                  "%s: a dry run names it: %s" % (what, err))
            r = subprocess.run([test_cli.IMATCH, "apply", plan],
                               capture_output=True, text=True, timeout=120)
            check(r.returncode == 0 and "imatch: apply: %s: left by an apply "
                  "that was killed: %s\n" % (left, said) in r.stderr,
                  "%s: says what it took back: %s %s"
                  % (what, r.stdout, r.stderr))
            check(os.listdir(directory) == ["big.bin"] and
                  open(moved, "rb").read() == data and
                  os.stat(moved).st_nlink == 1,
                  "%s: the copy in the trash once, no temporary name: %s"
                  % (what, os.listdir(directory)))
            check(not os.path.exists(copy) or
                  open(copy, "rb").read() == data,
                  "%s: nothing lost" % what)
    finally:
        subprocess.run(["umount", other])


def case_apply_killed_trash_copy_finishes(tmp):
    """A trash on another filesystem (a tmpfs here): kill -9 once the
    checked copy is linked into place, before the file is moved aside or
    before it is unlinked. Run again, apply finishes the line: the file's
    bytes are in the trash once, no name of the file is left in the share,
    no temporary name anywhere, exit 0; whether the trash's folder is read
    before the file's or after. A copy in the trash that differs from the
    file (its size and mtime alike) is no proof: the file stays."""
    other = os.path.join(tmp, "other")
    trash = os.path.join(other, "trash")
    plan = os.path.join(tmp, "plan.jsonl")
    rng = random.Random(83)
    data = bytes(rng.getrandbits(8) for _ in range(300_000))
    mount_tmpfs(other)
    try:
        # "a" sorts before "other", "z" after: the order folders are read.
        for share, syscall, when, differs in (
                ("a", "unlinkat", 1, False), ("z", "unlinkat", 1, False),
                ("a", "renameat2", 2, False), ("z", "renameat2", 2, True)):
            what = "%s, killed at %s %d" % (share, syscall, when)
            root = os.path.join(tmp, share, "share")
            shutil.rmtree(os.path.join(tmp, "a"), ignore_errors=True)
            shutil.rmtree(os.path.join(tmp, "z"), ignore_errors=True)
            shutil.rmtree(trash, ignore_errors=True)
            put(root, "a/big.bin", data, mtime=1_600_000_000)
            copy = put(root, "b/big.bin", data, mtime=1_600_000_001)
            moved = os.path.join(trash, "b", "big.bin")
            out, _ = run("dedupe", "--action", "trash=" + trash, root)
            with open(plan, "wb") as f:
                f.write(out)
            p = killed_at(tmp, plan, syscall, when=when)
            check(p.returncode and os.path.exists(moved),
                  "%s: killed with the copy in place: %s" % (what, p))
            if differs:
                with open(moved, "r+b") as f:
                    f.seek(1000)
                    f.write(b"\x00" if data[1000] else b"\x01")
                os.utime(moved, ns=(1_600_000_001_000_000_000,) * 2)
            r = subprocess.run([test_cli.IMATCH, "apply", plan],
                               capture_output=True, text=True, timeout=120)
            temps = [n for d in (os.path.dirname(copy),
                                 os.path.dirname(moved))
                     for n in os.listdir(d) if n.startswith(".imatch-")]
            check(r.returncode == 0 and not temps,
                  "%s: exit 0, no temporary name: %s %s %s"
                  % (what, temps, r.stdout, r.stderr))
            if differs:
                check(open(copy, "rb").read() == data and
                      "skipped %s: something is already at the destination "
                      "in the trash" % copy in r.stdout,
                      "%s: a different copy in the trash, the file stays: "
                      "%s" % (what, r.stdout))
                continue
            check(not os.path.exists(copy) and
                  open(moved, "rb").read() == data and
                  os.stat(moved).st_nlink == 1,
                  "%s: the line finished, the file in the trash once: "
                  "%s %s" % (what, r.stdout, r.stderr))
            r = subprocess.run([test_cli.IMATCH, "apply", plan],
                               capture_output=True, text=True, timeout=120)
            check(r.returncode == 0 and "left by" not in r.stderr,
                  "%s: a third run has nothing to take back: %s"
                  % (what, r.stderr))
    finally:
        subprocess.run(["umount", other])


def case_apply_overlapping_elsewhere(tmp):
    """Two applies of one plan at once, one in another PID namespace (a
    container; or on another machine sharing the folder over NFS): neither
    can see the other run, so the second takes the first's temporary name
    for a killed apply's, gives the file its name back and removes it as
    planned. Nothing is lost (the keeper stays), and the first, whose
    temporary name is gone, fails its line without saying the file is
    now at that name. apply runs under gdb, held as it unlinks the file it
    moved aside while the other runs in a new PID namespace."""
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run(
            [unshare, "--pid", "--fork", "--mount-proc", "true"],
            capture_output=True).returncode:
        print("SKIP: cannot run in a new PID namespace here")
        sys.exit(77)
    root = os.path.join(tmp, "share")
    plan = os.path.join(tmp, "plan.jsonl")
    other = os.path.join(tmp, "other.log")
    rng = random.Random(83)
    data = ("\n".join(document(rng, vocabulary(rng))) + "\n").encode()
    keeper = put(root, "a/report.txt", data, mtime=1_600_000_000)
    copy = put(root, "b/report.txt", data, mtime=1_600_000_001)
    out, _ = run("dedupe", root)
    check([l["path"] for l in plan_lines(out)] == [copy], "one line: %s" % out)
    with open(plan, "wb") as f:
        f.write(out)
    log = apply_held(tmp, plan, "unlinkat",
                     "%s --pid --fork --mount-proc %s apply %s > %s 2>&1"
                     % (unshare, test_cli.IMATCH, plan, other))
    with open(other) as f:
        elsewhere = f.read()
    check("removed %s\n" % copy in elsewhere,
          "the other apply did the line: %s" % elsewhere)
    m = re.search(r"failed %s: ([^\n]*)\n" % re.escape(copy), log)
    check(m and "exited with code 01" in log,
          "the first fails the line: %s" % log)
    now = re.search(r"; it is now at (\S+)$", m.group(1))
    check(not now or os.path.lexists(now.group(1)),
          "it names no path that does not exist: %s" % m.group(1))
    check(open(keeper, "rb").read() == data and
          os.listdir(os.path.dirname(copy)) == [],
          "the keeper stays, no temporary name: %s"
          % os.listdir(os.path.dirname(copy)))


def case_apply_names_leftovers(tmp):
    """kill -9 after apply moved a file aside to be removed and before it
    unlinked it: the file sits under a hidden temporary name. What apply
    cannot prove its own is left where it is and named on stderr, and the
    exit code is unchanged (0): a temporary name of a process still
    running (another apply may be at work on it), or one whose content is
    no longer what the plan records."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2,), singles=1)
    keeper, copy = groups[0]
    out, _ = run("dedupe", root)
    plan = os.path.join(tmp, "plan.jsonl")
    with open(plan, "wb") as f:
        f.write(out)
    p = killed_at(tmp, plan, "unlinkat")
    directory = os.path.dirname(copy)
    left = [n for n in os.listdir(directory) if n.startswith(".imatch-")]
    check(not os.path.exists(copy) and len(left) == 1,
          "killed with the file aside: %s %s" % (os.listdir(directory), p))
    dead = os.path.join(directory, left[0])
    check(open(dead, "rb").read() == open(keeper, "rb").read(),
          "the file aside holds its bytes")
    live = os.path.join(directory, ".imatch-%d-0-0.tmp" % os.getpid())
    shutil.copy2(dead, live)
    with open(dead, "ab") as f:
        f.write(b"written to since\n")
    out, err = run("apply", plan, text=True)
    check("skipped %s: the file is gone" % copy in out,
          "the line is skipped as gone: %s" % out)
    for aside in (dead, live):
        check("imatch: apply: %s: a temporary name left by an apply that "
              "was killed (or is still at work): a file\n" % aside in err,
              "the temporary is named: %s" % err)
        check(os.path.exists(aside), "and not removed")
    check(not os.path.exists(copy), "and not given back")


def xattrs_work(directory):
    """Whether files in @directory can carry user.* extended attributes."""
    probe = tempfile.NamedTemporaryFile(dir=directory)
    try:
        os.setxattr(probe.name, "user.imatch-probe", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.close()


def case_links_keep_xattrs(tmp):
    """A hard link or symlink would give the replaced path the keeper's
    extended attributes (ACLs are some): apply skips a copy whose
    attributes differ and says why, and replaces one whose attributes are
    the keeper's. A copy moved into a trash on another filesystem keeps
    its attributes, or stays where it is if the trash cannot hold them."""
    root = os.path.join(tmp, "share")
    os.makedirs(root)
    if not xattrs_work(root):
        print("SKIP: %s holds no user.* extended attributes" % root)
        sys.exit(77)
    rng = random.Random(33)
    vocab = vocabulary(rng)
    data = ("\n".join(document(rng, vocab)) + "\n").encode()
    for action in ("hardlink", "symlink"):
        shutil.rmtree(root)
        keeper = put(root, "keeper.txt", data, mtime=1_600_000_000)
        tagged = put(root, "tagged.txt", data, mtime=1_600_000_001)
        other = put(root, "other.txt", data, mtime=1_600_000_002)
        same = put(root, "same.txt", data, mtime=1_600_000_003)
        for p in (keeper, tagged, other, same):
            os.chmod(p, 0o644)
        os.setxattr(keeper, "user.note", b"kept")
        os.setxattr(same, "user.note", b"kept")
        os.setxattr(tagged, "user.note", b"kept")
        os.setxattr(tagged, "user.checksum", b"abc")
        os.setxattr(other, "user.note", b"other")
        before = {p: os.stat(p).st_ino for p in (tagged, other)}
        out, _ = run("dedupe", "--action", action, root)
        lines = plan_lines(out)
        check({l["path"] for l in lines} == {tagged, other, same} and
              all(l["keeper"] == keeper for l in lines),
              "%s: planned: %r" % (action, lines))
        out, err = run("apply", "-", stdin=out)
        text = out.decode()
        for p in (tagged, other):
            check("skipped %s: extended attributes or ACLs differ from the "
                  "keeper's" % p in text, "%s: %s" % (action, text))
            check(not os.path.islink(p) and
                  os.stat(p).st_ino == before[p] and
                  os.getxattr(p, "user.note") != b"" and
                  open(p, "rb").read() == data,
                  "%s: %s keeps its inode and attributes" % (action, p))
        check(os.getxattr(tagged, "user.checksum") == b"abc",
              "the checksum attribute is still there")
        if action == "hardlink":
            check(os.stat(same).st_ino == os.stat(keeper).st_ino,
                  "the copy with the keeper's attributes is linked")
        else:
            check(os.readlink(same) == keeper, "symlinked: %s" % text)
        check(" 1 done" in err and " 2 skipped, 0 failed" in err,
              "%s: summary: %s" % (action, err))

    if not os.path.isdir("/dev/shm") or \
            os.stat("/dev/shm").st_dev == os.stat(root).st_dev:
        return
    trash = tempfile.mkdtemp(prefix="imatch-trash-", dir="/dev/shm")
    try:
        shutil.rmtree(root)
        put(root, "keeper.txt", data, mtime=1_600_000_000)
        tagged = put(root, "tagged.txt", data, mtime=1_600_000_001)
        os.setxattr(tagged, "user.checksum", b"abc")
        out, _ = run("dedupe", "--action", "trash=" + trash, root)
        check([l["path"] for l in plan_lines(out)] == [tagged],
              "trash plan: %s" % out)
        out, err = run("apply", "-", stdin=out)
        dest = os.path.join(trash, "tagged.txt")
        if xattrs_work(trash):
            check(not os.path.exists(tagged) and
                  os.getxattr(dest, "user.checksum") == b"abc" and
                  open(dest, "rb").read() == data,
                  "moved across filesystems with its attributes: %s" % out)
        else:
            check(os.getxattr(tagged, "user.checksum") == b"abc" and
                  not os.path.exists(dest) and
                  b"the trash cannot keep the file's extended attributes"
                  in out,
                  "left in place when the trash cannot hold its "
                  "attributes: %s" % out)
    finally:
        shutil.rmtree(trash, ignore_errors=True)


def case_apply_stays_in_root(tmp):
    """A plan is about one tree: a (hand-edited) line whose path or keeper
    lies outside its root is skipped, even with a valid hash; a sibling
    whose name starts like the root (s3x beside s3) is outside too."""
    root = os.path.join(tmp, "s3")
    rng = random.Random(3)
    vocab = vocabulary(rng)
    a, b = copies(root, "in", 2, rng, vocab)
    data = open(a, "rb").read()
    outside = put(tmp, "outside/b-out", data, mtime=1_600_000_001)
    sibling = put(tmp, "s3x/b-out", data, mtime=1_600_000_001)
    keeper_out = put(tmp, "outside/keeper", data, mtime=1_600_000_000)
    out, _ = run("dedupe", root)
    lines = plan_lines(out)
    check(len(lines) == 1 and lines[0]["path"] == b and
          lines[0]["root"] == root, "planned: %r" % lines)
    edited = []
    for path, keeper in ((outside, a), (sibling, a), (b, keeper_out)):
        l = dict(lines[0])
        l["path"], l["keeper"] = path, keeper
        edited.append(l)
    plan = os.path.join(tmp, "plan.jsonl")
    dump(plan, edited)
    for args in (["--dry-run"], []):
        out, err = run("apply", *args, plan)
        text = out.decode()
        for path, why in ((outside, "the file is not under the plan's root"),
                          (sibling, "the file is not under the plan's root"),
                          (b, "the keeper is not under the plan's root")):
            check("skipped %s: %s" % (path, why) in text,
                  "%s skipped because %s: %s" % (path, why, text))
        check(" 0 %s" % ("would be done" if args else "done") in err and
              " 3 skipped, 0 failed" in err, "summary: %s" % err)
    check(all(os.path.exists(p) for p in (a, b, outside, sibling,
                                           keeper_out)),
          "nothing outside the root (or inside) was touched")
    # The line as planned is still applied.
    run("apply", "-", stdin=(json.dumps(lines[0]) + "\n").encode())
    check(not os.path.exists(b) and os.path.exists(a), "in-root line applied")


def mkdeep(root, depth, width):
    """ROOT/d1/d2/... DEPTH directories of WIDTH-byte names, made through
    directory fds (the whole path is longer than PATH_MAX). Returns the
    absolute path of the deepest one."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    path = root
    for i in range(depth):
        name = ("%02d" % i) * (width // 2) + "x" * (width % 2)
        os.mkdir(name, dir_fd=fd)
        nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
        path += "/" + name
    os.close(fd)
    return path


def at_deep(path, fn):
    """fn(dir_fd, name) for a PATH longer than PATH_MAX, reached from / one
    component at a time."""
    parts = path.strip("/").split("/")
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for p in parts[:-1]:
            nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return fn(fd, parts[-1])
    finally:
        os.close(fd)


def case_apply_long_paths(tmp):
    """A copy 20 directories of 243 bytes deep (a path of about 4,900
    bytes, over PATH_MAX), which scan and dedupe handle, is removed,
    hard-linked and trashed by apply too; a symlink to a keeper whose path
    is too long for one is skipped with that reason."""
    root = os.path.join(tmp, "s16")
    rng = random.Random(16)
    vocab = vocabulary(rng)
    data = ("\n".join(document(rng, vocab)) + "\n").encode()
    trash = os.path.join(tmp, "trash")
    for action in ("remove", "hardlink", "trash", "symlink", "symlink-deep"):
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(trash, ignore_errors=True)
        os.makedirs(root)
        deep = mkdeep(root, 20, 243)
        check(len(deep) > 4096, "deep path: %d bytes" % len(deep))
        top = put(root, "top.txt", data, mtime=1_600_000_000)
        copy = deep + "/copy.txt"

        def write(fd, name, mtime):
            f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644,
                        dir_fd=fd)
            os.write(f, data)
            os.close(f)
            os.utime(name, (mtime, mtime), dir_fd=fd)
        at_deep(copy, lambda fd, n: write(fd, n, 1_600_000_001))
        keeper, planned = top, copy
        if action == "symlink-deep":
            # The deep file is the keeper (oldest); top.txt is replaced.
            os.utime(top, (1_600_000_002, 1_600_000_002))
            keeper, planned = copy, top
        act = {"trash": "trash=" + trash,
               "symlink-deep": "symlink"}.get(action, action)
        out, _ = run("dedupe", "--action", act, root)
        lines = plan_lines(out)
        check(len(lines) == 1 and lines[0]["path"] == planned and
              lines[0]["keeper"] == keeper, "%s: planned: %r"
              % (action, lines))
        out, err = run("apply", "-", stdin=out)
        text = out.decode()
        if action == "symlink-deep":
            check("skipped %s: the keeper's path is too long for a symlink"
                  % top in text and os.path.isfile(top) and
                  not os.path.islink(top), "%s: %s" % (action, text))
            continue
        check(" 1 done" in err and " 0 failed" in err,
              "%s: applied: %s %s" % (action, text, err))
        st = at_deep(copy, lambda fd, n: os.stat(n, dir_fd=fd,
                                                  follow_symlinks=False)
                     if n in os.listdir(fd) else None)
        if action in ("remove", "trash"):
            check(st is None, "%s: the deep copy is gone" % action)
        elif action == "hardlink":
            check(st.st_ino == os.stat(top).st_ino, "hard-linked")
        else:
            check(at_deep(copy, lambda fd, n: os.readlink(n, dir_fd=fd))
                  == top, "symlinked to the keeper")
        if action == "trash":
            dest = trash + copy[len(root):]
            check(at_deep(dest, lambda fd, n: open(
                os.open(n, os.O_RDONLY, dir_fd=fd), "rb").read()) == data,
                "the trash holds the bytes at %d bytes of path" % len(dest))
        check(os.path.exists(top), "%s: the keeper stays" % action)


def case_formats(tmp):
    """--csv has the JSON's rows; --format text groups keeper first;
    --format sh is a script that dry-runs with -n and applies without."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2, 3), singles=2)
    j, _ = run("dedupe", root)
    jl = plan_lines(j)
    c, _ = run("dedupe", "--csv", root)
    rows = list(csv.DictReader(io.StringIO(c.decode("utf-8"))))
    check([r["path"] for r in rows] == [l["path"] for l in jl] and
          [int(r["size"]) for r in rows] == [l["size"] for l in jl],
          "CSV rows equal the JSON lines")
    t, _ = run("dedupe", "--format", "text", root)
    blocks = t.decode().strip().split("\n\n")
    check(len(blocks) == len(groups), "one block per keeper: %r" % t)
    for b in blocks:
        first, *rest = b.split("\n")
        g = next(g for g in groups if first == "keep\t" + g[0])
        check(sorted(r.split("\t")[3] for r in rest) == sorted(g[1:]) and
              all(r.startswith("remove\texact\t1.0000\t") for r in rest),
              "text block: %r" % b)
    s, _ = run("dedupe", "--format", "sh", root)
    script = os.path.join(tmp, "plan.sh")
    with open(script, "wb") as f:
        f.write(s)
    before = files_under(root)
    env = dict(os.environ, IMATCH=test_cli.IMATCH)
    p = subprocess.run(["sh", script, "-n"], env=env, capture_output=True)
    check(p.returncode == 0 and files_under(root) == before,
          "sh -n changes nothing: %r" % p.stderr)
    p = subprocess.run(["sh", script], env=env, capture_output=True)
    check(p.returncode == 0 and
          files_under(root) == before - {x for g in groups for x in g[1:]},
          "the script applies the plan: %r" % p.stderr)


def case_usage(tmp):
    root = os.path.join(tmp, "share")
    make_groups(root, sizes=(2,), singles=2)
    for args, what in [
            (["--keep", "oldest,newest"], "exclude each other"),
            (["--keep", "biggest"], "unknown keep rule"),
            (["--action", "hardlink", "--near"], "exact copies only"),
            (["--action", "shred"], "unknown --action"),
            (["--format", "xml"], "unknown --format"),
            (["--protect", tmp], "not inside"),
            (["--action", "trash=" + os.path.join(root, "t")],
             "must not contain each other")]:
        _, err = run("dedupe", *args, root, code=2)
        check(what in err, "%s: %s" % (args, err))
    _, err = run("apply", os.path.join(tmp, "nope"), code=1)
    check("nope" in err, err)
    # A folder given for the plan (its path completed one word short) says
    # so, where it said "Input/output error".
    _, err = run("apply", root, code=1)
    check(err == "imatch: apply: reading %s: %s\n"
          % (root, os.strerror(errno.EISDIR)), err)
    # A plan printed as text or csv: said once, not once per line.
    for fmt in ("text", "csv"):
        plan, _ = run("dedupe", "--format", fmt, root)
        out, err = run("apply", "-", stdin=plan, code=1)
        lines = err.splitlines()
        check(out == b"" and len(lines) == 3 and
              "not a JSON object (apply reads the plan" in lines[0] and
              "more lines are not JSON objects" in lines[1] and
              "malformed lines" in lines[2], "%s plan: %s" % (fmt, err))
    # --keep-fraction is the signing fraction (--keep means rules here).
    run("dedupe", "--keep-fraction", "0.5", root)


def case_scan_dirs(tmp):
    """A copied folder is one line of scan --dirs, at its top; a folder that
    holds only part of the copy, or one more document, is no duplicate."""
    root = os.path.join(tmp, "share")
    rng = random.Random(9)
    vocab = vocabulary(rng)
    docs = [("\n".join(document(rng, vocab)) + "\n").encode()
            for _ in range(6)]
    for base in ("proj", "backup/2024/proj", "old/proj-copy"):
        put(root, base + "/a.txt", docs[0])
        put(root, base + "/sub/b.txt", docs[1])
        put(root, base + "/sub/deeper/c.txt", docs[2])
    put(root, "old/notes.txt", docs[3])       # old/ is more than the copy
    put(root, "part/a.txt", docs[0])          # only part of it
    put(root, "part/sub/b.txt", docs[1])
    put(root, "x/one.txt", docs[4])
    put(root, "y/z/one-again.txt", docs[4])
    for i in range(6):
        put(root, "misc/s%d.txt" % i,
            ("\n".join(document(rng, vocab)) + "\n").encode())
    out, _ = run("scan", "--dirs", root)
    lines = [l.split("\t") for l in out.decode().splitlines()]
    check(lines == [["backup", "old/proj-copy", "proj"], ["x", "y"]],
          "duplicate directories: %r" % lines)
    out, _ = run("scan", "--dirs", "--json", root)
    doc = json.loads(out)
    check([(g["documents"], g["dirs"]) for g in doc["dir_groups"]] ==
          [(3, ["backup", "old/proj-copy", "proj"]), (1, ["x", "y"])],
          "JSON: %r" % doc)


def case_near(tmp):
    """--near plans near-duplicates too: each family of same-term variants
    (reordered, re-cased, as HTML) loses all but its keeper, every near line
    is above the similarity threshold, and nothing is planned across
    families; without --near none of them is planned."""
    from test_cli import variant
    root = os.path.join(tmp, "share")
    rng = random.Random(21)
    vocab = vocabulary(rng)
    families = []
    for f in range(4):
        sents = document(rng, vocab, nsent=40)
        fam = [put(root, "fam%d/base.txt" % f,
                   ("\n".join(sents) + "\n").encode(), mtime=1_500_000_000)]
        for i, how in enumerate(("reorder", "upper", "html")[:f % 3 + 1]):
            fam.append(put(root, "other/f%d-%s.txt" % (f, how),
                           variant(rng, sents, how).encode(),
                           mtime=1_600_000_000 + i))
        families.append(fam)
    for i in range(10):
        put(root, "misc/s%d.txt" % i,
            ("\n".join(document(rng, vocab)) + "\n").encode())
    out, _ = run("dedupe", root)
    check(out == b"", "no exact copies, nothing planned: %s" % out)
    out, err = run("dedupe", "--near", root)
    lines = plan_lines(out)
    want = {p for fam in families for p in fam[1:]}
    check({l["path"] for l in lines} == want,
          "planned %s, want %s" % (sorted(l["path"] for l in lines),
                                   sorted(want)))
    threshold = 0.9  # im_params.similarity's default
    for l in lines:
        fam = next(f for f in families if l["path"] in f)
        check(l["keeper"] == fam[0], "the oldest is kept: %r" % l)
        check(l["kind"] == "near" and l["similarity"] >= threshold,
              "near line above the threshold: %r" % l)
    check("%d near-duplicates" % len(want) in err, err)
    run("dedupe", "--near", "--action", "hardlink", root, code=2)
    # -v names what each line was checked against: the keeper, how alike.
    said, _ = run("apply", "-v", "--dry-run", "-", stdin=out)
    said = said.decode().splitlines()
    check(len(said) == len(lines), "one line per plan line: %s" % said)
    for l in lines:
        check("would remove %s (kept %s, near %.3f, %d bytes against %d)"
              % (l["path"], l["keeper"], l["similarity"], l["size"],
                 l["keeper_size"]) in said, "-v names %r: %s" % (l, said))
    plan = out
    out, err = run("apply", "-", stdin=plan)
    check(all(not os.path.exists(p) for p in want) and
          all(os.path.exists(f[0]) for f in families),
          "apply removed the near-duplicates, kept the keepers: %s" % out)
    check(b"(kept" not in out, "without -v no keeper is named: %s" % out)


def case_near_figures(tmp):
    """A folder of payslips (the same words every month, other amounts
    and dates) among licences: --near plans none of them, says why, and -v
    names each; an edited copy of one with its figures is still planned."""
    root = os.path.join(tmp, "share")
    lic = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       os.pardir, "data", "demo", "licenses")
    shutil.copytree(lic, root)
    slips = [put(root, "payslip-2024-%02d.txt" % m,
                 test_cli.payslip(m).encode(), mtime=1_700_000_000 + m)
             for m in (1, 2, 3)]
    out, err = run("dedupe", "--near", root)
    lines = plan_lines(out)
    check(not [l for l in lines if "payslip" in l["path"]],
          "no payslip planned: %s" % out)
    check("kept: their figures differ from their keeper's" in err, err)
    _, err = run("dedupe", "--near", "-v", "--format", "text", root)
    for p in slips[1:]:
        check(("kept %s: its figures differ from its keeper's, %s"
               % (p, slips[0])) in err, "-v names %s: %s" % (p, err))
    # The same figures, one word changed: a near-duplicate that goes.
    edited = put(root, "payslip-2024-01-edited.txt",
                 test_cli.payslip(1, "river pilot").encode(),
                 mtime=1_700_000_100)
    out, _ = run("dedupe", "--near", root)
    got = [(l["path"], l["keeper"], l["kind"]) for l in plan_lines(out)
           if "payslip" in l["path"]]
    check(got == [(edited, slips[0], "near")],
          "the edited copy goes, kept by January's: %s" % got)


def case_near_figures_named(tmp):
    """-v says which figures differ between a kept near-duplicate and its
    keeper, as they were read: those of the file its keeper lacks, "vs"
    those of the keeper the file lacks, a few of each, then how many more.
    Without -v the summary is as before, and the plan is the same."""
    root = os.path.join(tmp, "share")
    lic = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       os.pardir, "data", "demo", "licenses")
    shutil.copytree(lic, root)
    jan = test_cli.payslip(1)
    slips = [put(root, "pay/payslip-2024-%02d.txt" % m,
                 test_cli.payslip(m).encode(), mtime=1_700_000_000 + m)
             for m in (1, 2)]
    # An amount retyped with a thousands separator, an account number
    # mistyped: the figures are words, so 2,911.49 reads 2, 911 and 49.
    retyped = put(root, "pay/payslip-2024-01 retyped.txt",
                  jan.replace("2911.49", "2,911.49").replace(
                      "4471", "4417").encode(), mtime=1_700_000_100)
    quiet, err = run("dedupe", "--near", root)
    check("figures differ:" not in err, "without -v: %s" % err)
    out, err = run("dedupe", "--near", "-v", root)
    check(out == quiet, "-v changed the plan:\n%s\n%s" % (out, quiet))
    lines = err.splitlines()

    def named(path, keeper):
        head = ("imatch: dedupe: kept %s: its figures differ from its "
                "keeper's, %s" % (path, keeper))
        check(head in lines, "-v names %s: %s" % (path, err))
        i = lines.index(head)
        check(i + 1 < len(lines) and
              lines[i + 1].startswith("imatch: dedupe:   figures differ: "),
              "no figures under %s: %s" % (head, err))
        return lines[i + 1][len("imatch: dedupe:   figures differ: "):]

    got = named(slips[1], slips[0])
    check(got == "2912, 414, 125, 203, 610 (and 4 more) vs "
          "2911, 407, 115, 202, 607 (and 4 more)",
          "February against January: %r" % got)
    got = named(retyped, slips[0])
    check(got == "2, 911, 4417 vs 2911, 4471", "the retyped copy: %r" % got)
    out, _ = run("dedupe", "--help", text=True)
    verbose = out[out.index("-v, --verbose"):].split("\n  -", 1)[0]
    check("figures" in verbose, "dedupe --help on -v: %r" % verbose)


def case_csv_exports(tmp):
    """scan, dupes and scan --dirs offer --csv with the rows of --json;
    names with commas, quotes and newlines survive (RFC 4180)."""
    root = os.path.join(tmp, "share")
    groups = make_groups(root, sizes=(2, 3), singles=3)
    os.rename(groups[0][1], os.path.join(root, 'odd, "quoted"\nname.txt'))
    out, _ = run("scan", "--json", root)
    want = sorted((c["name"], m) for c in json.loads(out)["clusters"]
                  for m in c["members"])
    out, _ = run("scan", "--csv", root)
    rows = list(csv.DictReader(io.StringIO(out.decode(), newline="")))
    check(sorted((r["cluster"], r["path"]) for r in rows) == want,
          "scan --csv rows equal --json: %r" % rows)
    out, _ = run("dupes", "--json", root)
    want = sorted((d["path"], x["path"], x["kind"])
                  for d in json.loads(out)["documents"] for x in d["dupes"])
    out, _ = run("dupes", "--csv", root)
    rows = list(csv.DictReader(io.StringIO(out.decode(), newline="")))
    check(sorted((r["path"], r["dupe"], r["kind"]) for r in rows) == want
          and want, "dupes --csv rows equal --json: %r" % rows)
    out, _ = run("scan", "--dirs", "--csv", root)
    check(out.decode().splitlines()[0] == "group,documents,dir",
          "scan --dirs --csv header: %r" % out)


CASES = {name[5:]: fn for name, fn in globals().items()
         if name.startswith("case_")}

if __name__ == "__main__":
    # test_cli's driver: a temporary directory per case, FAIL/ok lines.
    test_cli.CASES = CASES
    sys.exit(test_cli.main())
