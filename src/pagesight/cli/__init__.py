"""The ``pagesight`` command line: ingest, search, ask, info, documents, delete, serve, mcp, eval,
compare, train, import-dataset, bench.

Each module here is a Typer app of a few commands, merged into ``app``; they parse options, call
the library (``Index``, ``frontends``, ``eval``, ``train``) and print. Search and ask take their
options from the request fields (``request.py``), as the HTTP API and the MCP tools do.
"""

from __future__ import annotations

from typing import Annotated

import typer

from pagesight import __version__
from pagesight.cli import evaluating, ingesting, managing, measuring, searching, serving, training
from pagesight.cli.common import close_opened

app = typer.Typer(
    help="Retrieval-augmented generation in pixel space: index page images, search them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: reads at 80 columns and in a pipe, and starts faster
    context_settings={"max_content_width": 100},
)


def _print_version(value: bool) -> None:
    if value:
        print(f"pagesight {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    ctx.call_on_close(close_opened)


for commands in (ingesting, searching, managing, serving, evaluating, measuring, training):
    app.add_typer(commands.app)
