import pytest

from pagesight.errors import PagesightError
from pagesight.eval.answers import (
    answer_scores,
    choice_question,
    chosen_letter,
    exact_match,
    relaxed_accuracy,
    scores,
    to_number,
    token_f1,
)
from pagesight.eval.judges import Judge, read_grade


def test_exact_match_and_f1_normalise_like_squad():
    assert exact_match("The Eiffel Tower!", "eiffel tower") == 1.0
    assert exact_match("Eiffel", ["eiffel tower", "Eiffel"]) == 1.0
    assert token_f1("the red brick house", "a red house") == pytest.approx(0.8)
    assert token_f1("blue", "red house") == 0.0


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("1,040", "1000", 1.0),  # 4% off
        ("1,060", "1000", 0.0),  # 6% off
        ("12.5%", "0.125", 1.0),
        ("0", "0", 1.0),
        ("0.01", "0", 0.0),
        ("Q3", "q3", 1.0),
        ("West", "East", 0.0),
        ("about 3 or 4", "3", 0.0),  # more than one number is no single answer
    ],
)
def test_relaxed_accuracy_tolerates_five_percent_on_numbers(prediction, reference, expected):
    assert relaxed_accuracy(prediction, reference) == expected


def test_numbers_are_read_from_short_answers():
    assert to_number("EUR 4,620") == 4620.0
    assert to_number("-3.5") == -3.5
    assert to_number("no number") is None
    assert answer_scores("4,620", "4620")["relaxed_accuracy"] == 1.0


def test_every_metric_honours_aliases_and_ignores_thinking():
    found = scores("<think>Is it 1,200? Or Paris?</think> The capital is Lutetia", ["Paris", "Lutetia"])
    assert found == {"exact_match": 0.0, "f1": pytest.approx(0.5), "relaxed_accuracy": 0.0, "contains": 1.0}
    assert scores("<think>maybe 7</think>1,200", ["1150", "about twelve hundred"])["relaxed_accuracy"] == 1.0
    assert scores("Lutetia", ["Paris", "Lutetia"])["exact_match"] == 1.0


def test_multiple_choice_is_scored_by_letter():
    options = ["Lisbon", "Porto", "Faro"]
    assert choice_question("Capital?", options).splitlines()[1:4] == ["Options:", "A. Lisbon", "B. Porto"]
    assert chosen_letter("(A)", options) == "A"
    assert chosen_letter("The answer is B.", options) == "B"
    assert chosen_letter("<think>A or C?</think> It is Faro", options) == "C"
    assert chosen_letter("I cannot tell", options) is None
    assert chosen_letter("A port city: Porto", options) == "B"  # a capital opening a sentence is no letter
    assert chosen_letter("Option (C), Faro", options) == "C"
    assert chosen_letter("Lisbon or Porto", options) is None  # two options named: no choice
    right = scores("B", ["B"], options)
    assert set(right.values()) == {1.0} and set(scores("A", ["B"], options).values()) == {0.0}


@pytest.mark.parametrize(
    ("kind", "reply", "label", "score"),
    [
        ("binary", "YES, it matches.", "YES", 1.0),
        ("binary", "No.", "NO", 0.0),
        ("graded", "Partially correct: the year is missing.", "PARTIALLY_CORRECT", 0.5),
        ("graded", "INCORRECT", "INCORRECT", 0.0),
        ("simpleqa", "Grade: NOT_ATTEMPTED", "NOT_ATTEMPTED", 0.0),
        ("simpleqa", "<think>CORRECT? no</think>INCORRECT", "INCORRECT", 0.0),
        ("simpleqa", "Not attempted", "NOT_ATTEMPTED", 0.0),
        ("simpleqa", "yes", "UNREADABLE", 0.0),  # not one of this judge's grades
    ],
)
def test_each_judge_reads_its_own_grades(kind, reply, label, score):
    prompts = []
    grade = Judge(kind, lambda prompt: prompts.append(prompt) or reply)(
        "Who?", ["Ada Lovelace", "Lovelace"], "Ada"
    )
    assert (grade.label, grade.score, grade.reply) == (label, score, reply)
    assert "Reference answer: Ada Lovelace OR Lovelace" in prompts[0] and "Answer to grade: Ada" in prompts[0]
    assert read_grade(reply, kind) == label


def test_an_empty_answer_is_not_attempted_and_costs_no_call():
    def refuse(prompt: str) -> str:
        raise AssertionError("an empty answer is graded without the model")

    assert Judge("simpleqa", refuse)("Q", ["a"], "  <think>no idea</think> ").label == "NOT_ATTEMPTED"
    assert Judge("graded", refuse)("Q", ["a"], "").label == "INCORRECT"
    assert Judge("binary", refuse)("Q", ["a"], "").label == "NO"
    assert [Judge("simpleqa", refuse).choice(c, "B").label for c in ("B", "A", None)] == [
        "CORRECT",
        "INCORRECT",
        "NOT_ATTEMPTED",
    ]
    with pytest.raises(PagesightError, match="judge must be one of binary, graded, simpleqa"):
        Judge("lenient", refuse)
