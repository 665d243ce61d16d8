"""TAT-QA's metric on invented answers, and a TAT-QA-shaped file imported, ingested and scored."""

from __future__ import annotations

import pytest

from pagesight.eval import tatqa


@pytest.mark.parametrize(
    ("prediction", "answer", "scale", "kind", "expected"),
    [
        # numbers are compared as numbers once the scale is applied, the prediction's own words
        # giving its scale
        ("4.5 million", "4.5", "million", "arithmetic", (1.0, 1.0)),
        ("$4,500 thousand", "4.5", "million", "arithmetic", (1.0, 1.0)),
        ("4.5", "4.5", "million", "arithmetic", (0.0, 0.0)),
        ("4.6 million", "4.5", "million", "arithmetic", (0.0, 0.0)),  # F1 is EM for figures
        ("12.5%", "12.5", "percent", "arithmetic", (1.0, 1.0)),
        ("12.5", "12.5", "percent", "arithmetic", (0.0, 0.0)),
        ("0.125", "12.5", "percent", "arithmetic", (1.0, 1.0)),  # a bare number read as it stands
        ("(3.2)", "-3.2", "", "arithmetic", (1.0, 1.0)),  # brackets: negative
        ("-3.20", "-3.2", "", "arithmetic", (1.0, 1.0)),
        ("3", "3", "", "count", (1.0, 1.0)),
        ("three", "3", "", "count", (0.0, 0.0)),
        ("$17,204", "$17,204", "thousand", "span", (0.0, 0.0)),  # the scale left out
        ("$17,204 thousand", "$17,204", "thousand", "span", (1.0, 1.0)),
        # words: punctuation, case and articles aside; F1 on the sets of words
        ("The harbour expansion.", "harbour expansion", "", "span", (1.0, 1.0)),
        ("costs of the new harbour", "new harbour costs", "", "span", (0.0, 0.86)),
        ("two thousand", "two", "thousand", "span", (1.0, 1.0)),  # a word's scale is a word
        # multi-span: a set of spans (lines or semicolons), scored as one bag of words
        ("Oslo\nBergen", ["Bergen", "Oslo"], "", "multi-span", (1.0, 1.0)),
        ("Bergen; Oslo", ["Bergen", "Oslo"], "", "multi-span", (1.0, 1.0)),
        ("Oslo and Bergen", ["Bergen", "Oslo"], "", "multi-span", (0.0, 0.8)),
        ("Oslo", ["Bergen", "Oslo"], "", "multi-span", (0.0, 0.67)),
        ("1,200 thousand\n900 thousand", ["900", "1,200"], "thousand", "multi-span", (1.0, 1.0)),
        ("1,200\n900", ["900", "1,200"], "thousand", "multi-span", (0.0, 0.0)),
        ("1,200\n900", ["900", "1,200"], "", "multi-span", (1.0, 1.0)),
        ("1,200 900", ["900", "1,200"], "", "multi-span", (0.0, 0.0)),  # one span: not a number
        ("", "4.5", "million", "arithmetic", (0.0, 0.0)),
    ],
)
def test_tatqa_exact_match_and_f1(prediction, answer, scale, kind, expected):
    assert tatqa.em_f1(prediction, answer, scale, kind) == expected


def test_declined_answers_score_nothing():
    row = {"answer": "4.5", "scale": "million", "answer_type": "arithmetic"}
    assert tatqa.scores("4.5 million", row) == {"tatqa_em": 1.0, "tatqa_f1": 1.0}
    assert tatqa.scores("4.5 million", row, answered=False) == {"tatqa_em": 0.0, "tatqa_f1": 0.0}


def test_numbers_read_as_the_authors_read_them():
    assert tatqa.to_number("$1,234.5") == 1234.5
    assert tatqa.to_number("2.5 billion") == 2_500_000_000
    assert tatqa.to_number("(12)") == -12
    assert tatqa.to_number("(1,200)") == 1200  # a bracket with a comma is not read as negative
    assert tatqa.to_number("7.5%") == 0.075
    assert tatqa.to_number(".5") is None and tatqa.to_number("none") is None
    assert tatqa.is_number("1,234 million") and not tatqa.is_number("1,234 units")
    assert tatqa.normalize("The Net  Sales, 1,234") == "net sales 1234"
