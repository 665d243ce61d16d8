"""Each page's language (``text/language.py``), and BM25 in it: French pages stemmed as French, a
French question read as French in an index that holds French pages, English ones as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.ingest.options import IngestOptions
from pagesight.text.language import document_languages, page_language, query_language
from tests.conftest import cli, make_pdf

FRENCH = [
    "Les chevaux de la ferme mangent du foin chaque matin,",
    "et les juments restent à l'écurie pendant tout l'hiver.",
    "Le fermier répare les clôtures des prés au printemps.",
]
ENGLISH = [
    "The farm's horses eat hay every morning, and the mares",
    "stay in the stable through the winter while the farmer",
    "mends the fences of the meadows in spring.",
]


def test_a_page_tells_its_language_when_it_says_enough():
    assert page_language(" ".join(FRENCH)) == "fr"
    assert page_language(" ".join(ENGLISH)) == "en"
    german = "Die Pferde des Hofes fressen jeden Morgen Heu, und die Stuten bleiben den ganzen langen Winter im warmen Stall."
    assert page_language(german) == "de"
    assert page_language("Total 4,521 3,980") is None  # too little text to tell
    assert document_languages(["fr", None, "fr", "en"]) == ["fr", "fr", "fr", "en"]
    assert document_languages([None, None]) == ["en", "en"]
    # a question is read in another language only where the index holds pages in it
    assert query_language("Que mangent les chevaux de la ferme ?", ["en"]) == "en"
    assert query_language("Que mangent les chevaux de la ferme ?", ["en", "fr"]) == "fr"
    assert query_language("What do the horses eat?", ["en", "fr"]) == "en"
    with pytest.raises(PagesightError, match="unknown language 'xx'"):
        IngestOptions(language="xx")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("store", ["local", "qdrant"])
def test_french_pages_are_stemmed_as_french_and_english_ones_as_before(tmp_path: Path, store: str):
    if store == "qdrant":
        pytest.importorskip("qdrant_client")
    (tmp_path / "docs").mkdir()
    make_pdf(tmp_path / "docs" / "ferme.pdf", [FRENCH])
    make_pdf(tmp_path / "docs" / "farm.pdf", [ENGLISH])
    location = str(tmp_path / "ix") if store == "local" else f"qdrant:{tmp_path / 'q'}"
    with Index.open(location, settings={"dense_model": None}) as index:
        assert index.add([tmp_path / "docs"], jobs=1).ok
        languages = {row["id"]: row["fields"]["language"] for row in index.document_list()}
        assert languages == {"ferme": "fr", "farm": "en"}
        assert index.info()["languages"] == {"fr": 1, "en": 1}
        # "cheval" meets the page's "chevaux" only through the French stemmer
        assert [h.doc_id for h in index.search("cheval", mode="lexical")] == ["ferme"]
        # a French question, read as French: its stop words gone, its words stemmed as French
        french = index.search("Que mangent les chevaux de la ferme ?", mode="lexical")
        assert french[0].doc_id == "ferme" and "farm" not in {h.doc_id for h in french}
        assert [h.doc_id for h in index.search("horse stables", mode="lexical")] == ["farm"]
        assert [row["id"] for row in index.document_list("language = fr")] == ["ferme"]


@pytest.mark.timeout(120)
def test_a_run_may_say_its_pages_language(tmp_path: Path):
    make_pdf(tmp_path / "hof.pdf", [["Die Pferde des Hofes fressen Heu"]])  # too short to tell
    cli(
        "ingest", str(tmp_path / "hof.pdf"), "--index", str(tmp_path / "ix"), "--no-dense", "--language", "de"
    )
    with Index.open(tmp_path / "ix", create=False) as index:
        assert index.document_list()[0]["fields"]["language"] == "de"
        assert [h.doc_id for h in index.search("Pferd", mode="lexical")] == ["hof"]  # Pferde -> pferd
    refused = cli(
        "ingest", str(tmp_path / "hof.pdf"), "--index", str(tmp_path / "iy"), "--language", "xx", check=False
    )
    assert refused.returncode != 0 and "unknown language 'xx'" in refused.stderr


@pytest.mark.timeout(120)
def test_a_request_may_say_its_questions_language(tmp_path: Path):
    make_pdf(tmp_path / "ferme.pdf", [FRENCH])
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add([tmp_path / "ferme.pdf"]).ok
        # told from the question: French, so "chevaux" meets the page's French "cheval"
        assert [h.doc_id for h in index.search("chevaux", mode="lexical")] == ["ferme"]
        # said to be English: "chevaux" stays as it is and misses it
        assert index.search("chevaux", mode="lexical", language="en") == []
        with pytest.raises(PagesightError, match="language"):
            index.search("chevaux", language="xx")
    args = ["search", "chevaux", "--index", str(tmp_path / "ix"), "--mode", "lexical", "--json"]
    assert '"doc_id": "ferme"' in cli(*args).stdout
    assert cli(*args, "--language", "en").stdout.strip() == "[]"


@pytest.mark.timeout(120)
def test_a_hit_quotes_the_lines_that_share_the_question_s_terms_in_its_language(tmp_path: Path):
    make_pdf(tmp_path / "ferme.pdf", [FRENCH])
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add([tmp_path / "ferme.pdf"]).ok
        # French stop words ("le", "la", "du") quote no line; "cloture" meets "clôtures" unaccented
        (hit,) = index.search("Quand le fermier répare-t-il la cloture du pré ?", mode="lexical")
        assert hit.snippet == FRENCH[2] and len(hit.boxes) == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("store", ["local", "qdrant"])
def test_a_question_in_another_language_meets_its_words_on_pages_read_as_english(tmp_path: Path, store: str):
    """A translation keeps a passage in English: that page is read as English, Portuguese sentence
    and all, and a Portuguese question still meets it through its content words read as English."""
    if store == "qdrant":
        pytest.importorskip("qdrant_client")
    portuguese = [
        "O sistema de pacotes do Debian instala programas a partir dos arquivos oficiais,",
        "resolve as dependências entre eles e mantém a configuração de cada pacote.",
        "As atualizações de segurança chegam pelos mesmos repositórios todas as semanas.",
    ]
    mixed = [
        "In order to run a console application under a graphical session, create a small",
        "wrapper script and set it as the preferred application, as the desktop expects.",
        "The wrapper may also set environment variables before starting the program.",
        "Para matar um processo use o comando kill.",
    ]
    make_pdf(tmp_path / "manual.pdf", [portuguese, mixed])
    location = str(tmp_path / "ix") if store == "local" else f"qdrant:{tmp_path / 'q'}"
    with Index.open(location, settings={"dense_model": None}) as index:
        assert index.add([tmp_path / "manual.pdf"], jobs=1).ok
        hits = index.search("Como mato um processo com um comando?", mode="lexical")
        assert hits and (hits[0].doc_id, hits[0].page) == ("manual", 2)
