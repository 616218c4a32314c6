#!/usr/bin/env bash
# Regenerate tests/data/formats/ (committed; CI does not run this) from two
# licence texts of tests/data/demo: the same text in every format, a slightly
# edited copy, an unrelated text made by the same programs, and hostile files.
# Needs pandoc, LibreOffice (soffice), gzip, bzip2 and python3.
#   cc0.*           CC0-1.0 as txt, html, docx, odt, epub (pandoc), pdf (LibreOffice
#                   from the docx), UTF-16LE txt, gzip'ed txt
#                   rtf (pandoc -s), doc (LibreOffice from the docx)
#   cc0-edited.*    the same with a few words changed: docx (pandoc), pdf and
#                   doc (LibreOffice)
#   artistic.*      Artistic licence: docx, odt (pandoc), pdf, rtf and doc
#                   (LibreOffice)
#   notes.docx, notes.doc   a short report with a footnote, a table, a
#                   hyperlink (a field in the .doc) and typographic quotes:
#                   pandoc, then LibreOffice; notes.html: pandoc -s (its
#                   <title> the file's name, as pandoc does without one)
#                   and notes.epub: pandoc
#   letterhead.odt/.docx/.html   LibreOffice, from a flat ODT with a title
#                   in its properties and a page header and footer
#   commission.odt/.docx/.html   LibreOffice, from a flat ODT with a title of
#                   over 1 KB in its properties, a page header and a footnote
#   links.odt/.docx/.html   LibreOffice, from a flat ODT with two links whose
#                   addresses hold "doc-noteref" and "sdfootnote"
#   review.docx, review.doc   a reviewed text: a tracked deletion (kept for
#                   undo) and a text box, LibreOffice from a flat ODT
#   memo-a.rtf, memo-b.rtf   two short memos on different subjects, RTF from
#                   one pandoc template with a Word-like preamble (fonts,
#                   colours, style sheet, info, letterhead header, rsid table)
#   flyer.rtf, flyer.docx   LibreOffice, from a flat ODT with a text box (RTF
#                   keeps its text in a shape's \shptxt)
#   sheet.xlsx/.ods/.xls and slides.pptx/.odp/.ppt.gz   LibreOffice, from a
#                   CSV and a flat ODP (the .ppt gzip'ed: LibreOffice puts a
#                   440 KB thumbnail in it)
#                   (the budget-* spreadsheets: tests/make_budget_fixtures.sh)
#   report.odt/.docx/.rtf/.html   LibreOffice, from a flat ODT with a table of
#                   contents, a footnote, an endnote and an image with alt
#                   text (the same words in each but the odt's index
#                   template, note numbers and alt text)
#   voyages.ods, voyages.xlsx   LibreOffice, from a flat ODS in the 1904 date
#                   system (table:null-date; date1904 in the xlsx)
#   harbour-zh.odt, harbour-zh.pdf   LibreOffice, a Chinese heading and a
#                   paragraph that the PDF breaks inside runs of ideographs
#   hidden.odt/.docx/.doc/.rtf   LibreOffice, from a flat ODT with a run
#                   of hidden text (character attribute, not shown)
#   hidden-styles.odt/.docx/.doc/.rtf   LibreOffice, from a flat ODT whose common
#                   styles (a character and a paragraph style) hide text
#   rules.txt/.docx/.odt/.html   two lists typed "1." to "3." and pandoc's
#                   docx, odt and html of them (automatic numbering)
#   outline.odt/.docx/.html   LibreOffice, from a flat ODT with a list
#                   numbered 1., 1.1. and a), and one I. from IV.
#   header-list.odt LibreOffice, from a flat ODT with a numbered list in
#                   its page header and one in its body
#   chapters.odt/.docx, chapters-4.odt/.docx   LibreOffice, from a flat ODT
#                   whose headings its outline style numbers (1., 1.1.),
#                   and the same from 4.
#   headings.odt    LibreOffice, from a flat ODT: outline numbering's
#                   edges (a level skipped, a list header, a restart, a
#                   heading in a list)
#   agenda.odp/.pptx, agenda-6.odp/.pptx   LibreOffice, from a flat ODP
#                   with numbered lists (a:buAutoNum in the pptx), the
#                   second slide's from 4, and the same from 6
#   legal.docx      numbering.xml as Word writes it and no program here
#                   does: w:isLgl, w:lvlRestart, w:lvlOverride/w:lvl
#   bomb.docx       a docx whose document.xml unpacks to 512 MiB (bzip2 in the ZIP)
#   bomb.txt.bz2    1 GiB of zeros in 800 bytes
#   entities.docx   "billion laughs" entity declarations in document.xml
#   nested.docx     document.xml nested 100000 elements deep
#   nested-lists.docx   40 lists (w:abstractNum) numbered from VII, each
#                   with another list inside its level's definition
#   spine.epub      a 2 MB page that the spine names 10000 times (20 GB of
#                   text from 8 KB)
#   spine-blank.epub  a 4 MB page of no text (one comment) that the spine
#                   names 20000 times (80 GB to read from 6 KB)
#   truncated.pdf   the first half of cc0.pdf; garbage.pdf: a header and noise
#   loop.doc, huge.doc, truncated.doc, encrypted.doc   notes.doc with its
#                   WordDocument stream's sector chain looping, its size
#                   claimed far beyond the file, cut in half (the FAT and
#                   directory kept, as Word writes them early), and marked
#                   password-protected
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
	office doc $t.docx
done
pandoc -f markdown -s -t html --metadata title=CC0 -o cc0.html cc0.txt
pandoc -f markdown -t epub --metadata title=CC0 -o cc0.epub cc0.txt
pandoc -f markdown -s -t rtf -o cc0.rtf cc0.txt
office rtf artistic.docx

# What a template puts in every memo a department writes: none of it is text
# a reader sees but the letterhead, which repeats on every page.
cat > memo.rtf.tpl <<'TPL'
{\rtf1\ansi\ansicpg1252\deff0\nouicompat\deflang2057\deflangfe2057
{\fonttbl{\f0\froman\fprq2\fcharset0 Times New Roman;}{\f1\fswiss\fprq2\fcharset0 Calibri Light;}{\f2\fswiss\fprq2\fcharset0 Segoe UI Semibold;}{\f3\fmodern\fprq1\fcharset0 Consolas;}}
{\colortbl;\red0\green0\blue0;\red31\green56\blue100;\red68\green114\blue196;\red165\green165\blue165;\red237\green125\blue49;}
{\*\defchp \f1\fs22\lang2057\langfe2057}{\*\defpap \ql \li0\ri0\sa160\sl259\slmult1\widctlpar\wrapdefault\aspalpha\aspnum\faauto\adjustright\rin0\lin0\itap0}
{\stylesheet{\ql \li0\ri0\sa160\sl259\slmult1\widctlpar\wrapdefault\aspalpha\aspnum\faauto\adjustright\rin0\lin0\itap0 \rtlch\fcs1 \af0\afs22\alang1025 \ltrch\fcs0 \f1\fs22\lang2057\langfe2057\cgrid\langnp2057\langfenp2057 \snext0 \sqformat \spriority0 Normal;}
{\s1\ql \li0\ri0\sb240\keepn\widctlpar\outlinelevel0 \rtlch\fcs1 \af0\afs32 \ltrch\fcs0 \f2\fs32\cf2 \sbasedon0 \snext0 \slink15 \sqformat \spriority9 heading 1;}
{\*\cs10 \additive \ssemihidden \sunhideused \spriority1 Default Paragraph Font;}
{\*\cs15 \additive \rtlch\fcs1 \af0\afs32 \ltrch\fcs0 \f2\fs32\cf2 \sbasedon10 \slink1 \slocked \spriority9 Heading 1 Char;}
{\s16\ql \li0\ri0\widctlpar\tqc\tx4513\tqr\tx9026 \sbasedon0 \snext16 \slink17 \sunhideused Letterhead Departmental Memorandum;}
{\s18\ql \li0\ri0\sa120\widctlpar\brdrb\brdrs\brdrw10\brsp20 \brdrcf4 \sbasedon0 \snext0 \sqformat Distribution Recipients Confidentiality Classification;}}
{\*\rsidtbl \rsid1135212\rsid2504217\rsid4459847\rsid7631542\rsid9965414\rsid12460384\rsid15878911}
{\*\generator Microsoft Word 16.0;}{\info{\title Departmental memorandum}{\author Harbour Authority Facilities Office}{\operator Records Management}{\creatim\yr2024\mo3\dy4\hr9\min12}{\company Northwind Harbour Authority}{\doccomm Approved template for internal circulation}}
{\*\xmlnstbl {\xmlns1 http://schemas.microsoft.com/office/word/2003/wordml}}
\paperw11906\paperh16838\margl1440\margr1440\margt1440\margb1440\gutter0\ltrsect
\widowctrl\ftnbj\aenddoc\trackmoves0\trackformatting1\donotembedsysfont1\relyonvml0\donotembedlingdata0\grfdocevents0\validatexml1\showplaceholdtext0\ignoremixedcontent0\saveinvalidxml0\showxmlerrors1
{\header \pard\plain \s16\ql \widctlpar\tqc\tx4513\tqr\tx9026 \f2\fs18\cf4 Northwind Harbour Authority \endash  Internal memorandum \endash  Facilities Office, Pier Road\par}
{\footer \pard\plain \s16\qc \f1\fs16\cf4 Internal circulation only. Printed copies are uncontrolled.\par}
{\pard\plain \s18\ql \f1\fs20\cf4 Distribution: all staff\par}
$body$
}
TPL
printf 'Memo: new coffee machines\n\nTwo espresso machines now stand in the third floor kitchen.\n' > memo-a.txt
printf 'Memo: fire drill\n\nAn evacuation drill is planned for Wednesday morning.\n' > memo-b.txt
for m in memo-a memo-b; do
	pandoc -f markdown -s -t rtf --template memo.rtf.tpl -o $m.rtf $m.txt
done
cat > flyer.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:body><office:text>
<text:p>Summer fete on the village green, Saturday from noon.</text:p>
<text:p><draw:frame draw:name="Box" text:anchor-type="paragraph" svg:width="6cm" svg:height="3cm"><draw:text-box><text:p>Raffle tickets at the bakery counter; proceeds repair the chapel roof.</text:p></draw:text-box></draw:frame>Bring a picnic blanket.</text:p>
</office:text></office:body></office:document>
FODT
office rtf flyer.fodt
office docx flyer.fodt
cat > notes.md <<'MD'
# Harbour report

The lighthouse keeper[^1] wrote about the *seagulls* and the
[harbour authority](https://example.org/harbour) budget.

| Quarter | Region | Note |
|---------|--------|------|
| first | northern territories | dredging |
| second | southern provinces | buoys |

Typography: “quoted” — ‘single’ café naïve Œuvre.

[^1]: A footnote about the foghorn maintenance.
MD
pandoc -f markdown -t docx -o notes.docx notes.md
pandoc -f markdown -s -t html -o notes.html notes.md 2>/dev/null
pandoc -f markdown -t epub -o notes.epub notes.md 2>/dev/null
office doc notes.docx
cat > letterhead.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:meta><dc:title>Quarterly pilotage review</dc:title></office:meta>
<office:automatic-styles><style:page-layout style:name="pm1"/></office:automatic-styles>
<office:master-styles><style:master-page style:name="Standard" style:page-layout-name="pm1">
<style:header><text:p>Meridian Shipping Consultancy, confidential assessment</text:p></style:header>
<style:footer><text:p>Prepared by the Halvorsen cartography bureau</text:p></style:footer>
</style:master-page></office:master-styles>
<office:body><office:text>
<text:p>The pilot boat leaves the outer harbour at dawn when the fog lifts.</text:p>
<text:p>Cargo manifests are checked by the customs officer before unloading.</text:p>
</office:text></office:body></office:document>
FODT
for f in odt docx html; do office $f letterhead.fodt; done
# A title of over 1 KB, which LibreOffice's html writes before its generator <meta>.
cat > commission.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:meta><dc:title>Report of the harbour commission on the pilotage service, the tide gauges of the outer harbour and the breakwater lights, with the accounts of the dredging fund, the minutes of the quarterly meetings held with the fishermen's cooperative, the ferry operators and the customs office, and the recommendations of the inspectors for the coming season, prepared at the request of the municipal council following the storms of the previous winter, which damaged the north quay, the slipway and two of the mooring buoys, together with a survey of the soundings taken along the approach channel and an estimate of the cost of repairs to the quay walls, the lighthouse lantern, the signal station and the pilot boat moorings, as agreed by the commission at its meeting in the spring and forwarded to the harbour board, the port authority, the coastguard station and the regional maritime office for their comments before the end of the year</dc:title></office:meta>
<office:automatic-styles><style:page-layout style:name="pm1"/></office:automatic-styles>
<office:master-styles><style:master-page style:name="Standard" style:page-layout-name="pm1">
<style:header><text:p>Meridian Shipping Consultancy, confidential assessment</text:p></style:header>
</style:master-page></office:master-styles>
<office:body><office:text>
<text:p>The harbour keeps three tide gauges<text:note text:id="n1" text:note-class="footnote"><text:note-citation>1</text:note-citation><text:note-body><text:p>Calibrated by the Rosendahl instrument workshop.</text:p></text:note-body></text:note> on the pier.</text:p>
</office:text></office:body></office:document>
FODT
for f in odt docx html; do office $f commission.fodt; done
# Links whose addresses hold the words of note marks (sdfootnote, doc-noteref).
cat > links.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:body><office:text>
<text:p>Screen readers announce a note reference by the <text:a xlink:type="simple" xlink:href="https://www.w3.org/TR/dpub-aria-1.1/#doc-noteref">noteref role of the publishing module</text:a> and an old export by its <text:a xlink:type="simple" xlink:href="https://help.libreoffice.org/latest/en-US/text/shared/guide/sdfootnote.html">anchor class documentation</text:a> online.</text:p>
</office:text></office:body></office:document>
FODT
for f in odt docx html; do office $f links.fodt; done
# Text hidden by styles: a character style, a paragraph style, an automatic
# style based on it, and a character style that shows its text again.
cat > hidden-styles.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:styles>
<style:style style:name="Standard" style:family="paragraph"/>
<style:style style:name="Secret" style:family="text"><style:text-properties text:display="none"/></style:style>
<style:style style:name="Unveiled" style:family="text" style:parent-style-name="Secret"><style:text-properties text:display="true"/></style:style>
<style:style style:name="Aside" style:family="text" style:parent-style-name="Secret"><style:text-properties fo:font-style="italic"/></style:style>
<style:style style:name="Clerk" style:family="paragraph" style:parent-style-name="Standard"><style:text-properties text:display="none"/></style:style>
<style:style style:name="Clerk_20_detail" style:display-name="Clerk detail" style:family="paragraph" style:parent-style-name="Clerk"><style:paragraph-properties fo:margin-left="1cm"/></style:style>
</office:styles>
<office:automatic-styles><style:style style:name="P1" style:family="paragraph" style:parent-style-name="Clerk"><style:paragraph-properties fo:text-align="center"/></style:style></office:automatic-styles>
<office:body><office:text>
<text:p>The ferry leaves the north quay at seven.<text:span text:style-name="Secret"> Reminder for the clerk: smuggled tobacco crates in shed four.</text:span> Tickets are sold on board<text:span text:style-name="Aside"> beside contraband</text:span><text:span text:style-name="Unveiled"> and at the kiosk</text:span>.</text:p>
<text:p text:style-name="Clerk">Whisky barrels are stored behind the net loft.</text:p>
<text:p text:style-name="Clerk_20_detail">Forged customs stamps are kept in the lighthouse.</text:p>
<text:p text:style-name="P1">Bribes are paid on the first Monday.</text:p>
<text:p>Passengers with bicycles board first.</text:p>
</office:text></office:body></office:document>
FODT
for f in odt docx doc rtf; do office $f hidden-styles.fodt; done
cat > rules.txt <<'TXT'
Harbour rules

The harbour master sets these rules for every vessel that moors here.

1. Report to the harbour office within one hour of arrival.
2. Keep the quay clear of cargo after sunset.
3. Pay the mooring fee before leaving.

The pilots follow their own steps when bringing a ship in.

1. Board the vessel outside the breakwater.
2. Check the draught against the tide table.
3. Hand over to the berthing master at the quay.
TXT
pandoc -f markdown -t docx -o rules.docx rules.txt
pandoc -f markdown -t odt -o rules.odt rules.txt
pandoc -f markdown -s -t html --metadata title=Rules -o rules.html rules.txt
cat > outline.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:automatic-styles>
<text:list-style style:name="L1">
<text:list-level-style-number text:level="1" style:num-suffix="." style:num-format="1"/>
<text:list-level-style-number text:level="2" style:num-suffix="." style:num-format="1" text:display-levels="2"/>
<text:list-level-style-number text:level="3" style:num-suffix=")" style:num-format="a"/>
</text:list-style>
<text:list-style style:name="L2">
<text:list-level-style-number text:level="1" style:num-suffix="." style:num-format="I" text:start-value="4"/>
</text:list-style>
</office:automatic-styles>
<office:body><office:text>
<text:p>Harbour regulations, as amended by the port council.</text:p>
<text:list text:style-name="L1">
<text:list-item><text:p>Moorings are let by the harbour office.</text:p>
<text:list>
<text:list-item><text:p>Fees are paid in advance for the season.</text:p></text:list-item>
<text:list-item><text:p>Berths are assigned by length of vessel:</text:p>
<text:list>
<text:list-item><text:p>trawlers along the north quay</text:p></text:list-item>
<text:list-item><text:p>yachts along the south quay</text:p></text:list-item>
</text:list></text:list-item>
</text:list></text:list-item>
<text:list-item><text:p>Pilotage is compulsory above fifty metres.</text:p>
<text:list>
<text:list-item><text:p>Pilots board outside the breakwater.</text:p></text:list-item>
</text:list></text:list-item>
</text:list>
<text:p>The articles below replace those of the previous edition.</text:p>
<text:list text:style-name="L2">
<text:list-item><text:p>Anchoring in the fairway is forbidden.</text:p></text:list-item>
<text:list-item><text:p>Fishing from the pier needs a permit.</text:p></text:list-item>
</text:list>
</office:text></office:body></office:document>
FODT
for f in odt docx html; do office $f outline.fodt; done
# A numbered list in the page header (styles.xml) and one in the body.
cat > header-list.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:automatic-styles><style:page-layout style:name="pm1"/>
<text:list-style style:name="L1"><text:list-level-style-number text:level="1" style:num-suffix="." style:num-format="1"/></text:list-style>
<text:list-style style:name="L2"><text:list-level-style-number text:level="1" style:num-suffix=")" style:num-format="a"/></text:list-style>
</office:automatic-styles>
<office:master-styles><style:master-page style:name="Standard" style:page-layout-name="pm1">
<style:header><text:list text:style-name="L2"><text:list-item><text:p>Harbour office, north quay</text:p></text:list-item></text:list></style:header>
</style:master-page></office:master-styles>
<office:body><office:text>
<text:list text:style-name="L1"><text:list-item><text:p>Moor bow and stern.</text:p></text:list-item><text:list-item><text:p>Keep the fairway clear.</text:p></text:list-item></text:list>
</office:text></office:body></office:document>
FODT
office odt header-list.fodt
# Headings LibreOffice numbers by its outline style ("Chapter numbering":
# text:outline-style in the odt, numbering on the Heading styles in the
# docx); chapters-4 is the same report with its first chapter 4.
python3 - <<'PY'
head = ('<?xml version="1.0" encoding="UTF-8"?><office:document '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2" '
        'office:mimetype="application/vnd.oasis.opendocument.text"><office:styles>'
        '<style:style style:name="Heading_20_1" style:display-name="Heading 1" '
        'style:family="paragraph" style:default-outline-level="1"/>'
        '<style:style style:name="Heading_20_2" style:display-name="Heading 2" '
        'style:family="paragraph" style:default-outline-level="2"/>'
        '<text:outline-style style:name="Outline"><text:outline-level-style text:level="1" '
        'style:num-format="1" style:num-suffix="."%s/><text:outline-level-style '
        'text:level="2" style:num-format="1" style:num-suffix="." text:display-levels="2"/>'
        '</text:outline-style></office:styles><office:body><office:text>')
body = [(1, "Tide gauges"),
        "The harbour keeps three tide gauges on the pier and logs their readings every ten minutes.",
        (2, "Calibration"),
        "The Rosendahl instrument workshop calibrates the floats every spring before the storms.",
        (2, "Repairs"),
        "A cracked stilling well was replaced after the winter gales flooded the slipway.",
        (1, "Dredging"),
        "The approach channel is dredged every second year to keep the fairway open for ferries.",
        (2, "Spoil"),
        "Spoil is dumped beyond the outer buoy where the currents carry it away from the beaches."]
text = "".join('<text:h text:style-name="Heading_20_%d" text:outline-level="%d">%s</text:h>'
               % (b[0], b[0], b[1]) if isinstance(b, tuple) else "<text:p>%s</text:p>" % b
               for b in body)
for name, start in (("chapters", ""), ("chapters-4", ' text:start-value="4"')):
    open(name + ".fodt", "w").write(head % start + text + "</office:text></office:body></office:document>")
PY
for f in odt docx; do office $f chapters.fodt; office $f chapters-4.fodt; done
# The outline's edges, as LibreOffice shows them: a level skipped (it
# counts at its start: "1.i.A." then "1.ii."), a list header, a restart at
# 7, a heading in a numbered list (the list's number).
cat > headings.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:styles>
<text:list-style style:name="Letters"><text:list-level-style-number text:level="1" style:num-format="a" style:num-suffix=")"/></text:list-style>
<text:outline-style style:name="Outline">
<text:outline-level-style text:level="1" style:num-format="1" style:num-prefix="Part " style:num-suffix="."/>
<text:outline-level-style text:level="2" style:num-format="i" style:num-suffix="." text:display-levels="2"/>
<text:outline-level-style text:level="3" style:num-format="A" style:num-suffix="." text:display-levels="3"/>
</text:outline-style>
</office:styles>
<office:body><office:text>
<text:h text:outline-level="1">Moorings</text:h>
<text:h text:outline-level="3">Winter berths</text:h>
<text:h text:outline-level="2">Summer berths</text:h>
<text:h text:outline-level="1" text:is-list-header="true">Interlude on tides</text:h>
<text:h text:outline-level="1">Pilotage</text:h>
<text:h text:outline-level="1" text:restart-numbering="true" text:start-value="7">Customs</text:h>
<text:h text:outline-level="2">Bonded stores</text:h>
<text:list text:style-name="Letters"><text:list-item><text:h text:outline-level="1">Listed heading</text:h></text:list-item></text:list>
<text:h text:outline-level="1">Lighthouse</text:h>
</office:text></office:body></office:document>
FODT
office odt headings.fodt
# An agenda in numbered lists on two slides (the second's from 4), and
# the same with the second from 6: odp and pptx (a:buAutoNum) by
# LibreOffice.
python3 - <<'PY'
doc = ('<?xml version="1.0" encoding="UTF-8"?><office:document '
       'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
       'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
       'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
       'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
       'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
       'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
       'office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.presentation">'
       '<office:automatic-styles><text:list-style style:name="L1">'
       '<text:list-level-style-number text:level="1" style:num-format="1" style:num-suffix="."/>'
       '<text:list-level-style-number text:level="2" style:num-format="i" style:num-suffix=")"/>'
       '</text:list-style><text:list-style style:name="L2"><text:list-level-style-number '
       'text:level="1" style:num-format="1" style:num-suffix="." text:start-value="%d"/>'
       '</text:list-style></office:automatic-styles><office:body><office:presentation>%s'
       '</office:presentation></office:body></office:document>')
def page(n, body):
    return ('<draw:page draw:name="p%d"><draw:frame svg:width="20cm" svg:height="10cm" svg:x="1cm" '
            'svg:y="1cm"><draw:text-box>%s</draw:text-box></draw:frame></draw:page>' % (n, body))
def items(xs):
    return "".join("<text:list-item><text:p>%s</text:p>%s</text:list-item>" % x for x in xs)
sub = '<text:list>%s</text:list>' % items([("dredging the approach channel", ""),
                                         ("moorings in the inner basin", "")])
pages = (page(1, '<text:p>Harbour board agenda</text:p><text:list text:style-name="L1">%s</text:list>'
              % items([("Minutes of the last meeting", ""), ("Budget of the works", sub),
                       ("Pilotage fees for the season", "")]))
         + page(2, '<text:list text:style-name="L2">%s</text:list>'
                % items([("Lighthouse lantern repairs", ""), ("Any other business", "")])))
for name, start in (("agenda", 4), ("agenda-6", 6)):
    open(name + ".fodp", "w").write(doc % (start, pages))
PY
for f in odp pptx; do office $f agenda.fodp; office $f agenda-6.fodp; done
# What no program here writes but Word does: its built-in "Article /
# Section" list (w:isLgl: "Section 1.01" under "Article I."), a level
# started again only by level 1 (w:lvlRestart 1) and one never (0), and a
# w:num that defines level 1 anew (w:lvlOverride/w:lvl: "Annex C:", as
# LibreOffice shows it, numbered on with the others).
python3 - <<'PY'
import zipfile
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
ct = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
      '<Default Extension="xml" ContentType="application/xml"/>'
      '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
      '<Override PartName="/word/numbering.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.numbering+xml"/></Types>')
rel = ('<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
       '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/%s" Target="%s"/></Relationships>')
def lvl(i, fmt, text, extra=""):
    return ('<w:lvl w:ilvl="%d"><w:start w:val="1"/><w:numFmt w:val="%s"/>%s<w:lvlText w:val="%s"/>'
            '<w:lvlJc w:val="left"/></w:lvl>' % (i, fmt, extra, text))
numbering = ('<w:abstractNum w:abstractNumId="0"><w:multiLevelType w:val="multilevel"/>'
             + lvl(0, "upperRoman", "Article %1.") + lvl(1, "decimalZero", "Section %1.%2", "<w:isLgl/>")
             + lvl(2, "lowerLetter", "(%3)", '<w:lvlRestart w:val="1"/>')
             + lvl(3, "decimal", "%4)", '<w:lvlRestart w:val="0"/>') + '</w:abstractNum>'
             '<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>'
             '<w:num w:numId="2"><w:abstractNumId w:val="0"/><w:lvlOverride w:ilvl="0">'
             '<w:lvl w:ilvl="0"><w:start w:val="5"/><w:numFmt w:val="upperLetter"/>'
             '<w:lvlText w:val="Annex %1:"/></w:lvl></w:lvlOverride></w:num>')
items = [(1, 0, "Moorings"), (1, 1, "Fees"), (1, 2, "Trawlers"), (1, 3, "Nets"), (1, 1, "Berths"),
         (1, 2, "Yachts"), (1, 3, "Sails"), (1, 0, "Pilotage"), (1, 1, "Pilots"), (1, 2, "Boarding"),
         (1, 3, "Ladders"), (2, 0, "Tariffs"), (2, 1, "Dues"), (2, 0, "Charts"), (1, 0, "Customs")]
body = "".join('<w:p><w:pPr><w:numPr><w:ilvl w:val="%d"/><w:numId w:val="%d"/></w:numPr></w:pPr>'
               '<w:r><w:t>%s</w:t></w:r></w:p>' % (k, n, t) for n, k, t in items)
with zipfile.ZipFile("legal.docx", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("[Content_Types].xml", ct)
    z.writestr("_rels/.rels", rel % ("officeDocument", "word/document.xml"))
    z.writestr("word/_rels/document.xml.rels", rel % ("numbering", "numbering.xml"))
    z.writestr("word/numbering.xml", "<w:numbering %s>%s</w:numbering>" % (W, numbering))
    z.writestr("word/document.xml", "<w:document %s><w:body>%s</w:body></w:document>" % (W, body))
PY
cat > review.fodt <<'FODT'
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:body><office:text>
<text:tracked-changes><text:changed-region text:id="ct1"><text:deletion><office:change-info><dc:creator>Reviewer</dc:creator><dc:date>2024-05-03T10:00:00</dc:date></office:change-info><text:p>obsolete lighthouse paragraph removed</text:p></text:deletion></text:changed-region></text:tracked-changes>
<text:p>The harbour master inspected the <text:change text:change-id="ct1"/>breakwater after the storm.<draw:frame text:anchor-type="paragraph" svg:width="6cm" svg:height="2cm" svg:x="1cm" svg:y="1cm"><draw:text-box><text:p>Boxed warning about spring tides</text:p></draw:text-box></draw:frame></text:p>
<text:p>Kept sentence about moorings.</text:p>
</office:text></office:body></office:document>
FODT
office docx review.fodt
office doc review.fodt
python3 - <<'PY'
import struct
def cfb(b):
    """The sector size, the offset of a sector, the FAT and the directory
    entries by name (their offsets) of a small compound file (no DIFAT
    sectors)."""
    ss = 1 << struct.unpack_from("<H", b, 30)[0]
    off = lambda s: (s + 1) * ss
    fat = []
    for k in range(struct.unpack_from("<I", b, 44)[0]):
        fs = struct.unpack_from("<I", b, 76 + 4 * k)[0]
        fat += struct.unpack_from("<%dI" % (ss // 4), b, off(fs))
    ents, s = {}, struct.unpack_from("<I", b, 48)[0]
    while s < 0xfffffffa:
        for i in range(ss // 128):
            e = off(s) + 128 * i
            n = struct.unpack_from("<H", b, e + 64)[0]
            ents[b[e:e + n - 2].decode("utf-16-le")] = e
        s = fat[s]
    return ss, off, fat, ents
def fat_at(b, ss, off, s):
    fs = struct.unpack_from("<I", b, 76 + 4 * (s // (ss // 4)))[0]
    return off(fs) + 4 * (s % (ss // 4))
b = bytearray(open("notes.doc", "rb").read())
ss, off, fat, ents = cfb(b)
wd = ents["WordDocument"]
start = struct.unpack_from("<I", b, wd + 116)[0]
loop = bytearray(b)
struct.pack_into("<I", loop, fat_at(b, ss, off, fat[fat[start]]), start)
open("loop.doc", "wb").write(loop)
huge = bytearray(b)
struct.pack_into("<I", huge, wd + 120, 0xfffffff0)
open("huge.doc", "wb").write(huge)
enc = bytearray(b)
enc[off(start) + 11] |= 0x01 # fEncrypted
open("encrypted.doc", "wb").write(enc)
# The first half, then the FAT and directory sectors, moved there.
cut = bytearray(b[:len(b) // 2 // ss * ss])
nfat = struct.unpack_from("<I", b, 44)[0]
fats = [struct.unpack_from("<I", b, 76 + 4 * k)[0] for k in range(nfat)]
dirs, s = [], struct.unpack_from("<I", b, 48)[0]
while s < 0xfffffffa:
    dirs.append(s)
    s = fat[s]
moved = {}
for s in fats + dirs:
    moved[s] = len(cut) // ss - 1
    cut += b[off(s):off(s) + ss]
newfat = list(fat) + [0xffffffff] * len(moved)
for s in fats:
    newfat[moved[s]] = 0xfffffffd
for i, s in enumerate(dirs):
    newfat[moved[s]] = moved[dirs[i + 1]] if i + 1 < len(dirs) else 0xfffffffe
for k, s in enumerate(fats):
    struct.pack_into("<I", cut, 76 + 4 * k, moved[s])
    struct.pack_into("<%dI" % (ss // 4), cut, off(moved[s]),
                     *newfat[k * ss // 4:(k + 1) * ss // 4])
struct.pack_into("<I", cut, 48, moved[dirs[0]])
open("truncated.doc", "wb").write(cut)
PY

iconv -f UTF-8 -t UTF-16LE cc0.txt | { printf '\xff\xfe'; cat; } > cc0-utf16.txt
gzip -9n < cc0.txt > cc0.txt.gz

printf 'Quarter,Region,Revenue\nfirst,northern territories,lighthouse\nsecond,southern provinces,harbour\n' > sheet.csv
office xlsx sheet.csv
office ods sheet.csv
office xls sheet.csv
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
office ppt slides.fodp
gzip -9n slides.ppt

python3 - <<'PY'
import base64, struct, zlib
NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
      'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
      'xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" '
      'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"')
def doc(kind, body, styles=""):
    return ('<?xml version="1.0" encoding="UTF-8"?><office:document %s office:version="1.2" '
            'office:mimetype="application/vnd.oasis.opendocument.%s">%s<office:body>%s'
            '</office:body></office:document>' % (NS, kind, styles, body))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"\0\x80\x80\x80\x80\x80\x80\x80\x80" * 8))
       + chunk(b"IEND", b""))
open("report.fodt", "w").write(doc("text", '<office:text>'
    '<text:table-of-content text:name="TOC"><text:table-of-content-source text:outline-level="1">'
    '<text:index-title-template>Contents</text:index-title-template></text:table-of-content-source>'
    '<text:index-body><text:index-title><text:p>Contents</text:p></text:index-title>'
    '<text:p>Tide gauges\t1</text:p></text:index-body></text:table-of-content>'
    '<text:h text:outline-level="1">Tide gauges</text:h>'
    '<text:p>The harbour keeps three tide gauges<text:note text:id="n1" text:note-class="footnote">'
    '<text:note-citation>1</text:note-citation><text:note-body><text:p>Calibrated by the '
    'Rosendahl instrument workshop.</text:p></text:note-body></text:note> and a weather '
    'station<text:note text:id="n2" text:note-class="endnote"><text:note-citation>i</text:note-citation>'
    '<text:note-body><text:p>Described in the Kattegat soundings survey.</text:p></text:note-body>'
    '</text:note> on the pier.</text:p>'
    '<text:p><draw:frame draw:name="Gauge" text:anchor-type="as-char" svg:width="2cm" '
    'svg:height="2cm"><draw:image><office:binary-data>%s</office:binary-data></draw:image>'
    '<svg:title>Gauge photograph</svg:title><svg:desc>Brass float mechanism beside the '
    'slipway</svg:desc></draw:frame>Readings are logged every ten minutes.</text:p>'
    '</office:text>' % base64.b64encode(png).decode()))
def row(cells):
    return "<table:table-row>%s</table:table-row>" % "".join(cells)
def s(t):
    return '<table:table-cell office:value-type="string"><text:p>%s</text:p></table:table-cell>' % t
def d(v):
    return ('<table:table-cell table:style-name="ce1" office:value-type="date" '
            'office:date-value="%s"><text:p>%s</text:p></table:table-cell>' % (v, v))
def f(v):
    return '<table:table-cell office:value-type="float" office:value="%s"><text:p>%s</text:p></table:table-cell>' % (v, v)
open("voyages.fods", "w").write(doc("spreadsheet",
    '<office:spreadsheet><table:calculation-settings><table:null-date '
    'table:date-value="1904-01-01"/></table:calculation-settings><table:table table:name="Voyages">'
    + row([s("Voyage"), s("Departed"), s("Returned"), s("Tonnes")])
    + row([s("Lisbon crossing"), d("2023-03-02"), d("2023-03-19"), f(1840)])
    + row([s("Baltic circuit"), d("2023-06-11"), d("2023-07-04T12:00:00"), f(2210)])
    + '</table:table></office:spreadsheet>',
    '<office:styles><number:date-style style:name="N37"><number:year/><number:text>-'
    '</number:text><number:month/><number:text>-</number:text><number:day/></number:date-style>'
    '</office:styles><office:automatic-styles><style:style style:name="ce1" '
    'style:family="table-cell" style:data-style-name="N37"/></office:automatic-styles>'))
open("hidden.fodt", "w").write(doc("text",
    '<office:text><text:p>The ferry leaves the north quay at seven.<text:span text:style-name="Hid">'
    ' Reminder for the clerk: smuggled tobacco crates in shed four.</text:span> Tickets are sold '
    'on board.</text:p></office:text>',
    '<office:automatic-styles><style:style style:name="Hid" style:family="text">'
    '<style:text-properties text:display="none"/></style:style></office:automatic-styles>'))
open("harbour-zh.fodt", "w").write(doc("text", '<office:text>'
    '<text:h text:outline-level="1">港口年度报告</text:h><text:p>今年港口的货物吞吐量比去年增长了百分之十二。新码头于六月投入使用，大型集装箱船舶可以直接靠泊。'
    '渔民希望改善旧防波堤的照明，附近居民则对卡车噪音表示不满。市议会批准了仓库和海关大楼的翻新计划。</text:p>'
    '</office:text>'))
PY
office odt report.fodt
office docx report.fodt
office rtf report.fodt
office html report.fodt
office ods voyages.fods
office xlsx voyages.fods
for f in odt docx doc rtf; do office $f hidden.fodt; done
office odt harbour-zh.fodt
office pdf harbour-zh.fodt

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
with zipfile.ZipFile("nested-lists.docx", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("[Content_Types].xml", ct)
    # One list first, so that the inner lists are the ones that grow the
    # table (its 4th, 8th, ... 64th).
    z.writestr("word/numbering.xml", '<w:numbering %s><w:abstractNum w:abstractNumId="999"/>%s%s</w:numbering>' % (W, "".join(
        '<w:abstractNum w:abstractNumId="%d"><w:lvl w:ilvl="0"><w:abstractNum w:abstractNumId="%d"/>'
        '<w:start w:val="7"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%%1."/></w:lvl>'
        '</w:abstractNum>' % (i, 1000 + i) for i in range(40)), "".join(
        '<w:num w:numId="%d"><w:abstractNumId w:val="%d"/></w:num>' % (i + 1, i) for i in range(40))))
    z.writestr("word/document.xml", '<w:document %s><w:body>%s</w:body></w:document>' % (W, "".join(
        '<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="%d"/></w:numPr></w:pPr>'
        '<w:r><w:t>harbour rule %d</w:t></w:r></w:p>' % (i + 1, i) for i in range(40))))
with zipfile.ZipFile("spine.epub", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
    z.writestr("META-INF/container.xml",
               '<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0">'
               '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
               '</rootfiles></container>')
    z.writestr("OEBPS/content.opf",
               '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>'
               '<item id="p" href="p.xhtml" media-type="application/xhtml+xml"/></manifest><spine>'
               + '<itemref idref="p"/>' * 10000 + '</spine></package>')
    z.writestr("OEBPS/p.xhtml", "<html><body><p>" + "lighthouse keeper harbour " * 80000 + "</p></body></html>")
with zipfile.ZipFile("spine-blank.epub", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
    z.writestr("META-INF/container.xml",
               '<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0">'
               '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
               '</rootfiles></container>')
    z.writestr("OEBPS/content.opf",
               '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>'
               '<item id="p" href="p.xhtml" media-type="application/xhtml+xml"/></manifest><spine>'
               + '<itemref idref="p"/>' * 20000 + '</spine></package>')
    z.writestr("OEBPS/p.xhtml", "<html><body><!--" + "x" * 4000000 + "--></body></html>")
PY
head -c 1073741824 /dev/zero | bzip2 -9 > bomb.txt.bz2
head -c "$(($(stat -c %s cc0.pdf) / 2))" cc0.pdf > truncated.pdf
{ printf '%%PDF-1.7\n'; head -c 3000 /dev/urandom; } > garbage.pdf

mkdir -p "$out"
cp cc0.txt cc0.html cc0.docx cc0.odt cc0.epub cc0.pdf cc0-utf16.txt cc0.txt.gz \
   cc0.rtf cc0-edited.docx cc0-edited.pdf artistic.docx artistic.odt artistic.pdf \
   artistic.rtf memo-a.rtf memo-b.rtf flyer.rtf flyer.docx \
   cc0.doc cc0-edited.doc artistic.doc notes.docx notes.doc notes.html notes.epub \
   letterhead.odt letterhead.docx letterhead.html \
   commission.odt commission.docx commission.html links.odt links.docx links.html \
   review.docx review.doc report.odt report.docx report.rtf report.html \
   voyages.ods voyages.xlsx harbour-zh.odt harbour-zh.pdf \
   hidden.odt hidden.docx hidden.doc hidden.rtf \
   hidden-styles.odt hidden-styles.docx hidden-styles.doc hidden-styles.rtf \
   rules.txt rules.docx rules.odt rules.html outline.odt outline.docx outline.html \
   header-list.odt chapters.odt chapters.docx chapters-4.odt chapters-4.docx headings.odt \
   legal.docx \
   agenda.odp agenda.pptx agenda-6.odp agenda-6.pptx \
   loop.doc huge.doc truncated.doc encrypted.doc \
   sheet.xlsx sheet.ods sheet.xls slides.pptx slides.odp slides.ppt.gz \
   bomb.docx bomb.txt.bz2 entities.docx nested.docx nested-lists.docx spine.epub spine-blank.epub truncated.pdf garbage.pdf "$out/"
ls -l "$out"
