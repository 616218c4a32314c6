#!/usr/bin/env python3
"""Black-box tests of the batch stages and their Dask driver
(tools/scale/imatch-cluster, SCALE.md).

Usage: test_scale.py IMATCH CASE SRCDIR

The driver runs on a LocalCluster; its outputs must equal what `imatch`
computes over the whole tree in one process, whatever the shard size and
worker count, and after a killed run. Exits 77 (skip) when no Python with
Dask distributed is installed.
"""
import json
import random
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cli  # noqa: E402  (the generated tree and helpers)
from test_cli import Failure, check, run  # noqa: E402

SKIP = 77
PYTHON = None
DRIVER = None


def find_python():
    """An interpreter that can import distributed: this one, else Debian's."""
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", "import distributed"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None


def driver(tree, out, *opts, code=0, timeout=120):
    """Run the driver; return its stderr (progress and summary)."""
    p = subprocess.run([PYTHON, DRIVER, "--imatch", test_cli.IMATCH, *opts,
                        tree, out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == code, "imatch-cluster %s: exit %d, expected %d:\n%s"
          % (" ".join(opts), p.returncode, code, err))
    return err


def read(path):
    with open(path, "rb") as f:
        return f.read()


def reference_lexicon(tmp, tree):
    ref = os.path.join(tmp, "lexicon.ref")
    run("lexicon", "build", "-o", ref, tree)
    return read(ref)


def resumed(err, stage):
    """The 'resumed' count the summary table gives for @stage."""
    for line in err.splitlines():
        f = line.split()
        if f and f[0] == stage and len(f) >= 3 and f[1].isdigit():
            return int(f[1]), int(f[2])
    raise Failure("no summary line for stage %s in:\n%s" % (stage, err))


# ---- Cases -----------------------------------------------------------------

def make_scale_tree(root):
    """test_cli's tree, plus what stresses the key groups: a licence-like
    text in 70 files with a changed name each (a hot key, above the index's
    cap of 64 compared holders) and exact copies of texts too short to
    sign (linked by their exact hash alone)."""
    test_cli.make_tree(root)
    rng = random.Random(11)
    vocab = test_cli.vocabulary(rng, 800)
    base = test_cli.document(rng, vocab, nsent=20)
    for i in range(70):
        d = os.path.join(root, "vendor", "pkg%02d" % i)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "LICENSE"), "w") as f:
            f.write("Copyright holder%02d\n" % i + "\n".join(base) + "\n")
    for i in range(3):
        with open(os.path.join(root, "misc", "short%d.txt" % i), "w") as f:
            f.write("tiny note\n")
    # Payslips: near-duplicates with other figures, which removal keeps,
    # and an edited copy of one with its figures, which it plans.
    os.makedirs(os.path.join(root, "pay"), exist_ok=True)
    for m in (1, 2, 3):
        with open(os.path.join(root, "pay", "payslip-2024-%02d.txt" % m),
                  "w") as f:
            f.write(test_cli.payslip(m))
    with open(os.path.join(root, "pay", "payslip-2024-01-edited.txt"),
              "w") as f:
        f.write(test_cli.payslip(1, "river pilot"))
    # Identical binaries: related by their bytes alone.
    for name in ("a.bin", "b.bin"):
        with open(os.path.join(root, "misc", name), "wb") as f:
            f.write(b"\x00\x01\x02payload\x00" * 50)


def reference_scan(tree):
    """What scan.json and dupes.json must hold (the root aside), and the
    bytes of dedupe-near.jsonl."""
    docs = []
    for cmd in ("scan", "dupes"):
        out, _ = run(cmd, "--json", tree)
        doc = json.loads(out)
        doc.pop("root")
        docs.append(doc)
    out, _ = run("dedupe", "--near", tree)
    docs.append(out.decode("utf-8", "surrogateescape"))
    return docs


def check_outputs(out, want_lex, want_scan, what):
    check(read(os.path.join(out, "lexicon")) == want_lex,
          "%s: the lexicon equals imatch lexicon build's, byte for byte"
          % what)
    for name, want in zip(("scan.json", "dupes.json"), want_scan):
        with open(os.path.join(out, name), "rb") as f:
            got = json.load(f)
        got.pop("root")
        check(got == want, "%s: %s equals imatch %s --json:\n%s\n%s"
              % (what, name, name[:-5], json.dumps(got, indent=1)[:3000],
                 json.dumps(want, indent=1)[:3000]))
    got = read(os.path.join(out, "dedupe-near.jsonl")).decode(
        "utf-8", "surrogateescape")
    check(got == want_scan[2] and got.count("\n") >= 3,
          "%s: dedupe-near.jsonl equals imatch dedupe --near:\n%s\n%s"
          % (what, got[:3000], want_scan[2][:3000]))


def case_scale_equal(tmp):
    """The lexicon and scan.json equal `imatch lexicon build` and `imatch
    scan --json`, for one worker and one shard as for two workers and many
    shards."""
    tree = os.path.join(tmp, "tree")
    make_scale_tree(tree)
    want_lex = reference_lexicon(tmp, tree)
    want_scan = reference_scan(tree)
    sizes = sorted(c["size"] for c in want_scan[0]["clusters"])
    check(sizes[-1] >= 70 and 3 in sizes and 2 in sizes,
          "the tree has a hot cluster, short and binary exact copies: %s"
          % sizes)
    for workers, parts, shard in (("1", "1", 1 << 30), ("2", "3", 12000)):
        out = os.path.join(tmp, "out-%s" % workers)
        err = driver(tree, out, "--local", workers, "-P", parts,
                     "--shard-bytes", str(shard))
        check_outputs(out, want_lex, want_scan,
                      "%s workers, %s partitions" % (workers, parts))
        tasks, _ = resumed(err, "sign")
        check(tasks >= (1 if shard > 1e6 else 10),
              "sign ran one task per shard: %d" % tasks)
    # The manifest names exactly the files scan reads (no hidden ones).
    man, _ = run("cat", os.path.join(tmp, "out-2", "manifest"))
    doc = json.loads(man)
    listed = sorted(r["path"].encode("utf-8", "surrogateescape")
                    for r in doc["records"])
    walked = []
    rootb = os.fsencode(tree)
    for d, dirs, files in os.walk(rootb):
        dirs[:] = [x for x in dirs if not x.startswith(b".")]
        for f in files:
            full = os.path.join(d, f)
            if not f.startswith(b".") and not os.path.islink(full):
                walked.append(os.path.relpath(full, rootb))
    check(listed == sorted(walked),
          "manifest lists the tree's regular files:\n%s\n%s"
          % (listed, sorted(walked)))


def case_scale_worker_killed(tmp):
    """A worker killed in the middle of a sign task costs a retry, not the
    run: the engine runs the task again and the result is the same."""
    tree = os.path.join(tmp, "tree")
    test_cli.make_tree(tree)
    want_lex = reference_lexicon(tmp, tree)
    want_scan = reference_scan(tree)
    marker = os.path.join(tmp, "killed")
    wrapper = os.path.join(tmp, "imatch-killer")
    # The first `imatch sign` kills the worker that started it (its parent)
    # and dies with it, before writing anything.
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                "if [ \"$1\" = sign ] && mkdir %s 2>/dev/null; then\n"
                "  kill -9 $PPID; exit 1\n"
                "fi\n"
                "exec %s \"$@\"\n" % (marker, test_cli.IMATCH))
    os.chmod(wrapper, 0o755)
    out = os.path.join(tmp, "out")
    p = subprocess.run([PYTHON, DRIVER, "--imatch", wrapper, "--local", "2",
                        "-P", "2", "--shard-bytes", "20000", tree, out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=150)
    err = p.stderr.decode("utf-8", "replace")
    check(os.path.isdir(marker), "a worker was killed during sign")
    check(p.returncode == 0, "the run survives a killed worker:\n%s" % err)
    check_outputs(out, want_lex, want_scan, "after a killed worker")


def case_scale_lexicon_sample(tmp):
    """--lexicon-shards N counts document frequencies in N shards only: the
    lexicon is what `imatch lexicon build` makes of those shards' files,
    and every output is what imatch prints over the whole tree with that
    lexicon given."""
    tree = os.path.join(tmp, "tree")
    make_scale_tree(tree)
    out = os.path.join(tmp, "out")
    err = driver(tree, out, "--local", "2", "-P", "2", "--shard-bytes",
                 "8000", "--lexicon-shards", "2")
    check(resumed(err, "df")[0] == 2, "two df tasks:\n%s" % err)
    note = [line for line in err.splitlines()
            if line.startswith("lexicon: from 2 of ")]
    check(len(note) == 1, "the summary names the sampled shards:\n%s" % err)
    counted = {int(i) for i in note[0].split("(")[1].rstrip(")").split()}
    man, _ = run("cat", os.path.join(out, "manifest"))
    recs = json.loads(man)["records"]
    nshards = 1 + max(r["shard"] for r in recs)
    check(nshards >= 8 and len(counted) == 2, "2 of %d shards: %s"
          % (nshards, note[0]))
    listing = os.path.join(tmp, "sampled.lst")
    with open(listing, "wb") as f:
        for r in recs:
            if r["shard"] in counted:
                f.write(r["path"].encode("utf-8", "surrogateescape") + b"\0")
    ref = os.path.join(tmp, "lexicon.sampled")
    run("lexicon", "build", "--files-from", listing, "--root", tree, "-o", ref)
    lexicon = os.path.join(out, "lexicon")
    check(read(lexicon) == read(ref), "the lexicon is the sampled shards'")
    check(read(lexicon) != reference_lexicon(tmp, tree),
          "a sample's lexicon is not the whole tree's")
    want = []
    for cmd in ("scan", "dupes"):
        doc = json.loads(run(cmd, "--json", "--lexicon", lexicon, tree)[0])
        want.append(doc)
        with open(os.path.join(out, cmd + ".json"), "rb") as f:
            got = json.load(f)
        # The root and the lexicon's file name aside (the run built it).
        for d in (doc, got):
            d.pop("root")
            d.get("lexicon", {}).pop("file", None)
        check(got == doc, "%s.json equals imatch %s --json --lexicon OUT/"
              "lexicon" % (cmd, cmd))
    check(want[0]["clusters"], "the sampled lexicon still finds clusters")
    got = read(os.path.join(out, "dedupe-near.jsonl"))
    check(got == run("dedupe", "--near", "--lexicon", lexicon, tree)[0],
          "dedupe-near.jsonl equals imatch dedupe --near --lexicon OUT/lexicon")


def case_sign_spill(tmp):
    """A sign task whose keys pass --spill-bytes writes sorted runs and
    merges them: its files are the bytes of a task that held every key, and
    no run is left behind."""
    tree = os.path.join(tmp, "tree")
    test_cli.make_tree(tree)
    shards = os.path.join(tmp, "shards")
    run("ls", "-o", os.path.join(tmp, "manifest"), "--shards", shards, tree)
    lexicon = os.path.join(tmp, "lexicon")
    run("lexicon", "build", "-o", lexicon, tree)
    # A process that has exited: its pid names a dead attempt.
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    outs = []
    for spill in ("16M", "1K"):
        d = os.path.join(tmp, "sign-" + spill)
        os.mkdir(d)
        # Runs a killed attempt on this host left, which this task removes;
        # a live attempt's and another host's, which it must leave alone.
        for r in range(40):
            with open(os.path.join(d, "s.k0001.r%d.%d.%s" % (r, dead.pid, host)),
                      "wb") as f:
                f.write(b"stale")
        others = ["s.k0000.r0.%d.%s" % (os.getpid(), host),
                  "s.k0000.r0.%d.other-host" % dead.pid]
        for n in others:
            with open(os.path.join(d, n), "wb") as f:
                f.write(b"not ours")
        _, err = run("sign", "--records", "-v", "--files-from",
                     os.path.join(shards, "000000"), "--root", tree,
                     "--shard-id", "0/1", "-P", "3", "--lexicon", lexicon,
                     "--spill-bytes", spill, "-o", os.path.join(d, "s"))
        runs = int(err.split(" sorted runs")[0].rsplit(" ", 1)[1])
        check(runs == 1 if spill == "16M" else runs >= 5,
              "--spill-bytes %s: keys in %d runs: %s" % (spill, runs, err))
        names = sorted(os.listdir(d))
        check(names == sorted(["s.k0000", "s.k0001", "s.k0002", "s.rec"] + others),
              "the records, 3 key files and others' runs remain: %s" % names)
        outs.append([read(os.path.join(d, n)) for n in
                     ("s.k0000", "s.k0001", "s.k0002", "s.rec")])
    check(outs[0] == outs[1], "spilled runs merge into the same bytes")

    # Two attempts of one task at once (an engine retrying a task whose
    # worker it lost, while that worker's imatch still runs): both finish,
    # with the same bytes, and leave no run behind.
    d = os.path.join(tmp, "sign-twice")
    os.mkdir(d)
    argv = [test_cli.IMATCH, "sign", "--records", "--files-from",
            os.path.join(shards, "000000"), "--root", tree, "--shard-id", "0/1",
            "-P", "3", "--lexicon", lexicon, "--spill-bytes", "1K",
            "-o", os.path.join(d, "s")]
    procs = [subprocess.Popen(argv, stderr=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        check(p.returncode == 0, "an overlapping attempt failed: %s" % err.decode())
    names = sorted(os.listdir(d))
    check(names == ["s.k0000", "s.k0001", "s.k0002", "s.rec"],
          "overlapping attempts left %s" % names)
    check([read(os.path.join(d, n)) for n in names] == outs[0],
          "overlapping attempts wrote other bytes")


def case_scale_resume(tmp):
    """A run killed in the middle resumes: verified outputs are kept, the
    rest is redone, and the result is the same."""
    tree = os.path.join(tmp, "tree")
    test_cli.make_tree(tree)
    want = reference_lexicon(tmp, tree)
    out = os.path.join(tmp, "out")
    argv = [PYTHON, DRIVER, "--imatch", test_cli.IMATCH, "--local", "1",
            "-P", "2", "--shard-bytes", "8000", tree, out]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    dfdir = os.path.join(out, "df")
    try:
        while time.monotonic() < deadline and p.poll() is None:
            if os.path.isdir(dfdir) and len(os.listdir(dfdir)) >= 4:
                break
            time.sleep(0.01)
    finally:
        # The driver and its LocalCluster share the new session's group.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    done = sum(1 for f in os.listdir(dfdir) if f.endswith(".p0001")
               and not f.startswith("merged")) if os.path.isdir(dfdir) else 0
    err = driver(tree, out, "--local", "1", "-P", "2", "--shard-bytes", "8000")
    tasks, again = resumed(err, "df")
    check(again >= done and again <= tasks,
          "the rerun resumed the %d finished df tasks (of %d): %d"
          % (done, tasks, again))
    check_outputs(out, want, reference_scan(tree), "resumed run")
    # A damaged output is redone, not trusted.
    victim = os.path.join(dfdir, "000003.p0000")
    with open(victim, "r+b") as f:
        f.seek(40)
        f.write(b"\xff\xff")
    err = driver(tree, out, "--local", "1", "-P", "2", "--shard-bytes", "8000")
    check(resumed(err, "df")[1] == tasks - 1,
          "only the damaged shard's df task ran again")
    run("cat", "--check", victim)
    check(read(os.path.join(out, "lexicon")) == want, "lexicon unchanged")
    # Other options into the same OUT are refused.
    err = driver(tree, out, "--local", "1", "-P", "3", code=1)
    check("other options" in err and "parts: 2 there, 3 here" in err,
          "a changed run is refused, naming what changed: %s" % err)
    # So is any run into it once run.json is gone: its files would count
    # as done for the new options until the export refused them.
    os.unlink(os.path.join(out, "run.json"))
    err = driver(tree, out, "--local", "1", "-P", "3", code=1)
    check("earlier run" in err and "df/" in err and "run.json" in err,
          "without run.json the stage files are refused: %s" % err)
    check(not os.path.exists(os.path.join(out, "run.json")),
          "the refused run wrote no run.json")


def case_stage_errors(tmp):
    """Stage files that are corrupt, truncated or mixed are refused with one
    line naming the file; usage errors exit 2."""
    tree = os.path.join(tmp, "tree")
    test_cli.make_tree(tree, singles=5)
    man = os.path.join(tmp, "manifest")
    run("ls", "-o", man, "--shards", os.path.join(tmp, "sh"), tree)
    data = read(man)
    bad = os.path.join(tmp, "bad")
    for cut, why in ((len(data) - 1, "checksum"), (10, "truncated"),
                     (0, "truncated")):
        with open(bad, "wb") as f:
            f.write(data[:cut])
        _, err = run("cat", bad, code=1)
        check(err.count("\n") == 1 and bad in err and why in err,
              "one line naming the file: %r" % err)
    with open(bad, "wb") as f:
        f.write(b"hello world, this is not a stage file at all" * 3)
    _, err = run("cat", "--check", bad, code=1)
    check("not an imatch stage file" in err, err)
    # df runs of another partition or other term options do not mix.
    sh = os.path.join(tmp, "sh", "000000")
    run("df", "--files-from", sh, "--root", tree, "-P", "2", "-o",
        os.path.join(tmp, "a"))
    run("df", "--files-from", sh, "--root", tree, "-P", "2",
        "--min-word-len", "3", "-o", os.path.join(tmp, "b"))
    _, err = run("df", "merge", "-o", os.path.join(tmp, "m"),
                 os.path.join(tmp, "a.p0000"), os.path.join(tmp, "a.p0001"),
                 code=1)
    check("partition" in err, err)
    _, err = run("df", "merge", "-o", os.path.join(tmp, "m"),
                 os.path.join(tmp, "a.p0000"), os.path.join(tmp, "b.p0000"),
                 code=1)
    check("other term options" in err, err)
    # One run twice (an overlapping glob) would count its shard twice; a
    # second name for it is the same run.
    twin = os.path.join(tmp, "a.twin")
    os.link(os.path.join(tmp, "a.p0000"), twin)
    for again in (os.path.join(tmp, "a.p0000"), twin):
        _, err = run("df", "merge", "-o", os.path.join(tmp, "m"),
                     os.path.join(tmp, "a.p0000"), again, code=1)
        check(err == "imatch: %s: the same run as %s: its counts would be "
              "added twice\n" % (again, os.path.join(tmp, "a.p0000")), err)
    check(not os.path.exists(os.path.join(tmp, "m")), "no merge written")
    _, err = run("lexicon", "build", "--from-df", "-o",
                 os.path.join(tmp, "lex"), os.path.join(tmp, "a.p0000"),
                 code=1)
    check("1 of 2 partitions" in err, err)
    _, err = run("lexicon", "build", "--from-df", "-o",
                 os.path.join(tmp, "lex"), man, code=1)
    check("not document frequencies" in err, err)
    run("df", "--root", tree, "-o", os.path.join(tmp, "x"), code=2)
    run("df", "--files-from", bad, "--root", tree, "-o",
        os.path.join(tmp, "x"), code=1)


def case_stages_incomplete(tmp):
    """A stage given an incomplete or mismatched set of inputs refuses it in
    one line, exit 1: a shard's key run left out of links, a links partition
    left out of components and export, a shard signed with another's list
    (links sees its paths twice, export with the manifest other files)."""
    import test_export_parts
    tree = os.path.join(tmp, "tree")
    make_scale_tree(tree)
    lex, man, records, links, clusters = test_export_parts.stages(tmp, tree)
    P, n = len(links), len(records)
    keys = [["%s.k%04d" % (r[:-4], p) for r in records] for p in range(P)]

    def refused(want, *args):
        _, err = run(*args, code=1)
        check(err.count("\n") == 1 and want in err,
              "imatch %s: one line saying %r: %r" % (args[0], want, err))

    head = json.loads(run("cat", "--head", links[1], text=True)[0])
    check((head["part"], head["nparts"]) == (1, P), "links header: %r" % head)
    out = os.path.join(tmp, "out")
    refused("the key run of shard 0 of %d for partition 0 is missing" % n,
            "links", "-o", out, *lex, *records, *keys[0][1:])
    refused("given twice", "links", "-o", out, *lex, *records, *keys[0],
            keys[0][1])
    refused("partition 1 of %d, but" % P, "links", "-o", out, *lex,
            *records, *keys[0], keys[1][0])
    check(not os.path.exists(out), "no output from a refused links")
    gone = "the links of partition %d of %d are missing" % (P - 1, P)
    refused(gone, "components", "-o", out, *lex, *records, *links[:-1])
    refused("no links files given", "components", "-o", out, *lex,
            *records)
    refused("given twice", "components", "-o", out, *lex, *records,
            *links, links[0])
    refused(gone, "export", "--dupes", "--json", *lex, *records,
            *links[:-1])
    refused(gone, "export", "--plan", "--root", tree, *lex, *records,
            *links[:-1], clusters)
    refused(gone, "export", "--dupes", "--part", "0/2", "-o", out, *lex,
            *records, *links[:-1])
    # Shard 1's list signed as shard 0: its files twice, shard 0's never.
    shards = os.path.join(tmp, "shards")
    lists = [os.path.join(shards, f) for f in sorted(os.listdir(shards))]
    bad = os.path.join(tmp, "bad")
    run("sign", "--records", "--files-from", lists[1], "--root", tree,
        "--shard-id", "0/%d" % n, "-P", P, "-o", bad, *lex)
    mixed = [bad + ".rec"] + records[1:]
    said = 0
    for p in range(P):
        r = subprocess.run([test_cli.IMATCH, "links", "-o", out, *lex,
                            *mixed, "%s.k%04d" % (bad, p), *keys[p][1:]],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        said += r.returncode == 1 and (b"is in the records of shard 0 and "
                                       b"of shard 1") in r.stderr
    check(said >= 1, "links saw no path twice")
    # Shard 0's list with its last file swapped for one of shard 1: the
    # count is right, the files are not.
    with open(lists[0], "rb") as f:
        own = f.read().split(b"\0")[:-1]
    with open(lists[1], "rb") as f:
        other = f.read().split(b"\0")[0]
    swapped = os.path.join(tmp, "swapped")
    with open(swapped, "wb") as f:
        f.write(b"".join(x + b"\0" for x in own[:-1] + [other]))
    run("sign", "--records", "--files-from", swapped, "--root", tree,
        "--shard-id", "0/%d" % n, "-P", P, "-o", bad, *lex)
    mixed = [bad + ".rec"] + records[1:]
    refused("made from other records than these", "components", "-o", out,
            *lex, *mixed, *links)
    refused("shard 0 lists other files than its records hold", "export",
            "--json", *lex, man, clusters, *mixed)
    refused("the clusters file was made from other records", "export",
            "--json", "--part", "0/2", "-o", out, *lex, clusters, *mixed)
    # A manifest listed without --shards numbers no shards: the records are
    # compared with it in all, and the right ones still pass.
    whole = os.path.join(tmp, "manifest.whole")
    run("ls", "-o", whole, tree)
    run("export", "--json", *lex, whole, clusters, *records)
    refused("lists other files than the records hold", "export", "--json",
            *lex, whole, clusters, *mixed)
    # A manifest that leaves a file out, with parts of the right records.
    short = os.path.join(tmp, "manifest.short")
    run("ls", "-o", short, "--exclude", os.path.basename(own[0].decode()),
        tree)
    listed = json.loads(run("cat", "--head", short, text=True)[0])["count"]
    parts = [os.path.join(tmp, "part%d" % i) for i in range(2)]
    for i, part in enumerate(parts):
        run("export", "--json", "--part", "%d/2" % i, "-o", part, *lex,
            clusters, *records)
    run("export", "--json", *lex, man, *parts)
    refused("lists %d files, but the records hold" % listed, "export",
            "--json", *lex, short, *parts)
    # Shard 0's list without its last file: the count differs.
    with open(swapped, "wb") as f:
        f.write(b"".join(x + b"\0" for x in own[:-1]))
    run("sign", "--records", "--files-from", swapped, "--root", tree,
        "--shard-id", "0/%d" % n, "-P", P, "-o", bad, *lex)
    refused("shard 0 lists %d files, but its records hold %d"
            % (len(own), len(own) - 1), "export", "--json", *lex, man,
            clusters, *mixed)
    # Shard 0's list naming a file twice: sign refuses the list, naming
    # both places, and writes no records (QA pass 5 found links the first
    # to notice).
    with open(swapped, "wb") as f:
        f.write(b"".join(x + b"\0" for x in own + [own[0]]))
    twice = os.path.join(tmp, "twice")
    refused("%s: paths 1 and %d are the same" % (swapped, len(own) + 1),
            "sign", "--records", "--files-from", swapped, "--root", tree,
            "--shard-id", "0/%d" % n, "-P", P, "-o", twice, *lex)
    check(not os.path.exists(twice + ".rec"), "records from a refused list")
    # A shard signed under another --max-size: its too-big files are other
    # files, and its records do not mix with the rest (the daemon's cache
    # checks the limit per entry, stage files by their key).
    limited = os.path.join(tmp, "limited")
    run("sign", "--records", "--files-from", lists[0], "--root", tree,
        "--shard-id", "0/%d" % n, "-P", P, "--max-size", "1K", "-o", limited,
        *lex)
    refused("made with other options", "links", "-o", out, *lex, limited + ".rec",
            *records[1:], "%s.k0000" % limited, *keys[0][1:])


def case_ls_parallel(tmp):
    """The list stage in parallel: `ls --top-dirs` of the root, one level
    more of some directories (`--top-dirs` with `--under-from`), `ls
    --under-from` per group of the rest, `ls merge`: the same files and
    totals as one `imatch ls`, every file in the shard its record names (the
    parts' shards in turn), hidden and ignored directories left out."""
    tree = os.path.join(tmp, "tree")
    test_cli.make_tree(tree, singles=5)
    os.makedirs(os.path.join(tree, ".hid", "x"))
    os.makedirs(os.path.join(tree, "ignored"))
    for p in (".hid/x/a.txt", "ignored/b.txt", "top.txt"):
        with open(os.path.join(tree, p), "w") as f:
            f.write("some words here\n")
    with open(os.path.join(tree, ".imatchignore"), "w") as f:
        f.write("ignored/\n")
    whole = os.path.join(tmp, "whole")
    run("ls", "-o", whole, tree)
    dirs = os.path.join(tmp, "top.dirs")
    run("ls", "--top-dirs", dirs, "-o", os.path.join(tmp, "top"), "--shards",
        os.path.join(tmp, "s.top"), "--shard-bytes", "3000", tree)
    top = sorted(os.fsdecode(d) for d in read(dirs).split(b"\0") if d)
    want = sorted(e.name for e in os.scandir(tree) if e.is_dir()
                  and not e.name.startswith(".") and e.name != "ignored")
    check(top == want and len(top) >= 2, "top.dirs: %r, wanted %r"
          % (top, want))
    # One level deeper for the first half (their own files, and the
    # directories below them), then two groups of what is left.
    level = os.path.join(tmp, "level.dirs")
    first = os.path.join(tmp, "first")
    with open(first, "wb") as f:
        f.write(b"".join(os.fsencode(d) + b"\0" for d in top[:len(top) // 2]))
    run("ls", "--top-dirs", level, "--under-from", first, "-o",
        os.path.join(tmp, "level"), "--shards", os.path.join(tmp, "s.level"),
        "--shard-bytes", "3000", tree)
    below = [os.fsdecode(d) for d in read(level).split(b"\0") if d]
    check(below and all(d.split("/")[0] in top[:len(top) // 2]
                        and d.count("/") == 1 for d in below),
          "level.dirs: %r" % below)
    rest = top[len(top) // 2:] + below
    parts = [os.path.join(tmp, "top"), os.path.join(tmp, "level")]
    for g, group in enumerate((rest[0::2], rest[1::2])):
        gf = os.path.join(tmp, "group%d" % g)
        with open(gf, "wb") as f:
            f.write(b"".join(os.fsencode(d) + b"\0" for d in group))
        parts.append(os.path.join(tmp, "part%d" % g))
        run("ls", "--under-from", gf, "-o", parts[-1], "--shards",
            os.path.join(tmp, "s%d" % g), "--shard-bytes", "3000", tree)
    merged = os.path.join(tmp, "merged")
    run("ls", "merge", "-o", merged, *parts)

    def dump(f):
        return json.loads(run("cat", f)[0])
    a, b = dump(whole), dump(merged)
    meta = dict(a["meta"], shards=None)
    check(dict(b["meta"], shards=None) == meta,
          "totals: %r, one walk: %r" % (b["meta"], a["meta"]))
    check(sorted(r["path"] for r in b["records"])
          == sorted(r["path"] for r in a["records"]),
          "the merged manifest lists other files than one walk")
    shard_files = [os.path.join(tmp, d, n)
                   for d in ("s.top", "s.level", "s0", "s1")
                   if os.path.isdir(os.path.join(tmp, d))
                   for n in sorted(os.listdir(os.path.join(tmp, d)))]
    check(len(shard_files) == b["meta"]["shards"] > 3,
          "%d shard files, the manifest counts %d"
          % (len(shard_files), b["meta"]["shards"]))
    for r in b["records"]:
        listed = read(shard_files[r["shard"]]).split(b"\0")
        check(os.fsencode(r["path"]) in listed, "%r is not in shard %d"
              % (r["path"], r["shard"]))
    run("ls", "--under-from", os.path.join(tmp, "nothere"), "-o",
        os.path.join(tmp, "x"), tree, code=1)
    # A directory and one inside it: whole walks of both would list its
    # files twice; one level of each lists each file once.
    inner = below[0]
    nested = os.path.join(tmp, "nested")
    with open(nested, "wb") as f:
        f.write(b"".join(os.fsencode(d) + b"\0"
                         for d in (inner, top[-1], inner.split("/")[0])))
    _, err = run("ls", "--under-from", nested, "-o", os.path.join(tmp, "x"),
                 tree, code=1)
    check(err == "imatch: %s: %s is inside another directory it lists\n"
          % (nested, inner), "nested directories: %r" % err)
    run("ls", "--top-dirs", os.path.join(tmp, "x.dirs"), "--under-from",
        nested, "-o", os.path.join(tmp, "x"), tree)
    _, err = run("ls", "merge", "-o", os.path.join(tmp, "x"), merged, dirs,
                 code=1)
    check(dirs in err and err.count("\n") == 1, "one line naming it: %r"
          % err)


CASES = {name[5:]: fn for name, fn in globals().items()
         if name.startswith("case_")}
NEEDS_DASK = {"scale_equal", "scale_resume", "scale_worker_killed",
              "scale_lexicon_sample"}


def main():
    global PYTHON, DRIVER
    if len(sys.argv) < 4 or sys.argv[2] not in CASES:
        print("usage: test_scale.py IMATCH CASE SRCDIR; cases: %s"
              % " ".join(sorted(CASES)), file=sys.stderr)
        return 2
    case = sys.argv[2]
    test_cli.IMATCH = os.path.abspath(sys.argv[1])
    DRIVER = os.path.join(sys.argv[3], "tools", "scale", "imatch-cluster")
    if case in NEEDS_DASK:
        PYTHON = find_python()
        if not PYTHON:
            print("SKIP %s: Dask distributed is not installed "
                  "(apt-get install python3-distributed)" % case)
            return SKIP
    tmp = tempfile.mkdtemp(prefix="imatch-scale-")
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
