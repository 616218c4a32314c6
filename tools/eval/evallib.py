"""Shared helpers of tools/eval/perturb and tools/eval/cosine (python3 stdlib only).

They drive the `imatch` CLI only through its documented output formats
(DESIGN §5): `sign` prints "path TAB sig0 TAB ... TAB sigK" with '-' for a
rejected coordinate, `scan` prints one cluster per line as TAB-separated paths
relative to DIR, `terms` prints "path TAB term TAB term ..." (the unique terms U).
"""

import hashlib
import os
import subprocess
import sys

BATCH = 400  # files per imatch invocation: far below ARG_MAX, few processes


def die(msg):
    print(f"{os.path.basename(sys.argv[0])}: {msg}", file=sys.stderr)
    sys.exit(1)


def list_files(root):
    """Regular files under root, sorted, skipping names that begin with '.'
    (imatch's default) so that both sides see the same documents."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in sorted(files):
            if not f.startswith("."):
                p = os.path.join(d, f)
                if os.path.isfile(p):
                    out.append(p)
    return out


def run(cmd, check=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="surrogateescape")
    if check and r.returncode != 0:
        die(f"'{' '.join(cmd[:6])} ...' failed ({r.returncode}): {r.stderr.strip()[:400]}")
    return r


def param_args(opts):
    """imatch options shared by sign and scan, from a dict (None = default)."""
    a = []
    for name in ("keep", "min-terms", "min-ratio", "seed", "similarity"):
        v = opts.get(name)
        if v is not None:
            a += [f"--{name}", str(v)]
    return a


def build_lexicon(imatch, nidf, out, dirs):
    run([imatch, "lexicon", "build", "--nidf", nidf, "-o", out] + list(dirs))


def _batched(imatch, sub, args, files):
    """Run `imatch SUB ARGS FILE...` over files in batches; yield output lines.
    A non-zero exit is tolerated only when imatch printed a line per input
    (e.g. it reports a skipped binary file on stderr); otherwise it is fatal."""
    for i in range(0, len(files), BATCH):
        chunk = files[i:i + BATCH]
        r = run([imatch, sub] + args + chunk, check=False)
        lines = [l for l in r.stdout.split("\n") if l]
        if r.returncode != 0 and not lines:
            die(f"imatch {sub} failed ({r.returncode}): {r.stderr.strip()[:400]}")
        yield from lines


def sign(imatch, lexicon, k, files, opts=None):
    """{path: [sig0, ..., sigK]} with None for a rejected coordinate."""
    sigs = {}
    sopts = {n: v for n, v in (opts or {}).items() if n != "similarity"}
    args = ["--lexicon", lexicon, "-k", str(k)] + param_args(sopts)
    for line in _batched(imatch, "sign", args, files):
        f = line.split("\t")
        if len(f) != k + 2:
            die(f"imatch sign: expected {k + 2} fields, got {len(f)}: {line[:200]!r}")
        sigs[f[0]] = [None if s == "-" else s for s in f[1:]]
    return sigs


def terms(imatch, files):
    """{path: frozenset of unique terms}."""
    out = {}
    for line in _batched(imatch, "terms", [], files):
        f = line.split("\t")
        out[f[0]] = frozenset(f[1:])
    return out


def scan_clusters(imatch, lexicon, k, root, opts=None, jobs=None):
    """List of clusters (lists of absolute paths) from `imatch scan`."""
    cmd = [imatch, "scan", "--lexicon", lexicon, "-k", str(k)] + param_args(opts or {})
    if jobs:
        cmd += ["-j", str(jobs)]
    r = run(cmd + [root])
    return [[os.path.join(root, p) for p in line.split("\t")]
            for line in r.stdout.split("\n") if line]


def content_hashes(files):
    """{path: sha1 of the bytes}: the exact-copy half of the relation."""
    h = {}
    for p in files:
        with open(p, "rb") as fh:
            h[p] = hashlib.sha1(fh.read()).hexdigest()
    return h


def neighbours(sigs, hashes=None):
    """The near-duplicate relation of DESIGN §2 computed from signatures:
    i ~ j when coordinate k of i equals coordinate k of j for some k, or when
    their bytes are identical. Returns {path: set of other paths}."""
    buckets = {}
    for p, s in sigs.items():
        for k, v in enumerate(s):
            if v is not None:
                buckets.setdefault((k, v), []).append(p)
    if hashes:
        for p, v in hashes.items():
            buckets.setdefault(("bytes", v), []).append(p)
    nb = {p: set() for p in sigs}
    for members in buckets.values():
        if len(members) < 2:
            continue
        for p in members:
            nb.setdefault(p, set()).update(members)
    for p, s in nb.items():
        s.discard(p)
    return nb


def md_table(header, rows):
    """A markdown table (list of str lines)."""
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x) for x in r) + " |")
    return out
