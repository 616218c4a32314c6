#!/usr/bin/env python3
"""Seeds for fuzz_zipxml (tests/fuzz/fuzz_extract.c) from real documents:
    tests/fuzz/make_zipxml_seeds.py DIR OUT
writes OUT/NAME for each .docx, .odt, .odp and .pptx in DIR: the byte that picks the
format, then its XML parts in the target's order, NUL between them."""
import os
import sys
import zipfile

PARTS = {
    ".docx": (0, ["word/document.xml", "word/styles.xml", "word/footnotes.xml",
                  "word/numbering.xml"]),
    ".odt": (1, ["content.xml", "styles.xml"]),
    # odp is read as odt is.
    ".odp": (1, ["content.xml", "styles.xml"]),
    ".pptx": (4, ["ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml"]),
}

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for name in sorted(os.listdir(src)):
    kind = PARTS.get(os.path.splitext(name)[1])
    if not kind:
        continue
    try:
        with zipfile.ZipFile(os.path.join(src, name)) as z:
            have = set(z.namelist())
            # Only the parts up to the first missing one: the target
            # names the parts by their place.
            parts = []
            for p in kind[1]:
                if p not in have:
                    break
                # Not the zip bomb's 512 MiB: the fuzzer cuts its inputs
                # to -max_len anyway.
                if z.getinfo(p).file_size > 1 << 20:
                    break
                parts.append(z.read(p))
    except (zipfile.BadZipFile, OSError):
        continue
    if not parts or any(b"\0" in p for p in parts):
        continue
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([kind[0]]) + b"\0".join(parts))
