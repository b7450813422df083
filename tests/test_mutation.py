"""`make mutation`'s table and arithmetic: every safety-core module of the issue is there with
tests that exist, a score counts what no test reaches as surviving, and the committed record
holds a score for each module."""

import json

from sstools.devstack.mutation import RECORD, SAFETY_CORE, score
from sstools.devstack.paths import REPO_ROOT


def test_the_safety_core_is_mutated_against_tests_that_exist() -> None:
    assert set(SAFETY_CORE) == {
        "policy",
        "sql",
        "sql_columns",
        "tokens",
        "confirmation",
        "gate",
        "limits",
        "admission",
        "fastpath",
        "guard",
        "idempotency",
    }
    for name, target in SAFETY_CORE.items():
        assert target.tests, name
        for file in target.files():
            assert (REPO_ROOT / file).is_file(), f"{name}: {file}"


def test_a_score_is_the_share_killed_and_an_untested_mutant_survives() -> None:
    exit_codes: dict[str, int | None] = {
        "m_1": 1,  # a test failed
        "m_2": 36,  # timed out: killed
        "m_3": 0,  # every test passed
        "m_4": 33,  # no test reaches it
        "m_5": 34,  # skipped: not counted
        "m_6": 3,  # pytest's internal error is a failure too
    }
    assert score(exit_codes) == {
        "mutants": 6,
        "killed": 3,
        "timed_out": 1,
        "survived": 2,
        "score": 60.0,
        "survivors": ["m_3", "m_4"],
    }


def test_the_record_scores_every_module_of_the_safety_core() -> None:
    record = json.loads(RECORD.read_text())
    assert set(record) == set(SAFETY_CORE)
    for name, kept in record.items():
        assert kept["score"] >= 90, f"{name}: {kept}"
        assert len(kept["survivors"]) == kept["mutants"] - kept["killed"], name
