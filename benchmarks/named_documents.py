"""Questions that name their document, over many documents alike (issue 18's second evaluation set).

    python -m benchmarks.named_documents [--out DIR] [--companies 30] [--weights 0 1 2 3]
    python -m benchmarks.named_documents --tiny      # 2 companies, weights 0 and 1

Writes DIR in the evaluation layout (``documents/``, ``queries.jsonl``, ``qrels.tsv``, then
``pagesight eval DIR`` runs on it) and gives the ablation of ``Settings.context_weight``: Recall@1,
@5, nDCG@10 and search latency (p50) of lexical search, each weight on a fresh index.

The corpus is what filings and annual reports look like: a company's report per year, every
report built on the same template, the company and year named on its cover (and in half of the file
names; the others are archive numbers) but not on the pages that hold the figures. Each question names the company and the year ("What
was Halvorsen Glassworks' revenue in the third quarter of 2022?"), so the right page is one of
dozens that read alike: only the document's context tells them apart. Typeset with reportlab (the
``eval`` extra); the figures are drawn from a seeded generator, so the set is the same every run.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

from reportlab.lib.pagesizes import LETTER
from reportlab.pdfgen import canvas

from benchmarks import harness
from pagesight import Index
from pagesight.eval import harness as eval_harness
from pagesight.eval.dataset import Dataset
from pagesight.settings import Settings

FIRST = ["Halvorsen", "Brightmere", "Castellan", "Dunmore", "Elverum", "Farrowdale", "Greywick", "Hollin"]
SECOND = ["Glassworks", "Optics", "Freight", "Textiles", "Robotics", "Foods", "Ceramics", "Marine"]
CITIES = ["Lisbon", "Tampere", "Ghent", "Porto", "Aarhus", "Bergen", "Utrecht", "Kraków", "Lyon"]
YEARS = (2021, 2022)
QUARTERS = ("first", "second", "third", "fourth")


def companies(n: int, rng: random.Random) -> list[str]:
    names = [f"{a} {b}" for a in FIRST for b in SECOND]
    rng.shuffle(names)
    return names[:n]


def write_report(path: Path, company: str, year: int, rng: random.Random) -> dict:
    """A three-page annual report; returns its figures."""
    revenue = [rng.randrange(1200, 9800) for _ in QUARTERS]
    staff, city = rng.randrange(40, 900), rng.choice(CITIES)
    page = canvas.Canvas(str(path), pagesize=LETTER)
    page.setTitle("")  # as most files come: no useful metadata
    page.setFont("Helvetica-Bold", 24)
    page.drawString(72, 700, f"{company}")
    page.setFont("Helvetica", 16)
    page.drawString(72, 670, f"Annual Report {year}")
    page.setFont("Helvetica", 11)
    for n, line in enumerate(
        [
            "This report describes the year's trading, the results and the outlook.",
            "The board thanks the staff, the customers and the suppliers for their trust.",
        ]
    ):
        page.drawString(72, 620 - 16 * n, line)
    page.showPage()
    page.setFont("Helvetica-Bold", 14)
    page.drawString(72, 720, "Revenue by quarter (thousands of euros)")
    page.setFont("Helvetica", 11)
    for n, (quarter, value) in enumerate(zip(QUARTERS, revenue)):
        page.drawString(72, 690 - 18 * n, f"Revenue in the {quarter} quarter: {value:,}")
    page.drawString(72, 600, f"Revenue for the year: {sum(revenue):,}")
    page.showPage()
    page.setFont("Helvetica-Bold", 14)
    page.drawString(72, 720, "People and places")
    page.setFont("Helvetica", 11)
    page.drawString(72, 690, f"Headcount at the end of the year: {staff} employees.")
    page.drawString(72, 672, f"The main site is in {city}, where most of the staff work.")
    page.showPage()
    page.save()
    return {"revenue": revenue, "staff": staff, "city": city}


def generate(out: Path, n_companies: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    documents = out / "documents"
    documents.mkdir(parents=True, exist_ok=True)
    queries, qrels = [], []
    for company in companies(n_companies, rng):
        for year in YEARS:
            # Half the files are named for what they hold, half as an archive numbers them.
            named = rng.random() < 0.5
            doc_id = (
                f"{company.lower().replace(' ', '-')}-{year}" if named else f"AR-{rng.randrange(10**5):05d}"
            )
            write_report(documents / f"{doc_id}.pdf", company, year, rng)
            quarter = rng.randrange(len(QUARTERS))
            asked = [
                (f"What was {company}'s revenue in the {QUARTERS[quarter]} quarter of {year}?", 2),
                (f"How many employees did {company} have at the end of {year}?", 3),
                (f"Where is the main site of {company} in {year}?", 3),
            ]
            for text, page in asked:
                query_id = f"q{len(queries)}"
                queries.append({"_id": query_id, "text": text})
                qrels.append(f"{query_id}\t{doc_id}_{page}\t1")
    (out / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (out / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    return out


def ablation(data: Dataset, weights: list[int], folder: Path) -> list[dict]:
    rows = []
    for weight in weights:
        path = folder / f"index-{weight}"
        shutil.rmtree(path, ignore_errors=True)
        with Index.open(path, settings=Settings(dense_model=None, context_weight=weight)) as index:
            assert index.add([data.documents]).ok
            result = eval_harness.evaluate(index, data, [eval_harness.Config.parse("lexical")])[0]
            rows.append({"context_weight": weight, **result.summary(index.catalog.counts()["pages"])})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--out", type=Path, help="where the dataset is written (default: temporary)")
    parser.add_argument("--companies", type=int, default=30, help="two annual reports each")
    parser.add_argument("--weights", type=int, nargs="*", default=[0, 1, 2, 3])
    args = harness.start(parser, argv)
    companies, weights = (2, [0, 1]) if args.tiny else (args.companies, args.weights)
    with tempfile.TemporaryDirectory() as folder:
        out = args.out or Path(folder) / "data"
        shutil.rmtree(out, ignore_errors=True)
        data = Dataset.load(generate(out, companies))
        rows = ablation(data, weights, Path(folder))
        documents = len(list(data.documents.iterdir()))
    keys = ("recall@1", "recall@5", "ndcg@10")
    lines = ["| context weight | " + " | ".join(keys) + " | search p50 |"]
    for row in rows:
        cells = " | ".join(f"{row[key]:.4f}" for key in keys)
        lines.append(f"| {row['context_weight']} | {cells} | {row['latency_ms_p50']} ms |")
    print("\n".join(lines), file=sys.stderr)
    harness.finish(args, __spec__.name, {"documents": documents, "queries": len(data.queries), "rows": rows})


if __name__ == "__main__":
    main()
