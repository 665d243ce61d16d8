"""Late-interaction (MaxSim) scoring of multi-vector queries against multi-vector documents.

ColBERT (Khattab & Zaharia, SIGIR 2020) and ColPali (Faysse et al., ICLR 2025) represent a query and a
page by one vector per token or image patch; the score is the sum, over query vectors, of the best
inner product with any document vector:

    MaxSim(q, d) = sum_i max_j <q_i, d_j>

colpali-engine's ``BaseVisualRetrieverProcessor.score_multi_vector`` zero-pads batches of 128
documents and runs ``einsum("bnd,csd->bcns").amax(-1).sum(-1)``. Here the documents are packed end to
end (no padding), so one matrix product scores a block of document vectors against all query vectors
of all queries, ``np.maximum.reduceat`` takes the max over each document's run of rows and
``np.add.reduceat`` sums each query's columns. That is the same float32 arithmetic (equal to 1e-4 on
unit vectors, checked against colpali-engine in the tests), faster on CPU (``benchmarks/vectors.py``
measures both), needs no torch, accepts a float16 store, and handles ragged lengths exactly: a
padding row never takes part in a max, whereas zero padding scores 0 against a query vector whose
true best inner product with a shorter document is negative.

Inputs may be a ``PackedMultiVectors``, a sequence of ``(n_i, dim)`` arrays or torch tensors, or a
padded ``(batch, length, dim)`` array or tensor whose all-zero rows are padding (colpali-engine's
convention: pad tokens are exactly zero).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Size of one block of scores (query vectors x document vectors) in float32 elements: 8 MB keeps it in
# the cache hierarchy while each matrix product is still large enough to run at full speed.
_BLOCK_ELEMENTS = 1 << 21


def to_numpy(array: Any) -> np.ndarray:
    """A numpy view or copy of a numpy array or a torch tensor (on any device, any float dtype)."""
    if hasattr(array, "detach"):  # torch.Tensor, without importing torch
        array = array.detach().to("cpu")
        if not array.is_floating_point() or array.dtype.itemsize < 4:
            array = array.float()  # bfloat16 has no numpy dtype; float16 is upcast for matmul speed
        return array.numpy()
    return np.asarray(array)


@dataclass(frozen=True)
class PackedMultiVectors:
    """Multi-vectors stored end to end: item ``i`` is ``vectors[offsets[i]:offsets[i + 1]]``."""

    vectors: np.ndarray  # (total vectors, dim), float16 or float32
    offsets: np.ndarray  # (items + 1,), int64, starting at 0

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.vectors[self.offsets[i] : self.offsets[i + 1]]

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def take(self, items: np.ndarray) -> PackedMultiVectors:
        """The multi-vectors ``items`` (indices into this pack), packed anew in that order."""
        items = np.asarray(items, dtype=np.int64)
        starts = self.offsets[items]
        return gather(self.vectors, starts, self.offsets[items + 1] - starts)


def gather(vectors: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> PackedMultiVectors:
    """The runs ``vectors[start : start + length]``, packed in that order."""
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return PackedMultiVectors(vectors[runs(starts, lengths)], offsets)


def runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``start, ..., start + length - 1`` of each run, the runs one after another:
    one gather takes them all, no slice a run (each run's start, shifted by the position in it)."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)


MultiVectors = PackedMultiVectors | Sequence[Any] | np.ndarray


def pack(multivectors: MultiVectors) -> PackedMultiVectors:
    """Pack multi-vectors given as a sequence of 2-D arrays/tensors or a zero-padded 3-D batch.

    Raises ``ValueError`` for an item with no vector, since its MaxSim is undefined.
    """
    if isinstance(multivectors, PackedMultiVectors):
        packed = multivectors
    elif hasattr(multivectors, "ndim") and multivectors.ndim == 3:
        batch = to_numpy(multivectors)
        real = np.any(batch != 0, axis=2)  # (batch, length): padding rows are exactly zero
        offsets = np.zeros(len(batch) + 1, dtype=np.int64)
        np.cumsum(real.sum(axis=1), out=offsets[1:])
        packed = PackedMultiVectors(batch[real], offsets)
    else:
        items = [to_numpy(item) for item in multivectors]
        if not items:
            raise ValueError("no multi-vectors given")
        if any(item.ndim != 2 for item in items):
            raise ValueError("each multi-vector must be a 2-D (vectors, dim) array")
        offsets = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum([len(item) for item in items], out=offsets[1:])
        packed = PackedMultiVectors(np.concatenate(items), offsets)
    if packed.vectors.dtype not in (np.float16, np.float32):
        packed = PackedMultiVectors(packed.vectors.astype(np.float32), packed.offsets)
    empty = np.flatnonzero(packed.lengths == 0)
    if len(empty):
        raise ValueError(f"multi-vector {int(empty[0])} has no vector")
    return packed


def maxsim(
    queries: MultiVectors, documents: MultiVectors, block_elements: int = _BLOCK_ELEMENTS
) -> np.ndarray:
    """MaxSim scores, shape ``(len(queries), len(documents))``, float32.

    ``block_elements`` bounds the similarity block computed at once (float32 elements); a document is
    never split across blocks, so one longer than a block is scored in a block of its own.

    Equal to colpali-engine's ``score_multi_vector`` on the same vectors (to float32 rounding) when no
    padding row would win a max; exact for ragged lengths in every case.
    """
    q = pack(queries)
    if isinstance(documents, Sequence) and not isinstance(documents, PackedMultiVectors | np.ndarray):
        # A list of per-page arrays/tensors is packed a group at a time, right before it is scored,
        # rather than copied whole into one array first: the copy then stays in cache (on 1,000 x
        # 1,030 x 128 floats the whole copy costs about as much as the scoring).
        items = [to_numpy(item) for item in documents]
        if not items:
            raise ValueError("no multi-vectors given")
        ends = np.cumsum([len(item) for item in items])
        group = max(1, 8 * block_elements // max(1, len(q.vectors)))
        scores = np.empty((len(q), len(items)), dtype=np.float32)
        first = 0
        while first < len(items):
            start = ends[first - 1] if first else 0
            last = min(len(items), max(first + 1, int(np.searchsorted(ends, start + group, side="right"))))
            scores[:, first:last] = _maxsim_packed(q, pack(items[first:last]), block_elements)
            first = last
        return scores
    return _maxsim_packed(q, pack(documents), block_elements)


def _maxsim_packed(q: PackedMultiVectors, d: PackedMultiVectors, block_elements: int) -> np.ndarray:
    if q.dim != d.dim:
        raise ValueError(f"query vectors have dimension {q.dim}, document vectors {d.dim}")
    query_vectors_t = np.ascontiguousarray(q.vectors.T, dtype=np.float32)  # (dim, query vectors)
    query_starts = q.offsets[:-1]
    scores = np.empty((len(q), len(d)), dtype=np.float32)
    block = max(1, block_elements // query_vectors_t.shape[1])  # document vectors per block
    first = 0
    while first < len(d):
        # The documents whose vectors end within this block (at least one document).
        last = int(np.searchsorted(d.offsets, d.offsets[first] + block, side="right")) - 1
        last = min(max(first + 1, last), len(d))
        start, stop = d.offsets[first], d.offsets[last]
        chunk = d.vectors[start:stop].astype(np.float32, copy=False)
        # Document vectors as rows: the max over each document's run of rows is then an elementwise
        # maximum of contiguous rows, which reduceat does at memory speed.
        similarities = chunk @ query_vectors_t  # (document vectors in block, query vectors)
        best = np.maximum.reduceat(similarities, d.offsets[first:last] - start, axis=0)
        scores[:, first:last] = np.add.reduceat(best, query_starts, axis=1).T
        first = last
    return scores


def best_similarity(patches: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each patch's best similarity to the query's tokens, MaxSim's inner max seen from the page:
    ``patches`` (rows, columns, dim) and ``query`` (tokens, dim), unit vectors, give a (rows,
    columns) grid (``search.explain`` draws it)."""
    return (patches @ query.T).max(axis=-1)
