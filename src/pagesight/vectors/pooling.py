"""Token pooling: fewer vectors per page by merging vectors that say the same thing.

A ColPali-style page carries about a thousand patch vectors, many of them near copies (white margins,
runs of body text). Hierarchical token pooling (Clavié, Chaffin & Adams, "Reducing the footprint of
multi-vector retrieval with minimal performance impact via token pooling", 2024; colpali-engine's
``HierarchicalTokenPooler``) clusters a page's vectors by cosine similarity with Ward linkage, cuts the
tree into ``n // pool_factor`` clusters and replaces each cluster by its mean, re-normalised. A pool
factor of 3 keeps a third of the vectors for a small loss of MaxSim quality
(``benchmarks/vectors.py`` measures it).

Clustering uses scipy's ``linkage``/``fcluster`` as colpali-engine does, but on the unit vectors
themselves: for unit vectors the squared Euclidean distance is ``2 - 2 cos``, so Ward linkage on them
merges by cosine similarity. colpali-engine (like PyLate) instead feeds the rows of the ``1 - cos``
matrix to ``linkage`` as n-dimensional points, which costs O(n^3) rather than O(n^2 d) (several times
slower on a 1,030-vector page: ``benchmarks/vectors.py`` times both), and gives the same clusters on
well-separated data (a test checks this against colpali-engine's own ``HierarchicalTokenPooler``).
colpali-engine is not called at run time because importing it loads its model classes, which need
torchvision.
"""

from __future__ import annotations

import numpy as np

from pagesight.errors import PagesightError
from pagesight.vectors.maxsim import MultiVectors, PackedMultiVectors, pack, to_numpy


def _linkage():
    try:
        from scipy.cluster.hierarchy import fcluster, linkage
    except ImportError:
        raise PagesightError("token pooling needs scipy: pip install scipy") from None
    return linkage, fcluster


def pool_tokens(vectors: np.ndarray, pool_factor: int) -> np.ndarray:
    """One page's ``(n, dim)`` vectors pooled to at most ``max(n // pool_factor, 1)`` unit vectors.

    Returns float32 vectors, one per cluster, in cluster order; a pool factor of 1 (or a single
    vector) returns the vectors unchanged.
    """
    if pool_factor < 1:
        raise ValueError(f"pool_factor must be at least 1, got {pool_factor}")
    vectors = to_numpy(vectors).astype(np.float32)
    n = len(vectors)
    if pool_factor == 1 or n < 2:
        return vectors
    linkage, fcluster = _linkage()
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    tree = linkage(unit.astype(np.float64), method="ward")
    labels = fcluster(tree, t=max(n // pool_factor, 1), criterion="maxclust") - 1
    sums = np.zeros((labels.max() + 1, vectors.shape[1]), dtype=np.float32)
    np.add.at(sums, labels, vectors)
    sums = sums[np.bincount(labels) > 0]
    return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)


def pool_multivectors(multivectors: MultiVectors, pool_factor: int) -> PackedMultiVectors:
    """Every page of ``multivectors`` pooled with ``pool_tokens``, packed in the same order."""
    packed = pack(multivectors)
    return pack([pool_tokens(packed[i], pool_factor) for i in range(len(packed))])
