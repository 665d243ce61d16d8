"""Errors users see. Each names the input it is about."""


class PagesightError(Exception):
    """Base class of every error pagesight raises on purpose."""


class InputError(PagesightError):
    """An input file that cannot be ingested (unreadable, encrypted, empty, unsupported, ...)."""


class IndexFormatError(PagesightError):
    """An index directory written by an incompatible version, or not an index at all."""


class IndexLockedError(PagesightError):
    """Another process is writing to the index."""
