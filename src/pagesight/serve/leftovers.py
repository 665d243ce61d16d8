"""What a killed server leaves under ``uploads/``, told apart from what a live process is writing,
and removed (``sweep``) when a server starts and on each delete.

A server writes every file under ``uploads/`` whole, as a temporary renamed into place, and keeps
an upload's files in its job's staging folder until the job ends:

- ``uploads/.swap-OWNER-…``: an ingested upload linked beside its final name, then renamed over it
  (``Jobs._swap_in``);
- ``uploads/.staging/JOB/.upload-OWNER-…``: an upload being saved (``jobs.save``);
- ``uploads/.jobs/.job-OWNER-…``: a job's record being written;
- ``uploads/.staging/JOB/``: a job's files, with ``.owner`` naming the process that staged them,
  written before the first file (the job has no record until all its files are staged).

OWNER is the writing process, its pid and start time (``this_process``: a pid is reused). A kill
between the writing and the renaming, or between a job's end and its folder's removal, leaves
these behind, and nothing removed them: a swap file is a whole copy of an upload, kept after its
document is deleted. ``sweep`` removes:

- a temporary whose owner no longer runs; one named without an owner (by an earlier version)
  when it was made (its inode changed: a link counts) before this server started;
- the staging folder of a job that ended (its record says done or failed), and that of a job
  without a record whose ``.owner`` no longer runs (an upload killed before it was queued), or,
  without ``.owner`` (an earlier version), when it was last changed before this server started.

A pending job's staging folder is left to ``Jobs.recover``, which takes the job over or fails it.
Nothing a running process writes is removed: its name or its folder says it is alive.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

OWNER = ".owner"  # in a staging folder: the process that staged its files
STAGING = ".staging"  # uploads/.staging/JOB/: files waiting to be ingested
_TEMPORARY = re.compile(r"\.(?:swap|upload|job)-(?:(\d+)-(\d*)-)?")  # the owner: pid, start time


def this_process() -> str:
    """This process as a job's record names it: its pid and start time (a pid is reused)."""
    return f"{os.getpid()}:{_started(os.getpid())}"


def _started(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot ('' where /proc cannot tell)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command's name


def alive(worker: str | None) -> bool:
    """Whether the process a record names (``this_process``) still runs: it exists, is the one that
    started then, and is not a zombie (killed, its exit not yet collected by its parent: it runs
    nothing)."""
    if not worker:
        return False
    pid, _, started = worker.partition(":")
    try:
        os.kill(int(pid), 0)
    except (ValueError, OverflowError, ProcessLookupError):
        return False
    except PermissionError:  # another user's process of that pid: not ours
        return False
    if _state(int(pid)) in ("Z", "X"):
        return False
    return not started or _started(int(pid)) == started


def _state(pid: int) -> str:
    """Process ``pid``'s state letter in /proc (R, S, D, Z for a zombie, ...; '' where /proc
    cannot tell)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def temporary_prefix(kind: str) -> str:
    """The start of the name of a temporary of ``kind`` (swap, upload, job) this process writes."""
    return f".{kind}-{this_process().replace(':', '-')}-"


def mark_owner(folder: Path) -> None:
    """``folder`` (a job's staging folder) made, and marked as this process's."""
    folder.mkdir(parents=True, exist_ok=True)
    written = folder / f"{OWNER}-{os.getpid()}"  # renamed whole: a sweep never reads it half written
    written.write_text(this_process(), encoding="utf-8")
    os.replace(written, folder / OWNER)


def sweep(uploads: Path, state: Callable[[str], str | None], started: float) -> int:
    """Remove what a killed server left under ``uploads`` (the module docstring); how many things
    were removed. ``state(job_id)``: the job's state by its record, None without one; ``started``:
    when this server started (seconds since the epoch)."""
    removed = 0
    for folder in _folders(uploads / STAGING):  # first: removing a temporary changes its folder
        if _ended(folder, state(folder.name), started):
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    for folder in (uploads, uploads / ".jobs", *_folders(uploads / STAGING)):
        for entry in _entries(folder):
            if entry.is_file(follow_symlinks=False) and _left(entry, started):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed += 1
    return removed


def _left(entry: os.DirEntry, started: float) -> bool:
    """Whether ``entry`` is a temporary no running process writes."""
    named = _TEMPORARY.match(entry.name)
    if named is None:
        return False
    if named.group(1) is not None:
        return not alive(f"{named.group(1)}:{named.group(2)}")
    with contextlib.suppress(FileNotFoundError):
        return entry.stat(follow_symlinks=False).st_ctime < started
    return False


def _ended(folder: Path, state: str | None, started: float) -> bool:
    """Whether a job's staging folder is no running process's: its job ended, or it has none and
    the process that staged it is gone."""
    if state is not None:
        return state not in ("queued", "running")
    try:
        return not alive((folder / OWNER).read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        with contextlib.suppress(FileNotFoundError):
            return folder.stat().st_mtime < started
    except OSError:
        pass
    return False


def _folders(parent: Path) -> list[Path]:
    return [Path(entry.path) for entry in _entries(parent) if entry.is_dir(follow_symlinks=False)]


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as found:
            return list(found)
    except (FileNotFoundError, NotADirectoryError):
        return []
