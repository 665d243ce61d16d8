"""A request's fields as pydantic declarations, for the HTTP API and the MCP tools: one source
(``request.py``) for their names, types, defaults, limits and descriptions.

``request_model`` makes the model FastAPI reads a search's query parameters or an answer's JSON
body with; ``tool_parameters`` makes the parameters of an MCP tool; ``form_model`` the upload
form's ingestion fields (``IngestOptions``, those its ``Spec`` offers a form). A field not ``served`` (a model
folder to load) is left out of both: a server chooses its models.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pagesight.request import SearchRequest, label, spec, value_type
from pagesight.spec import given_value


def request_model(
    kind: type[SearchRequest],
    name: str,
    *,
    required: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    extra: dict[str, Any] | None = None,
) -> type[BaseModel]:
    """A pydantic model of ``kind``'s served fields (and the ``extra`` ones, ``name: (type,
    FieldInfo)``), each under its HTTP name (``Spec.http``, else its label); ``required`` fields
    have no default and must not be empty. ``make(kind, model)`` gives the request back."""
    fields: dict[str, Any] = {}
    for f in _served(kind, exclude):
        rules = spec(f)
        alias = rules.http or label(f)
        if f.name in required:
            fields[f.name] = (_type(f), Field(..., alias=alias, min_length=1, **_limits(f)))
        else:
            fields[f.name] = (_type(f), Field(_default(f), alias=alias, **_limits(f)))
    config = ConfigDict(populate_by_name=True)
    return create_model(name, __config__=config, **fields, **(extra or {}))


def make(kind: type[SearchRequest], model: BaseModel, **changes: Any) -> SearchRequest:
    """The request of ``kind`` a ``request_model`` instance holds, with ``changes``."""
    names = {f.name for f in dataclasses.fields(kind)}
    return kind(**{**{key: value for key, value in model if key in names}, **changes})


def tool_parameters(kind: type[SearchRequest], *, exclude: tuple[str, ...] = ()) -> list[inspect.Parameter]:
    """``kind``'s served fields as keyword parameters of an MCP tool, under their labels, each
    annotated with its type, limits and description; the question (``query``) is required."""
    parameters = []
    for f in _served(kind, exclude):
        annotation = Annotated[_type(f), Field(**_limits(f))]
        default = inspect.Parameter.empty if f.name == "query" else _default(f)
        parameters.append(
            inspect.Parameter(
                label(f), inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
    return parameters


def tool_request(kind: type[SearchRequest], arguments: dict[str, Any], **changes: Any) -> SearchRequest:
    """The request of ``kind`` from a tool's ``arguments`` (by label), with ``changes``."""
    fields = {label(f): f.name for f in dataclasses.fields(kind)}
    return kind(**{fields[key]: value for key, value in arguments.items() if key in fields}, **changes)


def form_model(kind: type, name: str) -> type[BaseModel]:
    """A pydantic model of the fields of ``kind`` (``IngestOptions``) whose ``Spec`` says ``form``,
    for the upload form (``Annotated[model, Form()]``): each under its name, with its type as a
    front-end takes it (``Spec.taken_as``), its choices and description; none required.
    ``form_values`` gives the fields' values back."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        if spec(f).form:
            base, _ = value_type(f)
            if spec(f).choices is not None:
                base = Literal[spec(f).choices]
            fields[f.name] = (base | None, Field(None, **_limits(f)))
    return create_model(name, **fields)


def form_values(kind: type, model: BaseModel) -> dict[str, Any]:
    """The values of ``kind``'s fields a ``form_model`` instance was given (an empty text or list is
    none), each read as the field's (``spec.given_value``: ``meta``'s ``KEY=VALUE`` items as a
    mapping); a refusal names the field."""
    found = {f.name: f for f in dataclasses.fields(kind)}
    return {
        name: given_value(found[name], value, name)
        for name, value in model
        if value is not None and value != "" and value != []
    }


def _served(kind: type[SearchRequest], exclude: tuple[str, ...]) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(kind) if spec(f).served and f.name not in exclude]


def _type(f: dataclasses.Field) -> Any:
    base, optional = value_type(f)
    if spec(f).choices is not None:
        base = Literal[spec(f).choices]
    return base | None if optional else base


def _default(f: dataclasses.Field) -> Any:
    return list(f.default) if isinstance(f.default, tuple) else f.default


def _limits(f: dataclasses.Field) -> dict[str, Any]:
    rules = spec(f)
    given = {"ge": rules.ge, "le": rules.le, "max_length": rules.max_length}
    return {"description": rules.help, **{key: value for key, value in given.items() if value is not None}}
