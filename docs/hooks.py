"""MkDocs hooks: ARCHITECTURE.md and BENCHMARKS.md (kept at the repository's root) become site pages,
and the reference pages' markers are filled from the code, so the site cannot drift from it:
``<!-- cli -->`` with each command's ``--help``, ``<!-- routes -->`` with the HTTP API's routes and
``<!-- request-fields -->`` with the fields of ``SearchRequest`` and ``AskRequest``.

mkdocs-typer2 was tried for the CLI first: its in-process engine fails on this Typer (0.29) and its
subprocess engine leaves the page empty when the command fails, which a strict build would not see.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT_PAGES = {"ARCHITECTURE.md": "architecture.md", "BENCHMARKS.md": "benchmarks.md"}
_ROOT_LINK = re.compile(r"\]\((?:\.\./)+(" + "|".join(re.escape(name) for name in ROOT_PAGES) + r")")


def on_files(files, config):
    root = Path(config.config_file_path).parent
    for name, page in ROOT_PAGES.items():
        text = (root / name).read_text().replace("](docs/", "](")  # its pictures live in docs/
        files.append(File.generated(config, page, content=text))
    return files


def on_page_markdown(markdown, page, config, files):
    up = "../" * page.file.src_uri.count("/")
    markdown = _ROOT_LINK.sub(lambda m: f"]({up}{ROOT_PAGES[m.group(1)]}", markdown)
    if "<!-- cli -->" in markdown:
        markdown = markdown.replace("<!-- cli -->", _cli_help())
    if "<!-- routes -->" in markdown:
        markdown = markdown.replace("<!-- routes -->", _routes())
    if "<!-- request-fields -->" in markdown:
        markdown = markdown.replace("<!-- request-fields -->", _request_fields())
    return markdown


def _cli_help() -> str:
    import typer
    from typer.testing import CliRunner

    from pagesight.cli import app

    def shown(args: list[str]) -> str:
        result = CliRunner().invoke(app, [*args, "--help"], prog_name="pagesight", terminal_width=100)
        if result.exit_code != 0:
            raise RuntimeError(f"pagesight {' '.join(args)} --help failed: {result.output}")
        return f"```text\n{result.output.rstrip()}\n```\n"

    commands = typer.main.get_command(app).commands
    parts = [shown([])]
    for name, command in commands.items():
        if not command.hidden:
            parts.append(f"## {name}\n\n{shown([name])}")
    return "\n".join(parts)


def _routes() -> str:
    from pagesight.serve.routes import ROUTERS

    rows = ["| route | what it does |", "|---|---|"]
    for router in ROUTERS:
        for route in router.routes:
            doc = " ".join((route.endpoint.__doc__ or "").split()).replace("|", "\\|")
            rows.append(f"| `{' '.join(sorted(route.methods))} {route.path}` | {doc} |")
    return "\n".join(rows)


def _request_fields() -> str:
    import dataclasses

    from pagesight.request import AskRequest, SearchRequest, spec

    def cell(text) -> str:
        return str(text).replace("|", "\\|")

    rows = ["| request | field | default | values | help |", "|---|---|---|---|---|"]
    searched = {f.name for f in dataclasses.fields(SearchRequest)}
    for kind in (SearchRequest, AskRequest):
        for f in dataclasses.fields(kind):
            if kind is AskRequest and f.name in searched:
                continue
            rules = spec(f)
            values = ", ".join(rules.choices) if rules.choices else ""
            if rules.ge is not None or rules.le is not None:
                values = f"{'' if rules.ge is None else f'{rules.ge:g}'} to {'' if rules.le is None else f'{rules.le:g}'}"
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            rows.append(
                f"| {kind.__name__} | `{f.name}` | `{default!r}` | {cell(values)} | {cell(rules.help)} |"
            )
    return "\n".join(rows)
