"""What a person reads when something did not happen: every code the agent can say has words in
both languages, and the events carry them in the person's language, the technical words kept."""

import ast
import re
from pathlib import Path

import pytest

from sstools.agent import stream
from sstools.agent.answers import failure
from sstools.agent.stream import Event, error, in_language
from sstools.agent.wording import explained
from sstools.docparse.model import ErrorCode

_CYRILLIC = re.compile(r"[а-яё]", re.I)
_RAISERS = {"Refusal", "InputRejected", "Refused", "error"}


def _codes_raised() -> set[str]:
    """Every literal code the agent's own code refuses or fails with."""
    codes = set()
    for path in Path(stream.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in _RAISERS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                codes.add(node.args[0].value)
    return codes


def test_every_code_the_agent_raises_has_words_in_both_languages() -> None:
    codes = _codes_raised()
    assert {"BUSY", "RATE_LIMITED", "CONFIRMATION_PENDING", "LLM_UNAVAILABLE", "UNKNOWN_TOOL"} <= codes
    codes |= {f"UPLOAD_{reason.value}" for reason in ErrorCode} | {"UPLOAD_UNAVAILABLE"}
    missing = sorted(code for code in codes if explained(code, "ru") is None or explained(code, "en") is None)
    assert missing == []
    for code in codes:
        assert _CYRILLIC.search(explained(code, "ru") or ""), code
        assert not _CYRILLIC.search(explained(code, "en") or "Ё"), code


def test_a_refusal_reads_in_the_persons_language_and_keeps_the_technical_words() -> None:
    refused = error("INVALID_ENVIRONMENT", "no environment 'staging' is configured", env_id="staging")
    russian = in_language(refused, "ru")
    assert russian.content == russian.metadata["message"]
    assert russian.content.startswith("Окружения «staging» нет")
    assert russian.metadata["detail"] == "no environment 'staging' is configured"
    assert russian.metadata["code"] == "INVALID_ENVIRONMENT"
    assert in_language(refused, "en").content.startswith("There is no environment “staging”")


def test_a_wait_names_its_seconds() -> None:
    limited = error("RATE_LIMITED", "too many messages: try again in 42 s", retry_after=42)
    assert in_language(limited, "ru").content == "Слишком много сообщений подряд. Повторите через 42 с."


def test_a_spent_budget_of_heavy_requests_names_its_seconds() -> None:
    detail = {"code": "read_budget_exceeded", "message": "at most 20 a minute", "retry_after": 17}
    assert failure("get_health_summary", detail, "en") == (
        "Too many heavy requests this minute (health checks, SQL, database exploration). Try again in 17 s."
    )
    assert failure("superset_execute_sql", detail, "ru").endswith("Повторите через 17 с.")


def test_an_unknown_code_keeps_its_own_words() -> None:
    odd = error("SOMETHING_NEW", "a new kind of failure")
    assert in_language(odd, "ru") == odd


def test_a_fact_the_event_lacks_reads_as_a_dash_not_an_error() -> None:
    assert in_language(error("INVALID_ENVIRONMENT", "bad"), "en").content.startswith(
        "There is no environment “—”"
    )


@pytest.mark.parametrize(
    ("retryable", "russian"),
    [(True, "Спросить снова безопасно"), (False, "выполнено ли действие, неизвестно")],
)
def test_a_time_limit_says_whether_asking_again_is_safe(retryable: bool, russian: str) -> None:
    timeout = Event(
        "no answer in 30 s",
        {
            "type": "tool_timeout",
            "tool": "deploy_dashboard",
            "retryable": retryable,
            "message": "no answer in 30 s",
        },
    )
    said = in_language(timeout, "ru")
    assert russian in said.content
    assert said.metadata["detail"] == "no answer in 30 s"


def test_guards_speak_one_language() -> None:
    denied = Event(
        "",
        {
            "type": "permission_denied",
            "tool_name": "deploy_dashboard",
            "required_role": "admin",
            "user_role": "viewer",
        },
    )
    assert in_language(denied, "en").content == (
        "Permission denied: deploy_dashboard needs the admin role (you are viewer)."
    )
    assert not _CYRILLIC.search(in_language(denied, "en").content)
    retry = Event("", {"type": "tool_retry", "tool": "search_dashboards", "attempt": 2, "max_attempts": 3})
    assert in_language(retry, "ru").content == "search_dashboards: попытка 2/3"


def test_a_tool_failure_reads_as_its_cause() -> None:
    failed = Event(
        '{"error": {"code": "permission_denied", "message": "\\u001b[31mForbidden\\u001b[0m"}}',
        {
            "type": "tool_error",
            "tool": "deploy_dashboard",
            "run_id": "r1",
            "error": {"code": "permission_denied", "message": "Forbidden"},
        },
    )
    said = in_language(failed, "ru")
    assert said.content.startswith("Недостаточно прав")
    assert said.metadata == failed.metadata  # the card keeps ops' own words
    unknown = Event("{}", {**failed.metadata, "error": {"code": "odd", "message": "it broke"}})
    assert in_language(unknown, "en").content == "it broke"
