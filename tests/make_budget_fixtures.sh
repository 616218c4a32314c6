#!/usr/bin/env bash
# Regenerate the spreadsheets of tests/data/formats/ (committed; CI does not
# run this): budgets whose labels are the same and whose figures are the
# content. Needs LibreOffice (soffice) and python3.
#   budget-2024.xlsx/.ods   40 budget lines: four quarters in euros (some
#                   with cents), a row total and column totals (formulas), a
#                   change on the plan (percentage), a due date and whether
#                   it is approved (boolean), from one flat ODS
#   budget-2025.xlsx/.ods   the same labels and headings, every figure and
#                   date different
#   budget-2024-fix.xlsx    2024 with one figure corrected (and the totals
#                   its formulas recompute)
#   budget-2024.xls, budget-2025.xls   the same as Excel 97-2003 workbooks
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/data/formats
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp # LibreOffice writes its profile there
cd "$tmp"

office() { soffice --headless --convert-to "$1" --outdir "$tmp" "$2" >/dev/null 2>&1; }

python3 - <<'PY'
import random

LINES = """Office rent; Electricity; Heating oil; Water and sewage; Cleaning
contract; Building insurance; Liability insurance; Vehicle leasing; Fuel
cards; Vehicle maintenance; Staff salaries; Pension contributions; Health
insurance; Training courses; Recruitment agency; Travel expenses; Hotel
stays; Conference fees; Printing and stationery; Postage and courier;
Telephone lines; Mobile contracts; Internet connection; Software licences;
Cloud hosting; Laptop replacement; Printer toner; Furniture; Legal advice;
Audit fees; Bank charges; Loan interest; Marketing campaign; Trade fair
stand; Website redesign; Charity donations; Staff canteen; Christmas party;
Security service; Contingency reserve""".replace("\n", " ").split(";")
LINES = [l.strip() for l in LINES]
assert len(LINES) == 40

NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
      'xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" '
      'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
      'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2"')
STYLES = (
    '<office:automatic-styles>'
    '<number:number-style style:name="N2"><number:number number:decimal-places="2" '
    'number:min-integer-digits="1" number:grouping="true"/></number:number-style>'
    '<number:currency-style style:name="C1"><number:number number:decimal-places="2" '
    'number:min-integer-digits="1" number:grouping="true"/><number:text> </number:text>'
    '<number:currency-symbol number:language="de" number:country="DE">€</number:currency-symbol>'
    '</number:currency-style>'
    '<number:boolean-style style:name="B1"><number:boolean/></number:boolean-style>'
    '<number:percentage-style style:name="P1"><number:number number:decimal-places="1" '
    'number:min-integer-digits="1"/><number:text>%</number:text></number:percentage-style>'
    '<number:date-style style:name="D1"><number:day number:style="long"/><number:text> '
    '</number:text><number:month number:textual="true"/><number:text> </number:text>'
    '<number:year number:style="long"/></number:date-style>'
    '<style:style style:name="cN" style:family="table-cell" style:data-style-name="N2"/>'
    '<style:style style:name="cC" style:family="table-cell" style:data-style-name="C1"/>'
    '<style:style style:name="cB" style:family="table-cell" style:data-style-name="B1"/>'
    '<style:style style:name="cP" style:family="table-cell" style:data-style-name="P1"/>'
    '<style:style style:name="cD" style:family="table-cell" style:data-style-name="D1"/>'
    '</office:automatic-styles>')


def text(s):
    return '<table:table-cell office:value-type="string"><text:p>%s</text:p></table:table-cell>' % s


def num(v, formula=None):
    f = ' table:formula="of:=%s"' % formula if formula else ""
    return ('<table:table-cell table:style-name="cN"%s office:value-type="float" '
            'office:value="%r"><text:p>%s</text:p></table:table-cell>' % (f, v, "{:,.2f}".format(v)))


def eur(v):
    return ('<table:table-cell table:style-name="cC" office:value-type="currency" '
            'office:currency="EUR" office:value="%r"><text:p>{:,.2f} €</text:p></table:table-cell>'
            .format(v) % v)


def boolean(v):
    return ('<table:table-cell table:style-name="cB" office:value-type="boolean" '
            'office:boolean-value="%s"><text:p>%s</text:p></table:table-cell>'
            % (("true", "TRUE") if v else ("false", "FALSE")))


def pct(v):
    return ('<table:table-cell table:style-name="cP" office:value-type="percentage" '
            'office:value="%r"><text:p>%.1f%%</text:p></table:table-cell>' % (v, v * 100))


def date(y, m, d):
    return ('<table:table-cell table:style-name="cD" office:value-type="date" '
            'office:date-value="%04d-%02d-%02d"><text:p>%d %02d %d</text:p></table:table-cell>'
            % (y, m, d, d, m, y))


def sheet(name, year, figures, changes, days):
    rows = ['<table:table-row>' + "".join(text(h) for h in (
        "Budget line", "First quarter", "Second quarter", "Third quarter",
        "Fourth quarter", "Year total", "Change on plan", "Payment due",
        "Approved")) + '</table:table-row>']
    for i, line in enumerate(LINES):
        r = i + 2
        q = figures[i]
        rows.append('<table:table-row>' + text(line) + "".join(eur(v) for v in q)
                    + num(round(sum(q), 2), "SUM([.B%d:.E%d])" % (r, r))
                    + pct(changes[i]) + date(year, 1 + days[i] % 12, 1 + days[i] % 28)
                    + boolean(days[i] % 3 != 0) + '</table:table-row>')
    cols = ["B", "C", "D", "E", "F"]
    totals = [round(sum(f[c] for f in figures), 2) for c in range(4)]
    totals.append(round(sum(totals), 2))
    rows.append('<table:table-row>' + text("Total") + "".join(
        num(t, "SUM([.%s2:.%s41])" % (c, c)) for c, t in zip(cols, totals)) + '</table:table-row>')
    return ('<?xml version="1.0" encoding="UTF-8"?><office:document %s office:version="1.3" '
            'office:mimetype="application/vnd.oasis.opendocument.spreadsheet">%s'
            '<office:body><office:spreadsheet><table:table table:name="%s">%s</table:table>'
            '</office:spreadsheet></office:body></office:document>'
            % (NS, STYLES, name, "".join(rows)))


def budget(seed):
    rnd = random.Random(seed)
    figures = []
    for i in range(40):
        base = rnd.choice([80, 450, 1200, 3600, 9800, 24000])
        # Some lines are budgeted to the cent, most in whole amounts.
        cents = i % 5 == 0
        figures.append([round(base * rnd.uniform(0.7, 1.3), 2 if cents else 0)
                        for _ in range(4)])
    changes = [round(rnd.uniform(-0.2, 0.2), 3) for _ in range(40)]
    days = [rnd.randrange(365) for _ in range(40)]
    return figures, changes, days


f24, c24, d24 = budget(2024)
f25, c25, d25 = budget(2025)
for a, b in zip(f24, f25):
    assert all(x != y for x, y in zip(a, b))
open("budget-2024.fods", "w").write(sheet("Budget 2024", 2024, f24, c24, d24))
open("budget-2025.fods", "w").write(sheet("Budget 2025", 2025, f25, c25, d25))
f24[17][2] += 150  # Travel expenses, third quarter: one corrected figure
open("budget-2024-fix.fods", "w").write(sheet("Budget 2024", 2024, f24, c24, d24))
PY
for b in budget-2024 budget-2025; do
	office xlsx $b.fods
	office ods $b.fods
	office xls $b.fods
done
office xlsx budget-2024-fix.fods

mkdir -p "$out"
cp budget-2024.xlsx budget-2024.ods budget-2025.xlsx budget-2025.ods \
   budget-2024-fix.xlsx budget-2024.xls budget-2025.xls "$out/"
ls -l "$out"/budget-*
