"""Ingestion on a real local Ray cluster gives the index local ingestion gives: the same documents,
tiles, text, dense and visual vectors, the same per-file failures, and unchanged files skipped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.errors import InputError
from pagesight.ingest.options import RayOptions
from pagesight.settings import Settings
from tests.conftest import SAMPLES, make_pdf

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster():
    """One local Ray for the module (ingestion joins a Ray this process has already started)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ray-corpus")
    make_pdf(folder / "owls.pdf", [["Barn owls hunt voles at night"], ["Owl pellets hold small bones"]])
    make_pdf(folder / "tides.pdf", [["Spring tides follow the full and new moon"]])
    for name in ("scanned-memo.pdf", "field-notes-scan.png"):  # read by OCR
        (folder / name).write_bytes((SAMPLES / name).read_bytes())
    (folder / "cut-short.pdf").write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog")
    return folder


def _contents(index: Index) -> dict:
    """Everything ingestion decides, keyed by (doc, page, tile) rather than by tile id."""
    catalog = index.catalog
    ids = catalog.tile_ids()
    rows = catalog.tiles(ids.tolist())
    key = {tile_id: (row.doc_id, row.page, row.idx) for tile_id, row in rows.items()}
    dense_ids, dense = catalog.vectors()
    visual_ids, visual = catalog.visual_vectors(ids.tolist())
    return {
        "documents": sorted((d.id, d.n_pages, d.sha256) for d in catalog.documents()),
        "tiles": {key[i]: (row.box, row.kind, [s[:2] for s in row.spans]) for i, row in rows.items()},
        "dense": sorted((key[int(i)], v.round(5).tobytes()) for i, v in zip(dense_ids, dense)),
        "visual": sorted((key[int(i)], np.asarray(v).round(4).tobytes()) for i, v in zip(visual_ids, visual)),
    }


def test_ray_ingestion_equals_local_ingestion(cluster, folder: Path, tmp_path: Path):
    local = Index.open(tmp_path / "local")
    on_ray = Index.open(tmp_path / "ray")
    expected = local.add([folder])
    report = on_ray.add([folder], ray=True)
    assert (
        sorted(report.added)
        == sorted(expected.added)
        == ["field-notes-scan", "owls", "scanned-memo", "tides"]
    )
    assert report.failed == expected.failed and len(report.failed) == 1  # the same reason, word for word
    assert report.pages == expected.pages
    ours, theirs = _contents(on_ray), _contents(local)
    assert ours["documents"] == theirs["documents"] and ours["tiles"] == theirs["tiles"]
    assert ours["dense"] == theirs["dense"] and len(ours["dense"]) >= 5
    assert [h.page_id for h in on_ray.search("pellets", k=1)] == ["owls_2"]

    again = on_ray.add([folder], ray=RayOptions())
    assert sorted(again.unchanged) == sorted(report.added) and not again.added
    with pytest.raises(InputError, match="without --ray"):
        on_ray.add(["https://example.org/"], ray=True)
    local.close()
    on_ray.close()


def test_visual_vectors_come_from_encoder_actors(cluster, folder: Path, tmp_path: Path):
    pytest.importorskip("transformers")
    from tests.encode.visual.conftest import build_clip

    clip = tmp_path / "clip"
    build_clip(clip)
    settings = Settings(dense_model=None, visual_encoder="clip", visual_model=str(clip))
    local = Index.open(tmp_path / "local", settings=settings)
    on_ray = Index.open(tmp_path / "ray", settings=settings)
    local.device = "cpu"
    pdfs = [folder / "owls.pdf", folder / "tides.pdf"]
    assert local.add(pdfs, ocr="never").ok
    assert on_ray.add(pdfs, ocr="never", ray=RayOptions(device="cpu")).ok
    ours, theirs = _contents(on_ray), _contents(local)
    assert len(ours["visual"]) == 3 and ours["visual"] == theirs["visual"]
    assert on_ray.catalog.visual_spec() == local.catalog.visual_spec()
    local.close()
    on_ray.close()


def test_encoder_actors_run_a_models_own_code_only_with_leave(cluster, folder: Path, tmp_path: Path):
    """The actors' visual encoder is given ``RayOptions.trust_remote_code``: without it one whose
    model runs its own code (a tiny jina-embeddings-v4, ``tests/remote_code``) is refused naming the
    flag, with it the actors' vectors are those of the local encoder, given the leave by its index."""
    pytest.importorskip("transformers")
    from tests.remote_code import modeling_tiny_jina, save

    jina = tmp_path / "tiny-jina"
    save(jina, modeling_tiny_jina)
    settings = Settings(dense_model=None, visual_encoder="jina-v4", visual_model=str(jina))
    pdfs = [folder / "owls.pdf", folder / "tides.pdf"]
    refused = Index.open(tmp_path / "refused", settings=settings)
    # an actor that cannot start ends the run with Ray's error, which carries the refusal
    with pytest.raises(ray.exceptions.RayActorError, match="runs code of its own.*--trust-remote-code"):
        refused.add(pdfs, ocr="never", ray=RayOptions(device="cpu"))
    refused.close()
    local = Index.open(tmp_path / "local", settings=settings, device="cpu", trust_remote_code=True)
    on_ray = Index.open(tmp_path / "ray", settings=settings)
    assert local.add(pdfs, ocr="never").ok
    assert on_ray.add(pdfs, ocr="never", ray=RayOptions(device="cpu", trust_remote_code=True)).ok
    ours, theirs = _contents(on_ray), _contents(local)
    assert len(ours["visual"]) == 3 and ours["visual"] == theirs["visual"]
    local.close()
    on_ray.close()
