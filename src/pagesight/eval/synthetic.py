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
from typing import Any

from pagesight.records import Box, union

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
class SyntheticQuestion:
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
    from reportlab.pdfgen import canvas

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = rng.sample([f"{stem} {suffix}" for stem in STEMS for suffix in SUFFIXES], n_documents * pages * 3)
    questions: list[SyntheticQuestion] = []
    for d in range(n_documents):
        doc_id = f"company-register-{d + 1}"
        pdf = canvas.Canvas(str(folder / f"{doc_id}.pdf"), pagesize=(PAGE_W, PAGE_H), invariant=1)
        for p in range(1, pages + 1):
            page = _Page(pdf, dpi / 72, doc_id, p, questions)
            companies = [names.pop() for _ in range(3)]
            pdf.setFont("Helvetica-Bold", 14)
            pdf.drawString(MARGIN, page.y, f"Company register, part {d + 1}.{p}")
            page.y -= 2 * LEADING
            pdf.setFont(FONT, SIZE)
            for company in companies:
                page.paragraph(_facts(rng, company), rng)
            page.revenue_table(companies, rng)
            pdf.showPage()
        pdf.save()
    with (folder / "questions.jsonl").open("w") as out:
        for question in questions:
            out.write(json.dumps(asdict(question)) + "\n")
    return questions


def dataset(folder: Path, n_documents: int = 3, pages: int = 2, seed: int = 7) -> Path:
    """The corpus as an evaluation dataset in ``folder`` (``eval.dataset``'s layout): the PDFs in
    documents/, each question with its answer, judged by its page."""
    questions = generate(folder / "documents", n_documents, pages, seed)
    (folder / "documents" / "questions.jsonl").unlink()
    rows = {
        "queries.jsonl": [{"_id": q.id, "text": q.question} for q in questions],
        "answers.jsonl": [{"_id": q.id, "answer": q.answer} for q in questions],
    }
    for name, lines in rows.items():
        (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    judged = "".join(f"{q.id}\t{q.page_id}\t1\n" for q in questions)
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + judged)
    return folder


@dataclass
class _Page:
    """A page of ``doc_id`` being written top down from ``y`` (points), adding the questions its
    facts answer, each with the box of its answer in page pixels (``scale`` pixels a point)."""

    pdf: Any
    scale: float
    doc_id: str
    number: int
    questions: list[SyntheticQuestion]
    y: float = PAGE_H - MARGIN

    def box(self, x: float, baseline: float, text: str) -> Box:
        from reportlab.pdfbase.pdfmetrics import getAscentDescent, stringWidth

        ascent, descent = getAscentDescent(FONT, SIZE)
        right = x + stringWidth(text, FONT, SIZE)
        top, bottom = PAGE_H - baseline - ascent, PAGE_H - baseline - descent
        return (x * self.scale, top * self.scale, right * self.scale, bottom * self.scale)

    def ask(self, question: str, answer: str, region: Box, kind: str) -> None:
        number = len(self.questions) + 1
        self.questions.append(
            SyntheticQuestion(f"q{number}", question, answer, self.doc_id, self.number, region, kind)
        )

    def paragraph(self, facts: list[tuple[str, str, str]], rng: random.Random) -> None:
        """The ``facts`` in a shuffled order with filler between them, wrapped to the margins."""
        from reportlab.pdfbase.pdfmetrics import stringWidth

        rng.shuffle(facts)
        words: list[tuple[str, int | None]] = []  # each fact's words tagged with its index
        for f, (_, _, sentence) in enumerate(facts):
            words += [(w, f) for w in sentence.split()]
            words += [(w, None) for w in rng.choice(FILLER).split()]
        lines: list[list[tuple[str, int | None]]] = [[]]
        for word in words:
            trial = " ".join(w for w, _ in lines[-1] + [word])
            if lines[-1] and stringWidth(trial, FONT, SIZE) > PAGE_W - 2 * MARGIN:
                lines.append([])
            lines[-1].append(word)
        boxes: dict[int, list[Box]] = {}
        for line in lines:
            self.pdf.drawString(MARGIN, self.y, " ".join(w for w, _ in line))
            for f in {tag for _, tag in line if tag is not None}:
                at = [i for i, (_, tag) in enumerate(line) if tag == f]
                before = " ".join(w for w, _ in line[: at[0]])
                part = " ".join(w for w, _ in line[at[0] : at[-1] + 1])
                start = MARGIN + (stringWidth(before + " ", FONT, SIZE) if before else 0.0)
                boxes.setdefault(f, []).append(self.box(start, self.y, part))
            self.y -= LEADING
        self.y -= LEADING / 2
        for f, (question, answer, _) in enumerate(facts):
            self.ask(question, answer, union(boxes[f]), "wrapped" if len(boxes[f]) > 1 else "sentence")

    def revenue_table(self, companies: list[str], rng: random.Random) -> None:
        """A table of each company's revenue by quarter and in total, a question on one cell a row."""
        self.y -= LEADING / 2
        self.pdf.drawString(MARGIN, self.y, "Revenue by quarter (thousands of euros)")
        self.y -= 1.5 * LEADING
        columns = [MARGIN, MARGIN + 190, MARGIN + 250, MARGIN + 310, MARGIN + 370, MARGIN + 430]
        for x, title in zip(columns, ("Company", *QUARTERS, "Total")):
            self.pdf.drawString(x, self.y, title)
        self.y -= LEADING
        for company in companies:
            revenue = [rng.randrange(400, 9900) for _ in QUARTERS]
            cells = (company, *(f"{v:,}" for v in revenue), f"{sum(revenue):,}")
            for x, cell in zip(columns, cells):
                self.pdf.drawString(x, self.y, cell)
            row = union([self.box(columns[0], self.y, company), self.box(columns[-1], self.y, cells[-1])])
            q = rng.randrange(len(QUARTERS))
            asked = f"What was the revenue of {company} in {QUARTERS[q]}, in thousands of euros?"
            self.ask(asked, cells[1 + q], row, "table")
            self.y -= LEADING


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def register(folder: Path, n_documents: int = 3, seed: int = 7) -> Path:
    """The synthetic register as a dataset ``pagesight eval`` and ``fit-reader`` read: its PDFs
    under ``folder/pdfs``, each question judged on its page, its answer its fact."""
    questions = generate(folder / "pdfs", n_documents=n_documents, seed=seed)
    (folder / "pdfs" / "questions.jsonl").unlink()
    with (folder / "queries.jsonl").open("w") as queries, (folder / "answers.jsonl").open("w") as answers:
        for n, q in enumerate(questions):
            queries.write(json.dumps({"_id": f"r{n}", "text": q.question}) + "\n")
            answers.write(json.dumps({"_id": f"r{n}", "answer": q.answer}) + "\n")
    with (folder / "qrels.tsv").open("w") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        qrels.writelines(f"r{n}\t{q.page_id}\t1\n" for n, q in enumerate(questions))
    with (folder / "unanswerable.jsonl").open("w") as unanswerable:
        for n, (text, doc_id) in enumerate(absent(questions, random.Random(seed + 1))):
            unanswerable.write(json.dumps({"_id": f"u{n}", "text": text, "doc_id": doc_id}) + "\n")
    return folder


def absent(questions: list[SyntheticQuestion], rng: random.Random) -> list[tuple[str, str]]:
    """Each question asked of a company no document names (its own swapped for one of the names
    left unused), with the document it was asked of: the same wording, nothing on the pages to
    answer it."""
    every = [f"{stem} {suffix}" for stem in STEMS for suffix in SUFFIXES]
    used = {name for name in every if any(name in q.question for q in questions)}
    unused = [name for name in every if name not in used]
    found = []
    for q in questions:
        named = [name for name in used if name in q.question]
        if named:
            found.append((q.question.replace(named[0], rng.choice(unused)), q.page_id.rsplit("_", 1)[0]))
    return found
