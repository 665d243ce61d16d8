"""BM25 in segments: the local store's own (store/local/bm25.py) against tantivy, fed the same analysed
terms (issue 39: choose the engine by measurement).

    pip install tantivy
    python -m benchmarks.lexical_engines --index DIR [--data ../shared/data/irpapers]
    python -m benchmarks.lexical_engines --tiny      # a toy index made here; tantivy when installed

``DIR`` is a pagesight index. Both engines index the terms pagesight's analysis gives each tile (the
tile's text, its document's context and its page's heading, each in its page's language, with phrase
terms; ``encode.lexical``), so stemming, phrases and context are the same; tantivy reads them
through its whitespace tokenizer (a phrase term's space becomes U+001F, which no term holds). A
question is the same weighted terms (``encode.lexical.query_weights``, burstiness included): tantivy
gets them as a boolean query of boosted term queries, so both score
``sum(weight * idf * tf-part)`` with k1 1.2 and b 0.75; tantivy keeps a tile's length in one byte
(Lucene's norm encoding), pagesight keeps it exact.

Measured, each on the same tiles:

- build: analysing excluded (both are given the terms), seconds to index every tile and commit;
- add: one commit of a 2-tile document on top of them (tantivy: add, commit, reload the searcher;
  pagesight: a segment built and saved) and delete it again;
- search p50/p99 over the questions, warm, top 100 tile ids and scores only;
- disk bytes a tile;
- rankings: how many questions have the same top 10 in both, and the dataset's page-level
  Recall@1/5/20 and nDCG@10 of each (``eval.metrics``).

Times are wall clock: run it on a quiet machine. Without tantivy (``--tiny`` only) pagesight's side
is measured alone.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from pagesight import Index
from pagesight.encode.lexical import query_weights, tokenize
from pagesight.eval.dataset import Dataset
from pagesight.eval.metrics import mean, per_query
from pagesight.store.local import merging
from pagesight.store.local.bm25 import LexicalRetriever
from pagesight.store.local.postings import Postings
from pagesight.store.local.postings import analysed as analysed_postings
from pagesight.store.local.retrievers import indexed_tiles
from pagesight.store.local.segment import Segment
from pagesight.text.language import query_language

JOIN = "\x1f"  # a phrase term's space, for tantivy's whitespace tokenizer
BATCH = 20_000  # tiles analysed at a time


class Tantivy:
    def __init__(self, folder: Path):
        import tantivy

        self.tantivy = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_unsigned_field("tile", stored=True, indexed=True, fast=True)
        builder.add_text_field("terms", tokenizer_name="terms", index_option="freq")
        self.schema = builder.build()
        folder.mkdir()
        self.index = tantivy.Index(self.schema, path=str(folder))
        self.index.register_tokenizer(
            "terms", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        )
        self.writer = self.index.writer(heap_size=256_000_000, num_threads=1)

    def add(self, tile_ids, tokens) -> None:
        for tile_id, terms in zip(tile_ids.tolist(), tokens):
            document = self.tantivy.Document()
            document.add_unsigned("tile", tile_id)
            document.add_text("terms", " ".join(t.replace(" ", JOIN) for t in terms))
            self.writer.add_document(document)

    def commit(self) -> None:
        self.writer.commit()
        self.index.reload()
        self.searcher = self.index.searcher()

    def delete(self, tile_ids) -> None:
        for tile_id in tile_ids.tolist():
            self.writer.delete_documents_by_term("tile", tile_id)

    def search(self, weights: dict[str, float], n: int) -> list[tuple[int, float]]:
        query_class, occur = self.tantivy.Query, self.tantivy.Occur
        clauses = [
            (
                occur.Should,
                query_class.boost_query(
                    query_class.term_query(self.schema, "terms", term.replace(" ", JOIN)), weight
                ),
            )
            for term, weight in weights.items()
        ]
        found = self.searcher.search(query_class.boolean_query(clauses), n, count=False)
        return [(self.searcher.doc(address)["tile"][0], score) for score, address in found.hits]


def timings(search, questions) -> dict:
    latencies = []
    for question in questions:
        started = time.perf_counter()
        search(question)
        latencies.append(time.perf_counter() - started)
    return harness.latency(latencies)


def size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


class Pagesight:
    """The local store's BM25 over segments saved in ``folder``, as the Tantivy class is used."""

    def __init__(self, folder: Path, settings):
        self.folder, self.settings = folder, settings
        folder.mkdir()
        self.segments: list = []
        self.saved: list = []
        self.retriever = None

    def add(self, tile_ids, tokens, languages) -> None:
        self.segments.append(Segment.of(Postings.build(tile_ids, tokens, languages)))

    def commit(self) -> None:
        if len(self.segments) > 1:
            self.segments = merging.merged(self.segments, [list(range(len(self.segments)))], {})
        self.saved = [s.save(self.folder / f"segment-{i}") for i, s in enumerate(self.segments)]
        self.reload()

    def reload(self) -> None:
        settings = self.settings
        self.retriever = LexicalRetriever(
            self.saved, phrases=settings.phrases, term_weights=settings.term_weights
        )

    def weights(self, question: str) -> dict[str, float]:
        """The question's weighted terms, its bursty words counted over these tiles."""
        language = query_language(question, self.retriever.languages)
        return query_weights(question, self.settings.phrases, self.retriever.bursts, language)

    def add_document(self, tile_ids, texts: list[str]) -> None:
        part = Segment.of(analysed_postings(tile_ids, texts, self.settings.phrases, None))
        self.saved = [*self.saved, part.save(self.folder / "added")]
        self.reload()

    def delete(self, tile_ids) -> None:
        self.saved = [s.deleting(tile_ids) for s in self.saved]
        self.reload()


def measure(index: Index, data: Dataset, scratch: Path, with_tantivy: bool) -> dict:
    questions = list(data.queries.values())
    settings = index.catalog.settings
    tile_ids, texts, languages = indexed_tiles(index.catalog, np.sort(index.catalog.tile_ids()))
    result: dict = {"tiles": len(tile_ids), "questions": len(questions)}
    engines: dict = {"pagesight": Pagesight(scratch / "pagesight", settings)}
    if with_tantivy:
        engines["tantivy"] = Tantivy(scratch / "tantivy")
    seconds = dict.fromkeys(engines, 0.0)
    for start in range(0, len(texts), BATCH):  # analysed a batch at a time: not timed
        end = start + BATCH
        tokens = tokenize(texts[start:end], settings.phrases, languages[start:end])
        for name, engine in engines.items():
            started = time.perf_counter()
            if name == "pagesight":
                engine.add(tile_ids[start:end], tokens, languages[start:end])
            else:
                engine.add(tile_ids[start:end], tokens)
            seconds[name] += time.perf_counter() - started
    for name, engine in engines.items():
        started = time.perf_counter()
        engine.commit()
        result[f"{name}_build_seconds"] = round(seconds[name] + time.perf_counter() - started, 2)

    ours = engines["pagesight"]
    weighted = [ours.weights(q) for q in questions]  # the same weights for both: pagesight's
    searches = {
        "pagesight": (lambda q: ours.retriever.search(q, 100), questions),
        "tantivy": (lambda w: engines["tantivy"].search(w, 100), weighted),
    }
    rankings = {}
    for name in engines:
        search, asked = searches[name]
        rankings[name] = [search(q) for q in asked]
        result[name] = timings(search, asked)
    if with_tantivy:
        result["same_top10"] = sum(
            [t for t, _ in a[:10]] == [t for t, _ in b[:10]] for a, b in zip(*rankings.values())
        )

    added = np.array([int(tile_ids.max()) + 1, int(tile_ids.max()) + 2])
    lines = ["the quarterly revenue of the western region grew", "the supplier replaces the old one"]
    new = tokenize(lines, settings.phrases)
    for name, engine in engines.items():
        started = time.perf_counter()
        if name == "pagesight":
            engine.add_document(added, [" ".join(t) for t in new])
        else:
            engine.add(added, new)
            engine.commit()
        result[f"{name}_add_seconds"] = round(time.perf_counter() - started, 3)
        started = time.perf_counter()
        engine.delete(added)
        if name == "tantivy":
            engine.commit()
        result[f"{name}_delete_seconds"] = round(time.perf_counter() - started, 3)
    if with_tantivy:
        engines["tantivy"].writer.wait_merging_threads()
    for name in engines:
        result[f"{name}_bytes_per_tile"] = round(size(scratch / name) / len(tile_ids))

    places = index.catalog.tile_pages(tile_ids.tolist())
    for name, ranked in rankings.items():
        run = {}
        for query_id, hits in zip(data.queries, ranked):
            run[query_id] = list(dict.fromkeys(f"{places[t][0]}_{places[t][1]}" for t, _ in hits))
        scores = mean(per_query(run, data.qrels))
        for metric in ("recall@1", "recall@5", "recall@20", "ndcg@10"):
            result[f"{name}_{metric}"] = round(scores[metric], 4)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--index", type=Path, help="a pagesight index of the dataset's documents")
    parser.add_argument("--data", type=Path, default=harness.SHARED / "irpapers", help="its questions")
    args = harness.start(parser, argv)
    with_tantivy = importlib.util.find_spec("tantivy") is not None
    if not (with_tantivy or args.tiny):
        parser.error("this comparison needs tantivy: pip install tantivy")
    with tempfile.TemporaryDirectory() as scratch:
        if args.tiny:
            data = harness.toy_dataset(Path(scratch) / "data")
            index = harness.toy_index(Path(scratch) / "index", data)
        elif args.index:
            data, index = Dataset.load(args.data), Index.open(args.index, create=False)
        else:
            parser.error("--index is needed (or --tiny)")
        (Path(scratch) / "engines").mkdir()
        with index:
            result = measure(index, data, Path(scratch) / "engines", with_tantivy)
    harness.finish(args, __spec__.name, {"tantivy": with_tantivy, **result})


if __name__ == "__main__":
    main()
