"""What the commands share: the consoles, the common options, opening an index, progress, and
options derived from a request's fields (``request_options``)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pagesight.errors import PagesightError, SettingsConflict
from pagesight.request import MODES, SearchRequest, label, spec, value_type
from pagesight.spec import given_value

if TYPE_CHECKING:
    from pagesight.endpoints import VisualEndpoint
    from pagesight.index import Index

out = Console()
err = Console(stderr=True)


IndexOption = Annotated[
    str,
    typer.Option(
        "--index", "-i", help="Index: a directory, or a store (qdrant:FOLDER, qdrant://HOST:PORT/COLLECTION)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DeviceOption = Annotated[
    str, typer.Option(help="Where the models run (visual encoder, rerankers): auto, cpu, cuda[:N], mps.")
]
# a model reader's options that are the machine's, not the request's (ask, eval)
BaseUrlOption = Annotated[str | None, typer.Option(help="openai reader: the endpoint's base URL.")]
ApiKeyOption = Annotated[str | None, typer.Option(help="openai reader: API key.")]
ReaderDeviceOption = Annotated[
    str | None, typer.Option(help="transformers reader, visual encoder, rerankers: cpu, cuda, mps or auto.")
]
TrustOption = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Let the visual encoder, rerankers and the transformers reader run the code a model comes "
        "with (visrag-ret, jina-v4, nemotron-colembed, jina-m0): only for models whose source you trust. "
        "Given at each run, never stored in the index.",
    ),
]

VisualEndpointOption = Annotated[
    str | None,
    typer.Option(
        "--visual-endpoint",
        help="Run the visual encoder's model on this vLLM server (http://HOST:PORT, or a router in front "
        "of several) instead of here: pages and queries go there (colqwen3, colqwen3.5, "
        "qwen3-vl-embedding). Its key: --visual-endpoint-key-file, else $PAGESIGHT_VISUAL_API_KEY.",
    ),
]
VisualKeyFileOption = Annotated[
    Path | None,
    typer.Option("--visual-endpoint-key-file", help="A file holding the key sent to --visual-endpoint."),
]
VisualConcurrencyOption = Annotated[
    int, typer.Option("--visual-concurrency", help="--visual-endpoint: requests in flight at once.", min=1)
]
VisualMaxPixelsOption = Annotated[
    int | None,
    typer.Option(
        "--visual-max-pixels",
        help="--visual-endpoint: the server's image processor's pixel budget (its max_pixels): pages are "
        "resized to it here, as that processor would.",
    ),
]


def served_at(
    url: str | None, key_file: Path | None, concurrency: int, max_pixels: int | None = None
) -> VisualEndpoint | None:
    """The visual endpoint of the options (None without ``--visual-endpoint``), its key read once."""
    from pagesight.endpoints import VisualEndpoint

    try:
        return VisualEndpoint.given(url, key_file, concurrency=concurrency, max_pixels=max_pixels)
    except PagesightError as exc:
        fail(str(exc))


def fail(message: str, code: int = 2) -> None:
    """Print ``message`` as the command's error on stderr and end it with exit code ``code``."""
    # the message is text, not markup: "pip install 'pagesight[qdrant]'" keeps its brackets
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def open_index(
    path: str | Path,
    create: bool = False,
    settings: dict | None = None,
    device: str = "auto",
    trust_remote_code: bool = False,
    visual_endpoint: VisualEndpoint | None = None,
) -> Index:
    """The index at ``path`` (created with ``settings`` when ``create``), its models on ``device``
    (the visual encoder's at ``visual_endpoint`` when given), allowed to run a model's own code with
    ``trust_remote_code``; an error ends the command, except a settings conflict, which the caller
    words with its options' names."""
    try:
        from pagesight.index import Index

        index = Index.open(
            path,
            create=create,
            settings=settings,
            device=device,
            trust_remote_code=trust_remote_code,
            visual_endpoint=visual_endpoint,
        )
    except SettingsConflict:
        raise
    except PagesightError as exc:
        fail(str(exc))
    _OPENED.append(index)
    return index


_OPENED: list[Index] = []  # closed when the command ends (``_main``)


def close_opened() -> None:
    """Close the indexes the command opened: a store's client (Qdrant's) lets go of its files and
    connections before the interpreter ends, and in-process callers can open the store again."""
    while _OPENED:
        _OPENED.pop().close()


def is_given(ctx: typer.Context, option: str) -> bool:
    """Whether the command's parameter ``option`` was set on the command line, not defaulted."""
    source = ctx.get_parameter_source(option)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def flag_of(ctx: typer.Context, option: str) -> str:
    """The command-line flag of the command's parameter ``option`` (``--dense-model``)."""
    return next(max(param.opts, key=len) for param in ctx.command.params if param.name == option)


def progress_bar(transient: bool) -> Progress | _LineProgress:
    """A live progress bar on a terminal; plain progress lines on stderr elsewhere (logs, CI)."""
    if not err.is_terminal:
        return _LineProgress()
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        console=err,
        transient=transient,
    )


@dataclass
class _LineTask:
    description: str
    total: float | None
    note: str
    completed: float = 0
    shown: float = 0.0  # when its last line was printed


class _LineProgress:
    """The part of rich's Progress the commands use, printed as lines: each task's first step,
    then at most one line every ``every`` seconds, and its last step."""

    def __init__(self, every: float = 10.0):
        self.every = every
        self.tasks: list[_LineTask] = []
        self.started = time.monotonic()

    def __enter__(self) -> _LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def add_task(self, description: str, total: float | None = None, note: str = "") -> int:
        self.tasks.append(_LineTask(description, total, note))
        return len(self.tasks) - 1

    def update(
        self, task_id: int, *, advance: float = 0, completed: float | None = None, total=None, note=None
    ):
        task = self.tasks[task_id]
        before = task.completed
        task.completed = completed if completed is not None else task.completed + advance
        task.total = total if total is not None else task.total
        task.note = note if note is not None else task.note
        now = time.monotonic()
        done = task.total is not None and task.completed >= task.total
        if task.completed > before and (before == 0 or done or now - task.shown >= self.every):
            task.shown = now
            of = f"/{task.total:g}" if task.total is not None else ""
            err.print(
                f"{task.description}: {task.completed:g}{of} {task.note} ({now - self.started:.0f} s)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )


def choices(name: str, values: tuple[str, ...]) -> type[Enum]:
    """An enum of ``values`` for a typer option: its help lists them, and others are refused."""
    return Enum(name, [(value, value) for value in values], type=str)


Mode = choices("Mode", MODES)


def request_options(kind: type, *, required: tuple[str, ...] = (), into: str = "request"):
    """Decorate a command taking ``into: kind`` (``request`` by default): its options become the
    dataclass's fields, each an option with the field's help, default and flags (``spec.Spec``),
    ``query`` the argument (``required`` names those with no default), and the command is called
    with the ``kind`` made from them (a ``SearchRequest``, eval's ``SearchGrid``). A field added to
    the dataclass is an option of the command, with nothing here to change."""
    fields = dataclasses.fields(kind)

    def made(given: dict):
        values = {}
        for f in fields:
            value = given.pop(label(f))
            value = value.value if isinstance(value, Enum) else value
            if value is None and f.default is not None:
                continue  # not given: the field's own default (a factory's)
            values[f.name] = given_value(f, value, f"--{label(f).replace('_', '-')}")
        return kind(**values)

    return _derived(
        into,
        [
            inspect.Parameter(
                label(f),
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if f.name in required else _cli_default(f),
                annotation=_cli_type(f),
            )
            for f in fields
        ],
        made,
    )


def field_options(
    kind: type, names: list[str], *, many: Collection[str] = (), flags: Mapping = {}, into: str
):
    """Decorate a command taking ``into: dict`` with an option for each of ``kind``'s fields
    ``names``, as ``field_option`` makes it (a list of values for those in ``many``; ``flags``:
    other flags by name); the command is called with ``into``, each field's name to the value given
    (None when not; a tuple of values for those in ``many``)."""
    found = {f.name: f for f in dataclasses.fields(kind)}

    def made(given: dict) -> dict:
        taken = {}
        for name in names:
            value = given.pop(name)
            if name in many:
                flag = (flags.get(name) or (f"--{name.replace('_', '-')}",))[0]
                value = values(value, value_type(found[name])[0], flag)
            taken[name] = value.value if isinstance(value, Enum) else value
        return taken

    parameters = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=field_option(kind, name, flags=flags.get(name, ()), many=name in many),
        )
        for name in names
    ]
    return _derived(into, parameters, made)


def _derived(into: str, derived: list[inspect.Parameter], made):
    """Decorate a command taking ``into``: ``derived`` become its options, after its first, and
    it is called with ``into=made(values given)`` (a refusal ends the command)."""

    def decorate(command):
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != into]
        parameters = [own[0], *derived, *own[1:]] if own else derived
        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in parameters]

        @functools.wraps(command)
        def run(**given):
            try:
                value = made(given)
            except PagesightError as exc:
                fail(str(exc))
            return command(**{into: value}, **given)

        run.__signature__ = inspect.Signature(parameters)
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        return run

    return decorate


def _cli_default(f: dataclasses.Field):
    if f.default is dataclasses.MISSING:  # made by a factory: none given
        return None
    return list(f.default) if isinstance(f.default, tuple) else f.default


def _cli_type(f: dataclasses.Field):
    """The typer annotation of a request field: its type, choices as an enum, its help and flags."""
    rules = spec(f)
    if f.name == "query":
        return Annotated[str, typer.Argument(help=rules.help, show_default=False)]
    base, optional = value_type(f)
    if rules.choices is not None:
        base = choices(f.name.title().replace("_", ""), rules.choices)
    declared = rules.flags or ((f"--{f.name.replace('_', '-')}",) if base is bool else ())
    return Annotated[base | None if optional else base, typer.Option(*declared, help=rules.help)]


def field_option(kind: type[SearchRequest], name: str, *, flags: tuple[str, ...] = (), many: bool = False):
    """The typer annotation of request field ``name`` for a command that takes it as an option of
    its own (eval's answer settings): the field's help, its flags (or ``flags``), its choices; with
    ``many``, a list of values, the option repeated or its values joined by commas (``values``
    reads them)."""
    f = next(f for f in dataclasses.fields(kind) if f.name == name)
    rules = spec(f)
    declared = flags or rules.flags or (f"--{label(f).replace('_', '-')}",)
    if many:
        return Annotated[
            list[str] | None,
            typer.Option(*declared, help=f"{rules.help} Several: repeat, or join by commas."),
        ]
    base, _ = value_type(f)
    if rules.choices is not None:
        base = choices(f.name.title().replace("_", ""), rules.choices)
    return Annotated[base | None, typer.Option(*declared, help=rules.help)]


def values(given: list[str] | None, kind: type, flag: str) -> tuple | None:
    """The values of a list option (``field_option(many=True)``), commas splitting them, as ``kind``
    (None when not given); a value that is not one names the flag."""
    if not given:
        return None
    found = []
    for text in (part.strip() for item in given for part in item.split(",")):
        try:
            found.append(kind(text))
        except ValueError:
            what = {int: "a whole number", float: "a number"}.get(kind, "a value")
            raise PagesightError(f"{flag}: '{text}' is not {what}") from None
    return tuple(dict.fromkeys(found))


def field_help(name: str, kind: type[SearchRequest] = SearchRequest) -> str:
    """The help of request field ``name``, for a command that takes it as an option of its own."""
    return spec(next(f for f in dataclasses.fields(kind) if f.name == name)).help
