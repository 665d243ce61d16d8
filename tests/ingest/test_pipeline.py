"""The ingestion loop (``ingest/pipeline.py``) on a store's catalog, without ``Index``: what is
added, replaced, left unchanged or failed, and what the callbacks are told."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pagesight.ingest import pipeline
from pagesight.ingest.options import IngestOptions
from pagesight.settings import Settings
from pagesight.store.base import open_store
from tests.conftest import make_pdf


@pytest.mark.timeout(120)
def test_the_loop_adds_replaces_skips_and_fails_each_input_alone(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    owls = make_pdf(docs / "owls.pdf", [["barn owls hunt voles"]])
    make_pdf(docs / "tides.pdf", [["spring tides"], ["neap tides"]])
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 not really")
    store = open_store(tmp_path / "ix", create=True, settings=Settings(dense_model=None))
    options = IngestOptions(jobs=1)
    told, planned = [], []

    def run():
        told.clear()
        with store.writing():
            report = pipeline.run(
                store.catalog,
                [docs],
                options,
                progress=lambda *seen: told.append(seen),
                on_planned=planned.append,
            )
            store.refresh()
        return report

    try:
        first = run()
        assert sorted(first.added) == ["owls", "tides"]  # document ids
        assert [Path(p).name for p, _ in first.failed] == ["broken.pdf"] and planned[-1] == 3
        assert sorted((Path(p).name, outcome, pages) for p, outcome, pages in told) == [
            ("broken.pdf", "failed", 0),
            ("owls.pdf", "added", 1),
            ("tides.pdf", "added", 2),
        ]
        assert store.catalog.counts()["pages"] == 3

        make_pdf(owls, [["snowy owls"], ["on the tundra"]])
        os.utime(owls, ns=(owls.stat().st_atime_ns, owls.stat().st_mtime_ns + 10**9))
        second = run()
        assert second.replaced == ["owls"] and [Path(p).stem for p in second.unchanged] == ["tides"]
        assert store.catalog.document("owls").n_pages == 2 and store.catalog.counts()["pages"] == 4
    finally:
        store.close()
