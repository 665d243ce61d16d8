"""Segments (BM25 and the dense and visual parts beside each) merged beside the writers and the searches, in a
process of its own (Lucene's concurrent merge scheduler), so that no commit waits for a large
merge.

A commit merges small tiers itself (``INLINE_MERGE`` tiles at most, a fraction of a second); when a
larger merge is due it starts ``python -m pagesight.store.local.merging DIR``, detached, unless one runs
(``merging.lock``). That process reads the segments the pointer names, writes each merge due
(``bm25.plan_merges``) as a new segment without holding the index's write lock, then takes the
lock for a moment to swap it in: the pointer then names the merged segment instead of its parts,
if they are all still named (else the merge is dropped), and keeps as tombstones only the deletes
the merge did not see. The catalog's generation is unchanged: a merge changes no ranking. Its
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

from pagesight.store.local.bm25 import Segment
from pagesight.store.local.layout import (
    DENSE,
    FOLDER,
    MERGED_PREFIX,
    POINTER,
    READY,
    VISUAL,
    hold_merging,
    sync_new,
    write_atomically,
    write_pointer,
)
from pagesight.store.local.lock import WriteLock
from pagesight.store.local.segment import segments

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


def _merge_next(root: Path, folder: Path) -> bool:
    """Make the first merge due and swap it in; False when none is due or the swap could not be
    made (the write lock held too long, or the parts changed meanwhile)."""
    pointer = json.loads((folder / POINTER).read_text())
    lexical, dense, visual = segments(folder, pointer)
    plans = lexical.merges()
    if not plans:
        return False
    plan = plans[0]
    names = [lexical.segments[i].name for i in plan]
    merged = lexical.merged([plan]).segments[-1]  # the plan's segments, tombstoned tiles left out
    saved = merged.save(folder / f"{MERGED_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    for name, parts in ((DENSE, dense), (VISUAL, visual)):  # the parts beside them, joined the same way
        if parts is not None:
            parts.merged([plan]).part(-1).save(folder / saved.name / name)
    sync_new(folder, {saved.name})
    parts = np.concatenate([lexical.segments[i].tile_ids for i in plan])
    dropped = set(parts.tolist()) - set(saved.tile_ids.tolist())  # the tombstones it left out
    manifest = folder / f"{saved.name}{READY}"
    write_atomically(manifest, json.dumps({"merged": saved.name, "parts": names}))  # never read half
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
        now = json.loads((folder / POINTER).read_text())
        if not set(names) <= set(now.get("segments", [])) or not (folder / saved.name).is_dir():
            # a writer rebuilt the parts meanwhile
            shutil.rmtree(folder / saved.name, ignore_errors=True)
            return False
        now["segments"] = [name for name in now["segments"] if name not in names] + [saved.name]
        now["removed"] = [tile for tile in now.get("removed", []) if tile not in dropped]
        write_pointer(folder, now)
    finally:
        manifest.unlink(missing_ok=True)
        lock.release()
    for name in names:
        shutil.rmtree(folder / name, ignore_errors=True)
    return True


def _named(folder: Path, name: str) -> bool:
    """Whether the pointer names segment ``name`` now."""
    return name in json.loads((folder / POINTER).read_text()).get("segments", [])


def adopt(folder: Path, lexical, parts: dict):
    """``lexical`` and the ``parts`` beside its segments, by name (a writer's, under the write
    lock), with every merge a merger made ready swapped in, whose parts they all still hold; each
    manifest removed (a merge whose parts changed is dropped, its segment removed with what no
    pointer names)."""
    for manifest in sorted(folder.glob(f"{MERGED_PREFIX}*{READY}")):
        try:
            ready = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue  # being written: the next save sees it whole
        names = [segment.name for segment in lexical.segments]
        if set(ready["parts"]) <= set(names) and (folder / ready["merged"]).is_dir():
            positions = [names.index(name) for name in ready["parts"]]
            lexical = lexical.swapped(positions, Segment.load(folder / ready["merged"]))
            parts = {
                name: held.swapped(positions, folder / ready["merged"] / name) for name, held in parts.items()
            }
        manifest.unlink(missing_ok=True)
    return lexical, parts


if __name__ == "__main__":
    merge_due(Path(sys.argv[1]))
