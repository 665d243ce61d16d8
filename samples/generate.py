"""Generate the deterministic pagesight sample corpus into samples/corpus/.

Usage: python samples/generate.py [--verify]

Re-running produces byte-identical files: the random seed is fixed and reportlab
runs in invariant mode (no timestamps or random document ids). All prose is
original. It also writes samples/boxes.jsonl, where on its page each answer lies:
found in the text layer of the born-digital PDFs, and for the images from where
the text was drawn (through the scans' rotation). ``--verify`` also checks that
the memo PDF has no text layer and prints what RapidOCR reads from the scanned
images.
"""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageColor, ImageDraw, ImageFont
from reportlab.graphics.charts.barcharts import VerticalBarChart
from reportlab.graphics.shapes import Drawing, Group, String
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Flowable, PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table

SEED = 20240611
OUT = Path(__file__).resolve().parent / "corpus"
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
A4_150DPI = (1240, 1754)
STYLES = getSampleStyleSheet()
BODY = ParagraphStyle("Body", parent=STYLES["BodyText"], fontSize=11, leading=15.5, spaceAfter=4)

# One dict per page of the primer: heading -> paragraph.
PRIMER: list[dict[str, str]] = [
    {
        "Indexing page screenshots": (
            "Instead of trusting the text layer of a file, a visual retriever looks at each page the "
            "way a reader would. The renderer stores every page as a PNG at 150 dots per inch, which "
            "keeps small print legible without producing enormous files. Tall pages are cut into tiles "
            "of 1024 pixels so that no single image overwhelms the vision encoder."
        ),
        "Why pictures instead of text": (
            "Charts, stamps, handwriting and scanned forms often carry no extractable text at all. "
            "Treating the page as a picture means a table and its grid lines, or a bar chart and its "
            "axis labels, are indexed together with the words around them. A page that loses its layout "
            "also loses meaning."
        ),
        "Keeping track of pages": (
            "Every page receives a stable identifier made of the document stem and the page number, "
            "counted from one. A small thumbnail of 256 pixels on the longest side is kept next to the "
            "full render so that result lists can be drawn quickly. Re-indexing a file whose checksum "
            "has not changed is skipped."
        ),
    },
    {
        "Lexical search with BM25": (
            "BM25 scores a page by how often the query terms appear in it, discounted for very common "
            "words and for unusually long pages. The BM25 parameter k1 is usually set to 1.2, which "
            "limits how much a repeated term can help, and the length normalisation parameter b is "
            "usually set to 0.75."
        ),
        "Where lexical search shines": (
            "Exact identifiers such as part numbers, invoice codes or surnames are matched precisely by "
            "a lexical index, even when they mean nothing to a neural model. An inverted index over "
            "OCR text can be searched in a few milliseconds and needs no graphics card."
        ),
        "Where it struggles": (
            "A reader who asks about income will not find a page that only says revenue. Spelling "
            "errors introduced by optical character recognition make matters worse, because a single "
            "misread letter turns a word into a term that no query will ever contain."
        ),
    },
    {
        "Dense embeddings": (
            "A dense retriever maps both the question and the page into vectors and ranks pages by "
            "cosine similarity. A 384-dimensional embedding stored as 32-bit floats takes 1,536 bytes, "
            "so one million pages fit in about one and a half gigabytes. Similar meanings land close "
            "together even when the words differ."
        ),
        "Reciprocal rank fusion": (
            "Lexical and dense rankings disagree in useful ways, and reciprocal rank fusion combines "
            "them without calibrating their scores. Each page earns one divided by the sum of k and its "
            "rank in every list, and the sums are added. The reciprocal rank fusion constant k is "
            "usually set to 60, which keeps a single first place from dominating the fused list."
        ),
        "Measuring the result": (
            "A fixed set of questions with known answer pages makes changes measurable. Recall at five "
            "counts how often the right page appears among the first five results, and it is the number "
            "to watch when tuning the fusion step."
        ),
    },
]

REVENUE: dict[str, list[int]] = {  # thousands of euros, Q1..Q4
    "North": [3120, 3340, 3515, 3960],
    "South": [2480, 2610, 2395, 2740],
    "East": [3905, 4020, 4150, 4310],
    "West": [4215, 4460, 4870, 4605],
}
UNITS_SHIPPED: dict[str, int] = {
    "Lenses": 8200,
    "Mirrors": 5400,
    "Prisms": 12400,
    "Filters": 6900,
}

FIELD_NOTES = [
    "NORTHWIND OPTICS - FIELD NOTES",
    "Site visit, Lab 2, Tuesday 14 May",
    "",
    "Calibration bench 7 drifted by 0.4 millimetres overnight.",
    "Bench 3 and bench 5 stayed within tolerance.",
    "Humidity in the coating room read 41 percent at 9 am.",
    "Lens blank lot 22K was quarantined for surface haze.",
    "The new polishing pads last about 180 cycles.",
    "Technician Ines Varga recalibrated the autocollimator.",
    "Spare mirror mounts are stored in cabinet C4.",
    "Next inspection is planned for the first week of June.",
    "Signed: M. Okafor, quality lead",
]
MEMO = [
    "MEMO - Northwind Optics purchasing",
    "To: all production staff",
    "",
    "From 1 March we change our supplier of optical glass.",
    "Halvorsen Glassworks replaces Brightmere Supply.",
    "Halvorsen quoted a lead time of 12 working days.",
    "Open orders with Brightmere will still be delivered.",
    "Questions go to purchasing, extension 2215.",
]
INFOGRAPHIC: list[tuple[str, str, list[str]]] = [  # heading, band colour, lines
    ("Northwind Optics", "#1f4e79", ["Precision optics since 2011", "Four product lines", "Three factories"]),
    ("Our people", "#2e8b57", ["212 employees", "38 optical engineers", "Training day every Friday"]),
    ("Production", "#c46210", ["Lenses, mirrors, prisms, filters", "ISO 7 clean room", "Two shifts a day"]),
    ("Quality", "#803691", ["Every lens is measured twice", "Return rate below 0.8 percent"]),
    ("Logistics", "#b22234", ["Warehouse Delta ships 1,200 orders a day", "Same-day dispatch before 2 pm"]),
]


def font(size: int, bold: bool = False) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    path = FONT_DIR / ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")
    return ImageFont.truetype(str(path), size) if path.exists() else ImageFont.load_default(size=size)


def build_primer(path: Path) -> None:
    story: list[Flowable] = []
    for page_no, page in enumerate(PRIMER):
        if page_no:
            story.append(PageBreak())
        else:
            story.append(Paragraph("A Short Primer on Document Retrieval", STYLES["Title"]))
        for heading, text in page.items():
            story += [Paragraph(heading, STYLES["Heading2"]), Paragraph(text, BODY)]
    doc = SimpleDocTemplate(
        str(path), pagesize=A4, invariant=1, title="Retrieval primer", author="Northwind Optics"
    )
    doc.build(story)


def bar_chart() -> Drawing:
    drawing = Drawing(16 * cm, 10 * cm)
    chart = VerticalBarChart()
    chart.x, chart.y, chart.width, chart.height = 70, 50, 16 * cm - 100, 10 * cm - 100
    chart.data = [list(UNITS_SHIPPED.values())]
    chart.categoryAxis.categoryNames = list(UNITS_SHIPPED)
    chart.valueAxis.valueMin, chart.valueAxis.valueMax, chart.valueAxis.valueStep = 0, 14000, 2000
    chart.bars[0].fillColor = colors.HexColor("#1f4e79")
    drawing.add(chart)
    title = "Units shipped per product line, 2024"
    drawing.add(
        String(8 * cm, 10 * cm - 25, title, fontName="Helvetica-Bold", fontSize=13, textAnchor="middle")
    )
    drawing.add(String(70 + chart.width / 2, 12, "Product line", fontSize=10, textAnchor="middle"))
    y_label = String(0, 0, "Units shipped", fontSize=10, textAnchor="middle")
    drawing.add(Group(y_label, transform=(0, 1, -1, 0, 18, 50 + chart.height / 2)))
    return drawing


def build_report(path: Path) -> None:
    quarters = ["Q1", "Q2", "Q3", "Q4"]
    rows: list[list[str]] = [["Region", *quarters, "Total"]]
    for region, values in REVENUE.items():
        rows.append([region, *(f"{v:,}" for v in values), f"{sum(values):,}"])
    totals = [sum(col) for col in zip(*REVENUE.values(), strict=True)]
    rows.append(["All regions", *(f"{v:,}" for v in totals), f"{sum(totals):,}"])
    table = Table(rows, colWidths=[3.2 * cm] + [2.4 * cm] * 5)
    table.setStyle(
        [
            ("GRID", (0, 0), (-1, -1), 0.7, colors.black),
            ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dce6f1")),
            ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
            ("FONTNAME", (0, -1), (-1, -1), "Helvetica-Bold"),
            ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
        ]
    )
    story = [
        Paragraph("Northwind Optics - Quarterly Report 2024", STYLES["Title"]),
        Paragraph("Revenue by region (thousands of euros)", STYLES["Heading2"]),
        table,
        Spacer(1, 0.5 * cm),
        Paragraph(
            "The West region had the strongest third quarter, helped by a large "
            "order of telescope mirrors. South dipped in Q3 while a warehouse "
            "was being moved.",
            BODY,
        ),
        PageBreak(),
        Paragraph("Shipments by product line", STYLES["Heading2"]),
        bar_chart(),
        Paragraph(
            "Prisms were the largest product line, with twelve thousand four "
            "hundred units shipped during the year.",
            BODY,
        ),
    ]
    SimpleDocTemplate(
        str(path), pagesize=A4, invariant=1, title="Quarterly report", author="Northwind Optics"
    ).build(story)


def typed_page(
    lines: list[str], rng: np.random.Generator, angle: float, size: tuple[int, int] = A4_150DPI
) -> Image.Image:
    """Render lines as a typed page, then rotate it and add paper tone and noise."""
    page = Image.new("L", size, 255)
    draw = ImageDraw.Draw(page)
    y = 160
    for i, line in enumerate(lines):
        draw.text((130, y), line, fill=20, font=font(34 if i == 0 else 30, bold=i == 0))
        y += 64
    page = page.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=255)
    pixels = np.asarray(page, dtype=np.float32) * (224 / 255)  # grey-white paper
    pixels += rng.normal(0.0, 4.5, pixels.shape)
    # Quantise to steps of 16 (paper tone 224 sits on a step): keeps a light
    # speckle but compresses well.
    pixels = np.round(pixels / 16) * 16
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")


def drawn_box(lines: list[str], answer: str, origin, step: int, fonts) -> tuple[float, float, float, float]:
    """Where ``answer`` was drawn among ``lines``, the first at ``origin`` and each ``step`` pixels
    below the last, line ``i`` in ``fonts(i)``."""
    draw = ImageDraw.Draw(Image.new("L", (1, 1)))
    (i, line), *_ = [(i, line) for i, line in enumerate(lines) if answer in line]
    xy = (origin[0], origin[1] + i * step)
    x0 = xy[0] + draw.textlength(line[: line.index(answer)], font=fonts(i))
    _, top, _, bottom = draw.textbbox(xy, line, font=fonts(i))
    return x0, top, x0 + draw.textlength(answer, font=fonts(i)), bottom


def rotated(box, angle: float, size: tuple[int, int]) -> tuple[float, float, float, float]:
    """The bounding box of ``box`` after ``Image.rotate(angle)`` of an image of ``size``."""
    cx, cy = size[0] / 2, size[1] / 2
    cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    corners = [(x - cx, y - cy) for x in (box[0], box[2]) for y in (box[1], box[3])]
    moved = [(cx + dx * cos + dy * sin, cy - dx * sin + dy * cos) for dx, dy in corners]
    xs, ys = [x for x, _ in moved], [y for _, y in moved]
    return min(xs), min(ys), max(xs), max(ys)


def typed_font(i: int):
    return font(34 if i == 0 else 30, bold=i == 0)


def text_layer_boxes(path: Path, page: int, answer: str) -> list[tuple[float, float, float, float]]:
    """The boxes of ``answer``'s characters in the text layer of ``path``'s page (from 1), in
    points from the page's top left, a box a line."""
    import pypdfium2 as pdfium

    found = pdfium.PdfDocument(str(path))[page - 1]
    text = found.get_textpage()
    start, count = text.search(answer, match_case=True).get_next()
    height = found.get_height()
    rects = [text.get_rect(i) for i in range(text.count_rects(start, count))]
    return [(left, height - top, right, height - bottom) for left, bottom, right, top in rects]


def write_boxes(path: Path) -> None:
    """boxes.jsonl: each answer's gold boxes on its page (``pagesight.eval.dataset``), in points
    on a PDF's page and in pixels on an image, one annotator."""
    answers = {row["_id"]: row["answer"] for row in map(json.loads, (OUT.parent / "answers.jsonl").open())}
    pages = dict(line.split("\t")[:2] for line in (OUT.parent / "qrels.tsv").read_text().splitlines()[1:])
    scale = (A4[0] / A4_150DPI[0], A4[1] / A4_150DPI[1])  # the memo's image fills its page
    typed = {
        "field-notes-scan": (FIELD_NOTES, 1.1, (1.0, 1.0)),
        "scanned-memo": (MEMO, -0.8, scale),
    }
    rows = []
    for qid, corpus_id in pages.items():
        stem, page = corpus_id.rsplit("_", 1)
        answer = answers[qid]
        if stem in typed:
            lines, angle, (sx, sy) = typed[stem]
            x0, y0, x1, y1 = rotated(drawn_box(lines, answer, (130, 160), 64, typed_font), angle, A4_150DPI)
            boxes = [(x0 * sx, y0 * sy, x1 * sx, y1 * sy)]
        elif stem == "long-infographic":
            (i, (_, _, lines)), *_ = [(i, s) for i, s in enumerate(INFOGRAPHIC) if answer in " ".join(s[2])]
            boxes = [drawn_box(lines, answer, (40, i * 520 + 170), 70, lambda _: font(32))]
        else:
            boxes = text_layer_boxes(OUT / f"{stem}.pdf", int(page), answer)
        rows += [
            {"_id": qid, "corpus_id": corpus_id, "annotator": 0, "box": [round(v, 1) for v in box]}
            for box in boxes
        ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def build_memo_pdf(image: Image.Image, path: Path) -> None:
    png = io.BytesIO()
    image.save(png, format="PNG", optimize=True)
    canvas = Canvas(str(path), pagesize=A4, invariant=1, pageCompression=1)
    canvas.drawImage(ImageReader(png), 0, 0, width=A4[0], height=A4[1])
    canvas.showPage()
    canvas.save()


def build_infographic(path: Path) -> None:
    width, section_h = 800, 520
    image = Image.new("RGB", (width, section_h * len(INFOGRAPHIC)), "white")
    draw = ImageDraw.Draw(image)
    for i, (heading, colour, lines) in enumerate(INFOGRAPHIC):
        top = i * section_h
        tint = tuple(c + (255 - c) * 7 // 8 for c in ImageColor.getrgb(colour))
        draw.rectangle((0, top + 10, width, top + section_h - 10), fill=tint)
        draw.rectangle((0, top + 10, width, top + 130), fill=colour)
        draw.text((40, top + 38), heading, fill="white", font=font(54, bold=True))
        for j, line in enumerate(lines):
            draw.text((40, top + 170 + j * 70), line, fill=(25, 25, 25), font=font(32))
    image.quantize(colors=32, dither=Image.Dither.NONE).save(path, optimize=True)


def verify() -> None:
    """Check the memo has no text layer, print OCR of the scans, check every answer is findable."""
    import json

    import pypdfium2 as pdfium
    from rapidocr import RapidOCR

    engine = RapidOCR(params={"Global.use_cls": False})

    def ocr(image: Image.Image) -> str:
        return "\n".join(engine(np.asarray(image.convert("RGB"))).txts or ())

    memo = pdfium.PdfDocument(str(OUT / "scanned-memo.pdf"))
    if memo[0].get_textpage().get_text_range().strip():
        raise SystemExit("scanned-memo.pdf must not have a text layer")
    page_text: dict[tuple[str, int], str] = {}
    for path in sorted(OUT.iterdir()):
        if path.suffix == ".png":
            page_text[path.stem, 1] = ocr(Image.open(path))
            continue
        for number, page in enumerate(pdfium.PdfDocument(str(path)), start=1):
            text = page.get_textpage().get_text_range().strip()
            page_text[path.stem, number] = text or ocr(page.render(scale=150 / 72).to_pil())
    for stem in ("field-notes-scan", "scanned-memo", "long-infographic"):
        print(f"== OCR {stem}\n{page_text[stem, 1]}")
    flat = {f"{doc}_{page}": " ".join(text.split()) for (doc, page), text in page_text.items()}
    answers = [json.loads(line) for line in (OUT.parent / "answers.jsonl").read_text().splitlines()]
    pages = {}
    for line in (OUT.parent / "qrels.tsv").read_text().splitlines()[1:]:
        qid, page_id, _ = line.split("\t")
        pages[qid] = page_id
    missing = [a for a in answers if a["answer"] not in flat[pages[a["_id"]]]]
    print(f"{len(answers) - len(missing)}/{len(answers)} answers found verbatim on their page")
    if missing:
        raise SystemExit(f"answers not found: {missing}")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    build_primer(OUT / "retrieval-primer.pdf")
    build_report(OUT / "quarterly-report.pdf")
    typed_page(FIELD_NOTES, rng, angle=1.1).save(OUT / "field-notes-scan.png", optimize=True)
    build_memo_pdf(typed_page(MEMO, rng, angle=-0.8), OUT / "scanned-memo.pdf")
    build_infographic(OUT / "long-infographic.png")
    write_boxes(OUT.parent / "boxes.jsonl")
    for path in sorted(OUT.iterdir()):
        print(f"{path.name:24} {path.stat().st_size:>9,} bytes")
    if "--verify" in sys.argv[1:]:
        verify()


if __name__ == "__main__":
    main()
