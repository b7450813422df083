"""The SC-006 study's keystroke-level model (bench/tasks.py): the operators it places on an
action log as web/study/person.ts writes it, the same for both sides of the study."""

import importlib.util
import math
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sstools.devstack.paths import REPO_ROOT


@pytest.fixture(scope="module")
def study() -> ModuleType:
    spec = importlib.util.spec_from_file_location("task_study", REPO_ROOT / "bench" / "tasks.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_chat_request_is_one_thought_its_typing_and_its_enter(study: ModuleType) -> None:
    log = [
        {"op": "click", "target": "bookmark"},
        {"op": "wait", "what": "the page", "ms": 300},
        {"op": "type", "target": "composer", "text": "кто видит дашборд X?"},
        {"op": "key", "key": "Enter"},
        {"op": "wait", "what": "the answer", "ms": 1700},
    ]
    found = study.estimate(log, wall_ms=2500)
    assert (found.clicks, found.keystrokes, found.homings) == (1, 21, 1)
    # the bookmark, the request, the answer read; Enter ends the string: no thought of its own
    assert found.mentals == 3
    assert found.waited_s == pytest.approx(2.0)
    assert found.waits == [("the page", 0.3), ("the answer", 1.7)]  # where the wall time went
    expected = 21 * 0.28 + 1.1 + 2 * 0.1 + 0.4 + 3 * 1.35
    assert found.operators_s == pytest.approx(expected)
    assert found.klm_s == pytest.approx(expected + 2.5)


def test_a_field_clicked_selected_and_typed_is_one_step_and_a_chord_is_two_keys(study: ModuleType) -> None:
    log = [
        {"op": "click", "target": "editor"},
        {"op": "key", "key": "Control+a"},
        {"op": "type", "target": "editor", "text": "SELECT 1"},
        {"op": "key", "key": "Control+Enter"},
        {"op": "wait", "what": "the rows", "ms": 500},
        {"op": "click", "target": "download"},
        {"op": "wait", "what": "the file", "ms": 100},
        {"op": "key", "key": "Escape"},
    ]
    found = study.estimate(log, wall_ms=0)
    assert (found.clicks, found.keystrokes, found.pointings, found.homings) == (2, 13, 2, 3)
    # the editor (Ctrl+A, the text and its Enter go on with it), the download, Escape after a
    # wait (a new step), the outcome
    assert found.mentals == 4


def test_a_pointed_row_action_is_one_step_and_a_file_is_a_double_click(study: ModuleType) -> None:
    log = [
        {"op": "hover", "target": "row"},
        {"op": "click", "target": "row's export"},
        {"op": "file", "target": "select file"},
    ]
    found = study.estimate(log, wall_ms=0)
    assert (found.clicks, found.pointings, found.keystrokes, found.homings) == (3, 3, 0, 0)
    # the row, the file, the outcome; not the export under the pointer
    assert found.mentals == 3
    assert math.isclose(found.operators_s, 3 * 1.1 + 6 * 0.1 + 3 * 1.35)


def test_a_list_read_by_scrolling_is_one_step_and_a_press_per_notch(study: ModuleType) -> None:
    log = [
        {"op": "scroll", "target": "roles", "px": 250},
        {"op": "scroll", "target": "roles", "px": -1000},
        {"op": "click", "target": "a role"},
        {"op": "scroll", "target": "roles", "px": 80},
    ]
    found = study.estimate(log, wall_ms=0)
    assert (found.wheel_notches, found.pointings, found.clicks) == (3 + 10 + 1, 3, 1)
    assert found.mentals == 4  # two runs over the list, the click, the outcome
    assert math.isclose(found.operators_s, 3 * 1.1 + (14 + 2) * 0.1 + 4 * 1.35)


def test_the_ratio_is_of_the_median_estimates_and_says_what_time_a_model_may_take(study: ModuleType) -> None:
    def by_hand(wall_ms: float) -> object:
        return study.estimate([{"op": "click", "target": "x"}], wall_ms)

    def in_chat(wall_ms: float) -> object:
        return study.estimate([{"op": "type", "target": "composer", "text": "hi"}], wall_ms)

    runs = [
        {"t": {"manual": by_hand(10_000), "chat": in_chat(1_000)}},
        {"t": {"manual": by_hand(20_000), "chat": in_chat(3_000)}},
    ]
    summary = study.medians(runs)["t"]
    one_click = 1.1 + 0.2 + 2 * 1.35  # and the outcome read
    one_request = 2 * 0.28 + 0.4 + 2 * 1.35
    assert summary["manual"]["klm_s"] == pytest.approx(one_click + 15)
    assert summary["chat"]["klm_s"] == pytest.approx(one_request + 2)
    assert summary["chat"]["requests"] == 1
    ratio = (one_request + 2) / (one_click + 15)
    assert summary["ratio_chat_over_manual"] == pytest.approx(ratio, abs=1e-3)
    assert summary["sc006_met"] is True
    spare = 0.7 * (one_click + 15) - (one_request + 2)
    assert summary["model_seconds_a_request_may_take"] == pytest.approx(spare, abs=0.05)


def test_an_export_the_job_saved_must_hold_what_it_says(study: ModuleType, tmp_path: Path) -> None:
    export = tmp_path / "export.zip"
    with zipfile.ZipFile(export, "w") as archive:
        archive.writestr("export/metadata.yaml", "version: 1.0.0\n")
        archive.writestr("export/dashboards/a.yaml", "dashboard_title: Sales Overview\n")

    def outcome(must_hold: list[str]) -> dict[str, Any]:
        found = {"bundle_zip": str(export), "bundle_must_hold": must_hold}
        return {"task": "backup", "way": "manual", "found": found}

    study.check_bundle(outcome(["Sales Overview"]))
    with pytest.raises(SystemExit, match=r"lacks \['Orders and Events'\]"):
        study.check_bundle(outcome(["Sales Overview", "Orders and Events"]))
