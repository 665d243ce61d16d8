"""Every regular expression a request's text reaches runs in linear time: the patterns of the
modules below are found by looking (so one added later is fuzzed too), attacked with strings built
from each pattern's own pieces (a sample of what it matches, cut anywhere and one character of it,
a space, a digit or a punctuation mark repeated), and timed at a length and at several times it.
A pattern whose time grows faster than its input fails, named with the string that shows it."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import time
from collections.abc import Iterator

import pytest

try:  # Python 3.11 on
    from re import _parser as sre_parse
except ImportError:  # Python 3.10
    import sre_parse

# The modules a request's text reaches (a question, a filter, a formula, a query), and those that
# read an uploaded document's lines; a package stands for all its modules.
MODULES = (
    "pagesight.answer.extractive",
    "pagesight.text.tables",
    "pagesight.text.lines",
    "pagesight.text.titles",
    "pagesight.where",
    "pagesight.search.words",
    "pagesight.search.expansion",
    "pagesight.encode.lexical",
    "pagesight.frontends",
    "pagesight.request",
    "pagesight.answer.abstention",
)
PUMPED = " \t\n0a1A.,-$%()'/:?!"  # what an attack repeats, beside the pattern's own characters
SCAN = 160  # characters of the pumped run when looking for the worst string
LENGTH = 256  # ... when timing it, and GROWTH times it
GROWTH = 4
FLOOR = 0.003  # seconds under which a timing says nothing (a linear pattern's at GROWTH x LENGTH: < 0.3 ms)
HOPELESS = 0.1  # seconds at LENGTH that no linear pattern comes near (< 0.1 ms): no need to go longer
# a linear pattern's time grows GROWTH-fold; a quadratic one's GROWTH**2: the margin between them
# is wide, so a loaded machine does not fail a linear one
SUPERLINEAR = GROWTH**2 * 0.6


def patterns() -> Iterator[tuple[str, re.Pattern]]:
    """Every pattern the modules hold at their top level (compiled, alone or in a tuple, list or
    dict of them) or write out where they call ``re`` (``re.search(r"...", text)``)."""
    seen: set[tuple[str, int]] = set()
    for name in MODULES:
        module = importlib.import_module(name)
        found = [module]
        if hasattr(module, "__path__"):
            found += [
                importlib.import_module(info.name)
                for info in pkgutil.walk_packages(module.__path__, f"{name}.")
            ]
        for mod in found:
            held = [(f"{mod.__name__}.{attribute}", pattern) for attribute, value in vars(mod).items()
                    for pattern in _held(value)]  # fmt: skip
            for named, pattern in held + _written(mod):
                if pattern.pattern and (pattern.pattern, pattern.flags) not in seen:
                    seen.add((pattern.pattern, pattern.flags))
                    yield named, pattern


def _held(value) -> list[re.Pattern]:
    if isinstance(value, re.Pattern):
        return [value]
    if isinstance(value, (tuple, list)):
        return [p for item in value for p in _held(item)]
    if isinstance(value, dict):
        return [p for item in [*value.keys(), *value.values()] for p in _held(item)]
    return []


_FLAGS_AT = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2,
             "split": 3, "sub": 4, "subn": 4}  # fmt: skip


def _written(module) -> list[tuple[str, re.Pattern]]:
    """The patterns ``module`` writes as a string where it calls ``re``, with their flags."""
    found = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        call = node if isinstance(node, ast.Call) else None
        if call is None or not isinstance(call.func, ast.Attribute) or call.func.attr not in _FLAGS_AT:
            continue
        if not (isinstance(call.func.value, ast.Name) and call.func.value.id == "re") or not call.args:
            continue
        if not (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
            continue  # built at run time (an f-string of a term): not known here
        flags = [k.value for k in call.keywords if k.arg == "flags"]
        flags += call.args[_FLAGS_AT[call.func.attr] : _FLAGS_AT[call.func.attr] + 1]
        value = eval(compile(ast.Expression(flags[0]), "<flags>", "eval"), {"re": re}) if flags else 0
        found.append((f"{module.__name__}:{call.lineno}", re.compile(call.args[0].value, value)))
    return found


def samples(pattern: re.Pattern, most: int = 12) -> list[str]:
    """Strings the pattern (roughly) matches: each branch taken in turn, each repeat once and twice."""
    tree = sre_parse.parse(pattern.pattern, pattern.flags)
    found: list[str] = []
    for choice in range(most):
        text = _sample(tree, choice)
        if text not in found:
            found.append(text)
    return found


def _sample(items, choice: int) -> str:
    out = []
    for op, arg in items:
        op = str(op)
        if op == "LITERAL":
            out.append(chr(arg))
        elif op == "NOT_LITERAL":
            out.append("a" if chr(arg) != "a" else "b")
        elif op == "ANY":
            out.append("a")
        elif op == "IN":
            out.append(_member(arg, choice))
        elif op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            times = max(low, 1 + choice % 2) if high else 0
            out.append(_sample(sub, choice) * min(times, high if high is not None else times))
        elif op == "SUBPATTERN":
            out.append(_sample(arg[-1], choice))
        elif op == "ATOMIC_GROUP":
            out.append(_sample(arg, choice))
        elif op == "BRANCH":
            branches = arg[1]
            out.append(_sample(branches[choice % len(branches)], choice // len(branches)))
    return "".join(out)


def _member(arg, choice: int) -> str:
    """A character of a class: its first listed one, or one of its categories."""
    for op, value in arg:
        op = str(op)
        if op == "NEGATE":
            return "~"
        if op == "LITERAL":
            return chr(value)
        if op == "RANGE":
            return chr(value[0])
        if op == "CATEGORY":
            return {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " "}.get(str(value), "a")
    return "a"


def attacks(pattern: re.Pattern) -> Iterator[tuple[str, str, str]]:
    """(prefix, pumped character, suffix) triples: a sample cut at each place, one character
    repeated there, then the rest of the sample, or a character that fails it."""
    seen = set()
    for sample in samples(pattern):
        pumps = set(PUMPED) | set(sample)
        for cut in range(len(sample) + 1):
            for pump in pumps:
                for suffix in (sample[cut:] + "!", "!", "\x00"):
                    triple = (sample[:cut], pump, suffix)
                    if triple not in seen:
                        seen.add(triple)
                        yield triple


def cost(pattern: re.Pattern, text: str, repeats: int = 1) -> float:
    """The least of ``repeats`` timings of the pattern's searches over ``text`` (a search fails or
    succeeds at every place it may start, so it is the dearest use of a pattern)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        pattern.search(text)
        pattern.fullmatch(text)
        for _ in pattern.finditer(text):
            pass
        best = min(best, time.perf_counter() - start)
    return best


def worst(pattern: re.Pattern) -> tuple[str, str, str]:
    """The attack on which ``pattern`` spends the most time at a short length."""
    return max(attacks(pattern), key=lambda a: cost(pattern, a[0] + a[1] * SCAN + a[2]))


def growth(pattern: re.Pattern, attack: tuple[str, str, str]) -> tuple[float, float]:
    """The times at ``LENGTH`` and ``GROWTH`` x ``LENGTH`` pumped characters (least of repeats;
    infinite at the longer length when the shorter is ``HOPELESS`` already)."""
    prefix, pump, suffix = attack
    short = cost(pattern, prefix + pump * LENGTH + suffix, repeats=3)
    if short > HOPELESS:
        return short, float("inf")
    long = cost(pattern, prefix + pump * (LENGTH * GROWTH) + suffix, repeats=3)
    return short, long


def superlinear(pattern: re.Pattern) -> str | None:
    """What shows ``pattern`` growing faster than its input, or None."""
    attack = worst(pattern)
    short, long = growth(pattern, attack)
    if long < FLOOR or long < SUPERLINEAR * short:
        return None
    short, long = growth(pattern, attack)  # once more, so a busy moment does not fail it
    if long < FLOOR or long < SUPERLINEAR * short:
        return None
    prefix, pump, suffix = attack
    return f"{prefix!r} + {pump!r} x n + {suffix!r}: {short * 1000:.1f} ms at n={LENGTH}, {long * 1000:.1f} ms at {GROWTH}x"


FOUND = sorted(patterns(), key=lambda named: named[0])


def test_the_patterns_are_found():
    names = {name for name, _ in FOUND}
    # a pattern is named once, by the first module found holding it (program's PERIOD, imported by cells)
    assert {"pagesight.answer.extractive.program.PERIOD", "pagesight.answer.extractive.cells.PERIOD"} & names
    assert "pagesight.where._TOKEN" in names
    assert len(FOUND) > 40  # the request path's patterns: 45 when the reader read no wording


@pytest.mark.timeout(240)
def test_every_pattern_runs_in_linear_time():
    slow = {name: shown for name, pattern in FOUND if (shown := superlinear(pattern))}
    assert not slow, "\n".join(f"{name}: {shown}" for name, shown in slow.items())
