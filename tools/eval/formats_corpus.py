#!/usr/bin/env python3
"""One document, every format: do its versions link?

  tools/eval/formats_corpus.py make WORK
  tools/eval/formats_corpus.py table --imatch PATH [--diffs N] WORK

make: writes 22 source documents as flat OpenDocument (.fodt,
.fods, .fodp) or HTML to WORK/src, each with the features real documents
have (headings, lists, merged table cells, headers and footers, footnotes
and endnotes, comments, tracked changes, fields and a table of contents,
text boxes, hidden text, hyperlinks, images with alt text, columns, Greek,
Cyrillic and CJK text, ligatures and hyphenation, several sheets, a 1904
date system, a slide deck with notes), and has LibreOffice (soffice, with
HOME in a temporary directory) save each in every format it writes for
that kind of document: text docx doc odt rtf pdf html txt; sheets xlsx
xls ods csv pdf html; slides pptx ppt odp pdf. The files land in
WORK/out/NAME.EXT. The body text of most documents is a stretch of a
licence in tests/data/demo/licenses; the text of each feature has words
of its own, so a term one format has and another lacks names the feature.

table: `imatch terms` of every file and `imatch explain` (lexicon built
from WORK/out) of every pair of formats of one source; prints the
format x format table (pairs linked / pairs, least cosine of the term
sets) and every pair that does not link, with the terms each side has
and the other lacks (--diffs N of each, default 12).

python3 stdlib only; soffice only for make. Nothing here is a test.
"""

import argparse
import base64
import itertools
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
LIC = os.path.join(HERE, "..", "..", "tests", "data", "demo", "licenses")

TEXT_FMTS = ["docx", "doc", "odt", "rtf", "pdf", "html", "txt"]
SHEET_FMTS = ["xlsx", "xls", "ods", "csv", "pdf", "html"]
SLIDE_FMTS = ["pptx", "ppt", "odp", "pdf"]
# soffice --convert-to names: the filter "Save as" picks for each.
FILTER = {"doc": "doc:MS Word 97", "xls": "xls:MS Excel 97",
          "ppt": "ppt:MS PowerPoint 97", "txt": "txt:Text (encoded):UTF8"}

NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
      'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
      'xmlns:xlink="http://www.w3.org/1999/xlink" '
      'xmlns:dc="http://purl.org/dc/elements/1.1/" '
      'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
      'xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" '
      'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
      'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
      'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" '
      'xmlns:config="urn:oasis:names:tc:opendocument:xmlns:config:1.0"')


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def body(name, words=220):
    """A stretch of about WORDS words of licence NAME, as paragraphs."""
    with open(os.path.join(LIC, name), encoding="utf-8") as fh:
        paras = [" ".join(p.split()) for p in fh.read().split("\n\n")]
    out, n = [], 0
    for p in paras:
        if len(p.split()) < 12:
            continue
        out.append(p)
        n += len(p.split())
        if n >= words:
            break
    return out


def ps(paras, style=None):
    st = ' text:style-name="%s"' % style if style else ""
    return "".join("<text:p%s>%s</text:p>" % (st, esc(p)) for p in paras)


def png():
    """A 16x16 grey PNG."""
    def chunk(t, d):
        c = t + d
        return struct.pack(">I", len(d)) + c + struct.pack(">I", zlib.crc32(c))
    raw = b"".join(b"\0" + bytes([128] * 16) for _ in range(16))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", 16, 16, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def fodt(content, styles="", auto="", master="", meta=""):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<office:document %s '
            'office:version="1.2" office:mimetype="application/vnd.oasis.'
            'opendocument.text"><office:meta>%s</office:meta>'
            '<office:styles>%s</office:styles>'
            '<office:automatic-styles>%s</office:automatic-styles>'
            '<office:master-styles>%s</office:master-styles>'
            '<office:body><office:text>%s</office:text></office:body>'
            '</office:document>\n' % (NS, meta, styles, auto, master, content))


def h(level, t):
    return ('<text:h text:outline-level="%d">%s</text:h>' % (level, esc(t)))


def items(lst, numbered=False):
    return "<text:list>%s</text:list>" % "".join(
        "<text:list-item>%s</text:list-item>" % (
            items(i) if isinstance(i, list) else "<text:p>%s</text:p>" % esc(i))
        for i in lst)


def docs():
    """{name: (kind, source text)}"""
    d = {}
    d["structure"] = fodt(
        h(1, "Quarterly dredging programme") + ps(body("Apache-2.0")[:2])
        + h(2, "Priorities for the estuary channel")
        + items(["Survey sandbanks near the eastern jetty",
                 "Replace corroded bollards along quay seven",
                 ["Order galvanised anchors", "Schedule divers for inspection"],
                 "Publish tide tables for fishermen"])
        + h(2, "Budget notes") + ps(body("Apache-2.0")[2:4]))
    cells = [["Vessel", "Tonnage", "Berth"],
             ["Marigold trawler", "340", "north"],
             ["Osprey ferry", "1200", "south"]]
    rows = "".join("<table:table-row>%s</table:table-row>" % "".join(
        '<table:table-cell office:value-type="string"><text:p>%s</text:p>'
        '</table:table-cell>' % esc(c) for c in r) for r in cells)
    merged = ('<table:table-row><table:table-cell table:number-columns-spanned="2" '
              'office:value-type="string"><text:p>Combined harbour dues collected '
              'by wharfinger</text:p></table:table-cell><table:covered-table-cell/>'
              '<table:table-cell office:value-type="string"><text:p>pending audit'
              '</text:p></table:table-cell></table:table-row>')
    d["table"] = fodt(
        ps(body("BSD")) + '<table:table table:name="Berths">'
        '<table:table-column table:number-columns-repeated="3"/>'
        + rows + merged + "</table:table>" + ps(body("MPL-2.0", 80)))
    master = ('<style:master-page style:name="Standard" style:page-layout-name="pm1">'
              '<style:header><text:p>Meridian Shipping Consultancy confidential '
              'assessment</text:p></style:header><style:footer><text:p>Page '
              '<text:page-number text:select-page="current">1</text:page-number>'
              ' prepared by Halvorsen cartography bureau</text:p></style:footer>'
              '</style:master-page>')
    auto = ('<style:page-layout style:name="pm1"><style:page-layout-properties '
            'fo:page-width="21cm" fo:page-height="29.7cm"/><style:header-style/>'
            '<style:footer-style/></style:page-layout>')
    d["headfoot"] = fodt(ps(body("GPL-2", 260)), auto=auto, master=master)
    d["footnotes"] = fodt(
        "<text:p>%s<text:note text:id=\"n1\" text:note-class=\"footnote\">"
        "<text:note-citation>1</text:note-citation><text:note-body><text:p>"
        "Archival ledger from the customs warehouse, catalogued by Pemberton."
        "</text:p></text:note-body></text:note> %s<text:note text:id=\"n2\" "
        "text:note-class=\"endnote\"><text:note-citation>i</text:note-citation>"
        "<text:note-body><text:p>Endnote citing the admiralty gazetteer and "
        "Rasmussen's survey of shoals.</text:p></text:note-body></text:note>"
        "</text:p>%s" % (esc(body("LGPL-2.1")[0]), esc(body("LGPL-2.1")[1]),
                         ps(body("LGPL-2.1")[2:4])))
    d["comments"] = fodt(
        "<text:p>%s<office:annotation><dc:creator>Ingrid Solberg</dc:creator>"
        "<dc:date>2024-05-02T10:00:00</dc:date><text:p>Reviewer query: verify "
        "the quarantine figures with the veterinary inspectorate before "
        "circulation.</text:p></office:annotation></text:p>%s"
        % (esc(body("GPL-3")[0]), ps(body("GPL-3")[1:4])))
    tc = ('<text:tracked-changes>'
          '<text:changed-region text:id="ct1"><text:deletion><office:change-info>'
          '<dc:creator>Reviewer</dc:creator><dc:date>2024-05-03T10:00:00</dc:date>'
          '</office:change-info><text:p>Obsolete paragraph about sandbag '
          'levees and pumping stations withdrawn.</text:p></text:deletion>'
          '</text:changed-region><text:changed-region text:id="ct2"><text:insertion>'
          '<office:change-info><dc:creator>Reviewer</dc:creator><dc:date>'
          '2024-05-03T10:05:00</dc:date></office:change-info></text:insertion>'
          '</text:changed-region></text:tracked-changes>')
    d["tracked"] = fodt(
        tc + "<text:p>%s <text:change text:change-id=\"ct1\"/>"
        "<text:change-start text:change-id=\"ct2\"/>Inserted clause naming the "
        "floodplain commissioner.<text:change-end text:change-id=\"ct2\"/></text:p>%s"
        % (esc(body("MPL-1.1")[0]), ps(body("MPL-1.1")[1:4])))
    meta = ("<dc:title>Lighthouse keepers handbook</dc:title>"
            "<meta:initial-creator>Thorvald Eriksen</meta:initial-creator>"
            "<dc:subject>Maritime signalling</dc:subject>")
    toc = ('<text:table-of-content text:name="TOC"><text:table-of-content-source '
           'text:outline-level="2"><text:index-title-template>Contents'
           '</text:index-title-template></text:table-of-content-source>'
           '<text:index-body><text:index-title><text:p>Contents</text:p>'
           '</text:index-title><text:p>Beacon maintenance\t1</text:p>'
           '<text:p>Fog signals\t1</text:p></text:index-body>'
           '</text:table-of-content>')
    d["fields"] = fodt(
        toc + h(1, "Beacon maintenance")
        + "<text:p>Title: <text:title>Lighthouse keepers handbook</text:title>, "
        "author <text:initial-creator>Thorvald Eriksen</text:initial-creator>, "
        "printed <text:date style:data-style-name=\"N1\" text:date-value="
        "\"2024-03-15\">03/15/24</text:date>, page <text:page-number "
        "text:select-page=\"current\">1</text:page-number> of <text:page-count>"
        "1</text:page-count>.</text:p>" + ps(body("GFDL-1.3")[:2])
        + h(1, "Fog signals") + ps(body("GFDL-1.3")[2:4]), meta=meta)
    d["frames"] = fodt(
        "<text:p><draw:frame draw:name=\"Box\" text:anchor-type=\"paragraph\" "
        "svg:width=\"6cm\" svg:height=\"3cm\"><draw:text-box><text:p>Sidebar: "
        "pilotage exemptions for coastal schooners under ninety metres."
        "</text:p></draw:text-box></draw:frame>%s</text:p>%s"
        % (esc(body("LGPL-3")[0]), ps(body("LGPL-3")[1:4])))
    auto = ('<style:style style:name="Hid" style:family="text"><style:text-properties '
            'text:display="none"/></style:style>')
    d["hidden"] = fodt(
        "<text:p>%s<text:span text:style-name=\"Hid\"> Concealed remark about "
        "smuggled tobacco crates.</text:span></text:p>"
        "<text:p>%s<text:hidden-text text:condition=\"ooow:1\" "
        "text:string-value=\"Draft marker for the embargo negotiators\" "
        "text:is-hidden=\"true\"/></text:p>"
        "<text:hidden-paragraph text:condition=\"ooow:1\" text:is-hidden=\"true\"/>"
        "%s" % (esc(body("Artistic")[0]), esc(body("Artistic")[1]),
                ps(body("Artistic")[2:5])), auto=auto)
    d["hidden"] = d["hidden"].replace(
        '<text:hidden-paragraph text:condition="ooow:1" text:is-hidden="true"/>',
        '<text:p><text:hidden-paragraph text:condition="ooow:1" '
        'text:is-hidden="true"/>Hidden paragraph listing contraband '
        'warehouses.</text:p>')
    d["links"] = fodt(
        "<text:p>%s See the <text:a xlink:type=\"simple\" xlink:href="
        "\"https://example.org/registry/vessels\">national vessel registry</text:a> "
        "and <text:a xlink:type=\"simple\" xlink:href=\"mailto:harbourmaster@"
        "example.org\">write to the harbourmaster</text:a>.</text:p>%s"
        % (esc(body("GPL-1")[0]), ps(body("GPL-1")[1:4])))
    img = base64.b64encode(png()).decode()
    d["images"] = fodt(
        "<text:p>%s<draw:frame draw:name=\"Chart\" text:anchor-type=\"as-char\" "
        "svg:width=\"2cm\" svg:height=\"2cm\"><draw:image><office:binary-data>%s"
        "</office:binary-data></draw:image><svg:title>Cormorant colony photograph"
        "</svg:title><svg:desc>Aerial photograph of nesting cormorants on the "
        "breakwater</svg:desc></draw:frame></text:p>%s"
        % (esc(body("GFDL-1.2")[0]), img, ps(body("GFDL-1.2")[1:4])))
    auto = ('<style:style style:name="Sect1" style:family="section">'
            '<style:section-properties><style:columns fo:column-count="2" '
            'fo:column-gap="0.5cm"/></style:section-properties></style:style>')
    d["columns"] = fodt(
        h(1, "Newsletter of the rowing club")
        + '<text:section text:style-name="Sect1" text:name="S1">'
        + ps(body("LGPL-2", 300)) + "</text:section>", auto=auto)
    d["greek"] = fodt(
        h(1, "Ετήσια έκθεση του λιμεναρχείου") + ps([
            "Το λιμάνι της πόλης δέχθηκε φέτος περισσότερα πλοία από κάθε "
            "άλλη χρονιά. Οι εργασίες βυθοκόρησης ολοκληρώθηκαν πριν από την "
            "έναρξη της τουριστικής περιόδου και η νέα προβλήτα άνοιξε τον Ιούνιο.",
            "Οι αλιείς ζήτησαν καλύτερο φωτισμό στον παλιό μώλο, ενώ οι κάτοικοι "
            "παραπονέθηκαν για τον θόρυβο των φορτηγών. Το δημοτικό συμβούλιο "
            "ενέκρινε σχέδιο για την ανακαίνιση της αποθήκης και του τελωνείου.",
            "Η επόμενη έκθεση θα περιλαμβάνει στοιχεία για την κίνηση των "
            "επιβατών, τα έσοδα από τα τέλη ελλιμενισμού και την κατάσταση του "
            "φάρου στην είσοδο του κόλπου."]))
    d["cyrillic"] = fodt(
        h(1, "Отчёт о состоянии городской библиотеки") + ps([
            "В этом году библиотека получила более трёх тысяч новых книг, "
            "большую часть которых передали жители района. Читальный зал "
            "отремонтировали летом, и теперь он открыт до девяти вечера.",
            "Сотрудники провели серию лекций по истории края и организовали "
            "кружок для школьников. Особым успехом пользовались встречи с "
            "местными писателями и выставка старинных карт.",
            "В следующем году планируется оцифровать архив газет, заменить "
            "устаревшие компьютеры и расширить детский отдел."]))
    d["cjk"] = fodt(
        h(1, "港口年度报告") + ps([
            "今年港口的货物吞吐量比去年增长了百分之十二。新码头于六月投入使用，"
            "大型集装箱船舶可以直接靠泊。",
            "渔民希望改善旧防波堤的照明，附近居民则对卡车噪音表示不满。"
            "市议会批准了仓库和海关大楼的翻新计划。",
            "東京湾の灯台は来年改修される予定です。観光客の増加に伴い、"
            "フェリーの運航本数も増やします。",
            "내년 보고서에는 승객 수와 항만 요금 수입이 포함될 것입니다."]))
    auto = ('<style:style style:name="Just" style:family="paragraph">'
            '<style:paragraph-properties fo:text-align="justify"/>'
            '<style:text-properties fo:hyphenate="true" fo:language="en" '
            'fo:country="GB" fo:hyphenation-remain-char-count="2" '
            'fo:hyphenation-push-char-count="2"/></style:style>'
            '<style:style style:name="Sect1" style:family="section">'
            '<style:section-properties><style:columns fo:column-count="3" '
            'fo:column-gap="0.3cm"/></style:section-properties></style:style>')
    d["typography"] = fodt(
        '<text:section text:style-name="Sect1" text:name="S1">'
        + ps(["The official office affirmed that efficient, fluent staff "
              "find difficult offices baffling; the fjord's fiftyfold ferry "
              "traffic and waffling officials scuffled over affluent "
              "flagship finances, \u201cinflexible\u201d but fit."]
             + body("MPL-2.0", 260), "Just") + "</text:section>", auto=auto)
    d["index"] = fodt(
        h(1, "Glossary of navigation")
        + "<text:p>The <text:alphabetical-index-mark text:string-value="
        "\"sextant\"/>sextant and the chronometer<text:bookmark text:name="
        "\"chron\"/> let a navigator fix longitude; see <text:bookmark-ref "
        "text:reference-format=\"text\" text:ref-name=\"chron\">chronometer"
        "</text:bookmark-ref>.</text:p>" + ps(body("Apache-2.0")[4:8]))
    d["memo"] = fodt(
        "<text:p>To: all wardens</text:p><text:p>Subject: reopening of the "
        "heathland trails</text:p>" + ps(body("CC0-1.0", 260)))
    d["sheets"] = ("fods", fods_sheets())
    d["dates1904"] = ("fods", fods_1904())
    d["deck"] = ("fodp", fodp_deck())
    d["webpage"] = ("html", html_page())
    return {k: (v if isinstance(v, tuple) else ("fodt", v)) for k, v in d.items()}


def cell(v):
    if isinstance(v, tuple):  # a formula and its cached result
        return ('<table:table-cell table:formula="of:%s" office:value-type="float" '
                'office:value="%s"><text:p>%s</text:p></table:table-cell>'
                % (esc(v[0]), v[1], v[1]))
    if isinstance(v, str) and v.startswith("@"):
        return ('<table:table-cell office:value-type="date" office:date-value="%s" '
                'table:style-name="D"><text:p>%s</text:p></table:table-cell>'
                % (v[1:], v[1:]))
    if isinstance(v, (int, float)):
        return ('<table:table-cell office:value-type="float" office:value="%s">'
                '<text:p>%s</text:p></table:table-cell>' % (v, v))
    return ('<table:table-cell office:value-type="string"><text:p>%s</text:p>'
            '</table:table-cell>' % esc(v))


def sheet(name, rows, hidden=False):
    st = ' table:style-name="Hidden"' if hidden else ""
    # columns wide enough for their text, as a sheet meant to be printed
    cols = ('<table:table-column table:style-name="co1" '
            'table:number-columns-repeated="%d"/>' % max(len(r) for r in rows))
    body = "".join("<table:table-row>%s</table:table-row>"
                   % "".join(cell(c) for c in r) for r in rows)
    return ('<table:table table:name="%s"%s>%s%s</table:table>'
            % (name, st, cols, body))


FODS_STYLES = ('<number:date-style style:name="N37"><number:year/><number:text>-'
               '</number:text><number:month/><number:text>-</number:text>'
               '<number:day/></number:date-style>')
FODS_AUTO = ('<style:style style:name="D" style:family="table-cell" '
             'style:data-style-name="N37"/>'
             '<style:style style:name="co1" style:family="table-column">'
             '<style:table-column-properties style:column-width="4.5cm"/>'
             '</style:style>'
             '<style:style style:name="Hidden" style:family="table" '
             'style:master-page-name="Default"><style:table-properties '
             'table:display="false"/></style:style>')


def fods(tables, settings=""):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<office:document %s '
            'office:version="1.2" office:mimetype="application/vnd.oasis.'
            'opendocument.spreadsheet"><office:styles>%s</office:styles>'
            '<office:automatic-styles>%s</office:automatic-styles>'
            '<office:body><office:spreadsheet>%s%s</office:spreadsheet>'
            '</office:body></office:document>\n'
            % (NS, FODS_STYLES, FODS_AUTO, settings, tables))


def fods_sheets():
    inv = [["Item", "Supplier", "Quantity", "Unit price", "Total"]]
    goods = [("Mooring rope", "Kessler chandlery", 12, 48.5),
             ("Navigation lamp", "Brightwater marine", 4, 129.99),
             ("Life jacket", "Okonkwo safety", 30, 39.0),
             ("Bilge pump", "Varga hydraulics", 2, 310.25),
             ("Signal flares", "Castellan pyrotechnics", 24, 7.8)]
    for i, (a, b, q, p) in enumerate(goods):
        inv.append([a, b, q, p, ("=[.C%d]*[.D%d]" % (i + 2, i + 2),
                                 round(q * p, 2))])
    staff = [["Name", "Role", "Started"],
             ["Astrid Lindqvist", "harbour pilot", "@2019-04-01"],
             ["Mateus Ferreira", "crane operator", "@2021-09-15"],
             ["Nkechi Adeyemi", "customs clerk", "@2023-01-09"]]
    notes = [["Remarks"], ["Inventory audited by the quartermaster in March"],
             ["Spare parts ordered from the Rotterdam depot"]]
    secret = [["Salary review withheld pending union arbitration"]]
    return fods(sheet("Inventory", inv) + sheet("Staff", staff)
                + sheet("Notes", notes) + sheet("Payroll", secret, hidden=True))


def fods_1904():
    settings = ('<table:calculation-settings><table:null-date '
                'table:date-value="1904-01-01"/></table:calculation-settings>')
    rows = [["Voyage", "Departed", "Returned", "Cargo tonnes"],
            ["Lisbon crossing", "@2023-03-02", "@2023-03-19", 1840],
            ["Baltic circuit", "@2023-06-11", "@2023-07-04", 2210],
            ["Azores supply run", "@2023-10-20", "@2023-11-02", 960]]
    return fods(sheet("Voyages", rows), settings)


def fodp_deck():
    slides = [("Harbour modernisation plan", ["Replace the swing bridge",
               "Deepen the turning basin", "Electrify the container cranes"],
               "Mention the ministry grant and the environmental permit."),
              ("Timeline and milestones", ["Tendering closes in autumn",
               "Construction starts next spring"],
               "Stress that the ferry timetable stays unchanged during works."),
              ("Questions", ["Contact the project office"],
               "Invite the fishermen's cooperative to the consultation.")]
    pages = []
    for i, (t, bl, n) in enumerate(slides):
        pages.append(
            '<draw:page draw:name="p%d" draw:master-page-name="Default" '
            'presentation:presentation-page-layout-name="AL1T1">'
            '<draw:frame presentation:class="title" svg:width="25cm" '
            'svg:height="3cm" svg:x="1cm" svg:y="1cm"><draw:text-box>'
            '<text:p>%s</text:p></draw:text-box></draw:frame>'
            '<draw:frame presentation:class="outline" svg:width="25cm" '
            'svg:height="12cm" svg:x="1cm" svg:y="5cm"><draw:text-box>%s'
            '</draw:text-box></draw:frame><presentation:notes>'
            '<draw:page-thumbnail presentation:class="page" svg:width="14cm" '
            'svg:height="10cm" svg:x="3cm" svg:y="2cm" draw:page-number="%d"/>'
            '<draw:frame presentation:class="notes" svg:width="16cm" '
            'svg:height="12cm" svg:x="2cm" svg:y="13cm"><draw:text-box>'
            '<text:p>%s</text:p></draw:text-box></draw:frame>'
            '</presentation:notes></draw:page>'
            % (i, esc(t), items(bl), i + 1, esc(n)))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<office:document %s '
            'office:version="1.2" office:mimetype="application/vnd.oasis.'
            'opendocument.presentation"><office:styles/><office:master-styles>'
            '<style:master-page style:name="Default"/></office:master-styles>'
            '<office:body><office:presentation>%s</office:presentation>'
            '</office:body></office:document>\n' % (NS, "".join(pages)))


def html_page():
    paras = "".join("<p>%s</p>" % esc(p) for p in body("BSD", 120))
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Marina '
            'berth allocation policy</title></head><body><h1>Marina berth '
            'allocation policy</h1>%s<h2>Waiting list</h2><ol><li>Residents of '
            'the parish</li><li>Members of the sailing association</li></ol>'
            '<table border="1"><tr><th>Berth</th><th>Length</th></tr><tr><td>'
            'Pontoon alpha</td><td>twelve metres</td></tr></table><p>Read the '
            '<a href="https://example.org/fees">schedule of mooring fees</a>.'
            '<img src="data:image/png;base64,%s" alt="Map of the pontoons"></p>'
            '</body></html>\n' % (paras, base64.b64encode(png()).decode()))


def make(work):
    src, out = os.path.join(work, "src"), os.path.join(work, "out")
    os.makedirs(src, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    byfmt = {}
    for name, (kind, text) in sorted(docs().items()):
        p = os.path.join(src, "%s.%s" % (name, kind))
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)
        fmts = {"fodt": TEXT_FMTS, "html": TEXT_FMTS, "fods": SHEET_FMTS,
                "fodp": SLIDE_FMTS}[kind]
        for f in fmts:
            byfmt.setdefault((kind, f), []).append(p)
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home)
        for (kind, f), paths in sorted(byfmt.items()):
            flt = FILTER.get(f, f)
            if kind == "html" and f == "html":
                for p in paths:  # already HTML: it is its own export
                    with open(p, "rb") as a, open(os.path.join(
                            out, os.path.basename(p)), "wb") as b:
                        b.write(a.read())
                continue
            cmd = ["soffice", "--headless"]
            if kind == "html":  # as Writer opens a page, not Writer/Web
                cmd += ["--infilter=HTML (StarWriter)"]
            subprocess.run(cmd + ["--convert-to", flt, "--outdir", out] + paths,
                           env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
    n = len(os.listdir(out))
    print("%d files in %s" % (n, out))


def terms(imatch, paths):
    r = subprocess.run([imatch, "terms"] + paths, capture_output=True,
                       text=True, check=True)
    u = {}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        u[f[0]] = set(f[1:])
    return u


def cosine(a, b):
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))


def table(imatch, work, ndiff):
    out = os.path.join(work, "out")
    files = sorted(os.path.join(out, f) for f in os.listdir(out))
    lex = os.path.join(work, "lexicon")
    subprocess.run([imatch, "lexicon", "build", "-o", lex, out],
                   capture_output=True, check=True)
    u = terms(imatch, files)
    bysrc = {}
    for p in files:
        name, ext = os.path.splitext(os.path.basename(p))
        if ext[1:] not in TEXT_FMTS + SHEET_FMTS + SLIDE_FMTS:
            continue  # an HTML export's image
        bysrc.setdefault(name, {})[ext[1:]] = p
    fmts = []
    for group in (TEXT_FMTS, SHEET_FMTS, SLIDE_FMTS):
        fmts += [f for f in group if f not in fmts]
    cells = {}
    misses = []
    for name, byext in sorted(bysrc.items()):
        for a, b in itertools.combinations(sorted(byext, key=fmts.index), 2):
            pa, pb = byext[a], byext[b]
            r = subprocess.run([imatch, "explain", "--lexicon", lex, pa, pb],
                               capture_output=True, text=True)
            linked = bool(re.search(r"^linked: yes", r.stdout, re.M))
            c = cosine(u.get(pa, set()), u.get(pb, set()))
            cells.setdefault((a, b), []).append((linked, c))
            if not linked:
                misses.append((name, a, b, c, u.get(pa, set()), u.get(pb, set())))
    print("| | " + " | ".join(fmts) + " |")
    print("|---" * (len(fmts) + 1) + "|")
    for a in fmts:
        row = []
        for b in fmts:
            v = cells.get((a, b)) or cells.get((b, a))
            if a == b or not v:
                row.append("")
            else:
                row.append("%d/%d %.2f" % (sum(x[0] for x in v), len(v),
                                           min(x[1] for x in v)))
        print("| %s | %s |" % (a, " | ".join(row)))
    tot = [x for v in cells.values() for x in v]
    print("\npairs linked: %d of %d\n" % (sum(x[0] for x in tot), len(tot)))
    for name, a, b, c, ua, ub in misses:
        print("%s: %s vs %s cosine %.3f (|U| %d, %d)" % (name, a, b, c,
                                                          len(ua), len(ub)))
        for side, d in ((a, sorted(ua - ub)), (b, sorted(ub - ua))):
            if d:
                print("  only %s (%d): %s%s" % (side, len(d), " ".join(d[:ndiff]),
                                                " ..." if len(d) > ndiff else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("work")
    t = sub.add_parser("table")
    t.add_argument("--imatch", required=True)
    t.add_argument("--diffs", type=int, default=12)
    t.add_argument("work")
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.work)
    else:
        table(a.imatch, a.work, a.diffs)


if __name__ == "__main__":
    sys.exit(main())
