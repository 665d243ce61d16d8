"""``pagesight ingest``: files, folders and URLs into an index, with progress. Its options are
the fields of ``IngestOptions`` and ``Settings`` (``ingest_options``), and the rest is what only a
command line has (the index, the device, JSON output)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pagesight.cli.common import (
    DeviceOption,
    IndexOption,
    JsonOption,
    TrustOption,
    VisualConcurrencyOption,
    VisualEndpointOption,
    VisualKeyFileOption,
    VisualMaxPixelsOption,
    choices,
    err,
    fail,
    flag_of,
    is_given,
    open_index,
    progress_bar,
    served_at,
)
from pagesight.endpoints import CONCURRENCY
from pagesight.errors import PagesightError, SettingsConflict
from pagesight.ingest.options import IngestOptions
from pagesight.settings import Settings
from pagesight.spec import given_value, spec, specs, taken_default, value_type

if TYPE_CHECKING:
    from pagesight.index import Index

app = typer.Typer()


NEW_INDEX = " (new index only)"  # said of each index setting: an existing index keeps its own


@dataclass(frozen=True)
class _Option:
    """An option of ``ingest`` derived from a field: ``name``, its parameter; ``part``, the
    ``IngestOptions`` field (``web``, ``ray``) whose part it is; ``toggle``, the on/off option of a
    setting that may be None (``--dense``)."""

    name: str
    field: dataclasses.Field
    setting: bool
    part: str | None = None
    toggle: bool = False


def _offered() -> list[_Option]:
    """The options ``ingest`` offers: the fields of ``IngestOptions`` (and of its parts) and of
    ``Settings`` whose ``Spec`` says ``cli``, in their order."""
    found = []
    for f, rules in specs(IngestOptions):
        if rules.cli:
            found.append(_Option(f.name, f, setting=False))
        if rules.parts is not None:
            found += [_Option(f"{f.name}_{p.name}", p, False, f.name) for p, r in specs(rules.parts) if r.cli]
    for f, rules in specs(Settings):
        if rules.toggle is not None:
            found.append(_Option(rules.toggle[0].split("/")[0].lstrip("-"), f, setting=True, toggle=True))
        if rules.cli:
            found.append(_Option(f.name, f, setting=True))
    return found


def _annotation(option: _Option) -> tuple[Any, Any]:
    """The typer annotation and default of an option: the field's help (an index setting's noting
    that it sets a new index), flags, choices, and its default as the command line takes it."""
    rules = spec(option.field)
    note = NEW_INDEX if option.setting else ""
    if option.toggle:
        flags, help = rules.toggle
        return Annotated[bool, typer.Option(flags, help=help + note)], option.field.default is not None
    base, optional = value_type(option.field)
    if rules.choices is not None:
        base = choices(option.field.name.title().replace("_", ""), rules.choices)
    default = taken_default(option.field)
    if isinstance(default, str) and rules.choices is not None:
        default = base(default)
    flags = rules.flags or ()
    if option.part is not None and not flags:
        flags = (f"--{option.field.name.replace('_', '-')}",)
    return Annotated[base | None if optional else base, typer.Option(*flags, help=rules.help + note)], default


def _read_setting(ctx, option, offered, taken: dict, settings: dict, flags: dict) -> None:
    """A setting's value into ``settings`` (None when its toggle turned it off, its default when
    only the toggle was given) and the option given into ``flags``, when it or its toggle was
    given: those are checked against an existing index."""
    f = option.field
    toggle = next((o for o in offered if o.toggle and o.field is f), None)
    chosen = [o.name for o in (option, toggle) if o is not None and is_given(ctx, o.name)]
    if not chosen:
        return
    flags[f.name] = chosen[0]
    if toggle is not None and not taken[toggle.name]:
        settings[f.name] = None
    elif is_given(ctx, option.name):
        settings[f.name] = given_value(f, taken[option.name], flag_of(ctx, option.name))
    else:
        settings[f.name] = f.default


def ingest_options(command):
    """Decorate ``ingest``: the ingestion options and the index settings their fields' ``Spec``
    offers become its options, after ``index``; the command is called with ``options`` (an
    ``IngestOptions``, refused before any index is made when bad), ``settings`` (the settings given
    on the command line: only those are checked against an existing index) and ``flags`` (each
    setting's option, to word a conflict with). A field added to ``IngestOptions`` or ``Settings``
    with ``cli`` is an option here, with nothing to change."""
    offered = _offered()
    own = list(inspect.signature(command, eval_str=True).parameters.values())
    cut = [p.name for p in own].index("index") + 1
    derived = []
    for option in offered:
        annotation, default = _annotation(option)
        derived.append(
            inspect.Parameter(
                option.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
    kept = [p for p in own if p.name not in ("options", "settings", "flags")]
    parameters = [*kept[:cut], *derived, *kept[cut:]]
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in parameters]

    @functools.wraps(command)
    def run(ctx: typer.Context, **given):
        taken = {option.name: given.pop(option.name) for option in offered}
        taken = {name: v.value if isinstance(v, Enum) else v for name, v in taken.items()}
        options: dict[str, Any] = {}
        parts: dict[str, dict[str, Any]] = {}
        settings: dict[str, Any] = {}
        flags: dict[str, str] = {}
        try:
            for option in offered:
                f, value = option.field, taken[option.name]
                if option.setting:
                    if not option.toggle:
                        _read_setting(ctx, option, offered, taken, settings, flags)
                    continue
                if value is None or (spec(f).parts is not None and spec(f).taken_as is bool):
                    continue  # not given (the field's default), or a part's on/off (below)
                value = given_value(f, value, flag_of(ctx, option.name))
                if option.part is not None:
                    parts.setdefault(option.part, {})[f.name] = value
                else:
                    options[f.name] = value
            options["web"] = parts.get("web", {})
            ray = parts.get("ray", {})
            if taken["ray"] or ray.get("address"):  # --ray, or a cluster named: read on Ray
                options["ray"] = {
                    **ray,
                    "readers": options.get("jobs"),
                    "device": given["device"],
                    "trust_remote_code": given["trust_remote_code"],
                }
            made = IngestOptions(**options)  # before the index: a bad option leaves no new index
        except PagesightError as exc:
            fail(str(exc))
        return command(ctx=ctx, options=made, settings=settings, flags=flags, **given)

    run.__signature__ = inspect.Signature(parameters)
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


@app.command()
@ingest_options
def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Files, folders (searched recursively) and URLs; PDFs, images, office files (LibreOffice), "
            "HTML, ZIM archives."
        ),
    ],
    index: IndexOption,
    options: IngestOptions,
    settings: dict,
    flags: dict,
    device: DeviceOption = "auto",
    trust_remote_code: TrustOption = False,
    visual_endpoint: VisualEndpointOption = None,
    visual_endpoint_key_file: VisualKeyFileOption = None,
    visual_concurrency: VisualConcurrencyOption = CONCURRENCY,
    visual_max_pixels: VisualMaxPixelsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add files, folders and URLs to the index.

    The index is created if missing; unchanged inputs are skipped, changed ones replaced.
    """
    served = served_at(visual_endpoint, visual_endpoint_key_file, visual_concurrency, visual_max_pixels)
    try:
        idx = open_index(
            index,
            create=True,
            settings=settings,
            device=device,
            trust_remote_code=trust_remote_code,
            visual_endpoint=served,
        )
    except SettingsConflict as exc:
        named = [flag_of(ctx, flags[name]) for name in exc.conflicts]
        made = ", ".join(f"{name}={stored!r}" for name, (stored, _) in exc.conflicts.items())
        listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
        fail(
            f"{index}: {listed} {'is' if len(named) == 1 else 'are'} chosen when an index is made "
            f"(it was made with {made}); make a new index for {named[0] if len(named) == 1 else 'them'}"
        )
    try:
        report = _add_with_progress(idx, paths, options, transient=as_json)
    except PagesightError as exc:
        fail(str(exc))
    for path, note in report.notes:
        err.print(f"{path}: note: {note}", highlight=False, markup=False, soft_wrap=True)
    for path, reason in report.failed:
        err.print(f"{path}: {reason}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps(report.to_dict()))
    else:
        err.print(
            f"{len(report.added)} added, {len(report.replaced)} replaced, {len(report.unchanged)} unchanged, "
            f"{len(report.failed)} failed; {report.pages} pages read",
            highlight=False,
        )
    idx.close()
    raise typer.Exit(0 if report.ok else 1)


def _add_with_progress(idx: Index, paths, options: IngestOptions, transient: bool):
    """``idx.add`` with a progress bar of files and pages on stderr."""
    with progress_bar(transient) as progress:
        task = progress.add_task("ingest", total=None, note="files, 0 pages")
        pages = 0

        def on_file(path: str, outcome: str, n_pages: int) -> None:
            nonlocal pages
            pages += n_pages
            progress.update(task, advance=1, note=f"files, {pages} pages")

        def on_planned(n: int) -> None:
            progress.update(task, total=n + progress.tasks[0].completed)

        return idx.add(paths, options, progress=on_file, on_planned=on_planned)
