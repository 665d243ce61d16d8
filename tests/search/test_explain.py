"""Similarity maps (``search/explain.py``): each patch's best similarity to a query's tokens, drawn
over the tile; on tiny random-weight ColQwen2 and ColPali models, through the API, the command
line, HTTP and MCP, equal to colpali-engine's own maps."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from pagesight import Index
from pagesight.search.explain import SimilarityMap
from pagesight.settings import Settings
from pagesight.vectors.maxsim import best_similarity
from tests.conftest import cli, make_pdf


def test_the_planted_patch_is_the_strongest_and_outlined():
    rng = np.random.default_rng(0)
    patches = rng.normal(size=(4, 6, 8))
    patches /= np.linalg.norm(patches, axis=-1, keepdims=True)
    query = rng.normal(size=(3, 8))
    query /= np.linalg.norm(query, axis=-1, keepdims=True)
    patches[2, 5] = query[1]  # one patch holds a query token exactly
    grid = best_similarity(patches, query)
    assert grid.shape == (4, 6) and grid[2, 5] == pytest.approx(1.0)
    assert grid[0, 0] == pytest.approx(max(float(patches[0, 0] @ q) for q in query))
    tile = Image.new("RGB", (600, 400), "white")
    found = SimilarityMap(grid, tile)
    assert found.strongest == (2, 5) and found.cell_box(2, 5) == (500.0, 200.0, 600.0, 300.0)
    drawn = np.asarray(found.draw(), dtype=int)
    assert drawn.shape == (400, 600, 3)
    tint = (drawn[..., 0] - drawn[..., 1])[50::100, 50::100]  # at each patch's centre
    assert np.unravel_index(int(np.argmax(tint)), tint.shape) == (2, 5) and tint.max() > 0
    assert tint[np.unravel_index(int(np.argmin(grid)), grid.shape)] == 0  # the weakest: untinted
    assert tuple(drawn[200, 550]) == (220, 30, 30)  # the strongest outlined


def colpali_engines_maps():
    """colpali-engine's ``get_similarity_maps_from_embeddings``, read from its module file: the
    ``interpretability`` package's ``__init__`` imports its plotting helpers too (seaborn)."""
    import sys

    from pagesight.encode.visual.late_interaction import import_colpali

    import_colpali()
    path = (
        Path(sys.modules["colpali_engine"].__file__).parent / "interpretability" / "similarity_map_utils.py"
    )
    spec = importlib.util.spec_from_file_location("colpali_similarity_map_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_similarity_maps_from_embeddings


def colpali_engines_grid(encoder, image, query: str, n_patches: tuple[int, int]) -> np.ndarray:
    """colpali-engine's similarity maps of ``image`` to ``query`` from the encoder's unit vectors,
    at their maximum over the query's tokens, as a (rows, columns) grid."""
    import torch

    batch = encoder.processor.process_images([image])
    (page,) = encoder.encode_images([image])
    (vectors,) = encoder.encode_queries([query])
    (theirs,) = colpali_engines_maps()(
        torch.from_numpy(page)[None], torch.from_numpy(vectors)[None], n_patches,
        encoder.processor.get_image_mask(batch),
    )  # fmt: skip
    return theirs.max(dim=0).values.numpy().T


def _skip_without_models():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if importlib.util.find_spec("colpali_engine") is None:
        pytest.skip("colpali-engine is not installed")


@pytest.fixture(scope="module")
def colqwen_index(tmp_path_factory):
    _skip_without_models()
    from pagesight.encode.visual.late_interaction import import_colpali
    from tests.encode.visual.conftest import build_qwen

    models = import_colpali()
    root = tmp_path_factory.mktemp("explain")
    build_qwen(root / "colqwen2", "qwen2-vl", models.ColQwen2, models.ColQwen2Processor)
    make_pdf(root / "report.pdf", [["Quarterly revenue rose", "in the West region"]])
    settings = Settings(dense_model=None, visual_encoder="colqwen2", visual_model=str(root / "colqwen2"))
    index = Index.open(root / "index", settings=settings)
    index.device = "cpu"
    assert index.add([root / "report.pdf"], ocr="never", jobs=1).ok
    yield index
    index.close()


@pytest.mark.timeout(300)
def test_a_tiles_map_is_colpali_engines_and_served_everywhere(colqwen_index, tmp_path: Path):
    index = colqwen_index
    found = index.explain("quarterly revenue", "report", 1, 0)
    encoder = index.visual_encoder()
    image = index.tile_image("report", 1, 0)
    columns, rows = encoder.processor.get_n_patches(
        image.size, spatial_merge_size=encoder.model.spatial_merge_size
    )
    assert found.grid.shape == (rows, columns) and found.image.size == image.size
    # colpali-engine's maps from the same unit vectors, at their maximum over the query's tokens
    assert np.allclose(
        found.grid, colpali_engines_grid(encoder, image, "quarterly revenue", (columns, rows)), atol=1e-5
    )

    # the command line writes one map a hit
    out = tmp_path / "maps"
    result = cli(
        "search", "quarterly revenue", "--index", str(index.root), "--mode", "visual", "--explain", str(out)
    )
    assert "similarity map:" in result.stderr
    (written,) = out.glob("*.png")
    assert written.name == "report_1_0.png" and Image.open(written).size == image.size

    # HTTP: the tile with the map drawn, its own ETag
    from pagesight.serve.app import create_app

    with TestClient(create_app(Index.open(index.root, create=False))) as client:
        params = {"doc": "report", "page": 1, "tile": 0}
        plain = client.get("/api/tile", params=params)
        mapped = client.get("/api/tile", params={**params, "explain": "quarterly revenue"})
        assert mapped.status_code == 200 and mapped.headers["etag"] != plain.headers["etag"]
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(mapped.content))), np.asarray(found.draw()))

    # MCP: get_page with explain
    from mcp import Client

    from pagesight.serve.mcp import build_server

    async def session():
        async with Client(build_server(Index.open(index.root, create=False))) as client:
            args = {"doc_id": "report", "page": 1, "tile": 0, "explain": "quarterly revenue"}
            return await client.call_tool("get_page", args)

    note, picture = asyncio.run(session()).content
    assert "its similarity map to 'quarterly revenue'" in note.text
    drawn = Image.open(io.BytesIO(base64.b64decode(picture.data)))
    assert np.array_equal(np.asarray(drawn), np.asarray(found.draw()))


@pytest.mark.timeout(300)
def test_colpali_draws_its_square_grid(tmp_path: Path):
    _skip_without_models()
    from pagesight.encode.visual import make_encoder
    from pagesight.encode.visual.late_interaction import import_colpali
    from tests.encode.visual.conftest import PALIGEMMA_IMAGE, build_colpali, render_page

    models = import_colpali()
    build_colpali(tmp_path / "colpali", models.ColPali, models.ColPaliProcessor)
    encoder = make_encoder("colpali", model=str(tmp_path / "colpali"), device="cpu")
    page = render_page((300, 400), ["Warehouse Delta", "opened in March"])
    grid = encoder.patch_similarity(page, "warehouse")
    side = PALIGEMMA_IMAGE[0] // PALIGEMMA_IMAGE[1]
    assert grid.shape == (side, side)
    assert np.allclose(grid, colpali_engines_grid(encoder, page, "warehouse", (side, side)), atol=1e-5)


@pytest.mark.timeout(60)
def test_an_index_without_a_late_interaction_encoder_says_so(tmp_path: Path):
    make_pdf(tmp_path / "a.pdf", [["plain text"]])
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add([tmp_path / "a.pdf"]).ok
        assert index.info()["similarity_maps"] is False
        with pytest.raises(Exception, match="no visual encoder; similarity maps need a late-interaction one"):
            index.explain("plain", "a", 1, 0)
    result = cli(
        "search", "plain", "--index", str(tmp_path / "ix"), "--explain", str(tmp_path / "m"), check=False
    )
    assert result.returncode != 0 and "similarity maps need a late-interaction one" in result.stderr
