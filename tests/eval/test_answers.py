import pytest

from pagesight.eval.answers import LLMJudge, answer_scores, exact_match, relaxed_accuracy, to_number, token_f1


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


def test_judge_takes_the_majority_of_three_replies():
    replies = iter(["YES, it matches.", "No.", "yes"])
    prompts = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return next(replies)

    verdict = LLMJudge(model)("Who?", "Ada Lovelace", "Lovelace")
    assert verdict.aligned and verdict.votes == [True, False, True]
    assert len(prompts) == 3 and "Reference answer: Ada Lovelace" in prompts[0]
    unclear = LLMJudge(lambda _: "I cannot say")("Q", "a", "b")
    assert not unclear.aligned and unclear.votes == [None, None, None]
    with pytest.raises(ValueError):
        LLMJudge(model, votes=2)
