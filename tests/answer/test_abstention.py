"""Issue 40: a model reader's refusal is recognised as not answering (``answer.abstention``), and
the question's constraints the extractive reader looks for in its evidence
(``answer.extractive.support``)."""

from __future__ import annotations

import pytest

from pagesight.answer import make_reader
from pagesight.answer.abstention import refusal
from pagesight.answer.extractive.support import Evidence, asked
from tests.answer.test_openai_reader import MODEL
from tests.eval.test_grid import Endpoint

REFUSALS = [
    "I don't know.",
    "Not answerable",
    "The answer cannot be determined from the provided pages.",
    "The provided pages do not mention the 2019 revenue.",
    "The document does not say who the CEO was.",
    "There is not enough information in the pages to answer.",
    "The information is not provided in the given pages.",
    "I'm unable to find this in the document.",
    "According to the provided pages, the figure for 2023 is not mentioned.",
    "There is no information about Apple in the document.",
    "I cannot answer this question based on the given pages.",
    "",
]
ANSWERS = [
    "$3.2 billion",
    "No, the company did not increase its dividend.",
    "None",
    "0",
    "The document does not give the exact figure, but the chart shows about 12%.",
    "Net sales were $3.2 billion; the margin is not disclosed.",
    "It cannot be determined exactly; approximately 40%.",
    "The report does not cover 2020. However, in 2019 revenue was $5M.",
    "The company could not find a buyer for the plant in 2019.",
    "The device does not support Bluetooth 5.0.",
]


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", REFUSALS)
def test_refusals_are_recognised(text):
    assert refusal(text)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", ANSWERS)
def test_answers_that_only_sound_like_refusals_are_answers(text):
    assert refusal(text) is None


@pytest.mark.timeout(10)
def test_the_constraints_of_a_question_leave_out_pages_format_words_and_parentheses():
    assert asked("What was Quayside's revenue in FY2031? Answer in USD millions.") == ["2031", "Quayside"]
    assert asked("How many figures are provided in Pages 400-640?") == []
    assert asked("What is the title of Figure 7? Please give your answer in JSON format.") == ["Figure 7"]
    assert asked("Which slide (slides 3 to 12) names the crane hire fee (in USD millions)?") == []
    assert asked("Tell me the prompt template used for label 'Harbour.Meet'.") == ["Harbour.Meet"]
    assert Evidence("American adults polled in 2020: 1,003").holds("Americans")
    assert not Evidence("Sales in fiscal 2021 were strong").holds("Shopee")
    assert Evidence("Revenue FY2021 ... FY21 ...").holds("2021")


@pytest.mark.timeout(10)
def test_a_declines_reason_shows_its_support_below_the_threshold():
    from pagesight.answer.extractive.confidence import Judgement

    assert "support 0.7699 < 0.7700" in Judgement(0.7699, {}).reason(0.77)
    assert "support 0.41 < 0.49" in Judgement(0.41, {}).reason(0.49)
    assert "does not mention" in Judgement(0.2, {}, ["Quorlan"]).reason(0.49)


@pytest.mark.timeout(30)
def test_a_model_readers_refusal_marks_its_reading_not_answered():
    """A real OpenAI-compatible HTTP server on loopback replies with a refusal, then an answer."""
    replies = iter(["The provided pages do not mention the 2031 revenue.", "$3.2 billion"])
    server = Endpoint(lambda body: next(replies))
    try:
        reader = make_reader("openai", model=MODEL, base_url=server.base_url, api_key="sk-test")
        declined = reader.read("What was the revenue in 2031?", [])
        answered = reader.read("What was the revenue in 2022?", [])
    finally:
        server.close()
    assert not declined.answered and declined.reason == "The provided pages do not mention the 2031 revenue."
    assert declined.text == "The provided pages do not mention the 2031 revenue."  # kept as said
    assert answered.answered and answered.reason is None and answered.text == "$3.2 billion"
