"""The code's shape, checked: no function body (its docstring aside) over ``MAX_BODY`` lines, so
each stage reads on one screen. Typer commands declare their options in their signatures, which
are not their bodies."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pagesight

ROOT = Path(pagesight.__file__).parent
MAX_BODY = 60


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
