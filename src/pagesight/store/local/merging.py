"""Segments merged: ``merged`` takes segments and gives one (``Segment.merge``: postings merged, the
dense and visual parts joined, the deleted tiles left out), by the commit for a small merge and
beside the writers and the searches for a larger one, in a process of its own (Lucene's concurrent
merge scheduler), so that no commit waits for a large merge.

A commit merges small tiers itself (``INLINE_MERGE`` tiles at most, a fraction of a second); when a
larger merge is due it starts ``python -m pagesight.store.local.merging DIR``, detached, unless one runs
(``merging.lock``). That process reads the segments the pointer names, writes each merge due
(``due``, by ``bm25.plan_merges``) as a new segment without holding the index's write lock, then
takes the lock for a moment to swap it in: the pointer then names the merged segment instead of its
sources, if they are all still named (else the merge is dropped), and the merged segment's delete
bitset holds the deletes the merge did not see. The catalog's generation is unchanged: a merge changes no ranking. Its
parts' folders go once no pointer names them; a search holds the segments it loaded in memory.
A merger killed at any moment leaves the pointer as it was, and the next writer removes what no
pointer names.

A writer committing batch after batch holds the write lock nearly all the time, and a merger
waiting for it starved: a 1,000,000-tile build left 135 of its 142 segments unmerged. So a merge
that finds the lock held is made ready instead (``READY``: the merged segment's name and its
parts'), and the writer's next save takes it in under its own lock (``adopt``), as Lucene's
IndexWriter commits the merges its scheduler made; the merger waits for that, then goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from pagesight.store.local.bm25 import plan_merges
from pagesight.store.local.layout import (
    FOLDER,
    MERGED_PREFIX,
    READY,
    Pointer,
    hold_merging,
    sync_new,
    write_atomically,
)
from pagesight.store.local.lock import WriteLock
from pagesight.store.local.segment import Segment, joins, opened

INLINE_MERGE = 10_000  # tiles: a merge this small is made by the commit itself
LOCK_WAIT = 600.0  # seconds a merger waits for the write lock, or a writer, to swap its merge in


def start(root: Path) -> None:
    """Start a merging process over the index at ``root``, detached (it outlives this one); a
    thread of this process collects its exit, so it never lingers as a zombie child."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pagesight.store.local.merging", str(root)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    threading.Thread(target=process.wait, name="pagesight-merger-reaper", daemon=True).start()


def merge_due(root: Path) -> int:
    """Make every merge due, one after another; how many were swapped in. Returns at once when
    another process is merging this index."""
    folder = Path(root) / FOLDER
    held = hold_merging(folder)
    if held is None:
        return 0
    try:
        swapped = 0
        while _merge_next(Path(root), folder):
            swapped += 1
        return swapped
    finally:
        os.close(held)


def due(segments: list[Segment]) -> list[list[int]]:
    """The merges due among ``segments`` (``bm25.plan_merges``), each a list of their positions."""
    return plan_merges([len(s) for s in segments], [s.deleted_count for s in segments])


def merged(segments: list[Segment], plans: list[list[int]], joins: dict) -> list[Segment]:
    """``segments`` merged as ``plans`` say (of ``due``): the segments not merged in their order,
    then each plan's merged segment (its parts joined by ``joins``, ``segment.joins``)."""
    taken = {i for plan in plans for i in plan}
    kept = [s for i, s in enumerate(segments) if i not in taken]
    return kept + [Segment.merge([segments[i] for i in plan], joins) for plan in plans]


def _merge_next(root: Path, folder: Path) -> bool:
    """Make the first merge due and swap it in; False when none is due or the swap could not be
    made (the write lock held too long, or the parts changed meanwhile)."""
    pointer = Pointer.read(folder)
    if pointer is None:  # no segments saved yet (or an older build's, built again by the next writer)
        return False
    segments = opened(folder, pointer)
    plans = due(segments)
    if not plans:
        return False
    sources = [segments[plan] for plan in plans[0]]
    made = Segment.merge(sources, joins(pointer.dense, pointer.visual))  # deleted tiles left out
    saved = made.save(folder / f"{MERGED_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    sync_new(folder, {saved.name})
    names = [s.name for s in sources]
    manifest = folder / f"{saved.name}{READY}"
    write_atomically(manifest, json.dumps({"merged": saved.name, "parts": names}).encode())  # never read half
    lock = WriteLock(root)
    deadline = time.monotonic() + LOCK_WAIT
    while not lock.acquire():  # a writer holds it: it adopts the merge at its next save
        if not manifest.exists():  # adopted, or dropped as the parts changed
            return _named(folder, saved.name)
        if time.monotonic() > deadline:
            # left ready: only a writer, under its lock, may take it in or remove it
            return False
        time.sleep(0.2)
    try:
        if not manifest.exists():  # a writer adopted it (or dropped it) before the lock came free
            return _named(folder, saved.name)
        swapped = _swap(folder, sources, saved)
    finally:
        manifest.unlink(missing_ok=True)
        lock.release()
    # the sources' folders, which no pointer names now, removed once the lock is free again (a
    # search holds what it opened: a mapping outlives its file)
    for source in sources if swapped else [saved]:
        shutil.rmtree(folder / source.name, ignore_errors=True)
    return swapped


def _swap(folder: Path, sources: list[Segment], saved: Segment) -> bool:
    """Under the write lock: the pointer names ``saved`` instead of ``sources``, the tiles deleted
    from them since the merge read them deleted in it (its bitset written); False when a writer
    rebuilt the sources meanwhile (the merge then to be removed)."""
    now = Pointer.read(folder)
    names = [s.name for s in sources]
    if now is None or not set(names) <= set(now.segments) or not (folder / saved.name).is_dir():
        return False
    gone = np.concatenate([s.tile_ids[now.deleted(folder, s.name, s.tile_ids)] for s in sources])
    saved = saved.deleting(gone).with_deletes_saved(folder, now.generation)
    now.segments = [name for name in now.segments if name not in names] + [saved.name]
    now.deletes = {name: bitset for name, bitset in now.deletes.items() if name not in names}
    if saved.deleted_count:
        now.deletes[saved.name] = saved.deletes_file
    now.write(folder)
    return True


def _named(folder: Path, name: str) -> bool:
    """Whether the pointer names segment ``name`` now."""
    pointer = Pointer.read(folder)
    return pointer is not None and name in pointer.segments


def adopt(folder: Path, segments: list[Segment]) -> list[Segment]:
    """A writer's ``segments`` (under the write lock) with every merge a merger made ready swapped
    in, whose sources they all still hold, the tiles deleted from those since deleted in it; each
    manifest removed (a merge whose sources changed is dropped, its segment removed with what no
    pointer names)."""
    for manifest in sorted(folder.glob(f"{MERGED_PREFIX}*{READY}")):
        try:
            ready = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue  # being written: the next save sees it whole
        held = {segment.name: segment for segment in segments}
        if set(ready["parts"]) <= set(held) and (folder / ready["merged"]).is_dir():
            sources = [held[name] for name in ready["parts"]]
            gone = np.concatenate([s.tile_ids[s.deleted] for s in sources])
            made = Segment.open(folder, ready["merged"], sources[0].parts).deleting(gone)
            segments = [s for s in segments if s.name not in ready["parts"]] + [made]
        manifest.unlink(missing_ok=True)
    return segments


if __name__ == "__main__":
    merge_due(Path(sys.argv[1]))
