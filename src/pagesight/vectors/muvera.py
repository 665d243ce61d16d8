"""MUVERA: multi-vector retrieval through fixed-dimensional encodings (FDEs).

Dhulipala, Hadian, Jayaram, Lee & Mirrokni, "MUVERA: Multi-Vector Retrieval via Fixed Dimensional
Encodings" (NeurIPS 2024), as used by IRPAPERS for ColModernVBERT/ColQwen page vectors. A multi-vector
set becomes one vector whose inner product with a query's FDE approximates MaxSim, so an ordinary
single-vector ANN index finds candidates and exact MaxSim reranks the best ``ef`` of them.

One repetition of the encoding:

1. SimHash partition: ``k_sim`` Gaussian hyperplanes give each vector a ``k_sim``-bit code, its bucket
   among ``B = 2**k_sim``.
2. Per bucket, a document AVERAGES its vectors and a query SUMS them, so that the query's sum over its
   vectors of <q, bucket mean of d> approximates sum_i max_j <q_i, d_j>.
3. A document bucket left empty takes the document vector whose code is nearest in Hamming distance to
   the bucket's code (the lowest index among ties); a query bucket stays zero.
4. Each bucket's d-dimensional vector is projected to ``d_proj`` dimensions by a random matrix of ±1
   entries scaled by 1/sqrt(d_proj) (identity when ``d_proj == dim``).

``reps`` independent repetitions are concatenated (``reps * B * d_proj`` dimensions) and an optional
final Count Sketch (as in Google's reference implementation, graph-mining/sketching/point_cloud)
reduces them to ``final_dim``. All random draws come from ``seed``; queries and documents must be
encoded by the same ``Muvera`` (same seed and sizes).

The projection is linear, so each vector is projected once (one matrix product for all repetitions)
and the bucket sums are taken over projected vectors, for whole batches of documents at a time. This
is written here rather than taken from a library because no light, torch-free package does it: the
maintained Python implementation lives inside fastembed (with its ONNX model stack) and Google's
reference is C++ (graph-mining); the algorithm is ~100 lines of numpy, and the tests check its
defining properties (bucket sums/means, empty-bucket filling, exactness in the one-bucket case,
correlation with MaxSim, determinism by seed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from pagesight.errors import IndexFormatError, PagesightError
from pagesight.vectors.ann import VectorIndex
from pagesight.vectors.maxsim import MultiVectors, PackedMultiVectors, gather, maxsim, pack
from pagesight.vectors.quantize import check_storage, code_maxsim, encode

_FORMAT = 1
# Vectors encoded per batch: bounds the (vectors, reps, d_proj) intermediate at ~80 MB with defaults.
_BATCH_VECTORS = 1 << 16


class Muvera:
    """Fixed-dimensional encoder of multi-vectors; see the module docstring."""

    def __init__(
        self,
        dim: int,
        k_sim: int = 4,
        d_proj: int = 16,
        reps: int = 20,
        final_dim: int | None = None,
        seed: int = 0,
    ):
        if not 1 <= k_sim <= 16:
            raise ValueError(f"k_sim must be between 1 and 16, got {k_sim}")
        if not 1 <= d_proj <= dim:
            raise ValueError(f"d_proj must be between 1 and dim={dim}, got {d_proj}")
        if reps < 1 or (final_dim is not None and final_dim < 1):
            raise ValueError("reps and final_dim must be positive")
        self.dim, self.k_sim, self.d_proj, self.reps, self.final_dim, self.seed = (
            dim,
            k_sim,
            d_proj,
            reps,
            final_dim,
            seed,
        )
        self.buckets = 1 << k_sim
        rng = np.random.default_rng(seed)
        self._hyperplanes = rng.standard_normal((dim, reps * k_sim)).astype(np.float32)
        if d_proj < dim:
            signs = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=(dim, reps * d_proj))
            self._projection = signs / np.float32(np.sqrt(d_proj))
        else:
            self._projection = np.tile(np.eye(dim, dtype=np.float32), reps)
        self._bit_weights = (1 << np.arange(k_sim)).astype(np.int64)
        self._popcount = np.array([bin(code).count("1") for code in range(self.buckets)], dtype=np.int16)
        self.fde_dim = reps * self.buckets * d_proj
        if final_dim is not None:
            # Count Sketch: FDE coordinate i goes to output bucket[i] with sign[i].
            bucket = rng.integers(0, final_dim, size=self.fde_dim)
            sign = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=self.fde_dim)
            self._sketch_order = np.argsort(bucket, kind="stable")
            self._sketch_sign = sign[self._sketch_order]
            self._sketch_targets, self._sketch_starts = np.unique(
                bucket[self._sketch_order], return_index=True
            )

    @property
    def output_dim(self) -> int:
        return self.final_dim or self.fde_dim

    def encode_documents(self, multivectors: MultiVectors) -> np.ndarray:
        """Document FDEs, shape ``(len(multivectors), output_dim)``, float32."""
        return self._encode(pack(multivectors), document=True)

    def encode_queries(self, multivectors: MultiVectors) -> np.ndarray:
        """Query FDEs, shape ``(len(multivectors), output_dim)``, float32."""
        return self._encode(pack(multivectors), document=False)

    def _encode(self, packed: PackedMultiVectors, document: bool) -> np.ndarray:
        if packed.dim != self.dim:
            raise ValueError(f"vectors have dimension {packed.dim}, the encoder expects {self.dim}")
        out = np.empty((len(packed), self.output_dim), dtype=np.float32)
        first = 0
        while first < len(packed):
            end = int(np.searchsorted(packed.offsets, packed.offsets[first] + _BATCH_VECTORS, side="right"))
            last = min(len(packed), max(first + 1, end - 1))
            fde = self._encode_batch(packed.take(np.arange(first, last)), document)
            out[first:last] = fde if self.final_dim is None else self._sketch(fde)
            first = last
        return out

    def _encode_batch(self, batch: PackedMultiVectors, document: bool) -> np.ndarray:
        n, reps, buckets = len(batch), self.reps, self.buckets
        vectors = batch.vectors.astype(np.float32, copy=False)
        bits = (vectors @ self._hyperplanes).reshape(-1, reps, self.k_sim) > 0
        codes = bits @ self._bit_weights  # (vectors, reps): the bucket of each vector in each repetition
        projected = (vectors @ self._projection).reshape(-1, reps, self.d_proj)
        owner = np.repeat(np.arange(n), batch.lengths)
        # One row per (item, repetition, bucket) of the output, in that order.
        rows = (owner[:, None] * reps + np.arange(reps)) * buckets + codes
        sums = np.zeros((n * reps * buckets, self.d_proj), dtype=np.float32)
        np.add.at(sums, rows.ravel(), projected.reshape(-1, self.d_proj))
        if document:
            counts = np.bincount(rows.ravel(), minlength=len(sums))
            filled = counts > 0
            sums[filled] /= counts[filled, None]
            empty = np.flatnonzero(~filled)
            if len(empty):
                sums[empty] = self._nearest_vectors(batch, codes, projected, empty)
        return sums.reshape(n, -1)

    def _nearest_vectors(
        self, batch: PackedMultiVectors, codes: np.ndarray, projected: np.ndarray, empty: np.ndarray
    ) -> np.ndarray:
        """For each empty (item, repetition, bucket) row, the projected vector of that item whose code in
        that repetition is nearest in Hamming distance to the bucket (lowest index among ties)."""
        item, rep, bucket = (
            empty // (self.reps * self.buckets),
            (empty // self.buckets) % self.reps,
            empty % self.buckets,
        )
        longest = int(batch.lengths.max())
        position = np.arange(longest)
        valid = position < batch.lengths[item][:, None]  # (empty rows, longest)
        index = np.minimum(batch.offsets[item][:, None] + position, len(codes) - 1)
        distance = self._popcount[codes[index, rep[:, None]] ^ bucket[:, None]]
        distance[~valid] = self.k_sim + 1
        nearest = batch.offsets[item] + distance.argmin(axis=1)
        return projected[nearest, rep]

    def _sketch(self, fde: np.ndarray) -> np.ndarray:
        out = np.zeros((len(fde), self.final_dim), dtype=np.float32)
        signed = fde[:, self._sketch_order] * self._sketch_sign
        out[:, self._sketch_targets] = np.add.reduceat(signed, self._sketch_starts, axis=1)
        return out


class MuveraRetriever:
    """Multi-vector search: FDEs in a single-vector ``VectorIndex`` give ``ef`` candidates, which exact
    MaxSim over the stored multi-vectors reranks.

    The default index is HNSW over float16 FDEs (exact flat while small, see ``VectorIndex``); FDEs are
    not normalised, since their raw inner product is what approximates MaxSim. Multi-vectors are kept
    packed end to end as ``dtype`` (float16 by default: half the bytes, MaxSim within ~1e-3 for unit
    vectors); a removed page's rows are reclaimed once they are half of the store.

    With ``storage`` int8 or binary (``vectors.quantize``) the multi-vectors are also kept as codes,
    which MaxSim scores the ``ef`` candidates with; the best ``rescore`` of them are scored again
    with the originals, which a loaded retriever reads memory-mapped from disk: memory holds the
    codes, a half or a sixteenth of float16.

    On disk (``save``) it is a directory: ``muvera.json`` (format, encoder settings, generation) and,
    per generation, the packed vectors (and codes), offsets and ids as ``.npy`` files and the FDE
    index. A save writes a new generation, then atomically replaces ``muvera.json``, then deletes the
    old files, so a crash at any moment leaves a directory that loads (the old or the new state).
    """

    def __init__(
        self,
        encoder: Muvera,
        index: VectorIndex | None = None,
        dtype: type = np.float16,
        storage: str = "float16",
    ):
        if index is not None and index.dim != encoder.output_dim:
            raise ValueError(
                f"index dimension {index.dim} is not the encoder's FDE dimension {encoder.output_dim}"
            )
        if np.dtype(dtype) not in (np.float16, np.float32):
            raise ValueError(f"dtype must be float16 or float32, got {dtype}")
        self.encoder = encoder
        self.index = (
            index
            if index is not None
            else VectorIndex(encoder.output_dim, kind="hnsw", storage="fp16", normalize=False)
        )
        self.dtype = np.dtype(dtype)
        self.storage = check_storage(storage)
        self._vectors = np.zeros((0, encoder.dim), dtype=self.dtype)  # capacity rows; _rows are used
        # the codes of the same rows (vectors.quantize), or None when the vectors are searched as such
        self._codes = None if storage == "float16" else encode(np.zeros((0, encoder.dim)), storage)
        self._rows = 0
        self._starts = np.zeros(0, dtype=np.int64)  # per slot
        self._lengths = np.zeros(0, dtype=np.int64)
        self._ids = np.zeros(0, dtype=np.int64)
        self._slot: dict[int, int] = {}  # live id -> slot
        self._dead_rows = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, item: int) -> bool:
        return int(item) in self._slot

    def ids(self) -> np.ndarray:
        """The live page ids, sorted."""
        return np.sort(np.fromiter(self._slot, dtype=np.int64, count=len(self._slot)))

    def multivectors(self, ids: np.ndarray) -> PackedMultiVectors:
        """The stored multi-vectors of live pages ``ids``, packed in that order."""
        slots = np.array([self._slot[int(page)] for page in np.asarray(ids).tolist()], dtype=np.int64)
        return gather(self._vectors, self._starts[slots], self._lengths[slots])

    def codes(self, ids: np.ndarray) -> PackedMultiVectors:
        """The codes of live pages ``ids``, packed in that order (a retriever with codes)."""
        slots = np.array([self._slot[int(page)] for page in np.asarray(ids).tolist()], dtype=np.int64)
        return gather(self._codes, self._starts[slots], self._lengths[slots])

    def bytes_per_page(self) -> dict[str, float]:
        """Bytes per live page: the FDE index, the multi-vectors searched in memory (the codes, with
        compact storage) and the float multi-vectors (on disk, with compact storage)."""
        count = max(1, len(self))
        rows = float(self._lengths[list(self._slot.values())].sum()) / count
        floats = rows * self._vectors.itemsize * self.encoder.dim
        found = {"fde_index": self.index.bytes_per_vector(), "multivectors": floats}
        if self._codes is not None:
            found.update(multivectors=rows * self._codes.itemsize * self._codes.shape[1], on_disk=floats)
        return found

    def add(self, ids: np.ndarray, multivectors: MultiVectors) -> None:
        """Add (or replace) the pages ``ids`` with their multi-vectors."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        packed = pack(multivectors)
        if len(ids) != len(packed):
            raise ValueError(f"{len(ids)} ids for {len(packed)} multi-vectors")
        if packed.dim != self.encoder.dim:
            raise ValueError(
                f"multi-vectors have dimension {packed.dim}, the encoder expects {self.encoder.dim}"
            )
        if len(np.unique(ids)) != len(ids):
            raise ValueError("ids contain duplicates")
        fdes = self.encoder.encode_documents(packed)  # before any change, so a bad input changes nothing
        codes = encode(packed.vectors, self.storage) if self._codes is not None else None
        self.remove(ids)
        self.index.add(ids, fdes)
        total = len(packed.vectors)
        if self._rows + total > len(self._vectors):
            capacity = max(self._rows + total, 2 * len(self._vectors))
            self._vectors = _grown(self._vectors, self._rows, capacity)
            if codes is not None:
                self._codes = _grown(self._codes, self._rows, capacity)
        self._vectors[self._rows : self._rows + total] = packed.vectors
        if codes is not None:
            self._codes[self._rows : self._rows + total] = codes
        first = len(self._ids)
        self._starts = np.concatenate([self._starts, self._rows + packed.offsets[:-1]])
        self._lengths = np.concatenate([self._lengths, packed.lengths])
        self._ids = np.concatenate([self._ids, ids])
        self._slot.update(zip(ids.tolist(), range(first, first + len(ids))))
        self._rows += total

    def remove(self, ids: np.ndarray) -> int:
        """Remove the pages ``ids``; returns how many were present."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        self.index.remove(ids)
        removed = 0
        for page in ids.tolist():
            slot = self._slot.pop(page, None)
            if slot is not None:
                removed += 1
                self._dead_rows += int(self._lengths[slot])
        if self._dead_rows and self._dead_rows * 2 > self._rows:
            self._compact()
        return removed

    def _compact(self) -> None:
        live = self.ids()
        packed = self.multivectors(live)
        if self._codes is not None:
            self._codes = self.codes(live).vectors.copy()
        self._vectors, self._rows, self._dead_rows = packed.vectors.copy(), len(packed.vectors), 0
        self._starts, self._lengths, self._ids = packed.offsets[:-1].copy(), packed.lengths, live
        self._slot = dict(zip(live.tolist(), range(len(live))))

    def search(
        self,
        queries: MultiVectors,
        k: int = 10,
        ef: int = 256,
        rescore: int = 64,
        *,
        nprobe: int | None = None,
        ef_search: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best pages per query by MaxSim among the ``ef`` best by FDE inner product; with
        codes, the best ``rescore`` (``k`` at least) by the codes' MaxSim are scored again with the
        float vectors. ``nprobe`` and ``ef_search`` go to the FDE index's search
        (``VectorIndex.search``).

        Returns ``(scores, ids)``, each ``(len(queries), k)``, best first; missing places have id -1
        and score -inf.
        """
        if k < 1 or ef < 1:
            raise ValueError(f"k and ef must be positive, got k={k}, ef={ef}")
        packed = pack(queries)
        if packed.dim != self.encoder.dim:
            raise ValueError(f"query vectors have dimension {packed.dim}, the index holds {self.encoder.dim}")
        scores = np.full((len(packed), k), -np.inf, dtype=np.float32)
        ids = np.full((len(packed), k), -1, dtype=np.int64)
        fdes = self.encoder.encode_queries(packed)
        _, candidates = self.index.search(fdes, max(k, ef), nprobe=nprobe, ef_search=ef_search)
        for row, found in enumerate(candidates):
            found = found[found >= 0]
            if not len(found):
                continue
            query = packed.take(np.array([row]))
            if self._codes is not None:
                rough = code_maxsim(query, self.codes(found), self.storage, self.encoder.dim)[0]
                found = found[np.argsort(-rough, kind="stable")[: max(k, rescore)]]
            exact = maxsim(query, self.multivectors(found))[0]
            best = np.argsort(-exact, kind="stable")[:k]
            scores[row, : len(best)], ids[row, : len(best)] = exact[best], found[best]
        return scores, ids

    # ---- persistence ------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write to the directory ``path`` (created if needed); see the class docstring."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        manifest = path / "muvera.json"
        generation = 1
        if manifest.exists():
            generation = int(json.loads(manifest.read_text()).get("generation", 0)) + 1
        live = self.ids()
        packed = self.multivectors(live)
        prefix = f"g{generation}-"
        arrays = [("vectors", packed.vectors), ("offsets", packed.offsets), ("ids", live)]
        if self._codes is not None:
            arrays.append(("codes", self.codes(live).vectors))
        for name, array in arrays:
            with open(path / f"{prefix}{name}.npy", "wb") as f:
                np.save(f, array)
                f.flush()
                os.fsync(f.fileno())
        self.index.save(path / f"{prefix}fde.index")
        settings = {
            name: getattr(self.encoder, name)
            for name in ("dim", "k_sim", "d_proj", "reps", "final_dim", "seed")
        }
        document = {
            "format": _FORMAT,
            "generation": generation,
            "encoder": settings,
            "dtype": self.dtype.name,
            "storage": self.storage,
        }
        temporary = path / f".muvera.json.{os.getpid()}.tmp"
        with open(temporary, "w") as f:
            json.dump(document, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, manifest)
        for stale in path.glob("g*-*"):
            if not stale.name.startswith(prefix):
                stale.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: str | os.PathLike[str], mmap: bool = False) -> MuveraRetriever:
        """Read a retriever written by ``save``; with ``mmap``, or codes to search, the float
        multi-vectors stay on disk until the first add or removal compaction copies them."""
        path = Path(path)
        manifest = path / "muvera.json"
        if not manifest.exists():
            raise PagesightError(f"no MUVERA index at {path} (missing muvera.json)")
        try:
            document = json.loads(manifest.read_text())
        except json.JSONDecodeError as error:
            raise IndexFormatError(f"{manifest} is damaged: {error}") from None
        if document.get("format") != _FORMAT:
            raise IndexFormatError(
                f"{path} has MUVERA format {document.get('format')}, this build reads {_FORMAT}"
            )
        prefix = path / f"g{document['generation']}-"
        self = cls(
            Muvera(**document["encoder"]),
            index=VectorIndex.load(f"{prefix}fde.index"),
            dtype=np.dtype(document["dtype"]).type,
            storage=document.get("storage", "float16"),
        )
        compact = self._codes is not None
        vectors = np.load(f"{prefix}vectors.npy", mmap_mode="r" if mmap or compact else None)
        if compact:
            self._codes = np.load(f"{prefix}codes.npy")
        offsets, ids = np.load(f"{prefix}offsets.npy"), np.load(f"{prefix}ids.npy")
        self._vectors, self._rows = vectors, len(vectors)
        self._starts, self._lengths, self._ids = offsets[:-1].copy(), np.diff(offsets), ids
        self._slot = dict(zip(ids.tolist(), range(len(ids))))
        return self


def _grown(rows: np.ndarray, used: int, capacity: int) -> np.ndarray:
    """``rows``' first ``used`` rows in a new array of ``capacity`` rows."""
    grown = np.zeros((capacity, rows.shape[1]), rows.dtype)
    grown[:used] = rows[:used]
    return grown
