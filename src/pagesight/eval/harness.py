"""Run every query of a dataset through an index under one or more search configurations."""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pagesight.answer.ask import retrieve
from pagesight.choices import TEXT_FROM
from pagesight.errors import PagesightError
from pagesight.eval import metrics
from pagesight.eval.dataset import TEXTS, Dataset
from pagesight.eval.options import SETTINGS
from pagesight.index import Index
from pagesight.request import SearchRequest
from pagesight.settings import Settings
from pagesight.store.base import store_exists
from pagesight.text.transcripts import TRANSCRIPT

WITHIN = "/within"
UNRANKED = "/unranked"


@dataclass(frozen=True)
class Config:
    """A search configuration: a name, as on the command line, and the request each question is
    searched with (``request.SearchRequest``, its query left empty). The names: lexical, dense,
    visual, hybrid, rrf, rsf:ALPHA, each optionally with settings ``/NAME:VALUE`` of the request's
    numeric fields (``SETTINGS``: ``doc`` for ``document_weight``, the weight of a hit's document
    score, ``search.documents``, 0: pages alone; ``visual_weight``, ``alpha``, ``ef``, ``nprobe``,
    ...), then ``/unranked``: the hybrid head not reordered by the learned ranker
    (``search.ranking``), and then ``/within``: each question searched only inside its own
    documents (``Dataset.documents_of``), as long-document benchmarks do. ``visual`` needs an index
    made with a visual encoder (``pagesight ingest --encoder``); on such an index the hybrid
    configurations fuse its visual run too."""

    name: str
    request: SearchRequest = field(default_factory=SearchRequest)
    within_document: bool = False

    @classmethod
    def parse(cls, text: str) -> Config:
        text = text.strip()
        if text.endswith(WITHIN):
            return cls.parse(text.removesuffix(WITHIN)).within()
        if text.endswith(UNRANKED):
            config = cls.parse(text.removesuffix(UNRANKED))
            return replace(config, name=config.name + UNRANKED, request=config.request.replace(ranker=False))
        base, slash, setting = text.rpartition("/")
        if slash and ":" in setting:
            name, _, value = setting.partition(":")
            config = cls.parse(base)
            try:
                return config.setting(name, value)
            except PagesightError as exc:
                raise PagesightError(f"configuration '{text}': {exc}") from None
        if text in ("lexical", "dense", "visual"):
            return cls(text, SearchRequest(mode=text))
        if text == "hybrid":  # the search's default: its weights the index's (search.fusion)
            return cls("hybrid", SearchRequest(mode="hybrid"))
        if text == "rrf":
            return cls("rrf", SearchRequest(mode="hybrid", fusion="rrf"))
        if text.startswith("rsf:"):
            try:
                alpha = float(text[4:])
            except ValueError:
                alpha = -1.0
            if not 0.0 <= alpha <= 1.0:
                raise PagesightError(f"configuration '{text}': alpha must be a number from 0 to 1")
            return cls(f"rsf:{alpha:g}", SearchRequest(mode="hybrid", alpha=alpha))
        raise PagesightError(
            f"unknown configuration '{text}' (lexical, dense, visual, hybrid, rrf, rsf:ALPHA, "
            "each optionally with /NAME:VALUE settings such as /doc:WEIGHT, then /unranked, then /within)"
        )

    def setting(self, name: str, value: str | float) -> Config:
        """This configuration with the request field ``SETTINGS[name]`` set to ``value`` (text, as
        in a name, or a number), named ``<name>/<setting>:<value>``."""
        if name not in SETTINGS:
            raise PagesightError(f"unknown setting '{name}' (known: {', '.join(SETTINGS)})")
        field_name, kind = SETTINGS[name]
        try:
            number = kind(value)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise PagesightError(f"{name} must be {what}, got '{value}'") from None
        request = self.request.replace(**{field_name: number})
        return replace(self, name=f"{self.name}/{name}:{number:g}", request=request)

    @property
    def needs_dense(self) -> bool:
        return self.request.mode in ("dense", "hybrid")

    def within(self) -> Config:
        """This configuration with each question searched inside its own documents only."""
        return replace(self, name=f"{self.name}{WITHIN}", within_document=True)

    def reranked(self, name: str, candidates: int | None = None, model: str | None = None) -> Config:
        """This configuration with reranker ``name`` (with ``model``) over its ``candidates`` best
        hits (None: the request's default), named ``<config>+<reranker>``."""
        changes = {"rerank": name, "rerank_model": model}
        if candidates is not None:
            changes["rerank_candidates"] = candidates
        return replace(
            self,
            name=f"{self.name.removesuffix(WITHIN)}+{name}{WITHIN if self.within_document else ''}",
            request=self.request.replace(**changes),
        )


METRICS = (
    *(f"recall@{k}" for k in metrics.RECALL_CUTOFFS),
    "ndcg@10",
    "mrr@10",
    *(f"success@{k}" for k in metrics.SUCCESS_CUTOFFS),
)
ALPHA_SWEEP = tuple(round(0.1 * step, 1) for step in range(11))


@dataclass
class Result:
    config: Config
    run: dict[str, list[tuple[str, float]]]  # query id -> (corpus id, score), best first
    per_query: dict[str, dict[str, float]]
    latencies: list[float] = field(repr=False)

    @property
    def means(self) -> dict[str, float]:
        return metrics.mean(self.per_query)

    def latency_ms(self, quantile: float) -> float:
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, round(quantile * (len(ordered) - 1)))]

    def summary(self, n_pages: int) -> dict:
        return {
            "config": self.config.name,
            **{name: round(value, 6) for name, value in self.means.items()},
            "n_queries": len(self.per_query),
            "n_pages": n_pages,
            "latency_ms_p50": round(1000 * statistics.median(self.latencies), 2),
            "latency_ms_p95": round(self.latency_ms(0.95), 2),
            "latency_ms_p99": round(self.latency_ms(0.99), 2),
        }


def default_index_dir(dataset: Dataset, text_from: str = TEXT_FROM[0]) -> Path:
    """Where ``pagesight eval`` keeps a dataset's index when none is given: one folder for each
    source of the pages' text (``TEXT_FROM``), and for the transcriptions, one for each content of
    texts.jsonl (an unchanged page file is not read again, so changed transcriptions need a new
    index)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha1(str(dataset.root.resolve()).encode())
    transcribed = text_from != TEXT_FROM[0]
    if transcribed and (dataset.root / TEXTS).is_file():
        key.update((dataset.root / TEXTS).read_bytes())
    name = f"{dataset.name}-texts" if transcribed else dataset.name
    return cache / "pagesight" / "eval" / f"{name}-{key.hexdigest()[:8]}"


def prepare_index(
    dataset: Dataset,
    path: Path,
    dense: bool,
    text_from: str = TEXT_FROM[0],
    trust_remote_code: bool = False,
    **ingest,
) -> tuple[Index, list]:
    """The dataset's index at ``path``, created or brought up to date; returns it with the failures.

    A new index gets dense vectors only when ``dense``; an existing one must have them if asked
    (or, for hybrid configurations, visual vectors to fuse with BM25 instead). With ``text_from``
    'dataset', the pages' text is the dataset's transcriptions (texts.jsonl); an existing index
    whose documents took their text from elsewhere is refused before anything is added to it.
    ``trust_remote_code`` is the index's leave to run a model's own code (``Index.open``).
    """
    if text_from not in TEXT_FROM:
        raise PagesightError(f"text_from must be one of {', '.join(TEXT_FROM)}, got '{text_from}'")
    transcribed = text_from == "dataset"
    if transcribed and not dataset.texts:
        raise PagesightError(f"{dataset.root}: no {TEXTS} (the pages' transcriptions) to index")
    exists = store_exists(path)
    settings = None if exists else Settings() if dense else Settings(dense_model=None)
    index = Index.open(path, settings=settings, trust_remote_code=trust_remote_code)
    if dense and not (index.settings.dense_model or index.settings.visual_encoder):
        index.close()
        raise PagesightError(
            f"{path}: index has no dense vectors, which dense and hybrid configurations need;"
            " evaluate lexical only or use a new --index"
        )
    other = [
        row.id
        for row in index.catalog.documents()
        if (row.meta.get("text_from") == TRANSCRIPT) != transcribed
    ]
    if other:
        index.close()
        read = "the dataset's transcriptions" if not transcribed else "their text layer or OCR"
        raise PagesightError(
            f"{path}: its documents ({other[0]}, ...) took their text from {read}; "
            f"index text from {text_from} into a new index (--index)"
        )
    if transcribed:
        ingest["transcripts"] = dataset.root / TEXTS
    report = index.add(dataset.documents, **ingest)
    return index, report.failed


def corpus_unit(index: Index, qrels: metrics.Qrels) -> str:
    """'page' when the judged corpus ids are page ids (``<doc>_<page>``), else 'document'."""
    documents = {row.id: row.n_pages for row in index.catalog.documents()}
    pages = {f"{doc}_{page}" for doc, n in documents.items() for page in range(1, n + 1)}
    judged = {doc for judged in qrels.values() for doc in judged}
    return "page" if len(judged & pages) >= len(judged & documents.keys()) else "document"


def evaluate(
    index: Index,
    dataset: Dataset,
    configs: Sequence[Config],
    depth: int = 100,
    progress: Callable[[Config, int], None] | None = None,
) -> list[Result]:
    """Each configuration's run over every judged query, ranked ``depth`` deep in corpus units; a
    question about a picture is searched with it by the configurations that have a visual run
    (``answer.ask.retrieve``)."""
    unit = corpus_unit(index, dataset.qrels)
    queries = {qid: dataset.queries[qid] for qid in dataset.qrels}
    results = []
    for config in configs:
        request = config.request.replace(k=depth)
        index.search(request.replace(query="warm up the retrievers", k=1))
        run: dict[str, list[tuple[str, float]]] = {}
        latencies = []
        for done, (qid, text) in enumerate(queries.items(), 1):
            within = {"doc_ids": dataset.documents_of(qid, unit)} if config.within_document else {}
            start = time.perf_counter()
            hits = retrieve(index, request.replace(query=text, **within), dataset.image(qid), evidence=False)
            latencies.append(time.perf_counter() - start)
            ranked: dict[str, float] = {}
            for hit in hits:
                ranked.setdefault(hit.page_id if unit == "page" else hit.doc_id, hit.score)
            run[qid] = list(ranked.items())
            if progress:
                progress(config, done)
        per_query = metrics.per_query(
            {qid: [doc for doc, _ in ranked] for qid, ranked in run.items()}, dataset.qrels
        )
        results.append(Result(config, run, per_query, latencies))
    return results
