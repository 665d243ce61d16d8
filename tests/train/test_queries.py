"""Synthetic queries: offline from tile text, and from a reader model behind a real local
OpenAI-compatible server, with the filters against vague and unanswerable questions."""

from __future__ import annotations

import pytest

from pagesight.answer.openai_chat import OpenAIReader
from pagesight.train.corpus import TrainingTile
from pagesight.train.queries import (
    FilterReport,
    Vocabulary,
    contains,
    informative,
    keyword_query,
    model_queries,
    offline_queries,
    question,
    rejection,
    sentences,
)
from tests.answer.test_openai_reader import ChatServer, Reply, completion

from .conftest import PAGES

TILES = [TrainingTile(n, f"topic-{n}", 1, 0, "\n".join(lines)) for n, lines in enumerate(PAGES)]
VOCABULARY = Vocabulary(t.text for t in TILES)


@pytest.mark.timeout(10)
def test_sentences_rejoin_lines_and_words_cut_by_hyphens():
    text = "Engineers raised the dam by 3 me-\ntres in spring. The re\ufffeservoir\nholds water."
    assert sentences(text) == [
        "Engineers raised the dam by 3 metres in spring.",
        "The reservoir holds water.",
    ]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("Copper cathodes from the smelter reached a purity of 99.97 percent in the trial.", True),
        ("Short line here.", False),
        (
            "Gautier Izacard, Patrick Lewis, Maria Lomeli, Lucas Hosseini, Fabio Petroni and Timo Schick.",
            False,
        ),
        (
            "Few-shot learning with retrieval augmented language models. arXiv preprint arXiv:2208.03299, 2022.",
            False,
        ),
        (
            "In Proceedings of the Conference on Empirical Methods in natural language processing, pages 1-9.",
            False,
        ),
        ("0.41 0.52 0.63 0.74 0.85 0.96 0.17 0.28 0.39 0.40 results", False),
    ],
)
def test_informative_sentences_are_prose_not_citations_names_or_numbers(sentence, expected):
    assert informative(sentence) is expected


@pytest.mark.timeout(10)
def test_a_question_asks_for_the_number_and_keeps_its_answer():
    text, answer = question(
        "However, we found that copper cathodes reached a purity of 99.97 percent during the trial run.",
        VOCABULARY,
    )
    assert answer == "99.97"
    assert (
        text
        == "The authors found that copper cathodes reached a purity of what percent during the trial run?"
    )


@pytest.mark.timeout(10)
def test_without_a_number_the_rarest_word_is_asked_for():
    text, answer = question("Researchers attribute the loss mainly to warmer autumn rain.", VOCABULARY)
    assert answer.lower() in {"researchers", "attribute", "loss", "mainly", "warmer", "autumn", "rain"}
    assert "what" in text.lower() and answer not in text and text.endswith("?")


@pytest.mark.timeout(10)
def test_keyword_queries_keep_the_rarest_words_in_order():
    query = keyword_query(
        "The orchestra of Kirkwall performed the symphony with 64 musicians.", VOCABULARY, 3
    )
    words = query.split()
    assert len(words) == 3 and set(words) <= {"orchestra", "Kirkwall", "performed", "symphony", "musicians"}
    order = ["orchestra", "Kirkwall", "performed", "symphony", "musicians"]
    assert [order.index(w) for w in words] == sorted(order.index(w) for w in words)


@pytest.mark.timeout(10)
def test_offline_queries_come_from_their_tile_and_their_answers_are_on_it():
    queries = offline_queries(TILES, VOCABULARY, per_tile=2, keyword_share=0.0)
    assert {q.tile_id for q in queries} == {t.id for t in TILES}
    for q in queries:
        tile = TILES[q.tile_id]
        assert (q.doc_id, q.page, q.source) == (tile.doc_id, 1, "offline-question")
        assert q.text.endswith("?") and " what " in f" {q.text.lower()} "
        assert q.answer and contains(tile.text, q.answer)
    assert offline_queries(TILES, VOCABULARY, 2, 0.0, seed=3) == offline_queries(
        TILES, VOCABULARY, 2, 0.0, seed=3
    )


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text, answer, reason",
    [
        ("What does this figure show about the reservoir?", "water", "vague"),
        ("Which dam?", "northern", "too short"),
        ("How much water does the Brightmere reservoir hold?", "", "no answer"),
        ("How much water does the Brightmere reservoir hold?", "7 litres", "answer not on the tile"),
        ("How much water does the Brightmere reservoir hold?", "42 million cubic metres", None),
    ],
)
def test_model_questions_are_filtered(text, answer, reason):
    assert rejection(text, answer, TILES[0].text, set()) == reason


@pytest.mark.timeout(30)
def test_a_reader_shown_each_tile_writes_questions_that_are_filtered():
    reply = (
        "1. How much water does the Brightmere reservoir hold after the spring floods? || 42 million cubic metres\n"
        "2. What is shown on this page? || a reservoir\n"
        "3. By how much was the northern dam of Brightmere raised? || 9 metres\n"
    )
    server = ChatServer([Reply(completion(reply))])
    try:
        reader = OpenAIReader(model="m", base_url=server.base_url, max_retries=0)
        report = FilterReport()
        from PIL import Image

        found = model_queries(reader, TILES[:1], lambda tile: Image.new("RGB", (40, 30), "white"), 3, report)
    finally:
        server.close()
    assert [q.text for q in found] == [
        "How much water does the Brightmere reservoir hold after the spring floods?"
    ]
    assert found[0].answer == "42 million cubic metres" and found[0].source == "openai"
    assert report.to_dict() == {"kept": 1, "dropped": {"vague": 1, "answer not on the tile": 1}}
    parts = server.requests[0]["body"]["messages"][0]["content"]
    assert parts[0]["type"] == "image_url" and parts[0]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )
    assert "questions" in parts[1]["text"]
