"""An option declared once: a dataclass field with its one default and a ``Spec`` of its help, its
limits and its names, read by the dataclass's own check (``check``) and by every front-end that
offers it. The requests (``request.py``), the index settings (``settings.py``) and the ingestion
options (``ingest/options.py``) are declared this way; the CLI's options, the HTTP API's parameters,
the upload form and the MCP tools' parameters are derived from their fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagesight.errors import PagesightError


@dataclass(frozen=True)
class Spec:
    """A field's help and limits, read by its dataclass's check and by every front-end.

    ``label`` is its name outside Python when not the field's (the question of an ``AskRequest``),
    ``http`` its name in the HTTP API when not the label; ``flags`` its command-line flags when not
    ``--label``; ``served`` is False for a request field that names something to load on the machine
    (a model folder), which only the CLI and the library take: a server chooses its models.

    Ingestion fields (``Settings``, ``IngestOptions``) say which front-ends offer them: ``cli``
    (``pagesight ingest``) and ``form`` (the upload form, ``POST /api/documents``), and how a
    front-end's value becomes the field's when they differ: ``taken_as``, the type a front-end takes
    (``list[str]`` of ``KEY=VALUE`` for a mapping); ``read(value, name)``, the field's value from it,
    a refusal naming ``name``; ``none``, the value that stands for None (``--jobs 0``); ``unit``,
    the size of the unit a front-end counts in (GiB of a byte count); ``toggle``, the flags and help
    of an on/off option whose off sets the field to None (``--dense/--no-dense``); ``parts``, a
    dataclass whose offered fields are the field's parts (a ``RenderOptions``' for ``web``).
    """

    help: str
    ge: float | None = None
    le: float | None = None
    choices: tuple[str, ...] | None = None
    max_length: int | None = None
    flags: tuple[str, ...] | None = None
    label: str | None = None
    http: str | None = None
    served: bool = True
    cli: bool = True
    form: bool = False
    taken_as: Any = None
    read: Callable[[Any, str], Any] | None = None
    none: Any = None
    unit: int | None = None
    toggle: tuple[str, str] | None = None
    parts: type | None = None


def option(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = None, **rules: Any) -> Any:
    """A dataclass field with its ``Spec``; ``factory`` makes a mutable default."""
    metadata = {"spec": Spec(help, **rules)}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def spec(f: dataclasses.Field) -> Spec:
    return f.metadata["spec"]


def specs(kind: type) -> list[tuple[dataclasses.Field, Spec]]:
    """The fields of dataclass ``kind`` with their ``Spec``."""
    return [(f, spec(f)) for f in dataclasses.fields(kind)]


def value_type(f: dataclasses.Field) -> tuple[type, bool]:
    """The type of a field's values as a front-end takes them (``list[str]`` for a tuple of
    strings; ``Spec.taken_as`` when given), and whether it may be None."""
    text = str(f.type)  # the annotation as written: the modules declaring fields postpone annotations
    taken = spec(f).taken_as
    if taken is not None:
        return taken, taken is not bool
    if spec(f).unit is not None:
        return float, "None" in text
    if text.startswith("tuple["):
        base: Any = list[str]
    else:
        base = next(kind for name, kind in _TYPES.items() if text.startswith(name))
    return base, "None" in text


_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


def label(f: dataclasses.Field) -> str:
    """The field's name outside Python: its ``Spec.label``, else its own."""
    return spec(f).label or f.name


def taken_default(f: dataclasses.Field) -> Any:
    """The field's default as a front-end shows and takes it: in its ``unit``, a list for a tuple,
    None for a mapping made by a factory (nothing given), False for an off ``toggle``-like bool."""
    rules = spec(f)
    if f.default is dataclasses.MISSING:
        return None
    if rules.taken_as is bool:
        return bool(f.default)
    if rules.unit is not None and f.default is not None:
        return f.default / rules.unit
    return list(f.default) if isinstance(f.default, tuple) else f.default


def given_value(f: dataclasses.Field, value: Any, name: str) -> Any:
    """The field's value from what a front-end was given under ``name``: ``Spec.none`` as None, a
    count in ``Spec.unit`` (0 or less: None), or ``Spec.read``'s reading of it."""
    rules = spec(f)
    if value is None or (rules.none is not None and value == rules.none):
        return None
    if rules.unit is not None:
        return int(value * rules.unit) if value > 0 else None
    return rules.read(value, name) if rules.read is not None else value


def check_fields(owner: object, prefix: str = "") -> None:
    """Each field of dataclass instance ``owner`` within its ``Spec`` (``check``)."""
    for f in dataclasses.fields(owner):
        check(prefix + f.name, getattr(owner, f.name), spec(f))


def check(name: str, value: Any, rules: Spec) -> None:
    """``value`` of field ``name`` within ``rules``, or ``PagesightError`` naming the field."""
    if value is None:
        return
    if rules.choices is not None and value not in rules.choices:
        raise PagesightError(f"{name} must be one of {', '.join(rules.choices)}, got '{value}'")
    if rules.max_length is not None and len(value) > rules.max_length:
        what = "items" if isinstance(value, tuple) else "characters"
        raise PagesightError(f"{name} is longer than {rules.max_length} {what}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value or (rules.ge is not None and value < rules.ge):  # NaN is out of every range
            raise PagesightError(f"{name} must be {_range(rules)}, got {value:g}")
        if rules.le is not None and value > rules.le:
            raise PagesightError(f"{name} must be {_range(rules)}, got {value:g}")


def _range(rules: Spec) -> str:
    if rules.le is None:
        return f"{rules.ge:g} or more"
    if rules.ge is None:
        return f"{rules.le:g} or less"
    return f"from {rules.ge:g} to {rules.le:g}"


def model_reference(model: str) -> str:
    """A hub id as given; a local folder as an absolute path, so a setting or an encoder's spec names it
    unambiguously, whatever the folder it was given from."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.is_dir() else model
