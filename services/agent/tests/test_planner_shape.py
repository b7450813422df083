"""The offline planner stays general: it and the language layer name no tool but through the
catalogue's declarations, and hold no word of the demo data — the tables, columns, values and
titles ``make run`` seeds — that is not the tools' own vocabulary. What it knows of a Superset
it learns from that Superset."""

import ast
import re
from pathlib import Path

import sqlglot
from sqlglot import exp

import sstools.common.language
import sstools.devstack.demo
from sstools.agent import fastpath, planner
from sstools.common.catalogue import TOOLS

PLANNER = Path(planner.__file__).parent
LANGUAGE = Path(sstools.common.language.__file__)
_WORD = re.compile(r"[^\W\d_]+")


def _understanding() -> list[Path]:
    return [*sorted(PLANNER.glob("*.py")), LANGUAGE]


def _literals(path: Path) -> list[str]:
    """The module's string constants but its docstrings (what it says of itself is no data)."""
    tree = ast.parse(path.read_text())
    documented = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documented
    ]


def test_no_tool_is_named_but_in_its_declaration() -> None:
    names = {spec.name for spec in TOOLS}
    for path in [*_understanding(), Path(fastpath.__file__)]:
        named = names & {word for literal in _literals(path) for word in re.findall(r"\w+", literal)}
        assert not named, (path.name, named)


def _demo_words() -> set[str]:
    """Every table, column, value and title the demo seeds, read from the demo's own source: the
    identifiers and strings of its SQL, and the strings of its data (tuples, lists, titles)."""
    tree = ast.parse(Path(sstools.devstack.demo.__file__).read_text())
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            data = [
                item.value
                for item in node.elts
                if isinstance(item, ast.Constant) and isinstance(item.value, str)
            ]
            words |= {word for value in data if len(value) <= 40 for word in _WORD.findall(value)}
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.search(r"CREATE TABLE|INSERT INTO", node.value)
        ):
            for statement in sqlglot.parse(node.value, read="postgres"):
                for found in statement.find_all(exp.Identifier, exp.Literal) if statement else ():
                    words |= set(_WORD.findall(str(found.this)))
    return {word.lower() for word in words if len(word) > 2}


def _tools_vocabulary() -> set[str]:
    """The words the tools' declarations themselves use: their descriptions, keywords,
    examples, answers and arguments (a demo column named ``status`` is also a task's status)."""
    texts: list[str] = []
    for spec in TOOLS:
        texts += [
            spec.description_en,
            spec.description_ru,
            *spec.keywords,
            *spec.example,
            *spec.args.model_fields,
        ]
        texts += [spec.answer.ru, spec.answer.en, *spec.answer.columns] if spec.answer else []
    return {word.lower() for text in texts for word in _WORD.findall(text)}


def test_no_word_of_the_demo_data_is_in_the_planner_or_the_language_layer() -> None:
    demo = _demo_words() - _tools_vocabulary()
    assert {"widget", "invoices", "monthly", "revenue", "region", "overdue"} <= demo  # the demo is read
    for path in _understanding():
        found = demo & {word.lower() for literal in _literals(path) for word in _WORD.findall(literal)}
        assert not found, (path.name, sorted(found))
