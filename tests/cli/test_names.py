#!/usr/bin/env python3
"""Cluster names when two clusters share their smallest signature.

Usage: test_names.py IMATCH CASE

Two texts made of the same lexicon words, each with many words of its own
that the lexicon (built from another tree) does not know: every coordinate
of one equals the other's, but their term sets differ, so verification
keeps them apart. Each has a byte-identical copy, so there are two clusters
whose members hold the same smallest signature: scan, dupes and the batch
stages must tell them apart, alike.
"""
import functools
import json
import os
import random
import sys
import tempfile

import test_cli  # its run(), shared
from test_cli import Failure, check

run = functools.partial(test_cli.run, text=True)


def words(rng, n, prefix=""):
    out = set()
    while len(out) < n:
        out.add(prefix + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz")
                                 for _ in range(rng.randint(5, 9))))
    return sorted(out)


def write(root, files):
    for rel, body in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(body)


def build(tmp):
    rng = random.Random(5)
    vocab = words(rng, 300)
    # The lexicon's tree: each word in about half of 30 documents.
    lexdir = os.path.join(tmp, "lexicon-tree")
    write(lexdir, {"d%02d.txt" % i: " ".join(w for w in vocab
                                            if rng.random() < 0.5) + "\n"
                   for i in range(30)})
    lex = os.path.join(tmp, "other.lex")
    run("lexicon", "build", "-o", lex, lexdir)
    shared = " ".join(vocab[:120])
    a = shared + " " + " ".join(words(rng, 60, "qa")) + "\n"
    b = shared + " " + " ".join(words(rng, 60, "qb")) + "\n"
    root = os.path.join(tmp, "tree")
    write(root, {"a/one.txt": a, "a/two.txt": a, "b/one.txt": b,
                 "b/two.txt": b})
    return root, lex


def case_shared_name(tmp):
    root, lex = build(tmp)
    sigs = {}
    out, _ = run("sign", "--lexicon", lex,
                 *[os.path.join(root, r) for r in ("a/one.txt", "b/one.txt")])
    for line in out.splitlines():
        f = line.split("\t")
        sigs[os.path.relpath(f[0], root)] = [s for s in f[1:] if s != "-"]
    check(sigs["a/one.txt"] and sigs["a/one.txt"] == sigs["b/one.txt"],
          "the texts do not share their signatures: %r" % sigs)
    least = min(sigs["a/one.txt"])

    outs = [run("scan", "--json", "-j", j, "--lexicon", lex, root)[0]
            for j in ("1", "2")]
    check(outs[0] == outs[1], "-j1 and -j2 print other clusters")
    cl = json.loads(outs[0])["clusters"]
    got = sorted((c["members"], c["name"]) for c in cl)
    check([m for m, _ in got] == [["a/one.txt", "a/two.txt"],
                                  ["b/one.txt", "b/two.txt"]],
          "clusters: %r" % got)
    # The cluster with the smallest member path keeps the name; the other
    # counts its last 4 bytes up by one (index.h).
    check(got[0][1] == least, "a/'s cluster is %s, not %s"
          % (got[0][1], least))
    check(got[1][1] == least[:32] + "%08x" % (int(least[32:], 16) + 1),
          "b/'s cluster is %s, after %s" % (got[1][1], least))

    # The batch stages (SCALE.md) name them as the index does.
    st = os.path.join(tmp, "stages")
    os.mkdir(st)
    man, shards = os.path.join(st, "manifest"), os.path.join(st, "shards")
    rec, links, cls = (os.path.join(st, n) for n in ("s.rec", "links",
                                                   "clusters"))
    run("ls", "-o", man, "--shards", shards, root)
    shard = os.path.join(shards, sorted(os.listdir(shards))[0])
    run("sign", "--records", "--files-from", shard, "--root", root,
        "--shard-id", "0/1", "-P", "1", "-o", os.path.join(st, "s"),
        "--lexicon", lex)
    run("links", "-o", links, "--lexicon", lex, rec,
        os.path.join(st, "s.k0000"))
    run("components", "-o", cls, "--lexicon", lex, rec, links)
    exported = json.loads(run("export", "--json", "--root", root,
                              "--lexicon", lex, man, cls, rec)[0])
    check(exported["clusters"] == cl,
          "the stages' clusters differ: %r" % exported["clusters"])

    out, _ = run("scan", "--lexicon", lex, root)
    check(out.splitlines() == ["a/one.txt\ta/two.txt",
                               "b/one.txt\tb/two.txt"],
          "scan prints: %r" % out)
    out, _ = run("dupes", "--lexicon", lex, root)
    check(out.splitlines() == ["a/one.txt\ta/two.txt", "a/two.txt\ta/one.txt",
                               "b/one.txt\tb/two.txt", "b/two.txt\tb/one.txt"],
          "dupes prints: %r" % out)


def main():
    test_cli.IMATCH = sys.argv[1]
    case = {"shared_name": case_shared_name}[sys.argv[2]]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            case(tmp)
        except Failure as e:
            print("FAIL %s: %s" % (sys.argv[2], e))
            sys.exit(1)
    print("ok", sys.argv[2])


if __name__ == "__main__":
    main()
