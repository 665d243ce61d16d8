"""Errors users see. Each names the input it is about."""

from typing import Any


class PagesightError(Exception):
    """Base class of every error pagesight raises on purpose."""


class InputError(PagesightError):
    """An input file that cannot be ingested (unreadable, encrypted, empty, unsupported, ...)."""


class IndexFormatError(PagesightError):
    """An index directory written by an incompatible version, or not an index at all."""


class SettingsConflict(IndexFormatError):
    """An existing index opened with settings other than those it was made with."""

    def __init__(self, location: str, conflicts: dict[str, tuple[Any, Any]]):
        self.location = location
        self.conflicts = conflicts  # field -> (the index's value, the value asked for)
        made = ", ".join(f"{name}={stored!r}" for name, (stored, _) in conflicts.items())
        asked = ", ".join(f"{name}={value!r}" for name, (_, value) in conflicts.items())
        super().__init__(
            f"{location}: the index was made with {made}; settings are chosen when an index is made, "
            f"so make a new index for {asked}"
        )


class IndexLockedError(PagesightError):
    """Another process is writing to the index."""
