"""Office files (Word, PowerPoint, Excel, OpenDocument) as pages: converted to PDF by LibreOffice.

LibreOffice (Debian: ``libreoffice-core`` with ``-writer``, ``-impress``, ``-calc``) renders each
slide, page or sheet as its own applications would print it, with a text layer, so an office file
is then read, OCRed where needed and re-rendered like any PDF. The conversion runs headless with a
profile of its own (two conversions at once would share and lock one), in a session of its own
that is killed whole on time-out, and it dies with the worker process that started it.

An office file is untrusted input that can name other content to be loaded with it: an image
linked by ``file://`` URL (another tenant's upload on a server, drawn into the PDF the uploader
gets back) or by ``http://`` URL (a request from the server to wherever the file says). So a
conversion fetches nothing and reads nothing but its input:

- it runs in a bubblewrap sandbox (Debian: ``bubblewrap``) with no network at all (its own empty
  network namespace, loopback included) and no file outside its work folder but the system's own
  programs, libraries, fonts and LibreOffice's configuration, read-only: ``/usr``, a few parts of
  ``/etc`` and the font cache; not the home folders, the indexes, the uploads or the cache. The
  work folder, made for the conversion and removed after it, holds the copy of the input, the
  LibreOffice profile and the PDF; the environment is cleared to the path, the language and a
  home inside that folder;
- its profile turns on LibreOffice's own blocking of the links a document makes (Tools > Options >
  Security: ``BlockUntrustedRefererLinks``, which keeps linked images from loading), never runs
  macros, never updates linked sections or cells and starts no Java (``PROFILE``).

The sandbox is required: where ``bwrap`` is missing or cannot start one (it needs user namespaces;
checked once per process), an office file fails with one line saying so, and ``sandbox_problem``
tells a server the same before it takes an upload. ``PAGESIGHT_OFFICE_SANDBOX=off`` converts
without it, with the profile's settings only, for machines where the files are trusted.

A file that unpacks too large or would print too many pages is refused before LibreOffice starts
(``office_limits.py``), and a converted PDF of more than ``office_limits.MAX_PAGES`` pages is
refused, not cached.

Converted PDFs are cached by the file's SHA-256 under ``$PAGESIGHT_CACHE/office`` (else
``~/.cache/pagesight/office``), so answers and tile images render the pages again without
converting again; a missing cache entry is converted again. ``discard`` removes one (``Index.delete``
does, for the last document of that content in its index: the cache is the machine's, shared by
its indexes, so another index's document of the same content converts again when next rendered).
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from pagesight.errors import InputError
from pagesight.render.office_limits import check_office_file, check_pages
from pagesight.render.pdfium import PDFIUM_LOCK
from pagesight.settings import cache_dir

OFFICE_SUFFIXES = {".docx", ".doc", ".pptx", ".ppt", ".xlsx", ".xls", ".odt", ".odp", ".ods", ".rtf"}
CONVERT_TIMEOUT = 100.0  # seconds; under the default per-file limit (120 s), so this one speaks first
RESTART = 81  # LibreOffice's exit code for "start me again" (after it sets up a new profile)
INSTALL = "apt-get install libreoffice-core libreoffice-writer libreoffice-impress libreoffice-calc"
SANDBOX_SETTING = "PAGESIGHT_OFFICE_SANDBOX"  # "off" converts without the sandbox
SANDBOX_START_TIMEOUT = 20.0  # seconds for the check that bwrap starts a sandbox at all
WITHOUT_SANDBOX = (
    f"or set {SANDBOX_SETTING}=off to convert without one (the file's own links are then blocked "
    "only by LibreOffice's settings)"
)

# What the sandbox sees besides its work folder, read-only. /bin, /lib and the like are symlinks
# into /usr on a merged-/usr system (made again as symlinks inside) and folders elsewhere (bound).
SYSTEM_FOLDERS = ("/usr",)
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = (  # bound where they exist
    "/etc/ld.so.cache",  # the dynamic linker's index of libraries
    "/etc/fonts",  # fontconfig's configuration
    "/var/cache/fontconfig",  # and its cache: without it every conversion scans every font
    "/etc/libreoffice",  # Debian's sofficerc, registry and printer settings live here
    "/etc/localtime",  # date fields print in the machine's time zone
    "/etc/papersize",  # a document without a page size gets the machine's paper
)
# Kept from the environment, so numbers, dates and paper sizes come out as they do outside.
LOCALE = ("LANG", "LANGUAGE", "TZ")  # and every LC_*

# Written into each fresh profile (<profile>/user/registrymodifications.xcu) before LibreOffice
# starts; its first start keeps them. Only BlockUntrustedRefererLinks is seen to matter for the
# linked images above; the others close what a document could run or update on loading. The link
# update modes are enums of their own: Writer's 0 is "never" (sw UpdateLinks: NEVER, MANUAL,
# AUTOMATIC), Calc's 1 is (ScLkUpdMode: ALWAYS, NEVER, ON_DEMAND).
PROFILE = (
    ("/org.openoffice.Office.Common/Security/Scripting", "BlockUntrustedRefererLinks", "true"),
    ("/org.openoffice.Office.Common/Security/Scripting", "DisableMacrosExecution", "true"),
    ("/org.openoffice.Office.Common/Security/Scripting", "MacroSecurityLevel", "3"),  # very high
    ("/org.openoffice.Office.Writer/Content/Update", "Link", "0"),
    ("/org.openoffice.Office.Calc/Content/Update", "Link", "1"),
    ("/org.openoffice.Office.Java/VirtualMachine", "Enable", "false"),
)


def _cache_path(sha256: str) -> Path:
    return cache_dir() / "office" / f"{sha256}.pdf"


def cached_pdf(sha256: str) -> Path | None:
    """The cached PDF of the office file whose content hash is ``sha256``, if there is one."""
    cached = _cache_path(sha256)
    return cached if cached.exists() else None


def discard(sha256: str) -> None:
    """Remove the cached PDF of the office file whose content hash is ``sha256``, if there is one."""
    if re.fullmatch(r"[0-9a-f]{64}", sha256):  # a hash, never a path
        _cache_path(sha256).unlink(missing_ok=True)


def office_pdf(path: Path, sha256: str, timeout: float = CONVERT_TIMEOUT) -> Path:
    """The PDF of the office file ``path`` (whose content hash is ``sha256``), converted once per
    content and cached; in the sandbox unless ``PAGESIGHT_OFFICE_SANDBOX=off``. A file past the
    limits of ``office_limits`` is refused (``InputError``) before LibreOffice starts, a PDF of
    more than ``office_limits.MAX_PAGES`` pages after."""
    cached = _cache_path(sha256)
    if cached.exists():
        return cached
    check_office_file(path)
    soffice = _soffice()
    sandboxed = _sandbox_wanted()
    if sandboxed and (problem := _sandbox_check()):
        raise InputError(problem)
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pagesight-office-") as work:
        # Resolved, so the folder has one name both inside the sandbox and out.
        work = Path(work).resolve()
        # LibreOffice names its output after the input's stem; a copy with a fixed name keeps odd
        # file names (spaces, leading dashes, non-ASCII) away from its command line.
        original = work / f"input{path.suffix.lower()}"
        shutil.copyfile(path, original)
        _write_profile(work / "profile")
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
        if sandboxed:
            command = _sandboxed(command, work, shutil.which("bwrap") or "bwrap")
        for _ in range(2):  # a fresh profile makes LibreOffice restart itself once (exit code 81)
            returncode, output = _run(command, timeout)
            if returncode != RESTART:
                break
        converted = work / "out" / "input.pdf"
        if returncode != 0 or not converted.exists():
            said = " ".join(output.decode(errors="replace").split())[-200:]
            raise InputError(f"LibreOffice cannot convert it to PDF{f' ({said})' if said else ''}")
        check_pages(_page_count(converted))
        temporary = cached.with_suffix(f".{os.getpid()}.tmp")
        shutil.move(converted, temporary)
        os.replace(temporary, cached)  # whole or absent, also when two workers convert it at once
    return cached


def _page_count(pdf: Path) -> int:
    """The pages of a PDF LibreOffice made (0 when PDFium cannot open it: read as any PDF later)."""
    import pypdfium2

    with PDFIUM_LOCK:
        try:
            document = pypdfium2.PdfDocument(pdf)
        except pypdfium2.PdfiumError:
            return 0
        try:
            return len(document)
        finally:
            document.close()


def sandbox_problem() -> str | None:
    """Why office files cannot be converted here, in one line, or None when they can: the sandbox
    starts, or ``PAGESIGHT_OFFICE_SANDBOX=off`` does without it. A server asks before it takes an
    office upload, so the uploader hears it then rather than from a failed ingestion."""
    return _sandbox_check() if _sandbox_wanted() else None


def _sandbox_wanted() -> bool:
    """Unless ``PAGESIGHT_OFFICE_SANDBOX`` says off (read each time: a test or a caller may set it
    after import)."""
    return os.environ.get(SANDBOX_SETTING, "").strip().lower() not in {"off", "0", "false", "no"}


@functools.cache
def _sandbox_check() -> str | None:
    """Whether bwrap starts a sandbox like a conversion's on this machine (once per process: it
    depends on the machine, not the file); None if it does, else why not, in one line."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return (
            "bubblewrap, the sandbox office files are converted in, is not installed: install it "
            f"(apt-get install bubblewrap), {WITHOUT_SANDBOX}"
        )
    true = shutil.which("true", path="/usr/bin:/bin") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="pagesight-office-") as work:
        try:
            done = subprocess.run(
                _sandboxed([true], Path(work).resolve(), bwrap),
                capture_output=True,
                timeout=SANDBOX_START_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            said = f"it did not within {SANDBOX_START_TIMEOUT:g} s"
        except OSError as exc:
            said = str(exc)
        else:
            if done.returncode == 0:
                return None
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            said = lines[-1][-200:] if lines else f"exit code {done.returncode}"
    return (
        f"bubblewrap, the sandbox office files are converted in, cannot start one here ({said}): "
        f"let it (it needs user namespaces), {WITHOUT_SANDBOX}"
    )


def _sandboxed(command: list[str], work: Path, bwrap: str) -> list[str]:
    """``command`` inside a bubblewrap sandbox: no network, the system's files read-only, ``work``
    read-write and nothing else of the machine's files; it dies with the process that starts it."""
    # No capabilities either: run by root, bwrap leaves them to the sandboxed process unless told.
    sandbox = [bwrap, "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    for folder in SYSTEM_FOLDERS:
        sandbox += ["--ro-bind", folder, folder]
    for link in map(Path, SYSTEM_LINKS):
        if link.is_symlink():
            sandbox += ["--symlink", os.readlink(link), str(link)]
        elif link.is_dir():
            sandbox += ["--ro-bind", str(link), str(link)]
    program = Path(command[0]).resolve()
    install = program.parent.parent  # LibreOffice's own folder, e.g. /opt/libreoffice7.6
    if not any(install.is_relative_to(folder) for folder in SYSTEM_FOLDERS):
        sandbox += ["--ro-bind", str(install), str(install)]
    for name in SYSTEM_FILES:
        sandbox += ["--ro-bind-try", name, name]
    sandbox += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    sandbox += ["--bind", str(work), str(work), "--chdir", str(work)]
    home = work / "home"
    home.mkdir(exist_ok=True)
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    environment |= {
        name: value
        for name, value in os.environ.items()
        if value and (name in LOCALE or name.startswith("LC_"))
    }
    sandbox.append("--clearenv")
    for name, value in environment.items():
        sandbox += ["--setenv", name, value]
    return [*sandbox, "--", *command]


def _write_profile(profile: Path) -> None:
    """The settings of ``PROFILE`` in a fresh LibreOffice profile, before LibreOffice starts."""
    items = "".join(
        f'<item oor:path="{group}"><prop oor:name="{name}" oor:op="fuse"><value>{value}</value>'
        "</prop></item>\n"
        for group, name, value in PROFILE
    )
    (profile / "user").mkdir(parents=True)
    (profile / "user" / "registrymodifications.xcu").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
        'xmlns:xs="http://www.w3.org/2001/XMLSchema" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
        f"{items}</oor:items>\n",
        encoding="utf-8",
    )


def _run(command: list[str], timeout: float) -> tuple[int, bytes]:
    """Run LibreOffice in a session of its own, killed whole on time-out; (exit code, output).
    In the sandbox the session is bwrap's: killing it ends the sandbox's processes with it (they
    die with their parent, and its PID namespace goes when its first process does)."""
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
