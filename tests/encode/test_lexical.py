"""The lines a hit quotes: distinct query terms counted per line, by stem prefix, in any case."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pagesight.encode.lexical import query_terms, term_matcher, with_phrases
from pagesight.store.bm25 import LexicalRetriever


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


def test_phrase_terms_are_neighbouring_words_and_weigh_less_in_a_query():
    assert with_phrases(["total", "current", "liabil"]) == [
        "total",
        "current",
        "liabil",
        "total current",
        "current liabil",
    ]
    words, phrases = query_terms("the total current liabilities, total", phrases=True)
    assert (words, phrases) == (
        ["total", "current", "liabil", "total"],
        ["total current", "current liabil", "liabil total"],
    )
    assert query_terms("total current liabilities", phrases=False)[1] == []


@pytest.mark.timeout(60)
def test_a_saved_phrase_index_scores_as_it_was_built(tmp_path: Path):
    texts = [
        "Total current liabilities 4,521",
        "In total, liabilities grew; current debt fell",
        "Total current assets 9,100 and total current liabilities",
        "barn owls hunt voles",
    ]
    built = LexicalRetriever.build(np.arange(10, 14), texts, phrases=True)
    built.save(tmp_path / "bm25")
    loaded = LexicalRetriever.load(tmp_path / "bm25")
    assert "total current" not in loaded.model.vocab_dict  # phrases live beside the words' vocabulary
    for query in ("total current liabilities", "current debt", "owls", "liabilities total"):
        assert loaded.search(query, 10) == built.search(query, 10), query
