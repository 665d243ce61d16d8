"""JSON lines read with their line numbers, so that a bad line is an error naming its file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pagesight.errors import InputError


def numbered(path: Path) -> Iterator[tuple[int, dict]]:
    """Each non-blank line of ``path`` as its number (from 1) and its JSON object; ``InputError``
    naming ``path:line`` for a line that is not one, and ``path`` when it is missing."""
    if not path.is_file():
        raise InputError(f"{path}: missing")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{path}:{number}: not a JSON object")
            yield number, row
