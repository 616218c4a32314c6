#!/usr/bin/env bash
# Regenerate tests/data/formats/ (committed; CI does not run this) from two
# licence texts of tests/data/demo: the same text in every format, a slightly
# edited copy, an unrelated text made by the same programs, and hostile files.
# Needs pandoc, LibreOffice (soffice), gzip, bzip2 and python3.
#   cc0.*           CC0-1.0 as txt, html, docx, odt, epub (pandoc), pdf (LibreOffice
#                   from the docx), UTF-16LE txt, gzip'ed txt
#   cc0-edited.*    the same with a few words changed: docx (pandoc), pdf (LibreOffice)
#   artistic.*      Artistic licence: docx, odt (pandoc), pdf (LibreOffice)
#   sheet.xlsx/.ods and slides.pptx/.odp   LibreOffice, from a CSV and a flat ODP
#   bomb.docx       a docx whose document.xml unpacks to 512 MiB (bzip2 in the ZIP)
#   bomb.txt.bz2    1 GiB of zeros in 800 bytes
#   entities.docx   "billion laughs" entity declarations in document.xml
#   nested.docx     document.xml nested 100000 elements deep
#   truncated.pdf   the first half of cc0.pdf; garbage.pdf: a header and noise
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/data/formats
lic=$here/data/demo/licenses
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp # LibreOffice writes its profile there
cd "$tmp"

office() { soffice --headless --convert-to "$1" --outdir "$tmp" "$2" >/dev/null 2>&1; }

cp "$lic/CC0-1.0" cc0.txt
sed -e 's/permanently relinquish/irrevocably give up/' \
    -e 's/most jurisdictions throughout the world/many jurisdictions/' \
    -e 's/Statement of Purpose/Purpose/' cc0.txt > cc0-edited.txt
cp "$lic/Artistic" artistic.txt
for t in cc0 cc0-edited artistic; do
	pandoc -f markdown -t docx -o $t.docx $t.txt
	pandoc -f markdown -t odt -o $t.odt $t.txt
	office pdf $t.docx
done
pandoc -f markdown -s -t html --metadata title=CC0 -o cc0.html cc0.txt
pandoc -f markdown -t epub --metadata title=CC0 -o cc0.epub cc0.txt
iconv -f UTF-8 -t UTF-16LE cc0.txt | { printf '\xff\xfe'; cat; } > cc0-utf16.txt
gzip -9n < cc0.txt > cc0.txt.gz

printf 'Quarter,Region,Revenue\nfirst,northern territories,lighthouse\nsecond,southern provinces,harbour\n' > sheet.csv
office xlsx sheet.csv
office ods sheet.csv
python3 - <<'PY'
slides = ["Quarterly lighthouse maintenance review", "Harbour dredging schedule and budget"]
pages = "".join(
    '<draw:page draw:name="p%d"><draw:frame svg:width="20cm" svg:height="3cm" svg:x="1cm" svg:y="1cm">'
    '<draw:text-box><text:p>%s</text:p></draw:text-box></draw:frame>'
    '<presentation:notes><draw:frame svg:width="20cm" svg:height="3cm" svg:x="1cm" svg:y="1cm">'
    '<draw:text-box><text:p>Speaker notes mention seagulls %d</text:p></draw:text-box></draw:frame>'
    '</presentation:notes></draw:page>' % (i, t, i) for i, t in enumerate(slides))
open("slides.fodp", "w").write(
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.presentation">'
    '<office:body><office:presentation>%s</office:presentation></office:body></office:document>' % pages)
PY
office odp slides.fodp
office pptx slides.fodp

python3 - <<'PY'
import zipfile
ct = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
      '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
def docx(name, body, method=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(name, "w", method) as z:
        z.writestr("[Content_Types].xml", ct)
        if isinstance(body, bytes):
            z.writestr("word/document.xml", body)
        else:
            with z.open("word/document.xml", "w") as f:
                for chunk in body:
                    f.write(chunk)
def bomb():
    yield b'<w:document %s><w:body><w:p><w:r><w:t>' % W.encode()
    for _ in range(512):
        yield b" " * (1 << 20)
    yield b"</w:t></w:r></w:p></w:body></w:document>"
docx("bomb.docx", bomb(), zipfile.ZIP_BZIP2)
lol = "".join('<!ENTITY l%d "&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;">' % ((i,) + (i - 1,) * 10)
              for i in range(1, 10))
docx("entities.docx", ('<?xml version="1.0"?><!DOCTYPE w:document [<!ENTITY l0 "lol">%s]>'
                       '<w:document %s><w:body><w:p><w:r><w:t>&l9;</w:t></w:r></w:p></w:body></w:document>'
                       % (lol, W)).encode())
docx("nested.docx", ('<w:document %s><w:body>' % W + "<w:p>" * 100000 + "</w:p>" * 100000
                     + "</w:body></w:document>").encode())
PY
head -c 1073741824 /dev/zero | bzip2 -9 > bomb.txt.bz2
head -c "$(($(stat -c %s cc0.pdf) / 2))" cc0.pdf > truncated.pdf
{ printf '%%PDF-1.7\n'; head -c 3000 /dev/urandom; } > garbage.pdf

mkdir -p "$out"
cp cc0.txt cc0.html cc0.docx cc0.odt cc0.epub cc0.pdf cc0-utf16.txt cc0.txt.gz \
   cc0-edited.docx cc0-edited.pdf artistic.docx artistic.odt artistic.pdf \
   sheet.xlsx sheet.ods slides.pptx slides.odp \
   bomb.docx bomb.txt.bz2 entities.docx nested.docx truncated.pdf garbage.pdf "$out/"
ls -l "$out"
