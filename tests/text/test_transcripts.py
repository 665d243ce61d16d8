"""Pages' text given rather than read (``text.transcripts``, ``IngestOptions.transcripts``): each
page's lines laid over it in reading order, indexed through the normal ingestion instead of the
text layer and OCR; bad files refused by line before anything is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from pagesight.errors import InputError, PagesightError
from pagesight.index import Index
from pagesight.ingest.options import IngestOptions
from pagesight.settings import Settings
from pagesight.text.transcripts import TRANSCRIPT, page_transcript, read_transcripts, transcript_spans
from tests.conftest import make_pdf


def test_a_transcription_is_laid_over_the_page_in_reading_order():
    spans = transcript_spans("# Title\n\n  body   text here \nend", 800, 1200)
    assert [s.text for s in spans] == ["# Title", "body text here", "end"]
    assert {s.source for s in spans} == {TRANSCRIPT} and all(s.box[0] == 0 and s.box[2] == 800 for s in spans)
    tops = [s.box[1] for s in spans]
    assert tops == sorted(tops) and tops[0] == 0 and spans[-1].box[3] == pytest.approx(1200)
    # each line as tall as its share of the characters: "body text here" (14) twice "# Title" (7)
    heights = [s.box[3] - s.box[1] for s in spans]
    assert heights[1] == pytest.approx(2 * heights[0])
    assert transcript_spans(" \n\n", 800, 1200) == []


def test_transcriptions_are_indexed_instead_of_the_text_layer_and_ocr(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    make_pdf(docs / "tides.pdf", [["spring tides at the harbour"], ["neap tides in the estuary"]])
    Image.new("RGB", (500, 3072), "white").save(docs / "chart.png")  # three tiles, no ink
    lines = [f"{word} " * 30 for word in ("alpha", "bravo", "delta", "gamma", "omega", "sigma")]
    texts = tmp_path / "texts.jsonl"
    texts.write_text(
        json.dumps({"corpus_id": "tides_1", "text": "moonlit ebb over the flats"})
        + "\n"
        + json.dumps({"corpus_id": "chart", "text": "\n".join(lines)})
        + "\n"
    )
    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    try:
        report = index.add(docs, transcripts=texts, jobs=1)
        assert report.ok, report.failed
        found = index.search("moonlit ebb", mode="lexical")
        assert [(hit.doc_id, hit.page) for hit in found] == [("tides", 1)]
        assert found[0].boxes and all(box[2] - box[0] == found[0].page_size[0] for box in found[0].boxes)
        # the text layer was not read: its words are nowhere; page 2 has no transcription, no text
        assert index.search("spring harbour", mode="lexical") == []
        assert index.search("neap estuary", mode="lexical") == []
        bands = [index.catalog.tile_at("chart", 1, idx) for idx in range(3)]
        assert [{span[0].split()[0] for span in band.spans} for band in bands] == [
            {"alpha", "bravo"},
            {"delta", "gamma"},
            {"omega", "sigma"},
        ]
        assert {span[2] for band in bands for span in band.spans} == {TRANSCRIPT}
        assert {row.id: row.meta.get("text_from") for row in index.catalog.documents()} == {
            "tides": TRANSCRIPT,
            "chart": TRANSCRIPT,
        }
    finally:
        index.close()


def test_a_bad_transcription_file_is_refused_by_line_before_any_file_is_read(tmp_path: Path):
    texts = tmp_path / "texts.jsonl"
    for content, message in (
        ('{"corpus_id": "a", "text": "x"}\n{"corpus_id": "b"}\n', r"texts.jsonl:2: needs \"corpus_id\""),
        ('{"corpus_id": "a", "text": "x"}\n\n[1, 2]\n', r"texts.jsonl:3: not a JSON object"),
        (
            '{"corpus_id": 7, "text": "x"}\n{"corpus_id": "7", "text": "y"}\n',
            r"texts.jsonl:2: corpus id 7 has",
        ),
        ('{"corpus_id": "a", "text": "x"\n', r"texts.jsonl:1: not JSON"),
    ):
        texts.write_text(content)
        with pytest.raises(InputError, match=message):
            read_transcripts(texts)
        with pytest.raises(PagesightError, match=message):
            IngestOptions(transcripts=texts)
    with pytest.raises(InputError, match="missing"):
        IngestOptions(transcripts=tmp_path / "none.jsonl")
    with pytest.raises(InputError, match=r"name each page \(report_1, report_2"):
        page_transcript({"report": "text"}, "report", 1, 3)
    assert page_transcript({"report": "text"}, "report", 1, 1) == "text"
    assert page_transcript({"report_2": "two"}, "report", 1, 3) == ""
