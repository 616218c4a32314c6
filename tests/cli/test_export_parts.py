#!/usr/bin/env python3
"""Black-box tests of `imatch export` in parts (SCALE.md, stage export):
`export --part I/N -o FILE` over the stage files of a tree, then `export
PART...`, must print the same bytes as one `export` (and so as `imatch
scan --json`, `dupes --json` and `dedupe --near`), for any number of parts,
including parts of one document and empty ones.

Usage: test_export_parts.py IMATCH CASE SRCDIR

The stages run by hand here (no Dask): ls, lexicon build, sign --records
per shard, links per partition, components.
"""
import ctypes
import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cli  # noqa: E402
import test_scale  # noqa: E402
from test_cli import Failure, check, run  # noqa: E402

P = 2  # key partitions


def restamped(path, out, at, value, size=4):
    """Copy the stage file @path to @out with the @size bytes at offset @at
    set to @value and the checksum made right again (XXH3-64 of the bytes
    before it, by the library imatch links), as a file of another layout
    would pass the container's checks."""
    xxh3 = ctypes.CDLL(ctypes.util.find_library("xxhash")).XXH3_64bits
    xxh3.restype = ctypes.c_uint64
    xxh3.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    with open(path, "rb") as f:
        b = bytearray(f.read())
    b[at:at + size] = value.to_bytes(size, "little")
    b[-8:] = xxh3(bytes(b[:-8]), len(b) - 8).to_bytes(8, "little")
    with open(out, "wb") as f:
        f.write(b)


def stages(tmp, tree):
    """Run the stages up to components; return (lexicon option, manifest,
    records, links, clusters)."""
    man = os.path.join(tmp, "manifest")
    shards = os.path.join(tmp, "shards")
    run("ls", "-o", man, "--shards", shards, "--shard-bytes", "12000", tree)
    lex = os.path.join(tmp, "lexicon")
    run("lexicon", "build", "-o", lex, tree)
    names = sorted(os.listdir(shards))
    check(len(names) >= 4, "several shards: %d" % len(names))
    records, keys = [], [[] for _ in range(P)]
    for i, name in enumerate(names):
        prefix = os.path.join(tmp, "sign%02d" % i)
        run("sign", "--records", "--files-from", os.path.join(shards, name),
            "--root", tree, "--shard-id", "%d/%d" % (i, len(names)),
            "-P", P, "-o", prefix, "--lexicon", lex)
        records.append(prefix + ".rec")
        for p in range(P):
            keys[p].append("%s.k%04d" % (prefix, p))
    links = []
    for p in range(P):
        links.append(os.path.join(tmp, "links%d" % p))
        run("links", "-o", links[-1], "--lexicon", lex, *records, *keys[p])
    clusters = os.path.join(tmp, "clusters")
    run("components", "-o", clusters, "--lexicon", lex, *records, *links)
    return ["--lexicon", lex], man, records, links, clusters


def case_export_parts(tmp):
    """Every output, joined from 1, 3 and 40 parts (more parts than some
    clusters have members: parts of one document and parts that own
    nothing), equals the output of one export, which equals scan, dupes
    and dedupe; text and CSV too (3 parts)."""
    tree = os.path.join(tmp, "tree")
    test_scale.make_scale_tree(tree)
    lex, man, records, links, clusters = stages(tmp, tree)
    root = ["--root", tree]
    # (name, export flags, inputs of a part, inputs of the join besides
    # the parts)
    outputs = [
        ("scan", ["--json"], [man, clusters] + records, [man]),
        ("scan-text", [], [man, clusters] + records, [man]),
        ("dupes", ["--dupes", "--json"], records + links, []),
        ("dupes-csv", ["--dupes", "--format", "csv"], records + links, []),
        ("plan", ["--plan", "--near"], records + links + [clusters], []),
        ("plan-csv", ["--plan", "--format", "csv", "--keep-rules", "newest,longest",
                      "--protect", os.path.join(tree, "misc")],
         records + links + [clusters], []),
    ]
    want = {}
    for name, flags, inputs, _ in outputs:
        want[name], _ = run("export", *flags, *root, *lex, *inputs)
    # The single export is what imatch prints over the tree.
    ref = test_scale.reference_scan(tree)
    for name, i in (("scan", 0), ("dupes", 1)):
        doc = json.loads(want[name])
        doc.pop("root")
        check(doc == ref[i], "export %s equals imatch %s --json" %
              (name, name))
    check(want["plan"].decode("utf-8", "surrogateescape") == ref[2],
          "export --plan --near equals imatch dedupe --near")
    check(want["plan"].count(b"\n") >= 3 and b"exact" in want["plan"] and
          b"near" in want["plan"], "the plan has exact and near entries")
    # Of the payslips, only the edited copy with January's figures goes.
    pay = sorted(json.loads(l)["path"] for l in want["plan"].splitlines()
                 if b"/pay/" in l)
    check(pay == [os.path.join(tree, "pay", "payslip-2024-01-edited.txt")],
          "export --plan plans no other month's payslip: %s" % pay)
    for n in (1, 3, 40):
        for name, flags, inputs, join in outputs:
            if n != 3 and "-" in name:
                continue  # the other formats: once
            parts = []
            for i in range(n):
                parts.append(os.path.join(tmp, "%s.%d.p%d" % (name, n, i)))
                run("export", *flags, *root, *lex, "--part", "%d/%d" % (i, n),
                    "-o", parts[-1], *inputs)
            got, _ = run("export", *flags, *root, *lex, *join,
                         *reversed(parts))
            check(got == want[name],
                  "%s from %d parts equals one export:\n%s\n---\n%s"
                  % (name, n, got[:2000], want[name][:2000]))
    # A part's file dumps as JSON and verifies.
    out, _ = run("cat", os.path.join(tmp, "dupes.3.p1"))
    doc = json.loads(out)
    check(doc["kind"] == "export" and doc["records"],
          "cat shows an export part: %s" % out[:300])
    # What does not make one output is refused, naming the file.
    p3 = [os.path.join(tmp, "dupes.3.p%d" % i) for i in range(3)]
    _, err = run("export", "--dupes", "--json", *root, *lex, *p3[:2], code=1)
    check("part 2 of 3 is missing" in err, err)
    _, err = run("export", "--dupes", "--json", *root, *lex, p3[0], p3[1],
                 os.path.join(tmp, "dupes.40.p2"), code=1)
    check("dupes.40.p2" in err and "part 2 of 40" in err, err)
    _, err = run("export", "--json", *root, *lex, man,
                 *[os.path.join(tmp, "dupes.1.p0")], code=1)
    check("another output" in err, err)
    _, err = run("export", "--plan", "--format", "text", *root, *lex,
                 "--part", "0/2", "-o", os.path.join(tmp, "x"),
                 *records, *links, clusters, code=2)
    check("JSON or CSV" in err, err)
    run("export", "--dupes", *root, *lex, "--part", "2/2", "-o",
        os.path.join(tmp, "x"), *records, *links, code=2)
    run("export", "--dupes", *root, *lex, "--part", "0/2", *records,
        *links, code=2)
    # A record whose key would run past it (its length at 36, behind the
    # header and the record's length) is refused as cat --check refuses
    # it, not printed into the output.
    bad = os.path.join(tmp, "dupes.3.p0.bad")
    restamped(p3[0], bad, 36, 0xFFFFFFFF)
    run("cat", "--check", bad, code=1)
    out, err = run("export", "--dupes", "--json", *root, *lex, bad, *p3[1:],
                   code=1)
    check("dupes.3.p0.bad: corrupt: a record does not decode" in err,
          "a part with a record that does not decode: %s" % err)


def case_corrupt_records(tmp):
    """A records file whose record does not decode (another layout under a
    right checksum) is refused by every stage that reads records, with one
    line naming it, as cat --check names it, links too. (A part reads only the
    records of the documents it prints.)"""
    tree = os.path.join(tmp, "tree")
    test_scale.make_scale_tree(tree)
    lex, man, records, links, clusters = stages(tmp, tree)
    bad = os.path.join(tmp, "bad.rec")
    # ncoords of the first record: at 32 + 4 + 29 (records.h), beyond
    # IM_MAX_COORDS.
    restamped(records[1], bad, 65, 99, size=1)
    good = list(records)
    records[1] = bad
    root = ["--root", tree]
    x = os.path.join(tmp, "x")
    for args in (["components", "-o", x, *lex, *records, *links],
                 ["export", "--json", *root, *lex, man, clusters, *records],
                 ["export", "--dupes", "--json", *root, *lex, *records,
                  *links],
                 ["export", "--plan", "--near", *root, *lex, *records,
                  *links, clusters],
                 ["state", "import", "-o", os.path.join(tmp, "st"), *lex,
                  *records],
                 ["cat", "--check", bad]):
        _, err = run(*args, code=1)
        check(err == "imatch: %s: corrupt: record 1 does not decode\n" % bad,
              "imatch %s: one line naming the records file: %r"
              % (" ".join(args[:2]), err))
    # A links task reads only the records of a candidate group's members,
    # so every shard's first record is made bad: the links of some
    # partition meet one, and blame its records file, not the key file.
    bads = []
    for i, rec in enumerate(records):
        bads.append(os.path.join(tmp, "bad%02d.rec" % i))
        restamped(rec, bads[-1], 65, 99, size=1)
    said = []
    for p in range(P):
        keys = sorted(os.path.join(tmp, f) for f in os.listdir(tmp)
                      if f.startswith("sign") and f.endswith(".k%04d" % p))
        out = subprocess.run([test_cli.IMATCH, "links", "-o", x, *lex, *bads,
                              *keys], capture_output=True, timeout=300)
        err = out.stderr.decode()
        check(out.returncode == 0 and not err or out.returncode == 1,
              "imatch links: exit %d: %r" % (out.returncode, err))
        said += err.splitlines()
    want = {"imatch: %s: corrupt: record 1 does not decode" % b for b in bads}
    check(said and set(said) <= want,
          "imatch links: one line naming a records file: %r" % said)
    # A clusters file whose first cluster does not decode (its member
    # count, after the 20-byte name, made 1) is named as well.
    bad_cls = os.path.join(tmp, "bad.clusters")
    restamped(clusters, bad_cls, 32 + 4 + 20, 1)
    for args in (["export", "--json", *root, *lex, man, bad_cls, *good],
                 ["export", "--json", "--part", "0/2", "-o", x, *lex, bad_cls,
                  *good],
                 ["export", "--plan", "--near", *root, *lex, *good, *links,
                  bad_cls]):
        _, err = run(*args, code=1)
        check(err == "imatch: %s: corrupt: cluster 1 does not decode\n"
              % bad_cls, "imatch %s: one line naming the clusters file: %r"
              % (" ".join(args[:3]), err))


CASES = {name[5:]: fn for name, fn in globals().items()
         if name.startswith("case_")}


def main():
    if len(sys.argv) < 4 or sys.argv[2] not in CASES:
        print("usage: test_export_parts.py IMATCH CASE SRCDIR; cases: %s"
              % " ".join(sorted(CASES)), file=sys.stderr)
        return 2
    case = sys.argv[2]
    test_cli.IMATCH = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="imatch-xparts-")
    try:
        CASES[case](tmp)
    except Failure as e:
        print("FAIL %s: %s" % (case, e), file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok %s" % case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
