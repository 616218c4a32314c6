#!/usr/bin/env python3
"""Black-box tests of `imatch dupes` and `imatch explain A B`.

Usage: test_dupes.py IMATCH CASE

The tree: families of near-duplicates (one text and copies with a few words
replaced), a byte-identical copy, short texts too small for any signature
(the same words in another order and case), and unrelated texts. The truth
is the cosine of the unique-term sets, computed here from `imatch terms`.
"""
import functools
import json
import math
import os
import random
import sys
import tempfile

import test_cli  # its run(), shared
from test_cli import Failure, check

run = functools.partial(test_cli.run, text=True)


def words(rng, n):
    out = set()
    while len(out) < n:
        out.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz")
                        for _ in range(rng.randint(5, 9))))
    return sorted(out)


def text(rng, vocab, n):
    return " ".join(rng.choice(vocab) for _ in range(n)) + "\n"


def build(root):
    rng = random.Random(9)
    vocab = words(rng, 6000)
    files = {}
    for f in range(4):
        base = text(rng, vocab, 400)
        files["fam%d/orig.txt" % f] = base
        for c in range(3):
            w = base.split()
            for _ in range(6):  # a few words replaced: cosine about 0.97
                w[rng.randrange(len(w))] = rng.choice(vocab)
            files["fam%d/copy%d.txt" % (f, c)] = " ".join(w) + "\n"
    files["exact/a.txt"] = files["fam0/orig.txt"]
    short = words(rng, 12)
    files["short/one.txt"] = " ".join(short) + "\n"
    files["short/two.txt"] = " ".join(w.upper() for w in
                                      reversed(short)) + ".\n"
    for i in range(12):
        files["other/%02d.txt" % i] = text(rng, vocab, 300)
    for rel, body in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(body)
    return sorted(files)


def term_sets(root, rels):
    out, _ = run("terms", *[os.path.join(root, r) for r in rels])
    sets = {}
    for rel, line in zip(rels, out.splitlines()):
        sets[rel] = set(line.split("\t")[1:])
    return sets


def cosine(a, b):
    return len(a & b) / math.sqrt(len(a) * len(b)) if a and b else 0.0


def dupes_text(root):
    out, _ = run("dupes", root)
    rel = {}
    for line in out.splitlines():
        f = line.split("\t")
        check(len(f) >= 2, "a line without dupes: %r" % line)
        check(f[1:] == sorted(f[1:]), "dupes not sorted: %r" % line)
        rel[f[0]] = f[1:]
    check(list(rel) == sorted(rel), "documents not sorted")
    return rel


def case_relation(root):
    rels = build(root)
    sets = term_sets(root, rels)
    rel = dupes_text(root)
    for a, ds in rel.items():
        for b in ds:
            check(a in rel.get(b, []), "not symmetric: %s -> %s" % (a, b))
            c = cosine(sets[a], sets[b])
            check(c >= 0.8, "%s ~ %s linked at cosine %.3f" % (a, b, c))
    for f in range(4):
        fam = ["fam%d/orig.txt" % f] + ["fam%d/copy%d.txt" % (f, c)
                                        for c in range(3)]
        for a in fam:
            for b in fam:
                if a != b:
                    check(b in rel.get(a, []),
                          "%s lacks its near-duplicate %s (cosine %.3f)"
                          % (a, b, cosine(sets[a], sets[b])))
    check(rel.get("short/one.txt") == ["short/two.txt"],
          "short texts with the same 12 terms are not linked: %r"
          % rel.get("short/one.txt"))
    check(not any(r.startswith("other/") for r in rel),
          "an unrelated text has dupes")

    js = json.loads(run("dupes", "--json", root)[0])
    jrel = {d["path"]: d["dupes"] for d in js["documents"]}
    check(list(jrel) == list(rel), "JSON and text list other documents")
    for a, ds in jrel.items():
        check([d["path"] for d in ds] == rel[a], "JSON dupes of %s" % a)
        for d in ds:
            check(0 < d["similarity"] <= 1, "similarity out of range")
            check(d["kind"] in ("exact", "near"), "kind %r" % d["kind"])
    exact = {d["path"]: d for d in jrel["exact/a.txt"]}
    check(exact["fam0/orig.txt"]["kind"] == "exact" and
          exact["fam0/orig.txt"]["similarity"] == 1,
          "byte-identical copy is not exact with similarity 1")
    check(exact["fam0/copy0.txt"]["kind"] == "near", "a copy is not near")

    # A stricter threshold keeps only closer pairs, never more.
    strict = json.loads(run("dupes", "--json", "--similarity", "0.99",
                            root)[0])
    for d in strict["documents"]:
        for x in d["dupes"]:
            check(x["path"] in rel[d["path"]], "0.99 found a new link")
            check(x["similarity"] >= 0.99 or x["kind"] == "exact",
                  "a link below the threshold")


def case_explain(root):
    build(root)
    lex = os.path.join(root, "..", "lexicon")
    run("lexicon", "build", "-o", lex, root)
    out, _ = run("explain", "--lexicon", lex,
                 os.path.join(root, "fam1/orig.txt"),
                 os.path.join(root, "fam1/copy0.txt"))
    check("linked: yes, near" in out, "a near pair is not linked:\n" + out)
    check("cosine of the term sets: 0.9" in out, "no true cosine:\n" + out)
    out, _ = run("explain", "--lexicon", lex,
                 os.path.join(root, "other/00.txt"),
                 os.path.join(root, "other/01.txt"))
    check("linked: no" in out, "unrelated texts linked:\n" + out)
    out, _ = run("explain", "--lexicon", lex,
                 os.path.join(root, "exact/a.txt"),
                 os.path.join(root, "fam0/orig.txt"))
    check("bytes: identical" in out and "linked: yes, exact" in out,
          "identical bytes not exact:\n" + out)


def case_one_word(root):
    """1,000 files of one random word each are not near-duplicates of one
    another (their sketches once faked a link 66 times: one map bit per
    term, and one band value repeated across the bins); a byte copy of one
    and a 12-word text with one word added still are."""
    rng = random.Random(21)
    vocab = words(rng, 1025)
    for i in range(1000):
        with open(os.path.join(root, "w%04d.txt" % i), "w") as f:
            f.write(vocab[i] + "\n")
    with open(os.path.join(root, "copy.txt"), "w") as f:
        f.write(vocab[7] + "\n")
    short = vocab[1000:1012]
    with open(os.path.join(root, "short12.txt"), "w") as f:
        f.write(" ".join(short) + "\n")
    with open(os.path.join(root, "short13.txt"), "w") as f:
        f.write(" ".join(reversed(short + [vocab[1012]])) + "\n")
    rel = dupes_text(root)
    check(rel == {"copy.txt": ["w0007.txt"], "w0007.txt": ["copy.txt"],
                  "short12.txt": ["short13.txt"],
                  "short13.txt": ["short12.txt"]},
          "%d documents with dupes, e.g. %r"
          % (len(rel), sorted(rel.items())[:4]))
    js = json.loads(run("dupes", "--json", root)[0])
    kinds = {d["path"]: [x["kind"] for x in d["dupes"]]
             for d in js["documents"]}
    check(kinds["copy.txt"] == ["exact"], "the copy: %r" % kinds)
    check(kinds["short12.txt"] == ["near"], "12 + 1 words: %r" % kinds)


def case_short_pairs(root):
    """1,000 pairs of files of 14 to 26 random words, one a copy of the
    other with two or three words replaced (cosine 0.85 to 0.895, under
    the 0.9 threshold), are not near-duplicates, and `dedupe --near`
    plans none of them (their maps once faked about 6 links and as many
    removals: a collision of the two terms apart hid the difference); two
    pairs at or above 0.9, 2 words of 20 and one of 26 replaced, are."""
    rng = random.Random(27)
    vocab = words(rng, 30000)
    rng.shuffle(vocab)
    fresh = iter(vocab)

    def pair(name, n, replaced):
        a = [next(fresh) for _ in range(n)]
        b = list(a)
        for i in rng.sample(range(n), replaced):
            b[i] = next(fresh)
        rng.shuffle(b)
        for suffix, w in (("a", a), ("b", b)):
            with open(os.path.join(root, name + suffix + ".txt"), "w") as f:
                f.write(" ".join(w) + "\n")

    for p in range(1000):
        n = 14 + p % 13
        pair("p%04d" % p, n, 2 if n < 20 else 3)
    pair("at20", 20, 2)
    pair("one26", 26, 1)
    rel = dupes_text(root)
    want = {"at20a.txt": ["at20b.txt"], "at20b.txt": ["at20a.txt"],
            "one26a.txt": ["one26b.txt"], "one26b.txt": ["one26a.txt"]}
    check(rel == want, "%d documents with dupes, e.g. %r"
          % (len(rel), sorted(set(rel) - set(want))[:4]))
    plan, _ = run("dedupe", "--near", root)
    planned = sorted(os.path.basename(json.loads(line)["path"])[:-5]
                     for line in plan.splitlines())
    check(planned == ["at20", "one26"], "planned: %r" % planned[:6])


def case_usage(root):
    _, err = run("dupes", os.path.join(root, "missing"), code=1)
    check("missing" in err, "no reason for a missing DIR: " + err)
    run("dupes", root, root, code=2)
    run("dupes", "--similarity", "1.5", root, code=2)


def main():
    test_cli.IMATCH = sys.argv[1]
    case = {"relation": case_relation, "explain": case_explain,
            "usage": case_usage, "one_word": case_one_word,
            "short_pairs": case_short_pairs}[sys.argv[2]]
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "tree")
        os.mkdir(root)
        try:
            case(root)
        except Failure as e:
            print("FAIL %s: %s" % (sys.argv[2], e))
            sys.exit(1)
    print("ok", sys.argv[2])


if __name__ == "__main__":
    main()
