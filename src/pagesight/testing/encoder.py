"""The visual encoder contract (``encode/visual/base.py``) as assertions: what every encoder
promises, for a package adding one to check on a tiny random-weight model in its own tests::

    from pagesight.testing.encoder import assert_encoder_contract

    def test_my_encoder(pages, queries):
        assert_encoder_contract(MyEncoder(model=TINY_FOLDER, device="cpu"), pages, queries)

``pages`` are a few PIL images (the first at least 56 x 56 pixels: its corner is the image query)
and ``queries`` a few strings. The project's encoders are checked with it
(``tests/encode/visual/``).
"""

from __future__ import annotations

import numpy as np


def assert_unit_vectors(vectors: list, count: int, dim: int, multi_vector: bool) -> None:
    """``count`` float32 arrays of unit-norm vectors: ``(dim,)``, or ``(n, dim)`` with n > 0."""
    assert len(vectors) == count
    for array in vectors:
        assert array.dtype == np.float32
        if multi_vector:
            assert array.ndim == 2 and array.shape[0] > 0 and array.shape[1] == dim
        else:
            assert array.shape == (dim,)
        assert np.allclose(np.linalg.norm(array, axis=-1), 1.0, atol=1e-5)
        assert np.isfinite(array).all()


def assert_same(a: list, b: list, atol: float = 1e-5) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape
        assert np.allclose(x, y, atol=atol), float(np.abs(x - y).max())


def assert_differ(a: list, b: list, by: float = 1e-3) -> None:
    assert all(x.shape != y.shape or float(np.abs(x - y).max()) > by for x, y in zip(a, b))


def assert_encoder_contract(
    encoder, pages: list, queries: list[str], repeat_atol: float = 0.0
) -> tuple[list, list]:
    """What every encoder promises: shapes, unit norm, float32, the same vectors on a second run
    (exactly; within ``repeat_atol`` for one behind a server, which batches each request with
    whatever else it runs) and at batch size 1 as at 3, progress reported per input. Returns the
    page and query vectors."""
    from pagesight.encode.visual.base import VisualEncoder

    assert isinstance(encoder, VisualEncoder)
    done: list[int] = []
    page_vectors = encoder.encode_images(pages, progress=done.append)
    assert sum(done) == len(pages)
    query_vectors = encoder.encode_queries(queries)
    image_query_vectors = encoder.encode_image_queries([pages[0].crop((0, 0, 56, 56))])
    for vectors, count in (
        (page_vectors, len(pages)),
        (query_vectors, len(queries)),
        (image_query_vectors, 1),
    ):
        assert_unit_vectors(vectors, count, encoder.dim, encoder.multi_vector)
    assert_same(encoder.encode_images(pages), page_vectors, atol=repeat_atol)
    batch_size = encoder.batch_size
    try:
        encoder.batch_size = 1
        assert_same(encoder.encode_images(pages), page_vectors)
        assert_same(encoder.encode_queries(queries), query_vectors)
        encoder.batch_size = 3
        assert_same(encoder.encode_images(pages), page_vectors)
    finally:
        encoder.batch_size = batch_size
    assert encoder.encode_images([]) == []
    spec = encoder.spec()
    assert (spec["dim"], spec["multi_vector"], spec["name"]) == (
        encoder.dim,
        encoder.multi_vector,
        encoder.name,
    )
    return page_vectors, query_vectors
