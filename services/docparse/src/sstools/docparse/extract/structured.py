"""CSV and JSON: text formats, so the encoding is found first (UTF-8, UTF-8 with BOM, cp1251)."""

import csv
import io
import json

from sstools.docparse.extract.tables import bounded_table
from sstools.docparse.model import ErrorCode, Extraction, Kind, Limits, ParseFailure

# Russian spreadsheets are often exported as cp1251; UTF-8 is tried first because cp1251
# accepts almost any byte sequence and would "succeed" on UTF-8 text too.
_ENCODINGS = ("utf-8-sig", "cp1251")


def decode(content: bytes) -> tuple[str, str]:
    for encoding in _ENCODINGS:
        try:
            return content.decode(encoding), encoding
        except UnicodeDecodeError:
            continue
    raise ParseFailure(ErrorCode.MALFORMED, "the text is neither UTF-8 nor cp1251")


def extract_csv(content: bytes, limits: Limits) -> Extraction:
    text, encoding = decode(content)
    sample = text[:65536]
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel  # one column, or a delimiter the sniffer cannot tell: read as plain CSV
    result = Extraction(Kind.CSV, parts=1)
    try:
        rows = csv.reader(io.StringIO(text), dialect)
        result.tables.append(bounded_table("csv", rows, limits))
    except csv.Error as error:
        raise ParseFailure(ErrorCode.MALFORMED, f"the CSV cannot be read: {error}") from None
    result.truncated = result.tables[0].truncated
    if encoding == "cp1251":
        result.warnings.append("decoded as cp1251")
    result.text = result.cut_text(text, limits)
    return result


def extract_json(content: bytes, limits: Limits) -> Extraction:
    text, _ = decode(content)
    depth = _nesting_depth(text)
    if depth > limits.max_json_depth:
        raise ParseFailure(
            ErrorCode.MALFORMED, f"the JSON nests {depth} levels deep; the limit is {limits.max_json_depth}"
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseFailure(ErrorCode.MALFORMED, f"the JSON is not valid: {error}") from None
    result = Extraction(Kind.JSON, parts=1)
    result.text = result.cut_text(json.dumps(value, ensure_ascii=False, indent=2), limits)
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        columns = list(dict.fromkeys(key for item in value for key in item))
        rows = [columns, *([item.get(column) for column in columns] for item in value)]
        result.tables.append(bounded_table("json", rows, limits))
    return result


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting outside strings, without building anything (json.loads on a
    hostile 100 000-level document would exhaust the stack first)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
