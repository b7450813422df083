"""The chart README's values table, made from values.yaml's ``# --`` comments (helm-docs' mark):
such a comment, with the ``#`` lines right after it, describes the key below it. Keys inside
list items are the list's, never rows of their own.

``python -m sstools.devstack.chartdocs`` rewrites the table between the README's markers;
``--check`` fails when it is stale (tests/test_helm.py checks the same)."""

import argparse
import json
import re
from pathlib import Path
from typing import Any

import yaml

from sstools.devstack.manifests import CHART

BEGIN = "<!-- values table: python -m sstools.devstack.chartdocs -->"
END = "<!-- end of values table -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_./-]+):(?: |$)")
_LIST_ITEM = re.compile(r"^(?P<indent> *)- ")
_COMMENT = re.compile(r"^ *#(?P<text>.*)$")


def documented_keys(values_text: str) -> list[tuple[str, str]]:
    """Each documented key's dotted path and its description, in the file's order."""
    rows: list[tuple[str, str]] = []
    stack: list[tuple[int, str | None]] = []  # (indent, key); None: inside a list item
    description: list[str] | None = None
    for line in values_text.splitlines():
        comment = _COMMENT.match(line)
        if comment:
            text = comment["text"].strip()
            if text.startswith("-- "):
                description = [text.removeprefix("-- ")]
            elif description is not None:
                description.append(text)
            continue
        item = _LIST_ITEM.match(line)
        key = _KEY.match(line)
        found = item or key
        if found:
            indent = len(found["indent"])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if item:
                stack.append((indent, None))
            elif key and all(name is not None for _, name in stack):
                stack.append((indent, key["key"]))
                if description is not None:
                    rows.append((".".join(str(name) for _, name in stack), " ".join(description)))
        description = None  # a description belongs to the very next key only
    return rows


def _type(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "object"}.get(
        type(value), "null"
    )


def _cell(text: str) -> str:
    """Text safe in a table cell: pipes escaped, and angle brackets outside `code` (<release> is
    no HTML tag)."""
    parts = text.replace("|", "\\|").split("`")
    return "`".join(
        part if index % 2 else part.replace("<", "&lt;").replace(">", "&gt;")
        for index, part in enumerate(parts)
    )


def values_table(values_path: Path) -> str:
    """The Markdown table of every documented key: key, type, default, description."""
    text = values_path.read_text()
    values = yaml.safe_load(text)
    lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for path, description in documented_keys(text):
        value = values
        for part in path.split("."):
            value = value[part]
        default = json.dumps(value, separators=(", ", ": "))
        lines.append(f"| `{path}` | {_type(value)} | {_cell(f'`{default}`')} | {_cell(description)} |")
    return "\n".join(lines)


def readme(chart: Path = CHART) -> str:
    """The chart README as it should be: its own text, the table between the markers made anew."""
    current = (chart / "README.md").read_text()
    before, found, rest = current.partition(BEGIN)
    _, end, after = rest.partition(END)
    if not (found and end):
        raise ValueError(f"{chart / 'README.md'} lacks the markers {BEGIN} ... {END}")
    return f"{before}{BEGIN}\n{values_table(chart / 'values.yaml')}\n{END}{after}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if the README's table is stale")
    args = parser.parse_args()
    path = CHART / "README.md"
    fresh = readme()
    if path.read_text() == fresh:
        return
    if args.check:
        raise SystemExit(f"{path}: the values table is stale (python -m sstools.devstack.chartdocs)")
    path.write_text(fresh)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
