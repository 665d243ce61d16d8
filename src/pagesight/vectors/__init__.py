"""Vector search building blocks: single-vector ANN indexes, MaxSim, token pooling and MUVERA.

Everything here works on numpy arrays (torch tensors are accepted as inputs) and needs no torch.
"""

from pagesight.vectors.ann import KINDS, VectorIndex
from pagesight.vectors.maxsim import MultiVectors, PackedMultiVectors, maxsim, pack
from pagesight.vectors.muvera import Muvera, MuveraRetriever
from pagesight.vectors.pooling import pool_multivectors, pool_tokens

__all__ = [
    "KINDS",
    "Muvera",
    "MuveraRetriever",
    "MultiVectors",
    "PackedMultiVectors",
    "VectorIndex",
    "maxsim",
    "pack",
    "pool_multivectors",
    "pool_tokens",
]
