#!/usr/bin/env python3
"""Grow a benchmark corpus from real documents: copy SRC to DST/orig and make
N lightly perturbed replicas DST/repR (R = 1..N) in which each word of four or
more ASCII letters is, with probability P, replaced by another such word of the
same document (fixed seed per replica and file). The replicas are real text
with the statistics of the original, and near-duplicates of it, which is the
load imatch is for.

  replicate.py SRC DST N [P=0.002]
"""

import os
import random
import re
import shutil
import sys

WORD = re.compile(rb"[A-Za-z]{4,}")


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    p = float(sys.argv[4]) if len(sys.argv) == 5 else 0.002
    files = []
    for d, dirs, names in os.walk(src):
        dirs.sort()
        for f in sorted(names):
            files.append(os.path.relpath(os.path.join(d, f), src))
    shutil.copytree(src, os.path.join(dst, "orig"), dirs_exist_ok=True)
    for r in range(1, n + 1):
        for rel in files:
            with open(os.path.join(src, rel), "rb") as fh:
                data = fh.read()
            rng = random.Random(f"{r}/{rel}")
            pool = WORD.findall(data[:65536]) or [b"word"]

            def swap(m):
                return rng.choice(pool) if rng.random() < p else m.group(0)

            out = os.path.join(dst, f"rep{r}", rel)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as fh:
                fh.write(WORD.sub(swap, data))


if __name__ == "__main__":
    main()
