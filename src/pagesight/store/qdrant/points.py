"""What ``QdrantCatalog.put_document`` writes: a document's point in NAME-catalog (its record) and
its tiles' points in NAME (payload and named vectors), made from the ``Document`` alone."""

from __future__ import annotations

import os

import numpy as np

from pagesight.records import Document, Page, Tile
from pagesight.store.qdrant.bm25 import bm25_document
from pagesight.store.qdrant.schema import qdrant_models
from pagesight.store.rows import link_rows, region_row, span_rows


def document_record(document: Document, version: str) -> dict:
    """The payload of the document's point, but for what its tiles count (``tile_counts``) and its
    ``where`` fields (``fields.fields_payload``), which the catalog adds."""
    return {
        "kind": "document",
        "id": document.id,
        "source": os.path.abspath(document.source),
        "sha256": document.sha256,
        "type": document.type,
        "size": document.size,
        "mtime_ns": document.mtime_ns,
        "n_pages": len(document.pages),
        "meta": document.meta,
        "pages": [[p.number, p.width, p.height, p.text_source, p.language] for p in document.pages],
        "regions": {
            str(p.number): [[r.kind, [float(v) for v in r.box], r.score] for r in p.regions]
            for p in document.pages
            if p.regions
        },
        "version": version,
    }


def tile_points(
    document: Document,
    tiles: list[tuple[Page, Tile]],
    first_id: int,
    *,
    terms: list[list[str]],
    fields: list[tuple[str, str, str]],
    vectors: dict[tuple[int, int], np.ndarray],
    visual: dict[tuple[int, int], np.ndarray],
    multi_vector: bool,
    average: float,
    version: str,
    where: dict,
) -> list:
    """The points of ``tiles``, ids from ``first_id``, not yet live: each tile's payload (its
    ``fields``' context, heading and table cells, ``version``, the document's ``where``) and its
    BM25 weights (of its ``terms``, with the ``average`` tile length), text chunk ``vectors`` and
    ``visual`` vectors."""
    models = qdrant_models()
    points = []
    for offset, ((page, tile), tile_terms, (named, heading, cells)) in enumerate(zip(tiles, terms, fields)):
        vector: dict = {"bm25": bm25_document(tile_terms, average)}
        matrix = vectors.get((page.number, tile.index))
        if matrix is not None and len(matrix):
            vector["dense"] = np.asarray(matrix, dtype=np.float32).tolist()
        image_vectors = visual.get((page.number, tile.index))
        if image_vectors is not None:
            vector.update(visual_vectors(image_vectors, multi_vector))
        payload = {
            "doc_id": document.id,
            "page": page.number,
            "idx": tile.index,
            "box": [float(v) for v in tile.box],
            "page_size": [page.width, page.height],
            "text": tile.text,
            "context": named,
            "heading": heading,
            "cells": cells,
            "spans": span_rows(tile.spans),
            "links": link_rows(tile.links),
            "kind": tile.kind,
            "language": page.language,
            "chunks": 0 if matrix is None else len(matrix),
            "bm25_avg": average,
            "version": version,
            "live": False,
            "where": where,
        }
        if tile.image is not None:
            payload["image"] = tile.image.hex()
        if tile.region is not None:  # absent for bands: page_tiles selects tiles without it
            payload["region"] = region_row(tile)
        points.append(models.PointStruct(id=first_id + offset, vector=vector, payload=payload))
    return points


def tile_counts(document: Document, points: list, terms: list[list[str]]) -> dict[str, int]:
    """What the document's record counts of its tile ``points``: tiles, layout regions' units,
    text chunks, tiles with visual vectors, BM25 terms and OCR'd pages."""
    return {
        "tiles": len(points),
        "units": sum("region" in point.payload for point in points),
        "chunks": sum(point.payload["chunks"] for point in points),
        "visual": sum("visual" in point.vector for point in points),
        "bm25_terms": sum(map(len, terms)),
        "ocr_pages": sum(p.text_source == "ocr" for p in document.pages),
    }


def visual_vectors(vectors: np.ndarray, multi_vector: bool) -> dict:
    """The named visual vectors of a tile: its one vector, or its token vectors and their mean."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if not multi_vector:
        return {"visual": matrix.reshape(-1).tolist()}
    matrix = np.atleast_2d(matrix)
    return {"visual": matrix.tolist(), "visual_mean": matrix.mean(axis=0).tolist()}
