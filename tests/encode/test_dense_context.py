"""Dense chunks read after the line naming their document: a question that names a document finds
its pages by meaning, though the pages themselves never name it (annual reports on one template)."""

import json
import sqlite3
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.settings import Settings
from tests.conftest import make_pdf

pytestmark = pytest.mark.timeout(180)

COMPANIES = [
    "Halvorsen Glassworks",
    "Dunmore Freight",
    "Castellan Robotics",
    "Elverum Foods",
    "Greywick Marine",
]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("reports")
    for n, company in enumerate(COMPANIES):
        make_pdf(
            folder / f"{company.lower().replace(' ', '-')}.pdf",
            [
                ["This report describes the year's trading, the results and the outlook."],
                [
                    f"Revenue in the third quarter: {1200 + 977 * n} thousand euros.",
                    "Revenue grew in every region.",
                ],
            ],
        )
    return folder


def first_hits(index: Index) -> list[str]:
    return [
        index.search(f"What was {c}'s revenue in the third quarter?", k=1, mode="dense")[0].page_id
        for c in COMPANIES
    ]


def expected() -> list[str]:
    return [f"{c.lower().replace(' ', '-')}_2" for c in COMPANIES]


def test_a_question_naming_a_document_finds_its_page_by_meaning(tmp_path, reports):
    with Index.open(tmp_path / "named", settings={"dense_context": True}) as index:
        assert index.add([reports]).ok
        assert first_hits(index) == expected()
    with Index.open(tmp_path / "bare", settings={"dense_context": False}) as index:
        assert index.add([reports]).ok
        # the pages alone read alike: at most chance finds the named company's page
        assert sum(a == b for a, b in zip(first_hits(index), expected())) <= 2


def test_an_index_made_before_keeps_encoding_without_the_context(tmp_path, reports):
    path = tmp_path / "older"
    Index.open(path, settings=Settings()).close()
    with sqlite3.connect(path / "catalog.sqlite") as db:  # as an index made before the setting stored it
        stored = json.loads(db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()[0])
        del stored["dense_context"]
        db.execute("UPDATE meta SET value = ? WHERE key = 'settings'", (json.dumps(stored),))
    with Index.open(path, create=False) as index:
        assert index.settings.dense_context is False
