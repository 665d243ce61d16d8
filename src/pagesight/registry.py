"""One kind of registry for what pagesight builds by name: visual encoders, readers, rerankers and
stores (``ENCODERS``, ``READERS``, ``RERANKERS``, ``STORES``).

A registry maps a name to ``"module:attribute"``, imported only when the name is used. Other
packages add theirs in two ways: ``registry.register(name, "module:attribute")`` at run time, or
an entry point in their ``pyproject.toml``, found the first time the registry is read::

    [project.entry-points."pagesight.readers"]
    my-reader = "my_package.reader:MyReader"

The groups are ``pagesight.encoders``, ``pagesight.readers``, ``pagesight.rerankers`` and
``pagesight.stores`` (a store's name is the scheme of its locations).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from importlib.metadata import entry_points
from typing import Any

from pagesight.errors import PagesightError


class Registry(MutableMapping[str, str]):
    """Names to ``"module:attribute"`` targets: the built-in ones, then the entry points of
    ``group``, then those registered (a later one replaces an earlier one of the same name)."""

    def __init__(self, kind: str, group: str, builtin: Mapping[str, str]):
        self.kind = kind
        self.group = group
        self._targets = dict(builtin)
        self._added: dict[str, str] = {}
        self._discovered = False

    def register(self, name: str, target: str) -> None:
        """Make ``target`` (``"module:attribute"``) available as ``name``."""
        if ":" not in target:
            raise PagesightError(
                f"{self.kind} '{name}': the target must be 'module:attribute', got '{target}'"
            )
        self._added[name] = target
        self._targets[name] = target

    def load(self, name: str) -> Any:
        """The attribute ``name`` stands for, imported; an error lists the names known."""
        if name not in self:
            raise PagesightError(f"unknown {self.kind} '{name}'; choose one of {', '.join(sorted(self))}")
        module, _, attribute = self[name].partition(":")
        return getattr(importlib.import_module(module), attribute)

    def _all(self) -> dict[str, str]:
        if not self._discovered:
            self._discovered = True
            for point in entry_points(group=self.group):
                self._targets.setdefault(point.name, point.value)
            self._targets.update(self._added)  # registered at run time: over an entry point's
        return self._targets

    def __setitem__(self, name: str, target: str) -> None:
        self.register(name, target)

    def __delitem__(self, name: str) -> None:
        del self._all()[name]
        self._added.pop(name, None)

    def __getitem__(self, name: str) -> str:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())
