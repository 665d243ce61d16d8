"""BM25 in segments: the local store's own (store/local/bm25.py) against tantivy, fed the same analysed
terms (issue 39: choose the engine by measurement).

    pip install tantivy
    python benchmarks/lexical_engines.py --index DIR [--queries QUERIES.jsonl] [--qrels QRELS.tsv] [--json]

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
- rankings: how many questions have the same top 10 in both, and with ``--qrels``, page-level
  Recall@1/5/20 and nDCG@10 of each.

Prints one JSON line (with ``--json``) or a table. Times are wall clock: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pagesight import Index
from pagesight.encode.lexical import indexed_text, query_weights, tokenize
from pagesight.eval.metrics import mean, per_query
from pagesight.store.local import merging
from pagesight.store.local.bm25 import LexicalRetriever
from pagesight.store.local.postings import Postings
from pagesight.store.local.postings import analysed as analysed_postings
from pagesight.store.local.segment import Segment
from pagesight.text.language import query_language

JOIN = "\x1f"  # a phrase term's space, for tantivy's whitespace tokenizer
BATCH = 20_000  # tiles analysed at a time


def analysed(index: Index) -> tuple[np.ndarray, list[str], list[str]]:
    """Every tile's id, indexed text and language, as the local store's segments are built."""
    catalog = index.catalog
    languages = catalog.tile_languages()
    rows = list(catalog.tile_contexts())
    settings = catalog.settings
    texts = [indexed_text(text, named, heading, settings) for _, text, named, heading in rows]
    return (
        np.array([row[0] for row in rows], dtype=np.int64),
        texts,
        [languages.get(r[0], "en") for r in rows],
    )


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


def timings(search, questions) -> tuple[float, float]:
    latencies = []
    for question in questions:
        started = time.perf_counter()
        search(question)
        latencies.append(time.perf_counter() - started)
    ordered = sorted(latencies)
    return round(statistics.median(ordered) * 1000, 2), round(
        ordered[int(0.99 * (len(ordered) - 1))] * 1000, 2
    )


def size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="a pagesight index")
    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "irpapers"
    parser.add_argument("--queries", type=Path, default=data / "queries.jsonl")
    parser.add_argument("--qrels", type=Path, help="page-level judgements (query-id, corpus-id, score)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import tantivy  # noqa: F401
    except ImportError:
        sys.exit("this comparison needs tantivy: pip install tantivy")
    questions = [json.loads(line)["text"] for line in args.queries.open()]
    result: dict = {}
    with Index.open(args.index, create=False) as index, tempfile.TemporaryDirectory() as scratch:
        settings = index.catalog.settings
        tile_ids, texts, languages = analysed(index)
        result["tiles"] = len(tile_ids)
        ours_folder, theirs = Path(scratch) / "ours", Tantivy(Path(scratch) / "tantivy")
        ours_folder.mkdir()
        segments, ours_seconds, theirs_seconds = [], 0.0, 0.0
        for start in range(0, len(texts), BATCH):  # analysed a batch at a time: not timed
            end = start + BATCH
            tokens = tokenize(texts[start:end], settings.phrases, languages[start:end])
            started = time.perf_counter()
            segments.append(Segment.of(Postings.build(tile_ids[start:end], tokens, languages[start:end])))
            ours_seconds += time.perf_counter() - started
            started = time.perf_counter()
            theirs.add(tile_ids[start:end], tokens)
            theirs_seconds += time.perf_counter() - started
        started = time.perf_counter()
        if len(segments) > 1:
            segments = merging.merged(segments, [list(range(len(segments)))], {})
        saved = [s.save(ours_folder / f"segment-{i}") for i, s in enumerate(segments)]
        result["pagesight_build_seconds"] = round(ours_seconds + time.perf_counter() - started, 2)
        result["pagesight_bytes_per_tile"] = round(size(ours_folder) / len(tile_ids))
        started = time.perf_counter()
        theirs.commit()
        result["tantivy_build_seconds"] = round(theirs_seconds + time.perf_counter() - started, 2)

        # the same bursty-word weights for both: pagesight's, over these tiles
        ours = LexicalRetriever(saved, phrases=settings.phrases, term_weights=settings.term_weights)

        def weights_of(question: str) -> dict[str, float]:
            return query_weights(
                question, settings.phrases, ours.bursts, query_language(question, ours.languages)
            )

        weighted = [weights_of(q) for q in questions]
        rankings = {
            "pagesight": [ours.search(q, 100) for q in questions],
            "tantivy": [theirs.search(w, 100) for w in weighted],
        }
        result["pagesight_p50_ms"], result["pagesight_p99_ms"] = timings(
            lambda q: ours.search(q, 100), questions
        )
        result["tantivy_p50_ms"], result["tantivy_p99_ms"] = timings(
            lambda w: theirs.search(w, 100), weighted
        )
        result["same_top10"] = sum(
            [t for t, _ in a[:10]] == [t for t, _ in b[:10]] for a, b in zip(*rankings.values())
        )
        result["questions"] = len(questions)

        added = np.array([int(tile_ids.max()) + 1, int(tile_ids.max()) + 2])
        new = tokenize(
            ["the quarterly revenue of the western region grew", "the supplier replaces the old one"],
            settings.phrases,
        )
        started = time.perf_counter()
        part = Segment.of(analysed_postings(added, [" ".join(t) for t in new], settings.phrases, None))
        saved = [*saved, part.save(ours_folder / "added")]
        ours = LexicalRetriever(saved, phrases=settings.phrases, term_weights=settings.term_weights)
        result["pagesight_add_seconds"] = round(time.perf_counter() - started, 3)
        started = time.perf_counter()
        saved = [s.deleting(added) for s in saved]
        ours = LexicalRetriever(saved, phrases=settings.phrases, term_weights=settings.term_weights)
        result["pagesight_delete_seconds"] = round(time.perf_counter() - started, 3)
        started = time.perf_counter()
        theirs.add(added, new)
        theirs.commit()
        result["tantivy_add_seconds"] = round(time.perf_counter() - started, 3)
        started = time.perf_counter()
        theirs.delete(added)
        theirs.commit()
        result["tantivy_delete_seconds"] = round(time.perf_counter() - started, 3)
        theirs.writer.wait_merging_threads()
        result["tantivy_bytes_per_tile"] = round(size(Path(scratch) / "tantivy") / len(tile_ids))

        if args.qrels:
            qrels: dict[str, dict[str, int]] = {}
            for line in args.qrels.read_text().splitlines()[1:]:
                query_id, page, score = line.split("\t")
                qrels.setdefault(query_id, {})[page] = int(score)
            ids = [json.loads(line)["_id"] for line in args.queries.open()]
            places = index.catalog.tile_pages(tile_ids.tolist())
            for engine, ranked in rankings.items():
                run = {}
                for query_id, hits in zip(ids, ranked):
                    pages = dict.fromkeys(f"{places[t][0]}_{places[t][1]}" for t, _ in hits)
                    run[query_id] = list(pages)
                scores = mean(per_query(run, qrels))
                for metric in ("recall@1", "recall@5", "recall@20", "ndcg@10"):
                    result[f"{engine}_{metric}"] = round(scores[metric], 4)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")


if __name__ == "__main__":
    main()
