"""The learned ranker (``search.ranking``): its features, fitting and files, and its place in a
hybrid search."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.eval.harness import Config
from pagesight.request import SearchRequest
from pagesight.search import ranking
from pagesight.search.ranking import FEATURES, FirstStageHit
from tests.conftest import make_pdf

QUESTION = (
    "What is the FY2018 capital expenditure amount (in USD millions) for ACME? Give a response to "
    "the question by relying on the details shown in the cash flow statement."
)
STATEMENT = FirstStageHit(
    ranking.tile_profile(
        "Consolidated Statements of Cash Flows\n(Millions) 2018 2017\nCapital expenditures (1,577) (1,373)\n"
        "Net cash used in investing activities (222) (3,086)",
        "Consolidated Statements of Cash Flows",
    ),
    fused=0.8,
    bm25=9.0,
    dense=0.5,
)
NOTE = FirstStageHit(
    ranking.tile_profile(
        "Supplemental cash flow information. The cash flow statement shows capital expenditure and the\n"
        "amount of cash paid for interest, as the statement of cash flows describes each year.",
        "",
    ),
    fused=1.0,
    bm25=12.0,
    dense=0.7,
)


def column(rows: np.ndarray, name: str) -> np.ndarray:
    return rows[:, FEATURES.index(name)]


@pytest.mark.timeout(60)
def test_features_read_how_each_candidate_holds_the_question():
    weights = ranking.question_weights(QUESTION, None)
    assert set(weights) >= {"capit", "expenditur", "amount", "acm", "cash", "flow", "statement"}
    rows = ranking.features(weights, QUESTION, [NOTE, STATEMENT])
    assert rows.shape == (2, len(FEATURES))
    assert list(column(rows, "fused")) == [1.0, 0.8] and list(column(rows, "bm25")) == [1.0, 0.75]
    assert list(column(rows, "dense")) == [1.0, 0.0]
    assert list(column(rows, "log_rank")) == [0.0, pytest.approx(np.log(2))]
    total = sum(weights.values())
    # the statement's heading holds "cash", "flow" and "statement" (stems match "Statements", "Flows")
    assert column(rows, "heading")[1] == pytest.approx(3 / total) and column(rows, "heading")[0] == 0
    assert list(column(rows, "no_heading")) == [1.0, 0.0]
    # the note's first line holds five of the question's words, the statement's title line three
    assert column(rows, "best_line")[0] == pytest.approx(5 / total)
    assert column(rows, "best_line")[1] == pytest.approx(3 / total)
    # 6 of the statement's 20 words are figures (years included), none of the note's
    assert column(rows, "numbers")[1] == pytest.approx(6 / 20) and column(rows, "numbers")[0] == 0
    assert list(column(rows, "numbers_year")) == list(column(rows, "numbers"))  # the question names FY2018
    assert list(column(rows, "years")) == [0.0, 1.0]
    for name in ranking.CENTRED:  # each less its mean over the candidates
        own, centred = column(rows, name), column(rows, f"{name}-centred")
        assert centred == pytest.approx(own - own.mean())
    no_year = ranking.features(weights, "capital expenditure amount", [NOTE, STATEMENT])
    assert not column(no_year, "numbers_year").any() and not column(no_year, "years").any()
    assert ranking.features(weights, QUESTION, []).shape == (0, len(FEATURES))


@pytest.mark.timeout(60)
def test_a_question_word_weighs_its_burstiness():
    weights = ranking.question_weights("the capital expenditure amount", {"capit": 1.0, "expenditur": 0.8})
    assert weights == {"capit": 1.0, "expenditur": 0.8, "amount": 0.5}  # unknown words weigh the floor


@pytest.mark.timeout(60)
def test_a_fitted_ranker_orders_by_what_it_learned_and_reads_back_the_same(tmp_path):
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(40):  # the relevant candidate is the one whose best line holds most of the question
        rows = rng.random((10, len(FEATURES)))
        relevant = np.zeros(10, dtype=bool)
        relevant[np.argmax(rows[:, FEATURES.index("best_line")])] = True
        groups.append((rows, relevant))
    fitted = ranking.fit(groups, depth=10, about={"fitted on": "test"})
    assert fitted.coef[FEATURES.index("best_line")] == max(fitted.coef)
    rows, relevant = groups[0]
    assert np.argmax(fitted.scores(rows)) == np.argmax(relevant)
    path = tmp_path / "ranker.json"
    fitted.save(path)
    read = ranking.Ranker.load(path)
    assert read.depth == 10 and read.about == {"fitted on": "test"}
    assert read.scores(rows) == pytest.approx(fitted.scores(rows), abs=1e-6)
    with pytest.raises(PagesightError, match="relevant and other"):
        ranking.fit([(rows, np.zeros(10, dtype=bool))])


@pytest.mark.timeout(60)
def test_the_packaged_ranker_is_read_and_a_bad_ranker_file_is_refused_by_name(tmp_path):
    packaged = ranking.ranker()
    assert packaged.depth == ranking.DEPTH and len(packaged.coef) == len(FEATURES)
    assert set(packaged.about["fitted on"]) == {"irpapers", "financebench-dev", "mmlongbench-dev"}
    missing = tmp_path / "missing.json"
    with pytest.raises(PagesightError, match="missing.json does not exist"):
        ranking.ranker(str(missing))
    other = tmp_path / "other.json"
    record = json.loads(ranking.DEFAULT.read_text())
    other.write_text(json.dumps({**record, "features": record["features"][:-1]}))
    with pytest.raises(PagesightError, match="other.json was fitted on other features"):
        ranking.ranker(str(other))
    short = tmp_path / "short.json"
    short.write_text(json.dumps({**record, "coef": record["coef"][:-1]}))
    with pytest.raises(PagesightError, match="short.json is not a ranker file: 20 means"):
        ranking.ranker(str(short))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(PagesightError, match="broken.json is not a ranker file"):
        ranking.ranker(str(broken))
    with pytest.raises(PagesightError, match="ranker_file needs the ranker on"):
        SearchRequest("q", ranker=False, ranker_file=str(ranking.DEFAULT))


@pytest.mark.timeout(60)
def test_the_packaged_ranker_puts_the_statement_above_the_note_that_outscored_it():
    weights = ranking.question_weights(QUESTION, None)
    note, statement = ranking.rank(ranking.ranker(), weights, QUESTION, [NOTE, STATEMENT])
    assert statement > note


@pytest.fixture(scope="module")
def filing(tmp_path_factory) -> Index:
    """A small annual report: a page of prose about capital spending, short pages about segments,
    the statement of cash flows (figures under its heading) and a note about it."""
    folder = tmp_path_factory.mktemp("filing")
    prose = [
        "ACME Corp Annual Report 2018",
        "Liquidity and capital resources. Our cash flow from operations funds capital expenditure,",
        "and the amount we spend on capital expenditure is described in the cash flow statement.",
    ]
    statement = [
        "ACME Corp Annual Report 2018",
        "Consolidated Statements of Cash Flows",
        "(Millions) 2018 2017 2016",
        "Net income 5,363 4,858 5,050",
        "Capital expenditures (1,577) (1,373) (1,420)",
    ]
    note = [
        "ACME Corp Annual Report 2018",
        "Note 9. Supplemental cash flow information",
        "Cash paid for interest and taxes; the amount of capital expenditure is in the statement.",
    ]
    segments = [["ACME Corp Annual Report 2018", f"Segment {n}: capital spending grew."] for n in range(4)]
    make_pdf(folder / "acme.pdf", [prose, *segments, statement, note])
    index = Index.open(folder / "index")
    report = index.add([folder / "acme.pdf"])
    assert report.ok, report.failed
    return index


@pytest.mark.timeout(300)
def test_the_learned_ranker_reorders_a_hybrid_searchs_head(filing, tmp_path):
    # a ranker fitted to prefer the shortest candidates, against a fused order that puts them last
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(40):
        rows = rng.random((10, len(FEATURES)))
        relevant = np.zeros(10, dtype=bool)
        relevant[np.argmin(rows[:, FEATURES.index("length")])] = True
        groups.append((rows, relevant))
    shortest = tmp_path / "shortest.json"
    ranking.fit(groups, depth=5).save(shortest)

    unranked = filing.search(SearchRequest(QUESTION, k=8, ranker=False))
    ranked = filing.search(SearchRequest(QUESTION, k=8, ranker_file=str(shortest)))
    assert all("ranker" not in h.scores for h in unranked)
    assert unranked[0].page == 6  # the statement: its heading and figures
    # the first five reordered by the fitted ranker, the rest as they were, below them
    assert len(unranked) == 7 and {h.page_id for h in ranked[:5]} == {h.page_id for h in unranked[:5]}
    assert [h.page_id for h in ranked[5:]] == [h.page_id for h in unranked[5:]]
    scores = [h.scores["ranker"] for h in ranked[:5]]
    assert scores == sorted(scores, reverse=True) and all("ranker" not in h.scores for h in ranked[5:])
    assert ranked[0].page in (2, 3, 4, 5) and ranked[0].page_id != unranked[0].page_id  # a segment's page
    # the packaged ranker keeps the statement first
    assert filing.search(SearchRequest(QUESTION, k=3))[0].page == 6
    # one retriever's run is returned as it ranks
    assert all("ranker" not in h.scores for h in filing.search(SearchRequest(QUESTION, mode="lexical")))
    # a missing ranker file is refused by the search before it searches, in any mode
    with pytest.raises(PagesightError, match="gone.json does not exist"):
        filing.search(SearchRequest(QUESTION, mode="lexical", ranker_file=str(tmp_path / "gone.json")))
    config = Config.parse("hybrid/unranked")
    assert config.name == "hybrid/unranked" and config.request.ranker is False
