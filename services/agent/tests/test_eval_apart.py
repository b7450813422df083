"""The eval sets stay apart from the code they measure: no run of words from any request of the
agent's sets or the router's held-out set appears in production code, comments included — a
planner that quotes its eval is fitted to it, not reading requests. The catalogue's descriptions
and example prompts are exempt: they are what people (and the sets' writers) are shown."""

import json
import re
from pathlib import Path

from sstools.agent.eval import DOMAIN_HOLDOUT, HOLDOUT, REQUESTS
from sstools.common.catalogue import EXAMPLE_PROMPTS, TOOLS
from sstools.router.labelled import HOLDOUT as ROUTER_HOLDOUT

ROOT = Path(__file__).resolve().parents[3]
# Five words in a row: shorter runs are ordinary phrases ("from dev to prod").
RUN = 5
_PRODUCT_TEXTS = [
    *(text for spec in TOOLS for text in (spec.description_en, spec.description_ru)),
    *(text for pair in EXAMPLE_PROMPTS.values() for text in pair),
]


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def _runs(text: str) -> set[str]:
    words = _words(text)
    return {" ".join(words[start : start + RUN]) for start in range(len(words) - RUN + 1)}


def _requests() -> list[str]:
    texts = []
    for path in (REQUESTS, HOLDOUT, DOMAIN_HOLDOUT, ROUTER_HOLDOUT):
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            texts.append(str(item.get("text") or item.get("q")))
    return texts


def _code() -> dict[Path, str]:
    files = sorted(ROOT.glob("services/*/src/**/*.py")) + sorted(ROOT.glob("libs/*/src/**/*.py"))
    code = {}
    for path in files:
        words = " ".join(_words(path.read_text(encoding="utf-8")))
        for shown in _PRODUCT_TEXTS:
            words = words.replace(" ".join(_words(shown)), " ")
        code[path] = words
    return code


def test_the_sets_are_read_from_their_files() -> None:
    assert len(_requests()) > 300
    assert ROOT.joinpath("services/agent/src/sstools/agent/planner/steps.py") in _code()


def test_no_run_of_an_eval_request_appears_in_the_code() -> None:
    code = _code()
    quoted = sorted(
        f"{path.relative_to(ROOT)}: «{run}»"
        for text in _requests()
        for run in _runs(text)
        for path, words in code.items()
        if f" {run} " in f" {words} "
    )
    assert quoted == []
