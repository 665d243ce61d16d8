"""The extractive reader's shape (issue 61): its answers learned, not written. Its literal
patterns read figures, dates and units, 30 at most with its table finder; no rule and no test
names a development set's document or question; what it knows of figures and their names is
data beside it."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
from pathlib import Path

import pytest

import pagesight.answer.extractive as extractive
from pagesight.answer.extractive.cells import Tables
from pagesight.answer.extractive.formulas import defined, definitions

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PAGESIGHT_SHARED_DATA") or ROOT.parent / "shared" / "data")
MAX_PATTERNS = 30


def _patterns(module) -> set[int]:
    """The compiled patterns a module holds at its top level, and those it writes inline."""
    found = {id(value) for value in vars(module).values() if isinstance(value, re.Pattern)}
    source = Path(module.__file__).read_text()
    inline = re.findall(r"\bre\.(?:search|match|fullmatch|sub|split|findall|finditer)\(\s*r?[\"']", source)
    return found | {hash((module.__name__, n)) for n in range(len(inline))}


def test_the_reader_and_its_table_finder_hold_30_literal_patterns_at_most():
    modules = [
        importlib.import_module(f"pagesight.answer.extractive.{m.name}")
        for m in pkgutil.iter_modules(extractive.__path__)
    ]
    modules.append(importlib.import_module("pagesight.text.tables"))  # with the line pattern it reads
    found = set().union(*(_patterns(module) for module in modules))
    assert 0 < len(found) <= MAX_PATTERNS, len(found)


def _development_names() -> set[str]:
    """The ids of the shared development sets' questions and documents."""
    names = set()
    for folder in ("financebench-dev", "mmlongbench-dev"):
        for line in (SHARED / folder / "queries.jsonl").read_text().splitlines():
            names.add(json.loads(line)["_id"])
        names |= {path.stem for path in (SHARED / folder / "pdfs").iterdir()}
    for context in json.loads((SHARED / "tatqa" / "tatqa_dataset_dev.json").read_text()):
        names.add(context["table"]["uid"])
        names |= {question["uid"] for question in context["questions"]}
    return {name for name in names if len(name) >= 6}


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data beside the checkout")
def test_no_rule_and_no_test_names_a_development_document_or_question():
    names = _development_names()
    words = re.compile(r"[\w-]{6,}")
    for path in [
        *(ROOT / "src").rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "src").rglob("*.txt"),
    ]:
        named = set(words.findall(path.read_text(errors="replace"))) & names
        assert not named, f"{path.relative_to(ROOT)} names {sorted(named)[:5]}"


def test_figures_are_defined_in_data_not_in_rules():
    none = Tables()
    assert len(definitions()) >= 15
    assert defined("What is the quick ratio for FY2031?", none).startswith("(")
    assert defined("What is the days sales outstanding (DSO)?", none) == defined("What is the DSO?", none)
    assert defined("What is the fixed asset turnover?", none) != defined("What is the asset turnover?", none)
    assert defined("How tall is the lighthouse?", none) is None
