"""A synthetic question-answering corpus whose answers sit at known places on rendered pages.

Each page describes a few fictional companies: one sentence per fact in prose paragraphs (some
facts start mid-line and run on to the next), with distractor sentences of the same form about the
other companies, and a quarterly revenue table. Every question comes with its answer and the
region of the page that holds it, computed from the typesetting (reportlab's font metrics), not
from pagesight's own text extraction, so readers can be measured on answer and box at once.

Needs reportlab (the ``eval`` extra).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from pagesight.records import Box

FIRST = [
    "Ada",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Elif",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kaia",
    "Lionel",
    "Mira",
    "Nils",
    "Oona",
    "Pavel",
]
LAST = [
    "Arden",
    "Brask",
    "Corvin",
    "Dunmore",
    "Ekholm",
    "Falk",
    "Garrow",
    "Holt",
    "Ivers",
    "Jansen",
    "Kestrel",
    "Lund",
    "Marlow",
    "Nyberg",
]
CITIES = [
    "Tromsby",
    "Calderon",
    "Ostrava",
    "Valmont",
    "Kirkwall",
    "Lisieux",
    "Brenner",
    "Aalborg",
    "Siena",
    "Tarbes",
    "Umeå",
    "Zadar",
]
STEMS = [
    "Ashgrove",
    "Bellwether",
    "Coldharbour",
    "Driftwood",
    "Emberline",
    "Foxglove",
    "Greywater",
    "Hollowmere",
    "Ironbark",
]
SUFFIXES = ["Instruments", "Logistics", "Ceramics", "Textiles", "Analytics", "Robotics", "Foods", "Optics"]
FILLER = [
    "The company reviews its suppliers every spring and publishes the results internally.",
    "Most of its customers are small manufacturers in the region around the main plant.",
    "A new training programme for apprentices started at the beginning of the season.",
    "Shipping costs rose slightly because of longer routes through the northern ports.",
    "The board meets four times a year and keeps minutes of every decision it takes.",
    "Its quality team audits each production line at least once in every quarter.",
]
QUARTERS = ("Q1", "Q2", "Q3", "Q4")

PAGE_W, PAGE_H, MARGIN = 612.0, 792.0, 72.0  # Letter, points
FONT, SIZE, LEADING = "Helvetica", 11, 16


@dataclass
class Question:
    id: str
    question: str
    answer: str
    doc_id: str
    page: int
    region: Box  # page pixels at ``dpi``: the union of the answer's line boxes
    kind: str  # "sentence", "wrapped" or "table"

    @property
    def page_id(self) -> str:
        return f"{self.doc_id}_{self.page}"


def _facts(rng: random.Random, company: str) -> list[tuple[str, str, str]]:
    """(question, answer, sentence) for one company; questions are worded one of two ways, the
    second sharing little with the sentence but the company's name."""
    staff = rng.randrange(120, 9800)
    year = rng.randrange(1951, 2019)
    leader = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    city = rng.choice(CITIES)
    asked = [
        (f"How many people does {company} employ?", f"What is the headcount of {company}?"),
        (f"In what year was {company} founded?", f"When was {company} established?"),
        (f"Who is the chief executive of {company}?", f"Who runs {company}?"),
        (f"Which city is {company} based in?", f"Where is {company} headquartered?"),
    ]
    facts = [
        (f"{staff:,}", f"{company} employs {staff:,} people."),
        (str(year), f"{company} was founded in {year}."),
        (leader, f"The chief executive of {company} is {leader}."),
        (city, f"{company} has its head office in {city}."),
    ]
    return [(rng.choice(questions), answer, sentence) for questions, (answer, sentence) in zip(asked, facts)]


def generate(folder: Path, n_documents: int = 3, pages: int = 2, seed: int = 7, dpi: float = 100.0):
    """Write ``n_documents`` PDFs into ``folder``; return the questions (also in questions.jsonl)."""
    from reportlab.pdfbase.pdfmetrics import getAscentDescent, stringWidth
    from reportlab.pdfgen import canvas

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = rng.sample([f"{stem} {suffix}" for stem in STEMS for suffix in SUFFIXES], n_documents * pages * 3)
    ascent, descent = getAscentDescent(FONT, SIZE)
    scale = dpi / 72
    width = PAGE_W - 2 * MARGIN
    questions: list[Question] = []

    def line_box(x: float, baseline: float, text: str) -> Box:
        right = x + stringWidth(text, FONT, SIZE)
        return (
            x * scale,
            (PAGE_H - baseline - ascent) * scale,
            right * scale,
            (PAGE_H - baseline - descent) * scale,
        )

    for d in range(n_documents):
        doc_id = f"company-register-{d + 1}"
        pdf = canvas.Canvas(str(folder / f"{doc_id}.pdf"), pagesize=(PAGE_W, PAGE_H), invariant=1)
        for p in range(1, pages + 1):
            companies = [names.pop() for _ in range(3)]
            y = PAGE_H - MARGIN
            pdf.setFont("Helvetica-Bold", 14)
            pdf.drawString(MARGIN, y, f"Company register, part {d + 1}.{p}")
            y -= 2 * LEADING
            pdf.setFont(FONT, SIZE)
            for company in companies:
                facts = _facts(rng, company)
                rng.shuffle(facts)
                # words of the paragraph, each fact's words tagged with its index
                words: list[tuple[str, int | None]] = []
                for f, (_, _, sentence) in enumerate(facts):
                    words += [(w, f) for w in sentence.split()]
                    words += [(w, None) for w in rng.choice(FILLER).split()]
                lines: list[list[tuple[str, int | None]]] = [[]]
                for word in words:
                    trial = " ".join(w for w, _ in lines[-1] + [word])
                    if lines[-1] and stringWidth(trial, FONT, SIZE) > width:
                        lines.append([])
                    lines[-1].append(word)
                boxes: dict[int, list[Box]] = {}
                for line in lines:
                    x = MARGIN
                    pdf.drawString(x, y, " ".join(w for w, _ in line))
                    for f in {tag for _, tag in line if tag is not None}:
                        at = [i for i, (_, tag) in enumerate(line) if tag == f]
                        before = " ".join(w for w, _ in line[: at[0]])
                        part = " ".join(w for w, _ in line[at[0] : at[-1] + 1])
                        start = x + (stringWidth(before + " ", FONT, SIZE) if before else 0.0)
                        boxes.setdefault(f, []).append(line_box(start, y, part))
                    y -= LEADING
                y -= LEADING / 2
                for f, (question, answer, _) in enumerate(facts):
                    kind = "wrapped" if len(boxes[f]) > 1 else "sentence"
                    questions.append(
                        Question(f"q{len(questions) + 1}", question, answer, doc_id, p, union(boxes[f]), kind)
                    )
            y -= LEADING / 2
            pdf.drawString(MARGIN, y, "Revenue by quarter (thousands of euros)")
            y -= 1.5 * LEADING
            columns = [MARGIN, MARGIN + 190, MARGIN + 250, MARGIN + 310, MARGIN + 370, MARGIN + 430]
            for x, title in zip(columns, ("Company", *QUARTERS, "Total")):
                pdf.drawString(x, y, title)
            y -= LEADING
            for company in companies:
                revenue = [rng.randrange(400, 9900) for _ in QUARTERS]
                cells = (company, *(f"{v:,}" for v in revenue), f"{sum(revenue):,}")
                for x, cell in zip(columns, cells):
                    pdf.drawString(x, y, cell)
                row = union([line_box(columns[0], y, company), line_box(columns[-1], y, cells[-1])])
                q = rng.randrange(len(QUARTERS))
                questions.append(
                    Question(
                        f"q{len(questions) + 1}",
                        f"What was the revenue of {company} in {QUARTERS[q]}, in thousands of euros?",
                        cells[1 + q],
                        doc_id,
                        p,
                        row,
                        "table",
                    )
                )
                y -= LEADING
            pdf.showPage()
        pdf.save()
    with (folder / "questions.jsonl").open("w") as out:
        for question in questions:
            out.write(json.dumps(asdict(question)) + "\n")
    return questions


def union(boxes: list[Box]) -> Box:
    """The smallest box holding every box of ``boxes``."""
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
