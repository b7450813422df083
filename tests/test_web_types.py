"""The page's generated TypeScript contracts match the Python models they come from, and a model
changed without regenerating them is caught."""

from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field, TypeAdapter, create_model

from sstools.agent.events import STREAM_EVENTS, ErrorEvent, StateEvent
from sstools.devstack import webtypes
from sstools.devstack.webtypes import CONTRACTS_TS, UnsupportedSchema, contracts_ts, stale


def test_the_committed_contracts_are_current() -> None:
    assert not stale(), "run `make web-types` and commit web/src/lib/generated/contracts.ts"


def test_an_event_field_added_without_regeneration_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = tmp_path / "contracts.ts"
    committed.write_text(contracts_ts())
    assert not stale(committed)
    grown = create_model("ErrorEvent", __base__=ErrorEvent, request_id=(str | None, None))
    events = TypeAdapter(Annotated[grown | StateEvent, Field(discriminator="type")])
    monkeypatch.setattr(webtypes, "STREAM_EVENTS", events)
    assert stale(committed)
    assert "  request_id?: string | null;" in contracts_ts()


def test_every_event_type_is_in_the_page_union() -> None:
    text = CONTRACTS_TS.read_text()
    union = next(line for line in text.splitlines() if line.startswith("export type StreamEvent ="))
    declared = STREAM_EVENTS.json_schema()["discriminator"]["mapping"]
    assert len(declared) == 14
    for kind, ref in declared.items():
        name = ref.rsplit("/", 1)[-1]
        assert f" {name}" in union
        assert f'  type: "{kind}";' in text


def test_a_shape_it_cannot_translate_is_refused_not_guessed() -> None:
    with pytest.raises(UnsupportedSchema):
        webtypes._type({"type": "object", "properties": {"x": {"type": "string"}}})
