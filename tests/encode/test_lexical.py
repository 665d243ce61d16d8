"""The lines a hit quotes: distinct query terms counted per line, by stem prefix, in any case."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pagesight.encode.lexical import (
    BURST_FLOOR,
    burst_weights,
    line_words,
    query_stems,
    query_weights,
    stems_by_line,
    term_matcher,
    tokenize,
    with_phrases,
)
from pagesight.store.local.bm25 import LexicalRetriever
from pagesight.store.local.postings import Postings
from pagesight.store.local.segment import Segment


def test_each_line_counts_the_distinct_query_terms_it_holds():
    count = term_matcher("Retrieval fusion ranks")
    lines = [
        "RECIPROCAL RANK FUSION",  # rank, fusion (upper case)
        "retrievers and retrieval",  # one term, twice
        "İstanbul: nothing here",  # a lower-casing that lengthens the line must not shift the next
        "fused ranking of retrieved pages",  # rank, retriev (fused is not a fusion prefix)
        "",
    ]
    assert count(lines) == [2, 1, 0, 2, 0]
    assert term_matcher("the of and")(["the end"]) == [0]  # stopwords only: no term


def test_a_tiles_words_by_line_find_the_stems_the_pattern_finds():
    lines = [
        "RECIPROCAL RANK FUSION",
        "retrievers and retrieval",
        "İstanbul: nothing here",
        "fused ranking of retrieved pages",
        "",
        "Système de régulation",  # accents set aside, as the French stemmer's stems have them
    ]
    words = line_words("\n".join(lines))
    for query, language in (
        ("Retrieval fusion ranks", "en"),
        ("the of and", "en"),
        ("systèmes régler", "fr"),
    ):
        stems = query_stems(query, language)
        found = stems_by_line(stems, words)
        assert [len(found.get(i, ())) for i in range(len(lines))] == term_matcher(query, language)(lines)
    assert stems_by_line(query_stems("retrieval ranks"), words) == {
        0: {"rank"},
        1: {"retriev"},
        3: {"rank", "retriev"},
    }
    # a word matches its longest stem only, as the pattern's longest alternative
    assert stems_by_line(["capital", "capit"], line_words("capitalization\ncapitol")) == {
        0: {"capital"},
        1: {"capit"},
    }


def test_phrase_terms_are_neighbouring_words_and_weigh_less_in_a_query():
    assert with_phrases(["total", "current", "liabil"]) == [
        "total",
        "current",
        "liabil",
        "total current",
        "current liabil",
    ]
    weights = query_weights("the total current liabilities, total", phrases=True, bursts=None)
    assert weights == {
        "total": 2,
        "current": 1,
        "liabil": 1,
        "total current": 0.5,
        "current liabil": 0.5,
        "liabil total": 0.5,
    }
    assert query_weights("total current liabilities", phrases=False, bursts=None) == {
        "total": 1,
        "current": 1,
        "liabil": 1,
    }
    # with the collection's bursty words, the others weigh the floor, and a phrase its lighter word
    weights = query_weights("total current liabilities", phrases=True, bursts={"liabil": 1.0, "current": 0.8})
    assert weights == {
        "total": BURST_FLOOR,
        "current": 0.8,
        "liabil": 1.0,
        "total current": 0.25,
        "current liabil": 0.4,
    }


def test_bursty_words_weigh_more_than_words_spread_over_every_tile():
    tiles = [f"The information provided here concerns item {n}." for n in range(40)]
    tiles[3] += " Liabilities: current liabilities, other liabilities and total liabilities."
    tiles[9] += " Liabilities rose."
    weights = burst_weights(tokenize(tiles, phrases=True))
    assert weights.get("liabil") == 1.0  # five times on two tiles of forty: bursty
    assert "inform" not in weights and "provid" not in weights  # once on every tile: the floor
    assert all(" " not in term for term in weights)  # words only


@pytest.mark.timeout(60)
def test_a_saved_phrase_index_scores_as_it_was_built(tmp_path: Path):
    texts = [
        "Total current liabilities 4,521",
        "In total, liabilities grew; current debt fell",
        "Total current assets 9,100 and total current liabilities",
        "barn owls hunt voles",
    ]
    built = LexicalRetriever.build(np.arange(10, 14), texts, phrases=True)
    built.postings[0].save(tmp_path / "bm25")
    loaded = LexicalRetriever([Segment(Postings.load(tmp_path / "bm25"))], phrases=True)
    assert loaded.postings[0].terms.dtype == np.uint64  # words and phrases kept by hash: no strings
    for query in ("total current liabilities", "current debt", "owls", "liabilities total"):
        assert loaded.search(query, 10) == built.search(query, 10), query
