"""pagesight: retrieval-augmented generation in pixel space."""

from pagesight.errors import IndexFormatError, IndexLockedError, PagesightError
from pagesight.index import Index
from pagesight.records import Hit

__version__ = "0.1.0"
__all__ = ["Hit", "Index", "IndexFormatError", "IndexLockedError", "PagesightError", "__version__"]
