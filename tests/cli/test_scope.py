#!/usr/bin/env python3
"""Black-box tests of scoping: --exclude, --include and .imatchignore files
on every imatch command that walks a tree (scan, dupes, dedupe, lexicon
build, ls) and on sign's files.

Usage: test_scope.py IMATCH CASE

Python standard library only; helpers shared with test_cli.py.
"""
import json
import os
import random
import subprocess
import sys

import test_cli
from test_cli import check, document, vocabulary


def run(*args, code=0):
    """Run imatch; check its exit code; return (stdout str, stderr str)."""
    p = subprocess.run([test_cli.IMATCH, *map(str, args)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == code,
          "imatch %s: exit %d, expected %d; stderr: %s"
          % (" ".join(map(str, args)), p.returncode, code, err.strip()))
    return out, err


def put(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def share(root):
    """Pairs of copies in places scoping can name, plus singles so that the
    lexicon has a collection to count."""
    rng = random.Random(5)
    vocab = vocabulary(rng)
    pairs = {"docs": ("docs/a.txt", "docs/old/a.txt"),
             "logs": ("logs/x.log", "docs/x.log"),
             "build": ("build/out.txt", "build/deep/out.txt"),
             "notes": ("notes/n.md", "notes/tmp/n.md"),
             "keep": ("docs/keep.txt", "misc/keep.txt")}
    for name, (a, b) in pairs.items():
        text = "\n".join(document(rng, vocab)) + "\n"
        put(root, a, text)
        put(root, b, text)
    for i in range(10):
        put(root, "misc/s%d.txt" % i, "\n".join(document(rng, vocab)) + "\n")
    # The root's file leaves build/ out; notes/ has its own, deeper one:
    # tmp/ out.
    put(root, ".imatchignore", "# generated build output\nbuild/\n")
    put(root, "notes/.imatchignore", "tmp/\n")
    return pairs


def clusters(out):
    return sorted(tuple(sorted(l.split("\t"))) for l in out.splitlines())


def want(pairs, *names):
    return sorted(tuple(sorted(pairs[n])) for n in names)


def case_scope_commands(tmp):
    """Each command leaves out what the flags and the tree's .imatchignore
    files name, and agrees with scan."""
    root = os.path.join(tmp, "share")
    pairs = share(root)

    out, err = run("scan", "-v", root)
    check(clusters(out) == want(pairs, "docs", "logs", "keep"),
          ".imatchignore files leave build/ and notes/tmp/ out: %r" % out)
    check("excluded: 2" in err, "-v counts build/ and notes/tmp: %s" % err)

    out, _ = run("scan", "--exclude", "*.log", root)
    check(clusters(out) == want(pairs, "docs", "keep"),
          "--exclude '*.log' at any depth: %r" % out)
    out, _ = run("scan", "--exclude", "/docs/old", "--exclude", "*.txt",
                 "--exclude", "!keep.txt", root)
    check(clusters(out) == want(pairs, "logs", "keep"),
          "anchored exclude, negation, the last matching wins: %r" % out)
    # The command line comes first: '!' re-includes what a file excludes.
    out, _ = run("scan", "--exclude", "!build/", root)
    check(clusters(out) == want(pairs, "docs", "logs", "build", "keep"),
          "--exclude '!build/' overrides the root's .imatchignore: %r" % out)
    # Includes restrict; excludes still apply.
    out, _ = run("scan", "--include", "docs", root)
    check(clusters(out) == want(pairs, "docs"),
          "--include DIR: the files under it: %r" % out)
    out, _ = run("scan", "--include", "*.txt", "--include", "*.log", root)
    check(clusters(out) == want(pairs, "docs", "logs", "keep"),
          "--include by name: %r" % out)
    out, _ = run("scan", "--include", "*.txt", "--exclude", "old/", root)
    check(clusters(out) == want(pairs, "keep"),
          "--include with --exclude: %r" % out)

    out, _ = run("dupes", "--exclude", "*.log", root)
    firsts = sorted(l.split("\t")[0] for l in out.splitlines())
    check(firsts == sorted(pairs["docs"] + pairs["keep"]),
          "dupes --exclude: %r" % out)

    out, _ = run("dedupe", "--exclude", "*.log", "--exclude", "docs/old/",
                 root)
    planned = sorted(os.path.relpath(json.loads(l)["path"], root)
                     for l in out.splitlines())
    check(planned in (["docs/keep.txt"], ["misc/keep.txt"]),
          "dedupe plan: %r" % planned)

    lex = os.path.join(tmp, "lex")
    run("lexicon", "build", "--exclude", "misc/", "-o", lex, root)
    man = os.path.join(tmp, "manifest")
    run("ls", "--exclude", "*.log", "-o", man, root)
    out, _ = run("cat", man)
    listed = {r["path"] for r in json.loads(out)["records"]}
    check(listed and not any(p.endswith(".log") or p.startswith("build/") or
                             "/tmp/" in p for p in listed),
          "ls leaves out what scan leaves out: %r" % sorted(listed))
    check("docs/a.txt" in listed, "ls lists the rest: %r" % sorted(listed))

    # sign: the flags apply to the paths as given.
    os.chdir(root)
    out, _ = run("sign", "--lexicon", lex, "--exclude", "*.log",
                 "--exclude", "old/", "docs/x.log", "docs/a.txt",
                 "./docs/old/a.txt")
    signed = [l.split("\t")[0] for l in out.splitlines()]
    check(signed == ["docs/a.txt"], "sign --exclude: %r" % signed)
    out, _ = run("sign", "--lexicon", lex, "--include", "*.log",
                 "docs/x.log", "docs/a.txt")
    check([l.split("\t")[0] for l in out.splitlines()] == ["docs/x.log"],
          "sign --include: %r" % out)


def case_files_from(tmp):
    """--files-from LIST --root DIR in place of DIR: scan, dupes, dedupe and
    lexicon build read exactly the listed files, and print what they print
    for a tree holding only those files."""
    root = os.path.join(tmp, "share")
    pairs = share(root)
    listed = list(pairs["docs"] + pairs["keep"] + pairs["build"]) + \
        ["misc/s%d.txt" % i for i in range(0, 10, 2)]
    lst = os.path.join(tmp, "list")
    with open(lst, "wb") as f:
        f.write(b"".join(p.encode() + b"\0" for p in listed))
    # The same files alone in a tree of their own (with the .imatchignore
    # that leaves build/ out: patterns still apply to listed files).
    only = os.path.join(tmp, "only")
    for rel in listed + [".imatchignore"]:
        with open(os.path.join(root, rel)) as f:
            put(only, rel, f.read())
        st = os.stat(os.path.join(root, rel))  # dedupe prints mtimes
        os.utime(os.path.join(only, rel), ns=(st.st_atime_ns, st.st_mtime_ns))
    lex_list, lex_only = os.path.join(tmp, "lex1"), os.path.join(tmp, "lex2")
    run("lexicon", "build", "-o", lex_list, "--files-from", lst, "--root", root)
    run("lexicon", "build", "-o", lex_only, only)
    with open(lex_list, "rb") as a, open(lex_only, "rb") as b:
        check(a.read() == b.read(), "lexicon build --files-from equals the "
              "lexicon of the listed files alone")
    def same(cmd, text, tree, lex):
        text = text.replace(tree, "ROOT").replace(lex, "LEX")
        if cmd == "scan":
            # The walk of the whole tree enters more directories.
            return json.loads(text)["clusters"]
        return text
    for cmd in (["scan", "--json"], ["dupes", "--json"], ["dedupe"]):
        a, _ = run(*cmd, "--lexicon", lex_list, "--files-from", lst,
                   "--root", root)
        b, _ = run(*cmd, "--lexicon", lex_only, only)
        a, b = same(cmd[0], a, root, lex_list), same(cmd[0], b, only, lex_only)
        check(a == b, "%s --files-from equals %s of the listed files "
              "alone:\n%s\n%s" % (cmd[0], cmd[0], a, b))
    out, _ = run("scan", "--files-from", lst, "--root", root)
    check(clusters(out) == want(pairs, "docs", "keep"),
          "only the listed pairs, build/ still left out: %r" % out)
    _, err = run("scan", "--files-from", lst, root, code=2)
    check("--root" in err.splitlines()[0] and
          err.splitlines()[1:] == ["Try 'imatch scan --help'."],
          "--files-from without --root: one line and the hint: %r" % err)
    with open(lst, "wb") as f:
        f.write(b"../etc/passwd\0")
    _, err = run("scan", "--files-from", lst, "--root", root, code=2)
    check(lst in err, "a bad list is named: %r" % err)


def case_scope_usage(tmp):
    """Bad globs are usage errors with one line naming them, then the hint
    to --help."""
    root = os.path.join(tmp, "share")
    put(root, "a.txt", "x\n")
    for args in (["--exclude", ""], ["--exclude", "# comment"],
                 ["--include", "!negated"]):
        _, err = run("scan", *args, root, code=2)
        check(("--" + args[0][2:]) in err.splitlines()[0] and
              err.splitlines()[1:] == ["Try 'imatch scan --help'."],
              "one line naming the option, then the hint: %r" % err)
    out, _ = run("scan", "--help")
    check("--exclude GLOB" in out and "--include GLOB" in out,
          "scan --help lists both")


CASES = {name[5:]: fn for name, fn in globals().items()
         if name.startswith("case_")}

if __name__ == "__main__":
    test_cli.CASES = CASES
    sys.exit(test_cli.main())
