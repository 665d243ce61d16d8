"""The code's shape, checked: no function body (its docstring aside) over ``MAX_BODY`` lines, so
each stage reads on one screen; no module over ``MAX_MODULE`` lines; no command of the command line
over ``MAX_COMMAND`` lines, signature included, so its options are declared elsewhere once (the
requests' and other dataclasses' fields, ``cli.common.request_options``) or named by aliases."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pagesight

ROOT = Path(pagesight.__file__).parent
MAX_BODY = 60
MAX_MODULE = 500
MAX_COMMAND = 80


def body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines of ``function``'s body after its docstring."""
    body = function.body
    first = body[0]
    documented = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    start = body[1].lineno if documented and len(body) > 1 else first.lineno
    return function.end_lineno - start + 1


def long_functions(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and body_lines(node) > MAX_BODY:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({body_lines(node)} lines)")
    return found


@pytest.mark.timeout(60)
def test_no_function_body_is_over_sixty_lines():
    assert long_functions(ROOT) == []


@pytest.mark.timeout(60)
def test_a_long_function_is_found(tmp_path: Path):
    lines = "\n".join(f"    x{n} = {n}" for n in range(MAX_BODY + 1))
    (tmp_path / "long.py").write_text(f'def long():\n    """Its docstring is not counted."""\n{lines}\n')
    (tmp_path / "short.py").write_text("def short():\n    return 1\n")
    assert long_functions(tmp_path) == [f"long.py:1 long ({MAX_BODY + 1} lines)"]


def long_modules(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)} ({lines} lines)"
        for path in sorted(root.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE
    ]


def long_commands(root: Path) -> list[str]:
    """The functions decorated as commands (``@app.command``) longer than ``MAX_COMMAND`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            commands = [d for d in getattr(node, "decorator_list", []) if "command" in ast.unparse(d)]
            lines = node.end_lineno - node.lineno + 1 if commands else 0
            if lines > MAX_COMMAND:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


@pytest.mark.timeout(60)
def test_no_module_is_over_five_hundred_lines_and_no_command_over_eighty():
    assert long_modules(ROOT) == []
    assert long_commands(ROOT / "cli") == []


@pytest.mark.timeout(60)
def test_a_long_module_and_a_long_command_are_found(tmp_path: Path):
    options = "\n".join(f"    option{n}: int = {n}," for n in range(MAX_COMMAND))
    (tmp_path / "cli.py").write_text(f"@app.command()\ndef run(\n{options}\n):\n    pass\n")
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_MODULE + 1))
    assert long_commands(tmp_path) == [f"cli.py:2 run ({MAX_COMMAND + 3} lines)"]
    assert long_modules(tmp_path) == [f"long.py ({MAX_MODULE + 1} lines)"]
