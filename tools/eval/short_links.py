#!/usr/bin/env python3
"""False links between short documents: pairs of files of 14-26 random
words, one a copy of the other with one to three words replaced, added or
dropped, so that the true cosine of their unique-term sets lies just below
or at/above 0.9. Counts the links `imatch dupes --json` prints against the
cosine computed from `imatch terms`, and the files `imatch dedupe --near`
plans to remove although no link of theirs reaches 0.9.

Usage: short_links.py IMATCH [PAIRS] [SEED]
"""
import json
import math
import os
import random
import subprocess
import sys
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


def main():
    imatch = sys.argv[1]
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    vocab = words(rng, 60000)
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "tree")
        os.mkdir(root)
        for p in range(pairs):
            n = rng.randint(14, 26)
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
            r = rng.randint(1, 3)
            for _ in range(r):
                if how == "replace":
                    b[rng.randrange(len(b))] = fresh()
                elif how == "add":
                    b.insert(rng.randrange(len(b) + 1), fresh())
                else:
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


if __name__ == "__main__":
    main()
