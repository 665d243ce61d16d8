"""Other words than the page's: the finance thesaurus and period codes read as their years."""

import json
import sqlite3
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.choices import thesauri
from pagesight.encode.lexical import with_years
from pagesight.errors import PagesightError
from pagesight.search.expansion import expand, thesaurus
from pagesight.settings import Settings
from tests.conftest import cli, make_pdf


def test_a_question_is_expanded_with_the_words_a_filing_prints():
    capex = expand("What is the FY2018 capex for 3M?", "finance")
    assert capex.startswith("What is the FY2018 capex for 3M?\n")
    assert "purchases of property plant and equipment" in capex
    # names of one statement search each other, whichever the question uses
    assert "balance sheet" in expand("Rely on the statement of financial position.", "finance")
    assert "statement of financial position" in expand("Rely on the balance sheet.", "finance")
    # possessives read as plain words, terms match whole words only
    assert "total shareholders equity" in expand("What is the company's return on equity?", "finance")
    assert "total shareholders equity" in expand("What was ROE in 2022?", "finance")
    assert (
        expand("Reproduce the experiments of the paper", "finance")
        == "Reproduce the experiments of the paper"
    )
    assert expand("What is the FY2018 capex?", None) == "What is the FY2018 capex?"


@pytest.mark.timeout(30)
def test_only_the_entries_whose_first_word_the_question_holds_are_looked_for():
    """The entries are looked up by their terms' first words before any is matched: the same
    expansion as matching every entry, whatever the question (terms with marks in them, terms
    inside other words, several terms of one group)."""
    questions = [
        "What was the P&L impact of R&D and SG&A in FY2019?",
        "How did net revenue and revenues compare with the cost of revenue?",
        "What steps does the paper describe?",  # eps inside a word is no term
        "Which shareholders' equity figure appears in the statements of stockholders equity?",
        "capex, ppe; EPS!",
        "",
    ]
    for question in questions:
        asked = question.lower().replace("'", "")
        every = [entry.adds for entry in thesaurus("finance") if entry.found_in(asked)]
        expected = f"{question}\n{' '.join(dict.fromkeys(every))}" if every else question
        assert expand(question, "finance") == expected
    assert "earnings per share" not in expand("What steps does the paper describe?", "finance")
    assert "research and development" in expand("R&D spending", "finance")


def test_thesauri_ship_with_the_package_and_unknown_ones_are_refused():
    assert "finance" in thesauri()
    assert len(thesaurus("finance")) > 20
    with pytest.raises(PagesightError, match="unknown thesaurus 'legal'"):
        thesaurus("legal")
    with pytest.raises(PagesightError, match="unknown thesaurus 'legal'.*finance"):
        Settings(thesaurus="legal")
    with pytest.raises(PagesightError, match="heading_weight must be 0 or more"):
        Settings(heading_weight=-1)


def test_period_codes_read_as_their_years_too():
    assert with_years("FY2018 capex") == "FY2018 2018 capex"
    assert with_years("in 2023Q2 and Q3-2023") == "in 2023Q2 2023 and Q3-2023"  # a year of its own
    assert with_years("ACME_2018_10K") == "ACME_2018_10K 2018"
    # plain years, and codes with no year in them, stay as they are
    assert with_years("in 2018, BERT4Rec and the A380 (20180)") == "in 2018, BERT4Rec and the A380 (20180)"


def _filing(folder: Path) -> Path:
    """A 10-K whose cash flow statement names capital expenditure the way filings do, and a risk
    page that shares the question's other words."""
    return make_pdf(
        folder / "northwind-10k.pdf",
        [
            ["Northwind Traders", "Annual Report on Form 10-K"],
            [
                "Risk Factors",
                "Our plans for the fiscal year may change with demand.",
            ],
            [
                "Consolidated Statements of Cash Flows",
                "Cash flows from investing activities",
                "Purchases of property, plant and equipment (1,577)",
                "Proceeds from sale of businesses 25",
            ],
        ],
    )


@pytest.mark.parametrize("name", [None, "finance"])
def test_a_question_in_an_analysts_words_finds_the_statement(tmp_path: Path, name: str | None):
    index = Index.open(tmp_path / "index", settings=Settings(dense_model=None, thesaurus=name))
    assert index.add(_filing(tmp_path)).ok
    hits = index.search("What is the capex amount for the fiscal year?", k=3, mode="lexical")
    if name:
        assert hits[0].page_id == "northwind-10k_3"
    else:  # the statement shares no word with the question
        assert "northwind-10k_3" not in [hit.page_id for hit in hits]
    index.close()


@pytest.mark.parametrize("years", [False, True])
def test_a_question_about_fy2018_finds_the_2018_filing(tmp_path: Path, years: bool):
    folder = tmp_path / "filings"
    folder.mkdir()
    for year in (2017, 2018, 2019):
        make_pdf(
            folder / f"acme_{year}_10k.pdf",
            [["Acme Corporation", f"Net revenue rose to {year - 1990} billion."]],
        )
    index = Index.open(tmp_path / "index", settings=Settings(dense_model=None, period_years=years))
    assert index.add(folder).ok
    hits = index.search("What was Acme's FY2018 net revenue?", k=3, mode="lexical")
    if years:
        assert hits[0].doc_id == "acme_2018_10k"
    else:  # "FY2018" is one unknown word: the three filings tie
        assert len({hit.score for hit in hits}) == 1
    index.close()


def test_an_index_made_before_the_levers_keeps_its_ranking(tmp_path: Path):
    path = tmp_path / "older"
    Index.open(path, settings=Settings(dense_model=None)).close()
    with sqlite3.connect(path / "catalog.sqlite") as db:  # as an index made before these settings
        stored = json.loads(db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()[0])
        for name in ("heading_weight", "period_years", "thesaurus"):
            del stored[name]
        db.execute("UPDATE meta SET value = ? WHERE key = 'settings'", (json.dumps(stored),))
    with Index.open(path, create=False) as index:
        assert (index.settings.heading_weight, index.settings.period_years, index.settings.thesaurus) == (
            0,
            False,
            None,
        )


def test_the_levers_are_chosen_at_ingestion_from_the_command_line(tmp_path: Path):
    filing = _filing(tmp_path)
    cli("ingest", str(filing), "--index", str(tmp_path / "plain"), "--no-dense", "--thesaurus", "none",
        "--heading-weight", "0", "--no-period-years")  # fmt: skip
    with Index.open(tmp_path / "plain", create=False) as index:
        assert (index.settings.heading_weight, index.settings.period_years, index.settings.thesaurus) == (
            0,
            False,
            None,
        )
    refused = cli(
        "ingest", str(filing), "--index", str(tmp_path / "other"), "--thesaurus", "legal", check=False
    )
    assert refused.returncode != 0 and "unknown thesaurus 'legal'" in refused.stderr
    assert not (tmp_path / "other" / "catalog.sqlite").exists()
