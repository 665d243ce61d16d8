"""Compact multi-vectors: late-interaction token vectors kept as int8 or 1-bit codes.

A ColQwen page is about 1,030 vectors of 128 dimensions: 264 KB in float16, 30 million tiles 7.9 TB.
The codes of unit vectors are what a search scores first, the float16 originals (memory-mapped, read
for the few pages that need them) what it rescores the best candidates with, as Qdrant's quantized
vectors with ``rescore`` and the binary ColBERT indexes of Vespa do:

- ``int8``: each component as round(127 x), 1 byte a dimension (half of float16); scored as the
  codes' MaxSim over 127, within about 1e-2 of the float score.
- ``binary``: each component's sign, 1 bit a dimension (a sixteenth of float16); scored
  asymmetrically, the float query against the signs scaled to unit length (sign(x) / sqrt(dim)),
  which keeps more of the order than Hamming distances between two sign codes.

``code_maxsim`` scores packed codes against float queries a block of pages at a time, so no more
than a block is ever decoded to float32.
"""

from __future__ import annotations

import numpy as np

from pagesight.vectors.maxsim import PackedMultiVectors, maxsim

STORAGES = ("float16", "int8", "binary")
INT8_SCALE = 127.0
_BLOCK_VECTORS = 1 << 16  # page vectors decoded at once: 32 MB of float32 at 128 dimensions


def check_storage(storage: str) -> str:
    if storage not in STORAGES:
        raise ValueError(f"multi-vector storage must be one of {', '.join(STORAGES)}, got '{storage}'")
    return storage


def encode(vectors: np.ndarray, storage: str) -> np.ndarray:
    """The codes of unit ``vectors`` (rows): int8 components, or their signs packed 8 to a byte."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if check_storage(storage) == "int8":
        return np.clip(np.rint(vectors * INT8_SCALE), -127, 127).astype(np.int8)
    if storage == "binary":
        return np.packbits(vectors > 0, axis=1)
    raise ValueError("float16 vectors are stored as they are, not as codes")


def decode(codes: np.ndarray, storage: str, dim: int) -> np.ndarray:
    """Float32 vectors scored in place of the originals: int8 over 127, signs over sqrt(dim)."""
    if storage == "int8":
        return codes.astype(np.float32) / INT8_SCALE
    signs = np.unpackbits(codes, axis=1, count=dim).astype(np.float32)
    return (2.0 * signs - 1.0) / np.float32(np.sqrt(dim))


def code_maxsim(queries: PackedMultiVectors, codes: PackedMultiVectors, storage: str, dim: int) -> np.ndarray:
    """MaxSim of float ``queries`` against pages stored as ``codes``, ``(len(queries), len(codes))``."""
    scores = np.empty((len(queries), len(codes)), dtype=np.float32)
    first = 0
    while first < len(codes):
        start = codes.offsets[first]
        last = int(np.searchsorted(codes.offsets, start + _BLOCK_VECTORS, side="right")) - 1
        last = min(max(first + 1, last), len(codes))
        stop = codes.offsets[last]
        block = PackedMultiVectors(
            decode(codes.vectors[start:stop], storage, dim), codes.offsets[first : last + 1] - start
        )
        scores[:, first:last] = maxsim(queries, block)
        first = last
    return scores


def bytes_per_vector(dim: int, storage: str) -> int:
    """Bytes one token vector takes in memory under ``storage``."""
    return {"float16": 2 * dim, "int8": dim, "binary": (dim + 7) // 8}[check_storage(storage)]
