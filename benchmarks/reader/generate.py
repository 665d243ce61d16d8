"""Generate the reader question set: documents/, queries.jsonl, qrels.tsv, answers.jsonl.

Usage: python benchmarks/reader/generate.py [OUT]      (default: this folder)

Questions of the kinds the extractive reader got wrong on real documents (issue 14): figures next
to a quote that uses the same words, totals on receipts whose headers and footers also say "total"
or "amount", amounts next to rates ("VAT 7%  1.68"), table cells that prose around the table
also mentions, definitions among other definitions that name the same thing, dates next to other
dates, names after labels. Each answers.jsonl row carries the answer, its kind and its split:
``dev`` (tuned on) or ``test`` (held out, measured at the end only), alternating within each
document so both halves hold every kind of question.

Deterministic: reportlab runs in invariant mode and the scanned receipt is drawn without noise, so
re-running writes byte-identical files. All text, companies and figures are made up.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4, letter
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table

HERE = Path(__file__).resolve().parent
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
STYLES = getSampleStyleSheet()
BODY = ParagraphStyle("Body", parent=STYLES["BodyText"], fontSize=11, leading=15, spaceAfter=6)
GRID = [
    ("GRID", (0, 0), (-1, -1), 0.6, colors.black),
    ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dce6f1")),
    ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
]

# (document stem, page, question, expected answer, kind)
QUESTIONS: list[tuple[str, int, str, str, str]] = [
    # annual report: figures beside a CEO quote that repeats the question's words
    ("halcyon-annual-report", 1, "What were net sales in Q4 of fiscal 2022?", "$3.2 billion", "amount"),
    (
        "halcyon-annual-report",
        1,
        "What were Halcyon's net sales for the full fiscal year 2022?",
        "$11.8 billion",
        "amount",
    ),
    (
        "halcyon-annual-report",
        1,
        "What were diluted earnings per share in the fourth quarter?",
        "$1.07",
        "amount",
    ),
    ("halcyon-annual-report", 1, "How many stores did Halcyon operate at year end?", "1,046", "number"),
    ("halcyon-annual-report", 1, "Who is Halcyon's chief executive officer?", "Dana Whitfield", "name"),
    ("halcyon-annual-report", 2, "What was Halcyon's operating income in fiscal 2021?", "1,019", "table"),
    (
        "halcyon-annual-report",
        2,
        "How much did Halcyon spend on capital expenditures in 2022?",
        "402",
        "table",
    ),
    ("halcyon-annual-report", 2, "What was Halcyon's gross profit in 2022?", "4,371", "table"),
    # a café receipt (text layer): header, column heads, subtotal, VAT rate and amount, total
    ("copper-kettle-receipt", 1, "What was the TOTAL amount paid at the Copper Kettle?", "25.68", "total"),
    ("copper-kettle-receipt", 1, "How much VAT was charged on the Copper Kettle receipt?", "1.68", "amount"),
    ("copper-kettle-receipt", 1, "What was the subtotal on the Copper Kettle receipt?", "24.00", "total"),
    ("copper-kettle-receipt", 1, "What VAT rate did the Copper Kettle apply?", "7%", "rate"),
    (
        "copper-kettle-receipt",
        1,
        "How much did the smoked salmon bagel cost at the Copper Kettle?",
        "8.50",
        "amount",
    ),
    ("copper-kettle-receipt", 1, "On what date was the Copper Kettle receipt issued?", "14/03/2023", "date"),
    # a hardware store receipt, scanned (OCR)
    ("bolt-and-brace-receipt", 1, "What was the total at Bolt & Brace Hardware?", "48.66", "total"),
    ("bolt-and-brace-receipt", 1, "How much sales tax did Bolt & Brace charge?", "3.71", "amount"),
    ("bolt-and-brace-receipt", 1, "How much change was given at Bolt & Brace?", "1.34", "amount"),
    (
        "bolt-and-brace-receipt",
        1,
        "How much cash did the customer hand over at Bolt & Brace?",
        "50.00",
        "amount",
    ),
    # an invoice: labels with values, a line-item table, VAT, total due, terms with a rate
    ("larkspur-invoice", 1, "What is the total amount due on the Larkspur invoice?", "2,664.00", "total"),
    ("larkspur-invoice", 1, "How much VAT is charged on invoice INV-2291?", "444.00", "amount"),
    ("larkspur-invoice", 1, "When is payment of invoice INV-2291 due?", "2 November 2023", "date"),
    ("larkspur-invoice", 1, "How many hours of logo design did Larkspur bill?", "14", "table"),
    ("larkspur-invoice", 1, "Who is the Larkspur invoice billed to?", "Fenwick & Rowe", "name"),
    (
        "larkspur-invoice",
        1,
        "What interest rate applies to late payments on Larkspur invoices?",
        "8%",
        "rate",
    ),
    ("larkspur-invoice", 1, "What is the Larkspur invoice number?", "INV-2291", "name"),
    # a science centre guide: a floor directory table inside prose that mentions the same things
    ("meridian-guide", 1, "Which floor has the telescopes?", "Level 4", "table"),
    ("meridian-guide", 1, "Which floor is the planetarium on?", "Level 3", "table"),
    ("meridian-guide", 1, "Which gallery has the wind tunnel?", "Energy and motion", "table"),
    ("meridian-guide", 1, "How much is adult admission to the Meridian Science Centre?", "£14.50", "amount"),
    ("meridian-guide", 1, "When did the Meridian Science Centre open?", "1994", "date"),
    ("meridian-guide", 1, "Which floor has the aquarium?", "Level 1", "table"),
    # language documentation: several statements defined, each also named in other definitions
    (
        "loop-statements-docs",
        1,
        "What does the break statement do?",
        "leaves the innermost enclosing loop",
        "definition",
    ),
    ("loop-statements-docs", 1, "What does the continue statement do?", "next iteration", "definition"),
    ("loop-statements-docs", 1, "What does the pass statement do?", "does nothing", "definition"),
    (
        "loop-statements-docs",
        1,
        "What does the return statement do?",
        "leaves the current function",
        "definition",
    ),
    ("loop-statements-docs", 1, "What does the raise statement do?", "signals an exception", "definition"),
    (
        "loop-statements-docs",
        1,
        "When does the else clause of a loop run?",
        "when the loop ends without a break",
        "definition",
    ),
    # board minutes: dates beside other dates, names after labels, amounts in prose
    ("rowing-club-minutes", 1, "When was the rowing club board meeting held?", "12 May 2022", "date"),
    ("rowing-club-minutes", 1, "When is the next rowing club board meeting?", "8 September 2022", "date"),
    ("rowing-club-minutes", 1, "Who chaired the rowing club board meeting?", "Margaret Osei", "name"),
    ("rowing-club-minutes", 1, "Who is the rowing club's treasurer?", "Alan Brooks", "name"),
    ("rowing-club-minutes", 1, "How much did membership fees raise in 2021?", "£18,400", "amount"),
    ("rowing-club-minutes", 1, "How many trustees attended the rowing club meeting?", "9", "number"),
    # a product sheet: key: value pairs and marketing text with other numbers
    ("aster-kettle-sheet", 1, "How much does the Aster kettle weigh?", "1.2 kg", "amount"),
    ("aster-kettle-sheet", 1, "What is the warranty period of the Aster kettle?", "2 years", "number"),
    ("aster-kettle-sheet", 1, "What is the power rating of the Aster kettle?", "3000 W", "amount"),
    ("aster-kettle-sheet", 1, "What is the price of the Aster kettle?", "£49.99", "amount"),
    ("aster-kettle-sheet", 1, "How long is the Aster kettle's power cord?", "0.75 m", "amount"),
]


def annual_report(path: Path) -> None:
    pdf = Canvas(str(path), pagesize=letter, invariant=1)
    pdf.setFont("Helvetica-Bold", 20)
    pdf.drawString(72, 720, "Halcyon Home Goods, Inc.")
    pdf.setFont("Helvetica", 13)
    pdf.drawString(72, 698, "Fiscal 2022 Annual Report: Fourth Quarter and Full Year Highlights")
    callouts = [
        ("Q4 Fiscal 2022 Net Sales", "$3.2 Billion"),
        ("Fiscal 2022 Net Sales", "$11.8 Billion"),
        ("Q4 Diluted Earnings per Share", "$1.07"),
        ("Stores Operated at Year End", "1,046"),
    ]
    y = 650
    for label, value in callouts:
        pdf.setFont("Helvetica", 11)
        pdf.drawString(72, y, label)
        pdf.setFont("Helvetica-Bold", 26)
        pdf.drawString(72, y - 30, value)
        y -= 70
    quote = (
        "\u201cOur fourth quarter was the strongest in our history. Net sales in the fourth quarter of "
        "fiscal 2022 grew faster than in any quarter before, our stores drew more visitors than ever, "
        "and we enter fiscal 2023 with real momentum,\u201d said Dana Whitfield, President and Chief "
        "Executive Officer of Halcyon Home Goods."
    )
    text = pdf.beginText(72, y - 10)
    text.setFont("Helvetica-Oblique", 12)
    text.setLeading(16)
    for line in _wrap(quote, 82):
        text.textLine(line)
    pdf.drawText(text)
    pdf.setFont("Helvetica", 11)
    text = pdf.beginText(72, y - 110)
    text.setFont("Helvetica", 11)
    text.setLeading(15)
    body = (
        "Net sales for the year grew 13 percent, with comparable sales up 9 percent. We opened 58 "
        "stores in the year and closed 12, and our online net sales passed one billion dollars for the "
        "first time. The board raised the quarterly dividend by 10 percent."
    )
    for line in _wrap(body, 90):
        text.textLine(line)
    pdf.drawText(text)
    pdf.showPage()

    pdf.setFont("Helvetica-Bold", 16)
    pdf.drawString(72, 720, "Selected Financial Data")
    text = pdf.beginText(72, 696)
    text.setFont("Helvetica", 11)
    text.setLeading(15)
    body = (
        "Operating income rose 18 percent in fiscal 2022 as gross profit grew faster than store "
        "costs. Capital expenditures went mostly to new stores and to the distribution centre in "
        "Reno. The table gives the figures in millions of dollars, except per share data."
    )
    for line in _wrap(body, 90):
        text.textLine(line)
    pdf.drawText(text)
    rows = [
        ["(in millions of dollars)", "2022", "2021"],
        ["Net sales", "11,812", "10,430"],
        ["Gross profit", "4,371", "3,859"],
        ["Operating income", "1,204", "1,019"],
        ["Net income", "886", "741"],
        ["Capital expenditures", "402", "377"],
        ["Diluted earnings per share", "3.98", "3.27"],
    ]
    table = Table(rows, colWidths=[200, 80, 80])
    table.setStyle(GRID + [("ALIGN", (1, 0), (-1, -1), "RIGHT")])
    _, height = table.wrapOn(pdf, 400, 400)
    table.drawOn(pdf, 72, 620 - height)
    pdf.showPage()
    pdf.save()


def copper_kettle(path: Path) -> None:
    width = 80 * mm
    pdf = Canvas(str(path), pagesize=(width, 150 * mm), invariant=1)
    left, right, y = 6 * mm, width - 6 * mm, 140 * mm

    def line(label: str, amount: str = "", font: str = "Courier", size: float = 8.5, step: float = 11):
        nonlocal y
        pdf.setFont(font, size)
        pdf.drawString(left, y, label)
        if amount:
            pdf.drawRightString(right, y, amount)
        y -= step

    pdf.setFont("Courier-Bold", 12)
    pdf.drawCentredString(width / 2, y, "THE COPPER KETTLE")
    y -= 13
    for text in ("Cafe & Bakery", "12 Harbour Street, Portsmouth", "VAT Reg. No. GB 284 7731 05"):
        pdf.setFont("Courier", 8.5)
        pdf.drawCentredString(width / 2, y, text)
        y -= 11
    y -= 6
    line("Receipt 004512", "14/03/2023 12:41")
    line("Table 7", "Server: Priya")
    y -= 4
    line("ITEM            QTY", "AMOUNT", font="Courier-Bold")
    for item, qty, amount in (
        ("Cappuccino", 2, "7.00"),
        ("Almond croissant", 2, "6.40"),
        ("Smoked salmon bagel", 1, "8.50"),
        ("Sparkling water", 1, "2.10"),
    ):
        line(f"{item:<19} {qty}", amount)
    y -= 4
    line("SUBTOTAL", "24.00")
    line("VAT 7%", "1.68")
    line("TOTAL", "25.68", font="Courier-Bold", size=10, step=13)
    line("Visa ****4417", "25.68")
    line("Items sold: 6")
    y -= 6
    for text in ("Total customer satisfaction", "is our promise. Thank you!", "Service charge not included"):
        pdf.setFont("Courier", 8.5)
        pdf.drawCentredString(width / 2, y, text)
        y -= 11
    pdf.showPage()
    pdf.save()


def bolt_and_brace(path: Path) -> None:
    """A receipt photographed flat: pixels only, so it is read by OCR."""
    image = Image.new("L", (620, 1040), 255)
    draw = ImageDraw.Draw(image)
    regular, bold = _font(24), _font(28, bold=True)
    y = 40
    for text in ("BOLT & BRACE HARDWARE", "401 Elm Avenue, Dayton OH", "Store 12  Register 3"):
        size = draw.textlength(text, font=bold if y == 40 else regular)
        draw.text(((620 - size) / 2, y), text, fill=0, font=bold if y == 40 else regular)
        y += 44
    y += 20
    rows = [
        ("06/21/2023  4:12 PM", ""),
        ("", ""),
        ("DESCRIPTION", "PRICE"),
        ("Wood screws 4x40 (200)", "$11.49"),
        ("Hinge, brass 3in x2", "$14.98"),
        ("Sandpaper assorted", "$6.99"),
        ("Wood glue 8oz", "$11.49"),
        ("", ""),
        ("SUBTOTAL", "$44.95"),
        ("SALES TAX 8.25%", "$3.71"),
        ("TOTAL", "$48.66"),
        ("CASH", "$50.00"),
        ("CHANGE", "$1.34"),
        ("", ""),
        ("ITEMS 5", ""),
    ]
    for label, amount in rows:
        font = bold if label in ("TOTAL", "DESCRIPTION") else regular
        if label:
            draw.text((40, y), label, fill=0, font=font)
        if amount:
            draw.text((580 - draw.textlength(amount, font=font), y), amount, fill=0, font=font)
        y += 44
    for text in ("Returns within 30 days with receipt", "Thank you for shopping with us"):
        draw.text(((620 - draw.textlength(text, font=regular)) / 2, y), text, fill=0, font=regular)
        y += 40
    image.save(path, optimize=True)


def larkspur_invoice(path: Path) -> None:
    pdf = Canvas(str(path), pagesize=A4, invariant=1)
    top = A4[1] - 60
    pdf.setFont("Helvetica-Bold", 16)
    pdf.drawString(56, top, "Larkspur Design Studio")
    pdf.setFont("Helvetica-Bold", 22)
    pdf.drawRightString(540, top, "INVOICE")
    pdf.setFont("Helvetica", 10)
    pdf.drawString(56, top - 16, "44 Mill Lane, Bristol BS1 4QA")
    fields = [
        ("Invoice number:", "INV-2291"),
        ("Invoice date:", "3 October 2023"),
        ("Due date:", "2 November 2023"),
        ("Bill to:", "Fenwick & Rowe Ltd, 9 Quay Road, Cardiff"),
    ]
    y = top - 60
    for label, value in fields:
        pdf.setFont("Helvetica-Bold", 10)
        pdf.drawString(56, y, label)
        pdf.setFont("Helvetica", 10)
        pdf.drawString(150, y, value)
        y -= 15
    rows = [
        ["Description", "Hours", "Rate", "Amount"],
        ["Brand identity workshop", "6", "95.00", "570.00"],
        ["Logo design", "14", "95.00", "1,330.00"],
        ["Print-ready artwork", "4", "80.00", "320.00"],
    ]
    table = Table(rows, colWidths=[220, 60, 80, 100])
    table.setStyle(GRID + [("ALIGN", (1, 0), (-1, -1), "RIGHT")])
    _, height = table.wrapOn(pdf, 500, 400)
    y -= 20
    table.drawOn(pdf, 56, y - height)
    y -= height + 24
    for label, value, font in (
        ("Subtotal", "2,220.00", "Helvetica"),
        ("VAT (20%)", "444.00", "Helvetica"),
        ("Total due (GBP)", "2,664.00", "Helvetica-Bold"),
    ):
        pdf.setFont(font, 10)
        pdf.drawString(370, y, label)
        pdf.drawRightString(516, y, value)
        y -= 16
    y -= 20
    text = pdf.beginText(56, y)
    text.setFont("Helvetica", 9)
    text.setLeading(13)
    terms = (
        "Payment terms: 30 days from the invoice date. Late payments incur interest at 8% per year "
        "above the Bank of England base rate. Please quote the invoice number with your payment. "
        "Bank: Avon Mutual, account 41772301, sort code 20-45-77."
    )
    for line in _wrap(terms, 100):
        text.textLine(line)
    pdf.drawText(text)
    pdf.showPage()
    pdf.save()


def meridian_guide(path: Path) -> None:
    story = [
        Paragraph("Meridian Science Centre: Visitor Guide", STYLES["Title"]),
        Paragraph(
            "The Meridian Science Centre opened in 1994 in a former grain warehouse by the river. Its "
            "telescopes are the best-loved part of a visit: on clear Friday evenings volunteers from "
            "the astronomy society help visitors point the telescopes at the moon and the planets, and "
            "the planetarium runs a short show before each session.",
            BODY,
        ),
        Paragraph(
            "Opening hours: 10:00 to 17:30, Tuesday to Sunday. Admission: adults £14.50, children and "
            "students £8.00, under fives free. Annual membership costs £45 for a family.",
            BODY,
        ),
        Spacer(1, 8),
        Paragraph("Floor directory", STYLES["Heading2"]),
    ]
    rows = [
        ["Floor", "Gallery", "Highlights"],
        ["Level G", "Entrance hall", "Foucault pendulum, shop"],
        ["Level 1", "Living planet", "Aquarium, weather station"],
        ["Level 2", "Energy and motion", "Wind tunnel, Tesla coil"],
        ["Level 3", "Space gallery", "Planetarium dome"],
        ["Level 4", "Observation deck", "Two reflecting telescopes"],
    ]
    table = Table(rows, colWidths=[70, 140, 200], hAlign="LEFT")
    table.setStyle(GRID)
    story += [
        table,
        Spacer(1, 10),
        Paragraph(
            "Lifts reach every floor. The aquarium is fed at 11:00 and 15:00, and the wind tunnel "
            "demonstration starts every half hour.",
            BODY,
        ),
    ]
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title="Visitor guide").build(story)


def loop_docs(path: Path) -> None:
    sections = [
        (
            "7.1 The break statement",
            "The break statement leaves the innermost enclosing loop at once, and the loop's else "
            "clause, if there is one, is skipped. A break may appear only inside a for or while loop.",
        ),
        (
            "7.2 The continue statement",
            "The continue statement skips the rest of the loop body and goes on with the next "
            "iteration of the innermost enclosing loop. Like break, it may appear only inside a loop.",
        ),
        (
            "7.3 The else clause on loops",
            "A for or while loop may have an else clause. The else clause runs when the loop ends "
            "without a break: after the last item of a for loop, or once the condition of a while loop "
            "becomes false. When a break statement ends the loop, or a return statement leaves the "
            "function, the else clause does not run.",
        ),
        (
            "7.4 The pass statement",
            "The pass statement does nothing. It fills a place where the grammar needs a statement "
            "but the program needs no action, such as an empty class or a loop body to be written later.",
        ),
        (
            "7.5 The return statement",
            "The return statement leaves the current function call with the value of its expression, "
            "or with None when it has none. A return inside a try statement with a finally clause "
            "runs the finally clause before the function is left.",
        ),
        (
            "7.6 The raise statement",
            "The raise statement signals an exception, which travels up the call stack until a "
            "matching except clause handles it. A bare raise inside an except clause raises the "
            "exception being handled again.",
        ),
    ]
    story = [Paragraph("Chapter 7: Simple and loop statements", STYLES["Title"])]
    for heading, text in sections:
        story += [Paragraph(heading, STYLES["Heading3"]), Paragraph(text, BODY)]
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title="Loop statements").build(story)


def rowing_minutes(path: Path) -> None:
    story = [
        Paragraph("Harbourside Rowing Club: Minutes of the Board of Trustees", STYLES["Title"]),
        Paragraph("<b>Date:</b> Thursday 12 May 2022, 19:00", BODY),
        Paragraph("<b>Place:</b> Clubhouse, Quay Road, Falmouth", BODY),
        Paragraph("<b>Chair:</b> Margaret Osei", BODY),
        Paragraph("<b>Secretary:</b> Tom Reddy", BODY),
        Paragraph("<b>Present:</b> 9 trustees; apologies from 2", BODY),
        Paragraph("1. Finance", STYLES["Heading3"]),
        Paragraph(
            "The treasurer, Alan Brooks, reported that membership fees raised £18,400 in 2021, up from "
            "£15,900 in 2020, and that the boat fund stood at £6,250 on 30 April 2022.",
            BODY,
        ),
        Paragraph("2. Equipment", STYLES["Heading3"]),
        Paragraph(
            "The new coxless four, ordered on 3 March 2022, is expected to arrive in August. The board "
            "agreed to sell the two oldest sculls for no less than £900 each.",
            BODY,
        ),
        Paragraph("3. Next meeting", STYLES["Heading3"]),
        Paragraph(
            "The next meeting of the board will be held on 8 September 2022 at the clubhouse. The "
            "chair closed the meeting at 20:45.",
            BODY,
        ),
    ]
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title="Board minutes").build(story)


def kettle_sheet(path: Path) -> None:
    story = [
        Paragraph("Aster Rapid-Boil Kettle", STYLES["Title"]),
        Paragraph(
            "The Aster boils a full kettle in under four minutes and a single cup in 45 seconds. Its "
            "stainless steel body keeps water hot for 30 minutes after boiling, and the lid opens to "
            "70 degrees so it can be filled under any tap.",
            BODY,
        ),
        Paragraph("Specifications", STYLES["Heading2"]),
    ]
    for label, value in (
        ("Capacity", "1.7 litres"),
        ("Power", "3000 W"),
        ("Weight", "1.2 kg"),
        ("Cord length", "0.75 m"),
        ("Warranty", "2 years"),
        ("Price", "£49.99"),
    ):
        story.append(Paragraph(f"<b>{label}:</b> {value}", BODY))
    story.append(
        Paragraph(
            "Order before 2 pm for next-day delivery. Spare filters cost £4.99 for a pack of two, and "
            "the kettle weighs less than most 1.5 litre models.",
            BODY,
        )
    )
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title="Aster kettle").build(story)


BUILDERS = {
    "halcyon-annual-report.pdf": annual_report,
    "copper-kettle-receipt.pdf": copper_kettle,
    "bolt-and-brace-receipt.png": bolt_and_brace,
    "larkspur-invoice.pdf": larkspur_invoice,
    "meridian-guide.pdf": meridian_guide,
    "loop-statements-docs.pdf": loop_docs,
    "rowing-club-minutes.pdf": rowing_minutes,
    "aster-kettle-sheet.pdf": kettle_sheet,
}


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line else lines


def _font(size: int, bold: bool = False):
    path = FONT_DIR / ("DejaVuSansMono-Bold.ttf" if bold else "DejaVuSansMono.ttf")
    return ImageFont.truetype(str(path), size) if path.exists() else ImageFont.load_default(size=size)


def questions() -> list[dict]:
    """The question set: id, question, page id, answer, kind, split."""
    rows, seen = [], {}
    for stem, page, question, answer, kind in QUESTIONS:
        n = seen[stem] = seen.get(stem, -1) + 1
        rows.append(
            {
                "_id": f"r{len(rows) + 1:02d}",
                "question": question,
                "page_id": f"{stem}_{page}",
                "answer": answer,
                "kind": kind,
                "split": "dev" if n % 2 == 0 else "test",
            }
        )
    return rows


def generate(out: Path = HERE, documents: Path | None = None) -> Path:
    """Write the dataset files into ``out`` and the documents into ``documents`` (``out/documents``)."""
    documents = documents or out / "documents"
    documents.mkdir(parents=True, exist_ok=True)
    for name, build in BUILDERS.items():
        build(documents / name)
    rows = questions()
    with (out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({"_id": row["_id"], "text": row["question"]}, ensure_ascii=False) + "\n")
    with (out / "qrels.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for row in rows:
            handle.write(f"{row['_id']}\t{row['page_id']}\t1\n")
    with (out / "answers.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            answer = {key: row[key] for key in ("_id", "answer", "kind", "split")}
            handle.write(json.dumps(answer, ensure_ascii=False) + "\n")
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    generate(target)
    for path in sorted((target / "documents").iterdir()):
        print(f"{path.name:30} {path.stat().st_size:>9,} bytes")
    print(f"{len(QUESTIONS)} questions")
