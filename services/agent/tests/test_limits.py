"""What the chat accepts at its edge (limits.py): a long message cut to the limit at a sentence
end, the page's ``ui_context`` validated (size in bytes, each field, the typed error codes) and
the turn's environment id. Every expected value is written out by hand from the limits the data
model names: 100 000 characters a message, 4 096 bytes a ui_context."""

import json
import re

import pytest

from sstools.agent.limits import InputRejected, parse_env_id, parse_ui_context, truncate_message

MAX_CHARS = 100_000
MARK = "[...truncated]"
# Where a cut without a sentence end lands: the limit less the mark and the space before it.
HARD_CUT = MAX_CHARS - len(MARK) - 1  # 99 985
# The first index a sentence end may start at to be used: 2 000 before the hard cut.
WINDOW_START = HARD_CUT - 2_000  # 97 985
MAX_BYTES = 4096
NO_CONTEXT = {
    "objectType": None,
    "objectId": None,
    "objectName": None,
    "envId": None,
    "route": "",
    "contextVersion": 1,
    "lang": None,
}


def _message(at: int, piece: str, length: int = MAX_CHARS + 1) -> str:
    """``length`` characters of ``x`` (no sentence end anywhere) with ``piece`` at index ``at``."""
    return "x" * at + piece + "x" * (length - at - len(piece))


def _cut(kept: str) -> tuple[str, bool]:
    """What a truncated message is: the kept text, a space, the mark."""
    return f"{kept} {MARK}", True


# ---- truncate_message --------------------------------------------------------------------------


def test_a_message_of_exactly_the_limit_is_kept_whole() -> None:
    text = _message(50_000, ". ", MAX_CHARS)
    assert truncate_message(text) == (text, False)


def test_a_message_one_character_over_the_limit_is_cut_hard_without_a_sentence_end() -> None:
    result = truncate_message("y" * (MAX_CHARS + 1))
    assert result == _cut("y" * HARD_CUT)
    assert len(result[0]) == MAX_CHARS


@pytest.mark.parametrize(
    ("piece", "kept"),
    [
        (". ", "."),
        ("! ", "!"),
        ("? ", "?"),
        ("… ", "…"),
        ('." ', '."'),
        (".' ", ".'"),
        (".» ", ".»"),
        (".” ", ".”"),
        (".) ", ".)"),
        (".] ", ".]"),
        ('!") ', '!")'),  # several closers after one end
        (".\t", "."),  # any whitespace after the end
        (".\n", "."),
        ("\n", ""),  # a line break ends a sentence by itself
    ],
)
def test_the_cut_lands_after_a_sentence_end_near_the_limit(piece: str, kept: str) -> None:
    result = truncate_message(_message(99_000, piece))
    assert result == _cut("x" * 99_000 + kept)


def test_punctuation_inside_a_word_or_number_is_no_sentence_end() -> None:
    # "3.14" and "e.g" have no whitespace after the dot; a closer alone ends nothing either
    text = _message(99_000, "3.14 e.g.x ) » ” ")
    assert truncate_message(text) == _cut(text[:HARD_CUT])


def test_the_last_sentence_end_in_the_window_is_the_one_used() -> None:
    text = "x" * 98_000 + ". " + "x" * 998 + "! " + "x" * (MAX_CHARS + 1 - 98_000 - 2 - 998 - 2)
    assert truncate_message(text) == _cut("x" * 98_000 + ". " + "x" * 998 + "!")


def test_a_sentence_end_at_the_very_start_of_the_window_is_used() -> None:
    assert truncate_message(_message(WINDOW_START, ". ")) == _cut("x" * WINDOW_START + ".")


def test_a_sentence_end_just_before_the_window_is_not_used() -> None:
    text = _message(WINDOW_START - 1, ". ")
    assert truncate_message(text) == _cut(text[:HARD_CUT])


def test_a_sentence_end_whose_whitespace_is_the_last_kept_character_is_used() -> None:
    # the "." at 99 983 and its space at 99 984: the whole end lies before the hard cut
    assert truncate_message(_message(HARD_CUT - 2, ". ")) == _cut("x" * (HARD_CUT - 2) + ".")


def test_a_sentence_end_whose_whitespace_would_not_be_kept_is_not_used() -> None:
    # the "." at 99 984 is kept but its space at 99 985 is past the hard cut
    text = _message(HARD_CUT - 1, ". ")
    assert truncate_message(text) == _cut("x" * (HARD_CUT - 1) + ".")


def test_a_sentence_end_beyond_the_limit_is_not_used() -> None:
    text = _message(99_990, ". ")
    assert truncate_message(text) == _cut(text[:HARD_CUT])


def test_whitespace_before_the_cut_is_not_kept() -> None:
    text = "x" * (HARD_CUT - 3) + "   " + "x" * 500
    assert truncate_message(text) == _cut("x" * (HARD_CUT - 3))


def test_a_message_of_many_sentences_is_cut_after_the_last_whole_one_that_fits() -> None:
    # seven characters a sentence: the 14 283rd ends (its space included) at 99 981, the next
    # one's space would be at 99 987, past the hard cut
    result = truncate_message("Слово. " * 20_000)
    assert result == _cut("Слово. " * 14_282 + "Слово.")
    assert len(result[0]) == 99_995


# ---- parse_ui_context --------------------------------------------------------------------------


def _rejected_ui_context(raw: str) -> str:
    return _refusal_of_ui_context(raw).code


def _refusal_of_ui_context(raw: str) -> InputRejected:
    with pytest.raises(InputRejected) as rejected:
        parse_ui_context(raw)
    return rejected.value


def _named_first(refusal: InputRejected) -> str:
    """The input a refusal's message opens with: the wire name the person must correct."""
    return str(refusal).split(" ")[0]


def _padded(size: int) -> str:
    """A ui_context of exactly ``size`` bytes: an ignored field of two-byte Cyrillic letters
    (so it is far fewer characters than bytes), one ASCII letter making up an odd size."""
    head, tail = '{"pad": "', '"}'
    room = size - len(head) - len(tail)
    raw = head + "я" * (room // 2) + "x" * (room % 2) + tail
    assert len(raw.encode()) == size
    assert len(raw) < MAX_BYTES  # counted in characters, even one byte over would pass
    return raw


@pytest.mark.parametrize("raw", ["", "   ", "\n\t", "null", " null "])
def test_no_ui_context_is_none(raw: str) -> None:
    assert parse_ui_context(raw) is None


def test_a_full_ui_context_is_read_field_by_field() -> None:
    raw = json.dumps(
        {
            "objectType": "dashboard",
            "objectId": "123456789012345678",
            "objectName": "Продажи",
            "envId": "prod-eu_2",
            "route": "/superset/dashboard/12/",
            "contextVersion": 1,
            "lang": "en",
        }
    )
    parsed = parse_ui_context(raw)
    assert parsed is not None
    assert parsed.model_dump() == {
        "objectType": "dashboard",
        "objectId": "123456789012345678",
        "objectName": "Продажи",
        "envId": "prod-eu_2",
        "route": "/superset/dashboard/12/",
        "contextVersion": 1,
        "lang": "en",
    }


def test_unknown_fields_are_ignored_and_missing_ones_take_their_defaults() -> None:
    parsed = parse_ui_context('{"theme": "dark", "objectType": "dataset"}')
    assert parsed is not None
    assert parsed.model_dump() == NO_CONTEXT | {"objectType": "dataset"}


def test_a_ui_context_of_exactly_the_byte_limit_is_accepted() -> None:
    parsed = parse_ui_context(_padded(MAX_BYTES))
    assert parsed is not None
    assert parsed.model_dump() == NO_CONTEXT


def test_a_ui_context_one_byte_over_is_refused_counting_bytes_not_characters() -> None:
    assert _rejected_ui_context(_padded(MAX_BYTES + 1)) == "PAYLOAD_TOO_LARGE"


def test_a_refusal_for_size_tells_the_size_sent_and_the_limit() -> None:
    refusal = _refusal_of_ui_context(_padded(MAX_BYTES + 1))
    assert (_named_first(refusal), re.findall(r"\d+", str(refusal))) == ("ui_context", ["4097", "4096"])


def test_the_size_is_checked_before_the_json() -> None:
    assert _rejected_ui_context("{" * (MAX_BYTES + 1)) == "PAYLOAD_TOO_LARGE"


@pytest.mark.parametrize("raw", ["{", "dashboard", "{'objectType': 'dataset'}", '{"route": "/"} x'])
def test_a_ui_context_that_is_not_json_is_refused(raw: str) -> None:
    assert _rejected_ui_context(raw) == "INVALID_UI_CONTEXT"


def test_a_refusal_of_text_that_is_not_json_names_the_ui_context() -> None:
    assert _named_first(_refusal_of_ui_context("{")) == "ui_context"


@pytest.mark.parametrize("raw", ["[]", "1", '"dashboard"', "true"])
def test_json_that_is_not_an_object_is_refused(raw: str) -> None:
    assert _rejected_ui_context(raw) == "INVALID_UI_CONTEXT"


@pytest.mark.parametrize(
    "field",
    [
        {"objectType": "report"},
        {"objectType": "Dashboard"},
        {"objectId": "12a"},
        {"objectId": ""},
        {"objectId": "1234567890123456789"},  # 19 digits
        {"objectId": 12},  # a string of digits, not a number
        {"objectName": "н" * 257},
        {"route": "/" * 513},
        {"route": None},
        {"contextVersion": 2},
        {"contextVersion": 0},
        {"contextVersion": "one"},
    ],
)
def test_each_field_out_of_its_bounds_is_an_invalid_ui_context(field: dict[str, object]) -> None:
    assert _rejected_ui_context(json.dumps(field)) == "INVALID_UI_CONTEXT"


def _faulty_fields(refusal: InputRejected) -> list[str]:
    """The fields an INVALID_UI_CONTEXT names, in its ``ui_context: field: problem; ...`` list."""
    listed = str(refusal).removeprefix("ui_context: ").split("; ")
    return [problem.split(": ")[0] for problem in listed]


def test_an_invalid_ui_context_names_every_field_at_fault() -> None:
    refusal = _refusal_of_ui_context(json.dumps({"objectType": "report", "objectId": "abc", "route": "/"}))
    assert (refusal.code, _faulty_fields(refusal)) == ("INVALID_UI_CONTEXT", ["objectType", "objectId"])


def test_an_invalid_ui_context_that_is_no_object_names_the_whole_of_it() -> None:
    refusal = _refusal_of_ui_context("[]")
    assert (refusal.code, _faulty_fields(refusal)) == ("INVALID_UI_CONTEXT", ["ui_context"])


@pytest.mark.parametrize(
    "field",
    [
        {"objectType": "migration"},
        {"objectType": "chart"},
        {"objectType": "sqllab"},
        {"objectId": "1"},
        {"objectName": "н" * 256},
        {"route": "/" * 512},
        {"envId": "e" * 63},
        {"contextVersion": 1},
    ],
)
def test_each_field_at_its_bound_is_accepted(field: dict[str, object]) -> None:
    parsed = parse_ui_context(json.dumps(field))
    assert parsed is not None
    assert parsed.model_dump() == NO_CONTEXT | field


@pytest.mark.parametrize("env_id", ["Prod", "prod/maintenance/end#", "-dev", "", "e" * 64, 7])
def test_a_ui_context_with_a_bad_env_id_is_an_invalid_environment(env_id: object) -> None:
    assert _rejected_ui_context(json.dumps({"envId": env_id})) == "INVALID_ENVIRONMENT"


def test_a_bad_env_id_is_named_even_beside_other_bad_fields() -> None:
    raw = json.dumps({"objectType": "report", "envId": "Prod", "contextVersion": 3})
    refusal = _refusal_of_ui_context(raw)
    # the environment is what the person must fix first, and the message says where it was
    assert (refusal.code, _named_first(refusal)) == ("INVALID_ENVIRONMENT", "ui_context.envId")


# ---- parse_env_id ------------------------------------------------------------------------------


def test_no_env_id_is_none() -> None:
    assert parse_env_id("") is None


@pytest.mark.parametrize("env_id", ["dev", "prod-eu_2", "0", "e" * 63])
def test_an_env_id_is_taken_as_it_is(env_id: str) -> None:
    assert parse_env_id(env_id) == env_id


def _env_id_refusal(env_id: str) -> InputRejected:
    with pytest.raises(InputRejected) as rejected:
        parse_env_id(env_id)
    return rejected.value


@pytest.mark.parametrize("env_id", ["Prod", " dev", "prod/x", "_dev", "e" * 64, "дев"])
def test_anything_else_is_an_invalid_environment(env_id: str) -> None:
    assert _env_id_refusal(env_id).code == "INVALID_ENVIRONMENT"


def test_a_refused_env_id_is_quoted_back_at_most_80_characters_of_it() -> None:
    # enough to recognise the mistake, never a whole payload echoed into the stream and logs
    refusal = _env_id_refusal("E" * 500)
    assert (_named_first(refusal), re.findall(r"'([^']*)'", str(refusal))) == ("env_id", ["E" * 80])
    assert refusal.facts == {"env_id": "E" * 80}  # what the person is told names, cut the same
