import json
import logging
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.logs import JsonFormatter


def _format(record: logging.LogRecord) -> dict[str, object]:
    return json.loads(JsonFormatter("example").format(record))  # type: ignore[no-any-return]


def _record(message: str, **extra: object) -> logging.LogRecord:
    record = logging.getLogger("example.module").makeRecord(
        "example.module", logging.INFO, __file__, 1, message, (), None, extra=extra
    )
    return record


def test_line_carries_trace_and_span_of_the_active_span(tracer_provider: TracerProvider) -> None:
    with tracer_provider.get_tracer("test").start_as_current_span("work") as span:
        entry = _format(_record("inside"))
        context = span.get_span_context()
    assert entry["trace_id"] == f"{context.trace_id:032x}"
    assert entry["span_id"] == f"{context.span_id:016x}"
    assert entry["service"] == "example"
    assert entry["level"] == "info"
    assert entry["message"] == "inside"


def test_line_outside_a_span_has_no_trace_ids() -> None:
    entry = _format(_record("outside"))
    assert "trace_id" not in entry
    assert "span_id" not in entry


def test_extra_fields_and_non_ascii_text_are_kept() -> None:
    entry = _format(_record("дашборд готов", dashboard_id=42, env="prod"))
    assert entry["message"] == "дашборд готов"
    assert entry["dashboard_id"] == 42
    assert entry["env"] == "prod"


def test_exception_is_one_field_of_the_same_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    line = JsonFormatter("example").format(record)
    assert "\n" not in line
    assert "ValueError: boom" in json.loads(line)["exception"]


@pytest.mark.parametrize("level", ["debug", "WARNING"])
def test_configure_logging_writes_json_to_stdout(level: str, capsys: pytest.CaptureFixture[str]) -> None:
    from sstools.common.logs import configure_logging

    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        configure_logging("example", level)
        logging.getLogger("some.library").warning("visible", extra={"attempt": 2})
        logging.getLogger("some.library").debug("maybe")
    finally:
        root.handlers[:], root.level = saved_handlers, saved_level
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == {**lines[0], "message": "visible", "attempt": 2, "logger": "some.library"}
    assert len(lines) == (2 if level == "debug" else 1)
