"""SQL written into a message: where it starts and what it is, told apart from a sentence that
only sounds like it ("empty the <name> table" is a request, "DELETE FROM <name>"
a statement)."""

import re

_FENCED = re.compile(r"```(?:sql)?\s*\n?(.*?)```", re.I | re.S)
_STATEMENT = re.compile(
    r"\b(?:"
    r"select\s+(?:\*|distinct\b|top\s+\d|\d|(?:count|sum|avg|min|max)\s*\(|[\w.\"]+\s*(?:,|\bfrom\b|\bas\b))"
    r"|with\s+(?:recursive\s+)?(?:\w+|\"[^\"]+\")\s*(?:\([\w\s,\"]*\)\s*)?"
    r"as\s*(?:(?:not\s+)?materialized\s*)?\(\s*(?:select|with|values|insert|update|delete)\b"
    r"|insert\s+into\s+[\w.\"]"
    r"|update\s+[\w.\"]+\s+set\b"
    r"|delete\s+from\s+[\w.\"]+"
    r"|(?:create|drop|alter)\s+(?:table|view|index|schema|database|materialized)\b"
    r"|truncate\s+table\b"
    r")",
    re.I,
)


def split_sql(text: str) -> tuple[str, str | None]:
    """The message's own words, and the SQL statement it carries (fenced, or from its first
    keyword to the end), if any."""
    if fenced := _FENCED.search(text):
        return text[: fenced.start()] + " " + text[fenced.end() :], fenced.group(1).strip() or None
    if found := _STATEMENT.search(text):
        return text[: found.start()], text[found.start() :].strip().rstrip(";").strip() or None
    return text, None
