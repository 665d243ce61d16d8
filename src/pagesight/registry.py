"""One kind of registry for what pagesight builds by name: visual encoders, readers, rerankers and
stores (``ENCODERS``, ``READERS``, ``RERANKERS``, ``STORES``).

A registry maps a name to ``"module:attribute"``, imported only when the name is used. Other
packages add theirs in two ways: ``registry.register(name, "module:attribute")`` at run time, or
an entry point in their ``pyproject.toml``, found the first time the registry is read::

    [project.entry-points."pagesight.readers"]
    my-reader = "my_package.reader:MyReader"

The groups are ``pagesight.encoders``, ``pagesight.readers``, ``pagesight.rerankers`` and
``pagesight.stores`` (a store's name is the scheme of its locations).

What the machine lends a factory rather than the request (a ``device``, leave to run a model's own
code: ``trust_remote_code``) is given to those that name it as a parameter (``lent``), so a factory
that runs no such model, another package's included, needs no parameter it would ignore.
"""

from __future__ import annotations

import importlib
import inspect
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


def lent(factory: Any, **offered: Any) -> dict[str, Any]:
    """Those of ``offered`` that ``factory`` takes by name."""
    parameters = inspect.signature(factory).parameters
    return {name: value for name, value in offered.items() if name in parameters}
