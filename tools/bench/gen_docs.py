#!/usr/bin/env python3
"""Generate a large benchmark tree of text documents whose term frequencies
are those of a real corpus (issue 14's million-document run).

  gen_docs.py CORPUS DST N [JOBS]

Words (3 or more ASCII letters, lowercased) are counted over every file of
CORPUS (e.g. the perl-doc pages of tools/eval/fetch_corpus.sh); each
document draws its length (log-normal, median 180 words) and its words from
those frequencies, plus a few topic words of its own so that unrelated
documents share only common words. Of the documents, about
  8%  are near-duplicates of an earlier one (2% of its words replaced),
  4%  are byte-identical copies of an earlier one,
  5%  are short texts of 2-8 words (too short to sign; a third of them
      repeat one of 50 notes, so some are exact copies),
the rest unrelated. DST/dNNNN/ holds 1000 files each; a directory's content
depends only on the seed and its number, so the tree is the same on every
machine and JOBS processes can write it. Standard library only.
"""
import math
import os
import random
import re
import sys
from multiprocessing import Pool

WORD = re.compile(rb"[A-Za-z]{3,}")
PER_DIR = 1000
TABLE = 1 << 20


def vocabulary(corpus):
    counts = {}
    for d, _, names in os.walk(corpus):
        for f in names:
            try:
                with open(os.path.join(d, f), "rb") as fh:
                    data = fh.read(1 << 20)
            except OSError:
                continue
            for w in WORD.findall(data):
                w = w.lower()
                counts[w] = counts.get(w, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))
    total = sum(counts.values())
    # A sampling table: each word as often as its frequency says (at least
    # once), so drawing uniformly from it draws by frequency.
    table = []
    for w in words:
        table += [w] * max(1, round(counts[w] * TABLE / total))
    return [w.decode() for w in words], [w.decode() for w in table]


def text_of(words, width=72):
    lines, line = [], []
    n = 0
    for w in words:
        if n + len(w) + 1 > width and line:
            lines.append(" ".join(line))
            line, n = [], 0
        line.append(w)
        n += len(w) + 1
    if line:
        lines.append(" ".join(line))
    return "\n".join(lines) + "\n"


G = {}


def init(words, table):
    G["words"], G["table"] = words, table


def make_dir(args):
    dst, num, n, seed = args
    words, table = G["words"], G["table"]
    rng = random.Random("%s/%d" % (seed, num))
    d = os.path.join(dst, "d%04d" % num)
    os.makedirs(d, exist_ok=True)
    notes = [" ".join(random.Random("note%d" % i).choices(words[:3000], k=5))
             for i in range(50)]
    made = []  # texts of this directory, for copies
    for i in range(n):
        r = rng.random()
        if r < 0.08 and made:
            src = rng.choice(made).split()
            k = max(1, len(src) // 50)
            for _ in range(k):
                src[rng.randrange(len(src))] = rng.choice(table)
            text = text_of(src)
        elif r < 0.12 and made:
            text = rng.choice(made)
        elif r < 0.17:
            if rng.random() < 0.33:
                text = rng.choice(notes) + "\n"
            else:
                text = " ".join(rng.choices(table, k=rng.randint(2, 8))) + "\n"
        else:
            length = max(20, int(math.exp(rng.gauss(math.log(180), 0.6))))
            topic = rng.choices(words[2000:], k=8)
            body = rng.choices(table, k=length)
            for j in range(0, length, 12):
                body[j] = rng.choice(topic)
            text = text_of(body)
            made.append(text)
        with open(os.path.join(d, "doc%04d.txt" % i), "w") as f:
            f.write(text)
    return n


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    corpus, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    jobs = int(sys.argv[4]) if len(sys.argv) == 5 else os.cpu_count()
    words, table = vocabulary(corpus)
    dirs = (n + PER_DIR - 1) // PER_DIR
    tasks = [(dst, k, min(PER_DIR, n - k * PER_DIR), 1) for k in range(dirs)]
    with Pool(jobs, initializer=init, initargs=(words, table)) as p:
        done = sum(p.imap_unordered(make_dir, tasks, chunksize=4))
    print("%d documents in %d directories under %s (%d words of %s)"
          % (done, dirs, dst, len(words), corpus))


if __name__ == "__main__":
    main()
