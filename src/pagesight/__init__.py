"""pagesight: retrieval-augmented generation in pixel space."""

import os

# OpenMP threads (torch's) that finish their share spin while waiting for the others; beside other
# busy processes they spin on cores those need, and a CPU training step or rerank took ten times
# longer on a loaded 2-core machine (measured: 130 s against 12 s). Passive waiting costs no time
# measurably on an idle one. Set before torch loads its OpenMP runtime; a user's own value stays.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# JAX takes three quarters of a GPU's memory when it starts, by default. pagesight keeps bm25s from
# starting it (devices.jax_held_off); should anything else in the process start JAX, it takes memory
# as it needs it rather than 107.9 GB of an H200 (measured) that the visual encoder then lacks.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from pagesight.errors import IndexFormatError, IndexLockedError, PagesightError, SettingsConflict
from pagesight.records import Hit
from pagesight.settings import Settings

__version__ = "0.1.0"
__all__ = [
    "Hit",
    "Index",
    "IndexFormatError",
    "IndexLockedError",
    "PagesightError",
    "Settings",
    "SettingsConflict",
    "__version__",
]


def __getattr__(name: str):
    # Index pulls in the retrievers (FAISS, bm25s, SciPy): imported on first use, so the command
    # line answers --help and argument errors without them.
    if name == "Index":
        from pagesight.index import Index

        return Index
    raise AttributeError(f"module 'pagesight' has no attribute '{name}'")
