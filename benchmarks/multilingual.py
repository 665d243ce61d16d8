"""Documents and questions in six languages (issue 30): the Debian Reference in its English original
and its French, German, Spanish, Italian and Portuguese translations, with the same questions
written in each of the six languages.

    sudo apt-get install debian-reference-en debian-reference-fr debian-reference-de \\
        debian-reference-es debian-reference-it debian-reference-pt
    python -m benchmarks.multilingual --out DIR [--mode lexical --mode hybrid] [--json out.json]
                                      [--documents fr ...] [--ocr always] [--dense-model M ...]
    python -m benchmarks.multilingual --tiny  # toy "translations" made here: a page a section, lexical

The PDFs are Debian's own (``/usr/share/debian-reference/debian-reference.LANG.pdf``, 261 to 276
pages each). Each question in ``multilingual_questions.json`` is about one section, named by its
English title; a translation's section is the one at the same place in its PDF's outline (all six
outlines have the same 451 entries in the same order), and the page where it starts is the
question's relevant page. Every question is asked in every language of every translation, within
that translation (the within-document protocol), so a cell of the table is a document language
against a question language. The translations are partial: a section whose opening text is not in
its translation's language (py3langid's verdict among the six) is left out of that translation's
cells, and the table says how many questions each row kept.

Two indexes of the same PDFs (the six, or the translations ``--documents`` names) are compared:
each page analysed in its detected language (the default), and every page read as English
(``ingest --language en``, what pagesight did before). With ``--ocr always`` the pages are read by
OCR as scans would be: Tesseract's model of each page's language, or its English model. Each
``--dense-model`` (``multilingual``, ``multilingual-use``, ``multilingual-e5-use``, or a multilingual
sentence-transformers model's folder or hub id) makes one more index with its vectors, per-language
otherwise: what cross-language questions need.
Prints one table per index and mode (Recall@1, Recall@5, nDCG@10 per cell, on stderr) and a JSON
object. ``--tiny`` makes its own six PDFs (``toy_source``): three sections, each a page holding the
questions asked of it, written in the PDF's language, and lexical search alone.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pypdfium2

from benchmarks import harness
from pagesight import Index
from pagesight.eval import harness as harness_eval
from pagesight.eval.dataset import Dataset
from pagesight.settings import Settings
from pagesight.text.language import classify

LANGUAGES = ("en", "fr", "de", "es", "it", "pt")
SOURCE = Path("/usr/share/debian-reference")
QUESTIONS = Path(__file__).with_name("multilingual_questions.json")
METRICS = ("recall@1", "recall@5", "ndcg@10")


def outline(pdf: Path) -> list[tuple[str, int, str]]:
    """(title, first page from 1, the section's opening text) of each entry of a PDF's outline, in
    order. The opening text is what follows the title on its page and the next one, 1,000
    characters (its whole first page where the title is not found as extracted)."""
    document = pypdfium2.PdfDocument(pdf)
    try:
        texts = [page.get_textpage().get_text_range() for page in document]
        entries = []
        for entry in document.get_toc():
            title, page = entry.get_title(), entry.get_dest().get_index() + 1
            text = " ".join((texts[page - 1] + " " + (texts[page] if page < len(texts) else "")).split())
            found = text.find(title)
            entries.append((title, page, text[found + len(title) :][:1000] if found >= 0 else text[:1000]))
        return entries
    finally:
        document.close()


def questions(count: int | None = None) -> list[dict]:
    """The questions, each with its section's English title and its text in the six languages."""
    return json.loads(QUESTIONS.read_text())[:count]


def toy_source(folder: Path, count: int = 3) -> Path:
    """Six toy PDFs named as the Debian Reference's: the first ``count`` questions' sections, a page
    each under an outline entry of its English title, the page holding the section's questions in
    the PDF's language (so each page is in its language and answers its question)."""
    from reportlab.pdfgen import canvas

    asked = questions(count)
    folder.mkdir(parents=True)
    for lang in LANGUAGES:
        pdf = canvas.Canvas(str(folder / f"debian-reference.{lang}.pdf"), invariant=1)
        for number, question in enumerate(asked):
            pdf.bookmarkPage(f"s{number}")
            pdf.addOutlineEntry(question["section"], f"s{number}", level=0)
            pdf.setFont("Helvetica", 11)
            pdf.drawString(72, 760, question["section"])
            words = (question[lang] + " ") * 3
            for row in range(0, 12):
                pdf.drawString(72, 730 - 16 * row, words[row * 80 : (row + 1) * 80])
            pdf.showPage()
        pdf.save()
    return folder


def generate(
    out: Path, documents: tuple[str, ...] = LANGUAGES, source: Path = SOURCE, count: int | None = None
) -> Path:
    """The evaluation folder: the six PDFs of ``source``, a query per question (the first ``count``),
    question language and document language (asked within that document), each judged by the page
    its section starts on."""
    missing = [lang for lang in documents if not (source / f"debian-reference.{lang}.pdf").is_file()]
    if missing:
        packages = " ".join(f"debian-reference-{lang}" for lang in missing)
        raise SystemExit(f"the Debian Reference PDFs are missing: sudo apt-get install {packages}")
    folder = out / "documents"
    folder.mkdir(parents=True)
    outlines = {}
    for lang in LANGUAGES:
        if lang in documents:
            (folder / f"debian-reference-{lang}.pdf").symlink_to(source / f"debian-reference.{lang}.pdf")
        outlines[lang] = outline(source / f"debian-reference.{lang}.pdf")
    if len({len(entries) for entries in outlines.values()}) != 1:
        raise SystemExit("the translations' outlines differ in length: their sections cannot be matched")
    english = [title for title, _, _ in outlines["en"]]
    queries, qrels = [], []
    for number, question in enumerate(questions(count)):
        if english.count(question["section"]) != 1:
            raise SystemExit(f"section {question['section']!r} is not one entry of the English outline")
        place = english.index(question["section"])
        for doc_lang in documents:
            doc_id = f"debian-reference-{doc_lang}"
            _, page, opening = outlines[doc_lang][place]
            if classify(opening)[0] != doc_lang:  # left untranslated
                continue
            for query_lang in LANGUAGES:
                query_id = f"q{number:02d}-{query_lang}-{doc_lang}"
                queries.append({"_id": query_id, "text": question[query_lang], "doc_ids": [doc_id]})
                qrels.append(f"{query_id}\t{doc_id}_{page}\t1")
    (out / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries))
    (out / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    return out


def cells(result: harness_eval.Result, documents: tuple[str, ...]) -> dict[str, dict[str, dict[str, float]]]:
    """Mean metrics per document language, then question language."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for doc_lang in documents:
        for query_lang in LANGUAGES:
            rows = [
                scores
                for qid, scores in result.per_query.items()
                if qid.endswith(f"-{query_lang}-{doc_lang}")
            ]
            table.setdefault(doc_lang, {})[query_lang] = {
                **{name: round(sum(row[name] for row in rows) / len(rows), 3) for name in METRICS},
                "questions": len(rows),
            }
    return table


def print_table(title: str, table: dict) -> None:
    lines = [f"\n{title}: R@1 / R@5 / nDCG@10, document language (rows) x question language (columns)"]
    lines.append("| document (questions) | " + " | ".join(LANGUAGES) + " |")
    lines.append("|---" * (len(LANGUAGES) + 1) + "|")
    for doc_lang, row in table.items():
        values = [" / ".join(f"{row[q][m]:.2f}" for m in METRICS) for q in LANGUAGES]
        lines.append(f"| {doc_lang} ({row['en']['questions']}) | " + " | ".join(values) + " |")
    print("\n".join(lines), file=sys.stderr)


def measure(
    data: Dataset, out: Path, documents: tuple[str, ...], configs: list, indexes: list, ocr: str
) -> dict:
    report = {"queries": len(data.queries), "ocr": ocr, "indexes": {}}
    for number, (name, language, settings) in enumerate(indexes):
        with Index.open(out / f"index-{number}", settings=settings) as index:
            start = time.perf_counter()
            outcome = index.add([data.documents], language=language, ocr=ocr)
            seconds = time.perf_counter() - start
            if not outcome.ok:
                raise SystemExit(f"ingestion failed: {outcome.failed}")
            entry = {"ingest_s": round(seconds, 1), "languages": index.info().get("languages"), "runs": {}}
            for result in harness_eval.evaluate(index, data, configs):
                table = cells(result, documents)
                entry["runs"][result.config.name] = table
                print_table(f"{name} index, {result.config.name}", table)
            report["indexes"][name] = entry
    return report


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--out", type=Path, help="a folder for the dataset and indexes (default: temporary)")
    parser.add_argument(
        "--mode",
        action="append",
        help="an eval configuration (lexical, dense, hybrid, rsf:0.5, ...); default: lexical and hybrid",
    )
    parser.add_argument("--documents", nargs="+", choices=LANGUAGES, help="translations (default: all)")
    parser.add_argument("--ocr", choices=["auto", "always"], default="auto", help="always: read as scans")
    parser.add_argument(
        "--dense-model",
        action="append",
        help="a multilingual model for an index of its own (registered name, folder or hub id); repeatable",
    )
    args = harness.start(parser, argv)
    documents = tuple(args.documents or LANGUAGES)
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch) / "out"
        shutil.rmtree(out, ignore_errors=True)
        if args.tiny:
            data = Dataset.load(generate(out, documents, toy_source(Path(scratch) / "source"), count=3))
            modes, indexes = args.mode or ["lexical"], [("per-language", None, Settings(dense_model=None))]
        else:
            data = Dataset.load(generate(out, documents))
            modes = args.mode or ["lexical", "hybrid"]
            indexes = [("per-language", None, Settings()), ("english", "en", Settings())]
            indexes += [
                (f"dense {model}", None, Settings(dense_model=model)) for model in args.dense_model or []
            ]
        configs = [harness_eval.Config.parse(mode).within() for mode in modes]
        report = measure(data, out, documents, configs, indexes, args.ocr)
    harness.finish(args, __spec__.name, report)


if __name__ == "__main__":
    main()
