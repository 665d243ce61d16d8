"""``IngestOptions``: one typed, self-checking set of ingestion options, taken whole or as keywords."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.ingest.options import IngestOptions, RayOptions
from pagesight.render.web.jobs import RenderOptions
from tests.conftest import make_pdf


@pytest.mark.timeout(120)
def test_bad_options_are_refused_by_name_before_anything_is_read(tmp_path: Path):
    pdf = make_pdf(tmp_path / "owls.pdf", [["barn owls hunt voles"]])
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add([pdf], jobs=1).ok
        for fields, message in (
            ({"ocr": "sometimes"}, "ocr must be one of auto, always, never, got 'sometimes'"),
            ({"jobs": 0}, "jobs must be 1 or more"),
            ({"timeout": 0}, "timeout must be above 0"),
            ({"web": {"tabs": 3}}, "unknown web option tabs"),
        ):
            with pytest.raises(PagesightError, match=message):
                index.add([pdf], **fields)
        assert index.documents() == ["owls"]  # nothing stored was lost


def test_options_are_typed_whole_or_from_their_short_forms():
    given = IngestOptions(web={"concurrency": 3}, ray="ray://head:10001")
    assert given.web == RenderOptions(concurrency=3) and given.ray == RayOptions(address="ray://head:10001")
    assert IngestOptions(ray=True).ray == RayOptions() and IngestOptions(ray=False).ray is None
    assert IngestOptions.given(given, jobs=2) == IngestOptions(jobs=2, web=given.web, ray=given.ray)
