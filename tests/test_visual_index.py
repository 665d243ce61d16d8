"""Visual retrieval through the index: tiles embedded at ingest by a visual encoder (tiny random-weight
CLIP and ColQwen2 built here), searched by text, by an image or an image region, fused with BM25,
kept across reopening and deletion, and refused when queried with another encoder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.errors import PagesightError, SettingsConflict
from pagesight.search.rerank import make_reranker
from pagesight.settings import Settings
from pagesight.vectors import maxsim
from tests.conftest import make_pdf
from tests.test_cli import pagesight

pytest.importorskip("torch")
pytest.importorskip("transformers")

from pagesight.encode.visual import make_encoder  # noqa: E402
from tests.encode.visual.conftest import build_clip, build_qwen  # noqa: E402

PAGES = [  # lines, and a filled block (x, y, width, height in points, RGB) that tells pages apart
    (["Quarterly revenue by region", "West 4.2 million"], (72, 300, 460, 300, (0.1, 0.2, 0.8))),
    (
        ["Warehouse Delta ships 1,200 orders a day", "Lens blank lot 22K"],
        (300, 60, 250, 500, (0.9, 0.1, 0.1)),
    ),
    (
        ["Supplier change: Halvorsen Glassworks replaces Brightmere Supply"],
        (60, 60, 200, 200, (0.1, 0.7, 0.2)),
    ),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("visual-corpus")
    for name, pages in (("report", PAGES[:2]), ("memo", PAGES[2:])):
        make_pdf(folder / f"{name}.pdf", [lines for lines, _ in pages], blocks=[block for _, block in pages])
    return folder


@pytest.fixture(scope="module")
def clip_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-clip")
    build_clip(folder)
    return folder


@pytest.fixture(scope="module")
def clip_index(tmp_path_factory, corpus, clip_folder) -> Index:
    settings = Settings(dense_model=None, visual_encoder="clip", visual_model=str(clip_folder))
    index = Index.open(tmp_path_factory.mktemp("clip") / "index", settings=settings)
    index.device = "cpu"
    report = index.add([corpus], ocr="never")
    assert report.ok, report.failed
    return index


def _tiles(index: Index) -> list[tuple[str, int, int]]:
    """Every (doc id, page, tile) of the corpus, in a fixed order (one tile per Letter page)."""
    return [("memo", 1, 0), ("report", 1, 0), ("report", 2, 0)]


def test_text_query_scores_are_the_models(clip_index, clip_folder):
    assert clip_index.info()["visual_vectors"] == 3
    assert clip_index.info()["visual_index"] == "ivf"  # one vector a page: IVF by default
    encoder = make_encoder("clip", model=str(clip_folder), device="cpu")
    tiles = _tiles(clip_index)
    vectors = np.stack(encoder.encode_images([clip_index.tile_image(*tile) for tile in tiles]))
    query = "Which supplier replaces Brightmere Supply?"
    expected = vectors @ encoder.encode_queries([query])[0]
    hits = clip_index.search(query, k=3, mode="visual", document_weight=0)  # the model's scores alone
    assert [(h.doc_id, h.page, h.tile) for h in hits] == [tiles[i] for i in np.argsort(-expected)]
    assert [h.score for h in hits] == pytest.approx(np.sort(expected)[::-1], abs=2e-3)
    assert all(set(h.scores) == {"visual"} for h in hits)


def test_image_and_region_queries(clip_index):
    tile = clip_index.tile_image("report", 2, 0)
    (first, *_) = clip_index.search_image(tile, k=3)
    assert (first.doc_id, first.page, first.scores["visual"]) == ("report", 2, pytest.approx(1.0, abs=2e-3))
    region = (40, 40, tile.width // 2, tile.height // 3)
    by_region = clip_index.search_image(tile, k=3, region=region)
    by_crop = clip_index.search_image(tile.crop(region), k=3)
    assert [(h.page_id, h.score) for h in by_region] == [(h.page_id, h.score) for h in by_crop]
    assert [h.doc_id for h in clip_index.search_image(tile, k=3, doc_ids=["memo"])] == ["memo"]
    with pytest.raises(PagesightError, match="not inside the"):
        clip_index.search_image(tile, region=(0, 0, tile.width + 10, 10))


def test_hybrid_fuses_bm25_and_visual(clip_index):
    hits = clip_index.search("Halvorsen Glassworks", k=3)
    assert hits[0].page_id == "memo_1"  # BM25 alone knows the words; the random model does not
    assert set(hits[0].scores) == {"bm25", "visual"}
    alone = {"visual_weight": 1.0, "document_weight": 0}
    visual_only = clip_index.search("Halvorsen Glassworks", k=3, mode="visual", **alone)
    fused_all_visual = clip_index.search("Halvorsen Glassworks", k=3, **alone)
    assert [h.page_id for h in fused_all_visual] == [h.page_id for h in visual_only]


def test_reopen_delete_and_another_encoder(tmp_path, corpus, clip_folder):
    settings = Settings(dense_model=None, visual_encoder="clip", visual_model=str(clip_folder))
    index = Index.open(tmp_path / "ix", settings=settings)
    index.device = "cpu"
    assert index.add([corpus], ocr="never").ok
    query, visual = "Warehouse Delta", {"mode": "visual", "document_weight": 0}  # the model's scores
    before = [(h.page_id, h.score) for h in index.search(query, k=3, **visual)]
    index.close()

    reopened = Index.open(tmp_path / "ix")
    reopened.device = "cpu"
    assert [(h.page_id, h.score) for h in reopened.search(query, k=3, **visual)] == before
    assert reopened.delete("memo")
    after = [(h.page_id, h.score) for h in reopened.search(query, k=3, **visual)]
    assert after == [(page, score) for page, score in before if page != "memo_1"]
    assert reopened.info()["visual_vectors"] == 2
    reopened.close()

    other = tmp_path / "other-clip"
    build_clip(other, seed=1)
    spec = Index.open(tmp_path / "ix").catalog.visual_spec()
    spec["model"] = str(other)
    Index.open(tmp_path / "ix").catalog.set_visual_spec(spec)  # as if an index built by another model
    stale = Index.open(tmp_path / "ix")
    stale.device = "cpu"
    with pytest.raises(PagesightError, match="built with visual encoder 'clip'.*model differ"):
        stale.search(query, mode="visual")


def test_lexical_index_has_no_visual_search(tmp_path):
    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    index.add(make_pdf(tmp_path / "a.pdf", [["alpha beta"]]), ocr="never")
    with pytest.raises(PagesightError, match="no visual vectors"):
        index.search_image(index.tile_image("a", 1, 0))


@pytest.mark.parametrize(
    ("store", "storage"),
    [("local", "float16"), ("qdrant", "float16"), ("local", "binary"), ("qdrant", "int8")],
)
def test_late_interaction_index_ranks_by_maxsim(tmp_path, corpus, store, storage):
    """Compact storage (int8 or binary codes) rescores its candidates with the float16 vectors: on a
    corpus smaller than the rescored pool, the same exact ranking."""
    from pagesight.encode.visual.late_interaction import import_colpali

    if store == "qdrant":
        pytest.importorskip("qdrant_client")
    models = import_colpali()
    folder = tmp_path / "tiny-colqwen2"
    build_qwen(folder, "qwen2-vl", models.ColQwen2, models.ColQwen2Processor)
    settings = Settings(
        dense_model=None,
        visual_encoder="colqwen2",
        visual_model=str(folder),
        multi_vector_storage=storage,
        muvera_reps=5,  # IRPAPERS' is 10; the local store's encodings are the setting's
    )
    # Qdrant: token vectors compared by its MAX_SIM, after a prefetch on their mean
    index = Index.open(tmp_path / "ix" if store == "local" else f"qdrant:{tmp_path / 'q'}", settings=settings)
    index.device = "cpu"
    assert index.add([corpus], ocr="never").ok
    encoder = make_encoder("colqwen2", model=str(folder), device="cpu")
    tiles = _tiles(index)
    pages = encoder.encode_images([index.tile_image(*tile) for tile in tiles])
    query = "lens blank lot"
    expected = maxsim(encoder.encode_queries([query]), [page.astype(np.float16) for page in pages])[0]
    hits = index.search(query, k=3, mode="visual", document_weight=0)
    assert [(h.doc_id, h.page, h.tile) for h in hits] == [tiles[i] for i in np.argsort(-expected)]
    assert [h.score for h in hits] == pytest.approx(np.sort(expected)[::-1], rel=1e-3)
    assert index.catalog.visual_spec()["multi_vector"] is True
    if store == "local":
        engine = index.store.retrievers().visual.segments[0].part("visual").engine  # one part: one commit
        assert engine.storage == storage and (engine.encoder.reps, engine.encoder.k_sim) == (5, 4)
        # the encodings are found in HNSW by default: IVF over them misses most of MaxSim's top 10
        assert engine.index.kind == "hnsw" and index.info()["visual_index"] == "hnsw"
        with pytest.raises(SettingsConflict, match="made with muvera_reps=5"):
            Index.open(tmp_path / "ix", settings={"muvera_reps": 20})
    else:  # Qdrant keeps the codes it is told to (a server searches them; local mode exactly)
        params = index.store.client.get_collection(index.store.catalog.tiles_name).config.params
        quantization = params.vectors["visual"].quantization_config
        assert (quantization is None) == (storage == "float16")
    # Reranking any first stage by the same encoder scores the stored token vectors: no image is
    # encoded again, and the scores are the exact MaxSim of the stored (float16) vectors.
    reranker = make_reranker("colqwen2", model=str(folder), device="cpu")
    reranked = index.search(
        query, k=len(tiles), mode="lexical", rerank=reranker, rerank_candidates=len(tiles)
    )
    assert reranked and reranker.last["stored"] == reranker.last["candidates"] == len(reranked)
    by_tile = dict(zip(tiles, expected))
    for hit in reranked:
        assert hit.scores["rerank"] == pytest.approx(by_tile[(hit.doc_id, hit.page, hit.tile)], rel=1e-3)
    index.close()


def test_a_reranker_in_another_space_encodes_the_images(clip_index, clip_folder, tmp_path):
    same = make_reranker("clip", model=str(clip_folder), device="cpu")
    hits = clip_index.search("lens", k=3, mode="lexical", rerank=same, rerank_candidates=3)
    assert hits and same.last["stored"] == len(hits)
    build_clip(tmp_path / "other", seed=1)
    other = make_reranker("clip", model=str(tmp_path / "other"), device="cpu")
    reranked = clip_index.search("lens", k=3, mode="lexical", rerank=other, rerank_candidates=3)
    assert other.last["stored"] == 0 and other.last["candidates"] == len(reranked)
    query = other.encoder.encode_queries(["lens"])[0]
    for hit in reranked:
        image = clip_index.tile_image(hit.doc_id, hit.page, hit.tile)
        assert hit.scores["rerank"] == pytest.approx(
            float(np.dot(query, other.encoder.encode_images([image])[0])), abs=1e-5
        )


def test_the_qdrant_store_holds_single_visual_vectors(tmp_path, corpus, clip_folder, clip_index):
    pytest.importorskip("qdrant_client")
    settings = Settings(dense_model=None, visual_encoder="clip", visual_model=str(clip_folder))
    index = Index.open(f"qdrant:{tmp_path / 'q'}", settings=settings)
    index.device = "cpu"
    assert index.add([corpus], ocr="never").ok
    assert index.info()["visual_vectors"] == 3
    for query in ("quarterly revenue", "warehouse orders", "supplier change"):
        for mode in ("visual", "hybrid"):
            ours, theirs = clip_index.search(query, k=3, mode=mode), index.search(query, k=3, mode=mode)
            assert [(h.doc_id, h.page) for h in theirs] == [(h.doc_id, h.page) for h in ours], (query, mode)
            assert [h.score for h in theirs] == pytest.approx([h.score for h in ours], abs=2e-3)
    picture = clip_index.tile_image("report", 2)
    assert [(h.doc_id, h.page) for h in index.search_image(picture, k=3)] == [
        (h.doc_id, h.page) for h in clip_index.search_image(picture, k=3)
    ]
    index.close()


def test_cli_ingest_with_an_encoder_and_search_by_image(tmp_path, corpus, clip_folder):
    index = str(tmp_path / "ix")
    pagesight(
        "ingest", str(corpus), "--index", index, "--no-dense", "--ocr", "never",
        "--encoder", "clip", "--encoder-model", str(clip_folder), "--device", "cpu",
    )  # fmt: skip
    opened = Index.open(index)
    assert opened.settings.visual_encoder == "clip" and opened.info()["visual_vectors"] == 3
    query = tmp_path / "query.png"
    opened.tile_image("memo", 1, 0).save(query)
    found = json.loads(
        pagesight("search", "--image", str(query), "--index", index, "-k", "1", "--json").stdout
    )
    assert found[0]["page_id"] == "memo_1" and found[0]["scores"]["visual"] == pytest.approx(1.0, abs=2e-3)
    within = pagesight("search", "--image", str(query), "--index", index, "--where", "id != memo", "--json")
    within = json.loads(within.stdout)
    assert within and all(hit["doc_id"] != "memo" for hit in within)  # the filter holds
    textual = pagesight("search", "--image", str(query), "--index", index, "--mode", "lexical", check=False)
    assert (
        textual.returncode == 2
        and "mode lexical: an image alone is searched by its visual run" in textual.stderr
    )
    reranked = pagesight("search", "--image", str(query), "--index", index, "--rerank", "vlm", check=False)
    assert reranked.returncode == 2 and "without rerank (options of a text search)" in reranked.stderr
    bad = pagesight("search", "--image", str(query), "--region", "1,2,3", "--index", index, check=False)
    assert bad.returncode == 2 and "--region must be x0,y0,x1,y1" in bad.stderr
    changed = pagesight("ingest", str(corpus), "--index", index, "--encoder", "dse", check=False)
    assert changed.returncode == 2 and "chosen when an index is made" in changed.stderr


def test_web_pages_are_embedded_from_their_screenshots(tmp_path, clip_folder):
    from tests.render.web.conftest import MISSING, page

    if MISSING is not None:
        pytest.skip(f"web rendering needs Chromium: {MISSING}")
    site = tmp_path / "site"
    site.mkdir()
    (site / "orders.html").write_text(page("Orders", "<h1>Orders</h1><p>Warehouse Delta ships daily.</p>"))
    settings = Settings(dense_model=None, visual_encoder="clip", visual_model=str(clip_folder))
    index = Index.open(tmp_path / "ix", settings=settings)
    index.device = "cpu"
    assert index.add([site], web={"keep_images": False}).ok
    row = index.catalog.tile_at("orders", 1, 0)
    assert index.catalog.tile_image(row.id) is None  # the screenshot was read, then not kept
    shot = index.tile_image("orders", 1, 0)  # rendered again, pixel-identical
    encoder = make_encoder("clip", model=str(clip_folder), device="cpu")
    (hit,) = index.search_image(shot, k=1)
    assert hit.page_id == "orders_1"
    stored = index.catalog.visual_vectors([row.id])[1][0]
    assert stored == pytest.approx(encoder.encode_images([shot])[0], abs=2e-3)
    index.close()


def test_a_web_pages_table_is_embedded_from_the_bands_screenshots(tmp_path, clip_folder):
    pytest.importorskip("rapid_layout", reason="an index with layout regions needs the 'layout' extra")
    from tests.render.web.conftest import MISSING
    from tests.render.web.test_regions import report_page

    if MISSING is not None:
        pytest.skip(f"web rendering needs Chromium: {MISSING}")
    html = report_page(tmp_path / "site")
    settings = Settings(dense_model=None, visual_encoder="clip", visual_model=str(clip_folder), layout=True)
    index = Index.open(tmp_path / "ix", settings=settings)
    index.device = "cpu"
    assert index.add(html, web={"keep_images": False, "max_height": 6000}).ok
    counts = index.catalog.counts()
    assert counts["visual_vectors"] == counts["tiles"] + counts["region_units"] == counts["tiles"] + 2
    unit = index.catalog.tile_at("voyage", 1, counts["tiles"])
    assert unit.region is not None
    # Encoded at ingest from the screenshots put together; shown later from bands rendered again.
    image = index.tile_image("voyage", 1, counts["tiles"])
    assert image.size == (round(unit.box[2]) - round(unit.box[0]), round(unit.box[3]) - round(unit.box[1]))
    encoder = make_encoder("clip", model=str(clip_folder), device="cpu")
    stored = index.catalog.visual_vectors([unit.id])[1][0]
    assert stored == pytest.approx(encoder.encode_images([image])[0], abs=2e-3)
    index.close()


def test_eval_compares_visual_with_lexical(tmp_path, corpus, clip_folder):
    data = tmp_path / "dataset"
    (data / "pdfs").mkdir(parents=True)
    for pdf in corpus.glob("*.pdf"):
        (data / "pdfs" / pdf.name).write_bytes(pdf.read_bytes())
    questions = {"q1": ("Halvorsen Glassworks supplier", "memo_1"), "q2": ("lens blank lot", "report_2")}
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, (text, _) in questions.items())
    )
    (data / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{qid}\t{page}\t1\n" for qid, (_, page) in questions.items())
    )
    settings = Settings(dense_model=None, visual_encoder="clip", visual_model=str(clip_folder))
    index = Index.open(tmp_path / "ix", settings=settings)
    index.device = "cpu"
    assert index.add(data / "pdfs", ocr="never").ok
    top = {qid: index.search(text, k=1, mode="visual")[0].page_id for qid, (text, _) in questions.items()}
    index.close()
    out = pagesight(
        "eval", str(data), "--index", str(tmp_path / "ix"), "-m", "visual", "-m", "lexical", "-m", "hybrid",
        "--json",
    )  # fmt: skip
    configs = {c["config"]: c for c in json.loads(out.stdout)["configs"]}
    assert set(configs) == {"visual", "lexical", "hybrid"}
    hits = sum(top[qid] == page for qid, (_, page) in questions.items())
    assert configs["visual"]["recall@1"] == hits / len(questions)
    assert configs["lexical"]["recall@1"] == 1.0


def test_clip_draws_a_similarity_map_over_the_square_it_crops(clip_index, clip_folder):
    import torch

    encoder = make_encoder("clip", model=str(clip_folder), device="cpu")
    found = clip_index.explain("Which supplier replaces Brightmere Supply?", "memo", 1, 0)
    image = clip_index.tile_image("memo", 1, 0)
    vision = encoder.model.config.vision_config
    side = vision.image_size // vision.patch_size
    assert found.grid.shape == (side, side) and found.image.size == image.size
    # a Letter tile is taller than wide: the crop is its middle square, as wide as the tile
    left, top, right, bottom = found.covers
    assert abs(left) < 1e-6 and abs(right - image.width) < 1e-6 and abs((bottom - top) - image.width) < 1e-6
    assert abs(top - (image.height - image.width) / 2) < 1e-6
    # the patches go through the projection whose class token gives the tile's own vector
    pixels = encoder.processor.image_processor(images=[image], return_tensors="pt")["pixel_values"]
    with torch.inference_mode():
        states = encoder.model.vision_model(pixel_values=pixels).last_hidden_state[0]
        cls = encoder.model.visual_projection(encoder.model.vision_model.post_layernorm(states[:1]))[0]
    assert np.allclose(cls / cls.norm(), encoder.encode_images([image])[0], atol=1e-5)
    drawn = np.asarray(found.draw(), dtype=int)
    above = drawn[: int(top) - 1]  # outside the crop: untinted
    assert np.array_equal(above, np.asarray(image.convert("RGB"), dtype=int)[: int(top) - 1])
