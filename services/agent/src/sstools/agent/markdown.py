"""Values from outside — names, tags, slugs, error texts, result cells, anything Superset or a
database returned — put into the Markdown of an answer read as the literal text they are.

CommonMark lets a backslash escape every ASCII punctuation character, and an escaped character
is never syntax: so no link, image, autolink, entity, emphasis, code span, table cell border or
bare address the page would linkify survives in a value. Whitespace is folded to single spaces
(a value never starts a block: a heading, a list, a quote, a fence), control characters and the
bidirectional overrides that make text read differently from what it is are dropped.

Links the agent makes itself (:func:`link`) keep their address when it is http(s), with the
characters that could end it encoded, and the name inside escaped.
"""

import json
import re
from urllib.parse import quote, urlsplit

_PUNCTUATION = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])""")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# C0/C1 controls and the bidirectional marks, embeddings, overrides and isolates
_INVISIBLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# what an address keeps as it is: the URL's own delimiters and percent-escapes, never a
# bracket, a parenthesis, a space, a pipe or a quote, which would end the link or the table cell
_URL_SAFE = ":/?#@!$&'*+,;=%-._~"


class Markdown(str):
    """Text that is Markdown already (escaped values, a link the agent made): not escaped again."""


def markdown_text(value: object, limit: int | None = None) -> Markdown:
    """``value`` as Markdown that shows exactly its characters (a non-string as its JSON), on one
    line, cut to ``limit`` characters (with "…") when given."""
    if isinstance(value, Markdown):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(_INVISIBLE.sub(" ", _ANSI.sub("", text)).split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"  # cut before escaping: an escape is never cut in two
    return Markdown(_PUNCTUATION.sub(r"\\\1", text))


def link(title: object, url: object) -> Markdown:
    """A link the agent makes to an object it names; the title alone when the address is not
    http(s)."""
    shown = markdown_text(title)
    address = url if isinstance(url, str) else ""
    if urlsplit(address).scheme.lower() not in ("http", "https"):
        return shown
    return Markdown(f"[{shown}]({quote(address, safe=_URL_SAFE)})")
