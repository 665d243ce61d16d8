"""Ingest and search through the Python API, on the bundled samples and on files made here."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pagesight import Index, IndexFormatError, PagesightError, SettingsConflict
from pagesight.settings import Settings
from tests.conftest import SAMPLES, cli, make_pdf

LEXICAL = Settings(dense_model=None)


def test_samples_are_ingested_with_text_layer_and_ocr(sample_index: Index):
    counts = sample_index.catalog.counts()
    assert sorted(sample_index.documents()) == sorted(p.stem for p in SAMPLES.iterdir())
    assert counts["pages"] == 8
    assert counts["ocr_pages"] == 3  # two scans and the infographic have no text layer
    # The 2,600 px infographic is cut into three tiles and the 1,754 px scan into two.
    assert counts["tiles"] == 11
    assert counts["vectors"] > counts["tiles"] - 1


@pytest.mark.parametrize("mode", ["lexical", "dense", "hybrid"])
def test_every_sample_question_finds_its_page(sample_index: Index, questions, mode):
    found = 0
    for q in questions:
        hits = sample_index.search(q["question"], k=3, mode=mode)
        found += f"{q['doc_id']}_{q['page']}" in [h.page_id for h in hits]
    # Lexical and hybrid search must find every page in the top 3; dense alone (the static
    # distillation of MiniLM by default, weaker alone than MiniLM: BENCHMARKS.md) ten of the 13.
    assert found >= (len(questions) - 3 if mode == "dense" else len(questions))


def test_hits_carry_snippet_and_evidence_boxes_inside_the_tile(sample_index: Index):
    (hit,) = sample_index.search("How many orders a day does Warehouse Delta ship?", k=1, mode="lexical")
    assert hit.page_id == "long-infographic_1"
    assert hit.tile == 2  # the fact sits in the lowest section, the third tile
    assert "Warehouse Delta" in hit.snippet
    assert hit.scores.keys() == {"bm25"}
    assert hit.boxes
    tx0, ty0, tx1, ty1 = hit.tile_box
    for x0, y0, x1, y1 in hit.boxes:
        assert tx0 <= x0 < x1 <= tx1 and ty0 <= (y0 + y1) / 2 <= ty1


def test_hybrid_hits_report_each_retrievers_score(sample_index: Index):
    hits = sample_index.search("reciprocal rank fusion constant", k=3, mode="hybrid")
    assert hits[0].page_id == "retrieval-primer_3"
    assert set(hits[0].scores) == {"bm25", "dense", "ranker"}  # the learned ranker's too (search.ranking)
    assert hits[0].score == hits[0].scores["ranker"]
    options = {"k": 3, "mode": "hybrid", "fusion": "rsf", "alpha": 0.3, "ranker": False}
    rsf = sample_index.search("reciprocal rank fusion constant", document_weight=0, **options)
    assert rsf[0].page_id == "retrieval-primer_3"
    assert 0 < rsf[0].score <= 1.0 + 1e-9  # relative score fusion: weights summing to 1
    # With its document's score (weight 1 by default): at most 1 more.
    fused = sample_index.search("reciprocal rank fusion constant", **options)
    assert fused[0].page_id == "retrieval-primer_3" and 1.0 < fused[0].score <= 2.0 + 1e-9


def test_filter_by_document(sample_index: Index):
    hits = sample_index.search("revenue", k=10, doc_ids=["retrieval-primer"])
    assert hits and {h.doc_id for h in hits} == {"retrieval-primer"}
    with pytest.raises(PagesightError, match="no document 'no-such-doc' in the index"):
        sample_index.search("revenue", doc_ids=["retrieval-primer", "no-such-doc"])


@pytest.mark.parametrize(
    ("query", "options", "message"),
    [
        ("", {}, "the query is empty"),
        ("   ", {}, "the query is empty"),
        ("revenue", {"k": 0}, "k must be from 1 to 1000, got 0"),
        ("revenue", {"k": -3}, "k must be from 1 to 1000, got -3"),
        ("revenue", {"alpha": 1.5}, "alpha must be from 0 to 1, got 1.5"),
        ("revenue", {"alpha": -0.1}, "alpha must be from 0 to 1, got -0.1"),
        ("revenue", {"visual_weight": 1.5}, "visual_weight must be from 0 to 1, got 1.5"),
        ("revenue", {"ef": 0}, "ef must be from 1 to 4096, got 0"),
        ("revenue", {"ef_search": 5000}, "ef_search must be from 1 to 4096, got 5000"),
        ("revenue", {"nprobe": 0}, "nprobe must be from 1 to 65536, got 0"),
    ],
)
def test_bad_search_requests_are_refused(sample_index: Index, query, options, message):
    with pytest.raises(PagesightError, match=message):
        sample_index.search(query, **options)


def test_tile_image_is_rendered_again_from_the_source(sample_index: Index):
    tile = sample_index.tile_image("long-infographic", 1, 2)
    assert tile.size == (800, 2600 - 2048)
    original = Image.open(SAMPLES / "long-infographic.png").convert("RGB").crop((0, 2048, 800, 2600))
    assert np.array_equal(np.asarray(tile), np.asarray(original))
    (page_tile,) = sample_index.search("Revenue by region", k=1, mode="lexical")
    assert sample_index.page_image("quarterly-report", 1).size == page_tile.page_size == (827, 1170)


def test_unknown_mode_and_lexical_only_index_errors(tmp_path: Path):
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    index.add(make_pdf(tmp_path / "a.pdf", [["alpha beta gamma delta epsilon zeta eta theta"]]))
    with pytest.raises(PagesightError, match="no dense vectors"):
        index.search("alpha", mode="dense")
    with pytest.raises(PagesightError, match="no visual vectors"):
        index.search("alpha", mode="visual")
    with pytest.raises(PagesightError, match="mode must be"):
        index.search("alpha", mode="pixels")
    assert index.search("alpha")[0].doc_id == "a"


def test_unchanged_files_are_skipped_changed_replaced_deleted_removed(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    make_pdf(docs / "one.pdf", [["the quick brown fox jumps over the lazy dog"] * 3])
    make_pdf(docs / "two.pdf", [["a treatise on lighthouse keeping"], ["second page about foghorns"]])
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    first = index.add(docs)
    assert sorted(first.added) == ["one", "two"] and first.pages == 3
    generation = index.catalog.generation()

    again = index.add(docs)
    assert sorted(again.unchanged) == ["one", "two"] and again.pages == 0
    assert index.catalog.generation() == generation

    make_pdf(docs / "two.pdf", [["a treatise on lighthouse keeping, revised"]])
    changed = index.add(docs)
    assert changed.replaced == ["two"] and sorted(changed.unchanged) == ["one"]
    assert index.catalog.document("two").n_pages == 1
    assert index.search("foghorns") == []
    assert index.search("revised")[0].page_id == "two_1"

    assert index.delete("one") is True
    assert index.delete("one") is False
    assert index.documents() == ["two"]
    assert index.search("lazy dog") == []


def test_touching_a_file_without_changing_it_rehashes_but_keeps_it(tmp_path: Path):
    pdf = make_pdf(tmp_path / "doc.pdf", [["content that stays the same"]])
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    index.add(pdf)
    generation = index.catalog.generation()
    pdf.touch()
    report = index.add(pdf)
    assert report.unchanged == ["doc"] and index.catalog.generation() == generation
    assert index.add(pdf).unchanged == ["doc"]  # the new mtime was recorded


def test_bad_inputs_fail_alone_and_nothing_stored_is_lost(tmp_path: Path):
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    index.add(make_pdf(tmp_path / "keep.pdf", [["a document that must survive every bad run"]]))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "empty.pdf").write_bytes(b"")
    (bad / "garbage.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf" * 10)
    (bad / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    make_pdf(bad / "locked.pdf", [["secret"]], encrypt="hunter2")
    make_pdf(bad / "fine.pdf", [["a readable document among bad ones"]])
    notes = tmp_path / "notes.txt"
    notes.write_text("not a page")
    report = index.add([bad, notes, tmp_path / "missing.pdf"])
    reasons = dict(report.failed)
    assert report.added == ["fine"]
    assert reasons[str(bad / "empty.pdf")] == "file is empty"
    assert "not a readable PDF" in reasons[str(bad / "garbage.pdf")]
    assert "not a readable image" in reasons[str(bad / "broken.png")]
    assert reasons[str(bad / "locked.pdf")] == "PDF is encrypted and needs a password"
    assert reasons[str(notes)] == "unsupported file type '.txt'"
    assert reasons[str(tmp_path / "missing.pdf")] == "no such file or directory"
    assert sorted(index.documents()) == ["fine", "keep"]
    assert index.search("survive")[0].doc_id == "keep"


def test_same_stem_in_two_folders_is_refused_not_overwritten(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    make_pdf(tmp_path / "a" / "report.pdf", [["first report about apples"]])
    make_pdf(tmp_path / "b" / "report.pdf", [["second report about pears"]])
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    index.add(tmp_path / "a")
    report = index.add(tmp_path / "b")
    assert report.failed and "already taken" in report.failed[0][1]
    assert index.search("apples")[0].doc_id == "report"
    assert index.search("pears") == []


def test_multipage_tiff_pages_are_ocred(tmp_path: Path):
    from PIL import ImageDraw, ImageFont

    frames = []
    for word in ("Aardvark", "Zeppelin"):
        image = Image.new("RGB", (900, 300), "white")
        ImageDraw.Draw(image).text(
            (50, 100), f"{word} inventory 77", fill="black", font=ImageFont.load_default(size=48)
        )
        frames.append(image)
    frames[0].save(tmp_path / "scan.tiff", save_all=True, append_images=frames[1:])
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    assert index.add(tmp_path / "scan.tiff").pages == 2
    assert index.search("zeppelin")[0].page_id == "scan_2"
    assert index.search("aardvark")[0].page_id == "scan_1"


def test_ocr_never_leaves_scans_without_text(tmp_path: Path):
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    index.add(SAMPLES / "scanned-memo.pdf", ocr="never")
    assert index.catalog.counts()["ocr_pages"] == 0
    assert index.search("Halvorsen") == []


def test_index_format_checks(tmp_path: Path):
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    index.add(make_pdf(tmp_path / "a.pdf", [["format check document"]]))
    index.catalog.db.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    index.close()
    with pytest.raises(IndexFormatError, match="version 99 was written by a newer pagesight"):
        Index.open(tmp_path / "ix")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "file").write_text("x")
    with pytest.raises(IndexFormatError, match="not a pagesight index"):
        Index.open(tmp_path / "other")
    with pytest.raises(IndexFormatError, match="no pagesight index"):
        Index.open(tmp_path / "absent", create=False)
    assert not (tmp_path / "absent").exists()


def test_settings_are_checked_when_an_existing_index_is_opened(tmp_path: Path):
    path = tmp_path / "ix"
    Index.open(path, settings={"dense_model": None, "dpi": 120.0}).close()
    made = Index.open(path, create=False)
    assert (made.settings.dpi, made.settings.dense_model, made.settings.tile_height) == (120.0, None, 1024)
    made.close()
    # the fields named must be the index's; the others are not compared
    Index.open(path, settings={"dpi": 120.0}).close()
    with pytest.raises(
        SettingsConflict, match=r"made with dense_model=None.*make a new index for dense_model"
    ) as caught:
        Index.open(path, settings={"dpi": 120.0, "dense_model": "minilm-l6-v2"})
    assert caught.value.conflicts == {"dense_model": (None, "minilm-l6-v2")}
    with pytest.raises(SettingsConflict, match="dpi=120.0"):
        Index.open(path, settings=Settings(dense_model=None))  # a whole Settings: every field
    with pytest.raises(PagesightError, match="unknown index settings: colour"):
        Index.open(path, settings={"colour": "red"})
    # a field alone is compared, not validated as whole settings (a model needs an encoder)
    with pytest.raises(SettingsConflict, match="made with visual_model=None"):
        Index.open(path, settings={"visual_model": "vidore/colqwen2-v1.0"})


@pytest.mark.parametrize(
    "chosen, message",
    [
        ({"dpi": 0}, "dpi and ocr_dpi must be positive"),
        ({"visual_model": "vidore/colqwen2-v1.0"}, "visual_model and visual_adapter need a visual_encoder"),
        ({"visual_index": "annoy"}, "visual_index must be one of flat, ivf, hnsw, ivfpq"),
        ({"muvera_reps": 0}, "muvera_reps and muvera_d_proj must be 1 or more"),
        ({"muvera_k_sim": 17}, "muvera_k_sim from 1 to 16, got 20, 16 and 17"),
        ({"muvera_reps": 300}, "2\\*\\*muvera_k_sim x muvera_d_proj = 76,800 dimensions; at most 65,536"),
        ({"dense_model": "no-such-model"}, "no-such-model"),
    ],
)
def test_bad_settings_of_a_new_index_are_refused_before_it_is_made(tmp_path: Path, chosen, message):
    with pytest.raises(PagesightError, match=message):
        Index.open(tmp_path / "ix", settings=chosen)
    assert not (tmp_path / "ix").exists()


def test_a_bad_ingestion_option_leaves_no_new_index(tmp_path: Path):
    pdf = make_pdf(tmp_path / "a.pdf", [["some words"]])
    index = Index.open(tmp_path / "ix", settings=LEXICAL)
    with pytest.raises(PagesightError, match="unknown language 'xx'"):
        index.add(pdf, language="xx")
    assert not (tmp_path / "ix").exists()
    bad = cli("ingest", str(pdf), "--index", str(tmp_path / "iy"), "--language", "xx", check=False)
    assert bad.returncode == 2 and "unknown language 'xx'" in bad.stderr
    assert not (tmp_path / "iy").exists()


def test_index_moves_with_relative_source_paths(tmp_path: Path):
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    make_pdf(project / "docs" / "m.pdf", [["portable index content"]])
    index = Index.open(project / "ix", settings=LEXICAL)
    index.add(project / "docs")
    index.close()
    project.rename(tmp_path / "moved")
    moved = Index.open(tmp_path / "moved" / "ix", create=False)
    assert moved.search("portable")[0].doc_id == "m"
    assert moved.page_image("m", 1).size == (850, 1100)
    assert moved.add(tmp_path / "moved" / "docs").unchanged == ["m"]


def test_search_without_evidence_ranks_the_same(sample_index: Index):
    query = "West region revenue in the third quarter"
    full = sample_index.search(query, k=8)
    bare = sample_index.search(query, k=8, evidence=False)
    assert [(h.page_id, h.tile, h.score) for h in bare] == [(h.page_id, h.tile, h.score) for h in full]
    assert full[0].boxes and all(h.snippet == "" and h.boxes == [] for h in bare)


@pytest.mark.parametrize("ocr", ["auto", "never"])
def test_a_pdf_cut_short_gets_a_note_on_its_blank_pages(tmp_path: Path, ocr: str):
    # A 15-page PDF cut in half: PDFium refuses it, qpdf repairs it into 15 pages of which only the
    # first ones kept their content. Indexed, but said so, on the report and the document.
    whole = make_pdf(
        tmp_path / "whole.pdf", [[f"Page {n} of the annual report", "Revenue grew"] for n in range(15)]
    )
    data = whole.read_bytes()
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(data[: len(data) // 2])
    sparse = make_pdf(
        tmp_path / "sparse.pdf", [["a page of text"], [], ["more text"]]
    )  # one blank page: no note
    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    report = index.add([cut, whole, sparse], ocr=ocr)
    assert report.ok and len(report.added) == 3
    ((path, note),) = report.notes
    assert path == str(cut)
    blank = int(note.split(" of 15 pages are blank")[0])
    assert 7 <= blank < 15 and note.endswith("-15): the file may be damaged or cut short")
    listed = {d["id"]: d["notes"] for d in index.document_list()}
    assert listed == {"cut": [note], "whole": [], "sparse": []}
