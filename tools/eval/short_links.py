#!/usr/bin/env python3
"""False links between short documents: pairs of files of random words
(14-26 distinct words by default), one a copy of the other with some words
replaced, added or dropped, so that the true cosine of their unique-term
sets lies just below or at/above 0.9. Counts the links `imatch dupes
--json` prints against the cosine computed from `imatch terms`, and the
files `imatch dedupe --near` plans to remove although no link of theirs
reaches 0.9.

Usage: short_links.py [--min-terms N] [--max-terms N] [--changes HOW]
                      IMATCH [PAIRS] [SEED]

  --min-terms, --max-terms  the words of a pair's first file, drawn
                            uniformly from [min, max] (default 14, 26)
  --changes HOW             how many words to change: "LO-HI" draws the
                            count from [LO, HI] (default 1-3, which only
                            takes sets of up to about 30 terms under 0.9);
                            "near" draws it from the count that first takes
                            the cosine under 0.9 for that size and kind of
                            change, one less, or one more, so that about
                            half the pairs fall on each side at any size

The last line is a summary for tables: "summary: min max pairs seed below
above true false planned wrong".
"""
import argparse
import json
import math
import os
import random
import subprocess
import tempfile


def words(rng, n):
    out = set()
    while len(out) < n:
        out.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz")
                        for _ in range(rng.randint(5, 9))))
    return sorted(out)


def run(*args):
    return subprocess.run(args, check=True, capture_output=True,
                          text=True).stdout


def crossing(n, how):
    """The fewest words changed by @how that take a set of @n words under
    cosine 0.9."""
    for r in range(1, n):
        m = n + r if how == "add" else n - r if how == "drop" else n
        common = n - r if how == "replace" else min(n, m)
        if common / math.sqrt(n * m) < 0.9:
            return r
    return n - 1


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min-terms", type=int, default=14)
    ap.add_argument("--max-terms", type=int, default=26)
    ap.add_argument("--changes", default="1-3")
    ap.add_argument("imatch")
    ap.add_argument("pairs", nargs="?", type=int, default=3000)
    ap.add_argument("seed", nargs="?", type=int, default=1)
    o = ap.parse_args()
    if not 1 <= o.min_terms <= o.max_terms:
        ap.error("need 1 <= --min-terms <= --max-terms")
    near = o.changes == "near"
    if not near:
        try:
            lo, hi = (int(x) for x in o.changes.split("-"))
        except ValueError:
            ap.error("--changes: LO-HI or near")
    imatch, pairs = o.imatch, o.pairs
    rng = random.Random(o.seed)
    vocab = words(rng, 60000)
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "tree")
        os.mkdir(root)
        for p in range(pairs):
            n = rng.randint(o.min_terms, o.max_terms)
            a = rng.sample(vocab, n)
            used = set(a)

            def fresh():
                while True:
                    w = rng.choice(vocab)
                    if w not in used:
                        used.add(w)
                        return w

            b = list(a)
            how = rng.choice(["replace", "replace", "add", "drop"])
            if near:
                c = crossing(n, how)
                r = rng.randint(max(1, c - 1), min(c + 1, n - 1))
            else:
                r = rng.randint(lo, hi)
            for _ in range(r):
                if how == "replace":
                    b[rng.randrange(len(b))] = fresh()
                elif how == "add":
                    b.insert(rng.randrange(len(b) + 1), fresh())
                elif len(b) > 1:
                    del b[rng.randrange(len(b))]
            rng.shuffle(b)
            for name, w in (("a", a), ("b", b)):
                with open(os.path.join(root, "p%05d%s.txt" % (p, name)),
                          "w") as f:
                    f.write(" ".join(w) + "\n")
        rels = sorted(os.listdir(root))
        sets = {}
        for i in range(0, len(rels), 500):
            out = run(imatch, "terms",
                      *[os.path.join(root, r) for r in rels[i:i + 500]])
            for rel, line in zip(rels[i:i + 500], out.splitlines()):
                sets[rel] = set(line.split("\t")[1:])

        def cosine(x, y):
            a, b = sets[x], sets[y]
            return len(a & b) / math.sqrt(len(a) * len(b))

        js = json.loads(run(imatch, "dupes", "--json", root))
        links = {}
        for d in js["documents"]:
            for x in d["dupes"]:
                key = tuple(sorted((d["path"], x["path"])))
                links[key] = x["similarity"]
        below = above = 0
        for p in range(pairs):
            c = cosine("p%05da.txt" % p, "p%05db.txt" % p)
            below += c < 0.9
            above += c >= 0.9
        false = [(k, s, cosine(*k)) for k, s in links.items()
                 if cosine(*k) < 0.9]
        found = sum(1 for k in links if cosine(*k) >= 0.9)
        print("pairs: %d below 0.9, %d at or above" % (below, above))
        print("links: %d true (of %d), %d false" % (found, above,
                                                    len(false)))
        for k, s, c in sorted(false)[:10]:
            print("  false: %s %s similarity %.4f, cosine %.4f (%d, %d "
                  "terms)" % (k[0], k[1], s, c, len(sets[k[0]]),
                              len(sets[k[1]])))
        ok = {x for k in links if cosine(*k) >= 0.9 for x in k}
        plan = subprocess.run([imatch, "dedupe", "--near", root],
                              check=True, capture_output=True,
                              text=True).stdout
        removed = [json.loads(l)["path"] for l in plan.splitlines() if l]
        wrong = [r for r in removed if os.path.basename(r) not in ok]
        print("dedupe --near: %d planned, %d with no link >= 0.9"
              % (len(removed), len(wrong)))
        print("summary: %d %d %d %d %d %d %d %d %d %d"
              % (o.min_terms, o.max_terms, pairs, o.seed, below, above,
                 found, len(false), len(removed), len(wrong)))


if __name__ == "__main__":
    main()
