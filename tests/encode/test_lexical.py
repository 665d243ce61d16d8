"""The lines a hit quotes: distinct query terms counted per line, by stem prefix, in any case."""

from __future__ import annotations

from pagesight.encode.lexical import term_matcher


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
