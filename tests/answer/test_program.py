"""A question read once into its program (``answer/extractive/program.py``): its periods, scale
and written formula from its figures and symbols, its operation and answer form from the fitted
question model, and what an answer's form is."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight.answer.extractive.program import (
    FORMS,
    OPERATIONS,
    form,
    hashed,
    question_features,
    read_question,
    reader_model,
)


def test_periods_in_the_order_the_question_names_them():
    program = read_question("What was the change in dock fees from FY2030 to fiscal 2031?", {})
    assert program.years == ("2030", "2031")
    assert read_question("Revenue in FY31 against '30?", {}).years == ("2031", "2030")
    assert read_question("What is 2030.5 or 12,030 of it?", {}).years == ()  # figures, not years


def test_the_scale_asked_and_a_formula_written_out():
    program = read_question("What is the FY2031 net sales figure (in USD billions)?", {})
    assert program.scale == "billion" and program.formula is None
    written = read_question(
        "What is the quay ratio? It is defined as: (berths - idle berths) / berths. Round it to two places.",
        {},
    )
    assert written.formula == "(berths - idle berths) / berths" and written.operation == "formula"
    assert read_question("What is the increase / (decrease) in tolls from 2030 to 2031?", {}).formula is None


def test_without_a_model_every_operation_and_form_is_alike():
    program = read_question("How much did tolls change?", {})
    assert set(program.probabilities) == set(OPERATIONS) and set(program.forms) == set(FORMS)
    assert len(set(program.probabilities.values())) == 1 and len(set(program.forms.values())) == 1


def test_the_packaged_model_reads_operations_and_forms_from_words_it_was_fitted_on():
    fitted = reader_model()["question"]
    assert (
        read_question(
            "What was the percentage change in ferry tickets between 2030 and 2031?", fitted
        ).operation
        == "percent_change"
    )
    assert read_question("What was the average mooring fee for 2030 and 2031?", fitted).operation == "average"
    assert read_question("What were the crane hire fees in 2031?", fitted).operation == "span"
    when = read_question("When was the Brenvik quay opened?", fitted).forms
    assert max(when, key=when.get) == "date"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1966", "date"),
        ("12 May 2031", "date"),
        ("FY2031", "date"),
        ("$11.8 billion", "number"),
        ("(1,577) million", "number"),
        ("7%", "number"),
        ("Hugo Kestrel", "name"),
        ("Level 4", "name"),
        ("because of a warm spring", "text"),
        ("2031; 2030", "date"),
        ("412.5 million; 398.0 million", "number"),
        ("Oslo; a warm spring", "text"),
    ],
)
def test_an_answers_form(text, expected):
    assert form(text) == expected


def test_question_features_are_the_same_in_every_process():
    features = question_features("What was the change in dock fees from 2030 to 2031?")
    assert "w:chang" in features and "p:<year> to" in features and "y:2" in features
    x = hashed(features)
    assert x.shape == (1 << 14,) and np.isclose(np.linalg.norm(x), 1.0)
    assert np.array_equal(x, hashed(list(features)))


@pytest.mark.timeout(30)
def test_a_figure_is_read_whole_with_its_unit_and_not_from_inside_a_word():
    from pagesight.answer.extractive.lines import AMOUNT
    from pagesight.answer.extractive.reader import parts, unit

    found = [m.group() for m in AMOUNT.finditer("BM25's k1 is set to 60, then 1,536 bytes; Q3 $4.2 and 7%")]
    assert found == ["60", "1,536", "$4.2", "7%"]  # not the digits of BM25, k1 or Q3, nor the comma after 60
    sentence = "Each vector of 384 floats takes 1,536 bytes, so a page of 1024 pixels costs more."
    offered = parts(sentence, "How many bytes does a vector of 384 floats take?")
    assert "1,536 bytes" in offered and "1024 pixels" in offered and "1,536" in offered
    assert not any(part.startswith("384") for part in offered)  # the question's own figure
    assert unit("1,536 bytes") == 1.0 and unit("1,536") == 0.0 and unit("Brenvik 1,536") == 0.0
    offered = parts("Brenvik quoted a lead time of 12 working days.", "Which lead time did Brenvik quote?")
    assert {"12", "12 working", "12 working days"} <= set(offered) and unit("12 working days") == 1.0
    offered = parts("Pages are cut at 1024 pixels so that tiles stay small.", "How wide is a tile cut?")
    assert "1024 pixels" in offered and not any(part.startswith("1024 pixels so") for part in offered)
    assert unit("1024 pixels so") == 0.0  # no unit holds a function word
