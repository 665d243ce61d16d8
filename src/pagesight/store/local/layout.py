"""Where the local store keeps what, and how it is written and removed: the one module that names
the folders and files of an index directory, reads and writes the pointer (``Pointer``), syncs
files and directories, and says what may be removed (the segment's life: docs/segments.md).

A rename is durable only once the directory holding it is synced: a file synced and renamed into
place, its directory not synced, may be gone after a power loss while the pointer renamed after it
names it. So every rename here is followed by a sync of its directory (``replace``), and a new
segment's folder is synced, and its parent, before the pointer names it (``sync_new``).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

CATALOG = "catalog.sqlite"  # the SQLite catalog, the source of truth (its -wal and -shm beside it)
WRITE_LOCK = "write.lock"  # the single writer's flock (store/local/lock.py)
FOLDER = "retrievers"  # the retriever files, derived from the catalog
POINTER = "current.json"  # in FOLDER: the generation and the segments the readers open
MERGING_LOCK = "merging.lock"  # in FOLDER: held by the merging process while it runs
MERGED_PREFIX = "bm25-merged-"  # a merging process's segment, written before a pointer names it
READY = ".ready.json"  # suffix of a merge left ready for a writer to adopt, beside its segment
DENSE = "dense"  # a segment's dense part, in its folder
VISUAL = "visual"  # ... and its visual part
DELETES = "deletes-"  # a segment's delete bitset, in its folder: deletes-GENERATION-R.npy
TILE_IDS = "tile_ids.npy"  # in a segment's folder: its tiles' ids (store/local/postings.py)
FORMAT = 4  # the pointer's: segments with their dense and visual parts and delete bitsets (3: the
# deleted tiles one list, "removed"; 2: the visual vectors one file)


class Bitset(NamedTuple):
    """A segment's delete bitset as the pointer names it: its file in the segment's folder and the
    tiles it marks."""

    file: str
    count: int


@dataclass
class Pointer:
    """``current.json``: the catalog generation the saved retrievers match and what a reader opens
    for it (tantivy's ``meta.json``, its ``IndexMeta``): the segments in order, each one's delete
    bitset, the BM25 options (``lexical``), the dense parts' width and how the visual parts are made
    (None: the index has none). Read and written here alone, always in this build's format; an
    older one is migrated when read (``read``) and written in this format by the next writer.
    """

    generation: int
    segments: list[str]
    deletes: dict[str, Bitset] = field(default_factory=dict)
    lexical: dict = field(default_factory=dict)
    dense: int | None = None
    visual: dict | None = None
    # format 3 only (its "removed"): every deleted tile in one list, until ``write`` saves each
    # segment's bitset
    deleted_list: np.ndarray | None = None

    @classmethod
    def read(cls, folder: Path) -> Pointer | None:
        """The pointer in ``folder``; None when there is none or it is an older build's that this
        one does not read (format 2 with visual vectors, one file then: built again). A pointer of
        format 3 listed every deleted tile in one list (``deleted_list``); it is read as each segment's
        bitset."""
        try:
            found = json.loads((folder / POINTER).read_text())
        except FileNotFoundError:
            return None
        kind = found.get("format")
        if not (kind in (FORMAT, 3) or (kind == 2 and not found.get("visual"))):
            return None
        listed = found.get("removed")
        return cls(
            generation=found["generation"],
            segments=list(found["segments"]),
            deletes={name: Bitset(**entry) for name, entry in found.get("deletes", {}).items()},
            lexical=found.get("lexical", {}),
            dense=found.get("dense"),
            visual=found.get("visual"),
            deleted_list=np.asarray(listed, dtype=np.int64) if listed else None,
        )

    def write(self, folder: Path) -> None:
        """Replace ``current.json`` atomically and durably (readers see the old pointer or this one,
        and after a power loss the disk holds one of them), in this build's format: a pointer read
        from format 3 first gets each segment's bitset written."""
        if self.deleted_list is not None:
            for name in self.segments:
                if name not in self.deletes:
                    deleted = np.isin(np.load(folder / name / TILE_IDS), self.deleted_list)
                    if deleted.any():
                        self.deletes[name] = write_deletes(folder, name, deleted, self.generation)
            self.deleted_list = None
        written = {
            "format": FORMAT,
            "generation": self.generation,
            "segments": self.segments,
            "deletes": {name: bitset._asdict() for name, bitset in self.deletes.items()},
            "lexical": self.lexical,
            "dense": self.dense,
            "visual": self.visual,
        }
        write_atomically(folder / POINTER, json.dumps(written).encode())

    def deleted(self, folder: Path, name: str, tile_ids: np.ndarray) -> np.ndarray:
        """The delete bitset of segment ``name`` (of tiles ``tile_ids``)."""
        bitset = self.deletes.get(name)
        if bitset is not None:
            return np.unpackbits(np.load(folder / name / bitset.file), count=len(tile_ids)).astype(bool)
        if self.deleted_list is not None:
            return np.isin(tile_ids, self.deleted_list)
        return np.zeros(len(tile_ids), dtype=bool)

    def kinds(self) -> list[str]:
        """The kinds of parts its segments hold."""
        return [kind for kind, held in ((DENSE, self.dense), (VISUAL, self.visual)) if held]


def pointed_generation(root: Path) -> int | None:
    """The catalog generation the saved retrievers of the index at ``root`` match, None when there
    are none (or they are an older build's, which are built again as segments)."""
    pointer = Pointer.read(root / FOLDER)
    return None if pointer is None else pointer.generation


def write_atomically(path: Path, data: bytes) -> None:
    """``data`` at ``path``: written beside it, synced, renamed over it, its directory synced."""
    temporary = path.with_name(f"{path.name}.new-{os.getpid()}")
    with temporary.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    replace(temporary, path)


def replace(source: Path, target: Path) -> None:
    """Rename ``source`` over ``target`` and sync their directory, so the rename survives a power
    loss."""
    os.replace(source, target)
    sync_directory(target.parent)


def write_deletes(folder: Path, name: str, deleted: np.ndarray, generation: int) -> Bitset:
    """Segment ``name``'s delete bitset written durably under a new name; its pointer entry."""
    file = f"{DELETES}{generation}-{uuid.uuid4().hex[:8]}.npy"
    buffer = io.BytesIO()
    np.save(buffer, np.packbits(deleted))
    write_atomically(folder / name / file, buffer.getvalue())
    return Bitset(file, int(deleted.sum()))


def sync_directory(folder: Path) -> None:
    """The entries of ``folder`` (names created, renamed or removed in it) on disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_file(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def sync_new(folder: Path, names: set) -> None:
    """The entries ``names`` of ``folder``, written by this process, on disk: their files, every
    folder in them, and ``folder`` itself, which names them."""
    for name in names:
        entry = folder / name
        if entry.is_file():
            sync_file(entry)
            continue
        for path in sorted(entry.rglob("*"), reverse=True):  # a folder's files before the folder
            sync_file(path) if path.is_file() else sync_directory(path)
        sync_directory(entry)
    sync_directory(folder)


def merger_running(folder: Path) -> bool:
    """Whether a merging process holds ``merging.lock`` in ``folder`` now, asked without taking it
    (an open file description lock, tested by ``F_OFD_GETLK``), so a merger starting at this
    instant is never turned away by the question."""
    try:
        fd = os.open(folder / MERGING_LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        asked = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, asked)
        return struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK
    finally:
        os.close(fd)


def hold_merging(folder: Path) -> int | None:
    """The merging lock of ``folder`` taken (the open descriptor, which holds it until closed), or
    None when another process holds it."""
    fd = os.open(folder / MERGING_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    except OSError:
        os.close(fd)
        return None
    return fd


# struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for an open file description lock)
_FLOCK = "@hhqqi4x"


def removable(name: str, pointer: Pointer, merging: bool) -> bool:
    """Whether the entry ``name`` of the retrievers folder may be removed by a writer holding the
    write lock, the pointer it wrote being ``pointer``: what the pointer names, the merging lock,
    and, while a merger runs, a merged segment it may be writing (named by no pointer yet) stay."""
    if name in (POINTER, MERGING_LOCK) or name in pointer.segments:
        return False
    return not (merging and name.startswith(MERGED_PREFIX))


def collect(folder: Path, pointer: Pointer) -> None:
    """Remove what ``pointer`` (just written) leaves unnamed in ``folder`` (``removable``), and the
    delete bitsets of its segments it no longer names."""
    merging = merger_running(folder)
    for entry in folder.iterdir():
        if removable(entry.name, pointer, merging):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink(missing_ok=True)
    for name in pointer.segments:
        named = pointer.deletes[name].file if name in pointer.deletes else None
        for stale in (folder / name).glob(f"{DELETES}*"):
            if stale.name != named:
                stale.unlink(missing_ok=True)
