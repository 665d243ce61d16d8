"""Hard negatives mined from a real lexical index: the query's own page never, candidates that hold
the answer or score too close to the positive dropped, the rest kept in rank order, all counted."""

from __future__ import annotations

import pytest

from pagesight import Index
from pagesight.settings import Settings
from pagesight.train.corpus import load_tiles
from pagesight.train.negatives import mine
from pagesight.train.queries import SyntheticQuery
from tests.conftest import make_pdf

from .conftest import PAGES

RESERVOIR = "How many cubic metres of water does the Brightmere reservoir hold after the spring floods?"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mining")
    for number, lines in enumerate(PAGES):
        make_pdf(folder / f"topic-{number}.pdf", [lines])
    # another page that answers the reservoir question too: a false negative to be caught
    make_pdf(
        folder / "digest.pdf",
        [
            [
                "Water news: the Brightmere reservoir holds 42 million cubic metres",
                "after the spring floods, the county says.",
            ]
        ],
    )
    opened = Index.open(folder / "index", settings=Settings(dense_model=None))
    opened.add(folder, jobs=1)
    yield opened
    opened.close()


def query(text: str, doc: str, answer: str = "") -> SyntheticQuery:
    return SyntheticQuery(text, -1, doc, 1, answer)


@pytest.mark.timeout(30)
def test_negatives_are_other_pages_in_rank_order(index):
    tiles = load_tiles(index.catalog)
    ranked = [h.doc_id for h in index.search("water reservoir metres floods", k=10, mode="lexical")]
    found = mine(index, [query("water reservoir metres floods", "topic-0")], tiles, ["lexical"], 2, margin=10)
    (mined,), report = found
    by_id = {t.id: t for t in tiles}
    names = [by_id[i].doc_id for i in mined]
    assert "topic-0" not in names and len(names) == 2
    assert names == [doc for doc in ranked if doc != "topic-0"][:2]
    assert report.kept == 2 and report.found_by == {"lexical": 2} and report.without_negatives == 0


@pytest.mark.timeout(30)
def test_a_candidate_holding_the_answer_is_a_false_negative(index):
    tiles = load_tiles(index.catalog)
    # margin 10: no candidate is "too close", so only the answer rule can drop one
    (mined,), report = mine(
        index, [query(RESERVOIR, "topic-0", "42 million")], tiles, ["lexical"], 3, margin=10
    )
    by_id = {t.id: t for t in tiles}
    assert "digest" not in [by_id[i].doc_id for i in mined]
    assert report.dropped == {"contains answer": 1}
    # without the answer the same page is a (wrong) negative: the rule is what removed it
    (unfiltered,), _ = mine(index, [query(RESERVOIR, "topic-0")], tiles, ["lexical"], 3, margin=10)
    assert "digest" in [by_id[i].doc_id for i in unfiltered]


@pytest.mark.timeout(30)
def test_candidates_scoring_near_the_positive_are_dropped_and_the_thresholds_reported(index):
    tiles = load_tiles(index.catalog)
    # at the default margin the digest, which scores as high as the positive, is "too close"
    (mined,), report = mine(index, [query(RESERVOIR, "topic-0")], tiles, ["lexical"], per_query=3)
    by_id = {t.id: t for t in tiles}
    assert "digest" not in [by_id[i].doc_id for i in mined] and report.dropped == {"too close": 1}
    # margin 0: every candidate of a run holding the positive is "too close"
    (mined,), report = mine(index, [query(RESERVOIR, "topic-0")], tiles, ["lexical"], per_query=3, margin=0.0)
    assert mined == [] and report.dropped["too close"] == report.candidates > 0
    assert report.without_negatives == 1
    described = report.to_dict()
    assert described["thresholds"]["too_close"].startswith("score >= 0 x")
    assert "50%" in described["thresholds"]["contains_answer"]
