"""pagesight: retrieval-augmented generation in pixel space."""

from pagesight.errors import IndexFormatError, IndexLockedError, PagesightError, SettingsConflict
from pagesight.records import Hit

__version__ = "0.1.0"
__all__ = [
    "Hit",
    "Index",
    "IndexFormatError",
    "IndexLockedError",
    "PagesightError",
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
