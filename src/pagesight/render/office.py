"""Office files (Word, PowerPoint, Excel, OpenDocument) as pages: converted to PDF by LibreOffice.

LibreOffice (Debian: ``libreoffice-core`` with ``-writer``, ``-impress``, ``-calc``) renders each
slide, page or sheet as its own applications would print it, with a text layer, so an office file
is then read, OCRed where needed and re-rendered like any PDF. The conversion runs headless with a
profile of its own (two conversions at once would share and lock one), in a session of its own
that is killed whole on time-out, and it dies with the worker process that started it.

Converted PDFs are cached by the file's SHA-256 under ``$PAGESIGHT_CACHE/office`` (else
``~/.cache/pagesight/office``), so answers and tile images render the pages again without
converting again; a missing cache entry is converted again.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from pagesight.errors import InputError
from pagesight.settings import cache_dir

OFFICE_SUFFIXES = {".docx", ".doc", ".pptx", ".ppt", ".xlsx", ".xls", ".odt", ".odp", ".ods", ".rtf"}
CONVERT_TIMEOUT = 100.0  # seconds; under the default per-file limit (120 s), so this one speaks first
RESTART = 81  # LibreOffice's exit code for "start me again" (after it sets up a new profile)
INSTALL = "apt-get install libreoffice-core libreoffice-writer libreoffice-impress libreoffice-calc"


def _cache_path(sha256: str) -> Path:
    return cache_dir() / "office" / f"{sha256}.pdf"


def cached_pdf(sha256: str) -> Path | None:
    """The cached PDF of the office file whose content hash is ``sha256``, if there is one."""
    cached = _cache_path(sha256)
    return cached if cached.exists() else None


def office_pdf(path: Path, sha256: str, timeout: float = CONVERT_TIMEOUT) -> Path:
    """The PDF of the office file ``path`` (whose content hash is ``sha256``), converted once per
    content and cached."""
    cached = _cache_path(sha256)
    if cached.exists():
        return cached
    soffice = _soffice()
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pagesight-office-") as work:
        work = Path(work)
        # LibreOffice names its output after the input's stem; a copy with a fixed name keeps odd
        # file names (spaces, leading dashes, non-ASCII) away from its command line.
        original = work / f"input{path.suffix.lower()}"
        shutil.copyfile(path, original)
        command = [
            soffice,
            f"-env:UserInstallation={(work / 'profile').as_uri()}",
            "--headless",
            "--norestore",
            "--convert-to",
            "pdf",
            "--outdir",
            str(work / "out"),
            str(original),
        ]
        for _ in range(2):  # a fresh profile makes LibreOffice restart itself once (exit code 81)
            returncode, output = _run(command, timeout)
            if returncode != RESTART:
                break
        converted = work / "out" / "input.pdf"
        if returncode != 0 or not converted.exists():
            said = " ".join(output.decode(errors="replace").split())[-200:]
            raise InputError(f"LibreOffice cannot convert it to PDF{f' ({said})' if said else ''}")
        temporary = cached.with_suffix(f".{os.getpid()}.tmp")
        shutil.move(converted, temporary)
        os.replace(temporary, cached)  # whole or absent, also when two workers convert it at once
    return cached


def _run(command: list[str], timeout: float) -> tuple[int, bytes]:
    """Run LibreOffice in a session of its own, killed whole on time-out; (exit code, output)."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise InputError(f"LibreOffice did not convert it to PDF within {timeout:g} s") from None
    return process.returncode, output


def _soffice() -> str:
    """LibreOffice's program itself (not the launcher script, so it dies with our process)."""
    found = shutil.which("soffice") or shutil.which("libreoffice")
    if found is None:
        raise InputError(f"office files need LibreOffice, which is not installed ({INSTALL})")
    program = Path(found).resolve().parent / "soffice.bin"
    return str(program) if program.exists() else found


def _die_with_parent() -> None:
    """Runs in the child before LibreOffice starts: a kill of the worker (its time limit) kills it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
