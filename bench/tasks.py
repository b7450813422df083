"""SC-006 task study: five multi-step jobs done by hand in Superset's own UI and through the
agent's page, a person's time for each estimated with the keystroke-level model (KLM).

Each run starts a stack of its own (`sstools-stack`: a fresh data folder, the real Superset pair,
the built-in planner), and web/study/tasks.study.ts drives Debian's Chromium through the jobs as
a person clicks and types, writing down every action and every wait. The estimate is computed
here from that log, the same way for both sides:

- operators (Card, Moran and Newell 1980; Kieras, "Using the keystroke-level model", 2001):
  K 0.28 s a keystroke (an average typist, 40 words a minute; a chord such as Ctrl+Enter is two),
  P 1.1 s to point, B 0.1 s a button press or release (a click BB, a double click BBBB),
  H 0.4 s to move the hand between mouse and keyboard (it starts on the mouse), M 1.35 s to
  think what to do next;
- M before every pointing that starts a new step (a click or pointing not continuing a pointing
  just made, a file picked), before every typed string and every key that does not go on with a
  field the step is in (a click into a field, Ctrl+A there, the text typed and its Enter are one
  step; a wait for the screen ends the step), and one at the end of every job to read its outcome;
- a turn of the mouse wheel (KLM names none): B for every notch of 100 pixels, and a run of turns
  over one list one step — P to the list and M — as a person reads a list while scrolling it;
- R: the job's whole wall time, added in full — what the system took, with the browser's own
  actions (which take a person the operators above) inside it. A person who thinks while a page
  loads would be quicker on both sides: adding both is the conservative reading for each.

Printed as JSON: a line per run (with each job's waits: where its wall time went), then the medians
over runs per job and side (clicks, keystrokes, wall seconds, the estimate) and the ratio chat /
manual of the median estimates.
SC-006 asks for at most 0.7 on every job.

Run: `.venv/bin/python bench/tasks.py [--runs 2]` (each run: a stack start, then ~5 minutes).
"""

import argparse
import json
import math
import statistics
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sstools.devstack.paths import REPO_ROOT
from sstools.devstack.running import RunningStack, stack_environment
from sstools.devstack.stack import page_address
from sstools.devstack.testing import free_port
from sstools.ops.superset import bundle

# seconds, Card, Moran and Newell (1980)
K, P, B, H, M = 0.28, 1.1, 0.1, 0.4, 1.35
MOUSE_OPS = {"click", "hover", "file", "scroll"}
WHEEL_NOTCH_PX = 100
KEYBOARD_OPS = {"type", "key"}
SC006_RATIO = 0.7
COMPOSER = "composer"  # web/study/chat.ts types each request there
STUDY_TIMEOUT_SECONDS = 1800


@dataclass
class Estimate:
    """One job on one side: what the person did, and the model's time for it."""

    clicks: int = 0
    wheel_notches: int = 0
    keystrokes: int = 0
    pointings: int = 0
    homings: int = 0
    mentals: int = 0
    wall_s: float = 0.0
    waited_s: float = 0.0
    requests: int = 0  # requests sent to the agent
    waits: list[tuple[str, float]] = field(default_factory=list)  # what the person waited for, seconds

    @property
    def operators_s(self) -> float:
        button_presses = 2 * self.clicks + self.wheel_notches
        return (
            self.keystrokes * K
            + self.pointings * P
            + button_presses * B
            + self.homings * H
            + self.mentals * M
        )

    @property
    def klm_s(self) -> float:
        return self.operators_s + self.wall_s

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "clicks": self.clicks,
            "wheel_notches": self.wheel_notches,
            "keystrokes": self.keystrokes,
            "mental": self.mentals,
            "homing": self.homings,
            "wall_s": round(self.wall_s, 2),
            "waited_s": round(self.waited_s, 2),
            "operators_s": round(self.operators_s, 2),
            "klm_s": round(self.klm_s, 2),
        }


def keystrokes_of(key: str) -> int:
    return len(key.split("+"))  # "Control+Enter": two keys down


def estimate(actions: list[dict[str, Any]], wall_ms: float) -> Estimate:
    """The KLM estimate of one job's action log (web/study/person.ts writes it)."""
    found = Estimate(wall_s=wall_ms / 1000, mentals=1)  # the outcome read at the end
    hand = "mouse"
    previous: dict[str, Any] = {}
    typed_into: str | None = None  # the field this step clicked or typed into: its keys go on with it
    for action in actions:
        op = action["op"]
        if op == "wait":
            found.waited_s += action["ms"] / 1000
            found.waits.append((action["what"], action["ms"] / 1000))
            typed_into = None  # what the screen then shows is read anew
            continue
        if op in MOUSE_OPS | KEYBOARD_OPS:
            side = "mouse" if op in MOUSE_OPS else "keyboard"
            found.homings += side != hand
            hand = side
        if op == "scroll":
            found.wheel_notches += math.ceil(abs(action["px"]) / WHEEL_NOTCH_PX)
            if previous.get("op") != "scroll" or previous.get("target") != action["target"]:
                found.pointings += 1
                found.mentals += 1
        elif op in MOUSE_OPS:
            found.pointings += 1
            found.clicks += {"click": 1, "hover": 0, "file": 2}[op]
            found.mentals += previous.get("op") != "hover"  # a row's action pointed at in one go
        elif op == "type":
            found.keystrokes += len(action["text"])
            found.mentals += typed_into != action["target"]
            found.requests += action["target"] == COMPOSER
        elif op == "key":
            found.keystrokes += keystrokes_of(action["key"])
            found.mentals += typed_into is None  # Enter ends the string, Ctrl+A starts it: no new thought
        if op in MOUSE_OPS:
            typed_into = action["target"] if op == "click" else None
        elif op == "type":
            typed_into = action["target"]
        previous = action
    return found


def run_study(environment: dict[str, str], supersets: dict[str, str], folder: Path) -> list[dict[str, Any]]:
    """web/study against the running stack; its outcomes, or the study's output as the error."""
    results = folder / "study-results.json"
    study = subprocess.run(
        [*("npm", "--prefix", str(REPO_ROOT / "web"), "--loglevel=error", "run", "study")],
        env={
            **environment,
            "STUDY_BASE_URL": page_address(environment).url,
            "STUDY_SUPERSET_DEV": supersets["dev"],
            "STUDY_SUPERSET_PROD": supersets["prod"],
            "STUDY_FILES": str(folder / "files"),
            "STUDY_RESULTS": str(results),
        },
        capture_output=True,
        text=True,
        timeout=STUDY_TIMEOUT_SECONDS,
    )
    if study.returncode or not results.exists():
        raise SystemExit(f"the study failed ({study.returncode}):\n{(study.stdout + study.stderr)[-6000:]}")
    outcomes: list[dict[str, Any]] = json.loads(results.read_text())
    for outcome in outcomes:
        check_bundle(outcome)
    return outcomes


def check_bundle(outcome: dict[str, Any]) -> None:
    """An export a job saved (a deploy's, a backup's) read with ops' own bundle reader: it must
    hold every dashboard the job says it should."""
    found = outcome["found"]
    if "bundle_zip" not in found:
        return
    held = bundle.contents(Path(found["bundle_zip"]).read_bytes()).dashboards
    missing = sorted(set(found["bundle_must_hold"]) - set(held))
    if missing:
        raise SystemExit(f"{outcome['task']} ({outcome['way']}): the export lacks {missing}, holds {held}")


def one_run() -> dict[str, dict[str, Estimate]]:
    """A fresh stack, the study once; each job's estimate by side."""
    environment = stack_environment()
    with tempfile.TemporaryDirectory(prefix="task-study-") as folder:
        data_dir = Path(folder) / "pg"
        stack = RunningStack(data_dir, environment, f"dev={free_port()},prod={free_port()}")
        try:
            stack.wait_until_ready()
            outcomes = run_study(environment, stack.supersets, Path(folder))
        finally:
            if stack.process.poll() is None:
                stack.interrupt()
            stack.kill_leftovers()
    jobs: dict[str, dict[str, Estimate]] = {}
    for outcome in outcomes:
        jobs.setdefault(outcome["task"], {})[outcome["way"]] = estimate(
            outcome["actions"], outcome["wall_ms"]
        )
    return jobs


def medians(runs: list[dict[str, dict[str, Estimate]]]) -> dict[str, Any]:
    """Per job and side, the median of every figure over runs, and the ratio of the medians."""
    summary: dict[str, Any] = {}
    for task in runs[0]:
        sides = {}
        for way in ("manual", "chat"):
            figures = [run[task][way].summary() for run in runs]
            sides[way] = {key: statistics.median(figure[key] for figure in figures) for key in figures[0]}
        ratio = sides["chat"]["klm_s"] / sides["manual"]["klm_s"]
        # The stack answers with its built-in planner: a real model adds its own time to every
        # request. How much each could take before the chat stops being 30 % quicker:
        spare = SC006_RATIO * sides["manual"]["klm_s"] - sides["chat"]["klm_s"]
        summary[task] = {
            **sides,
            "ratio_chat_over_manual": round(ratio, 3),
            "sc006_met": ratio <= SC006_RATIO,
            "model_seconds_a_request_may_take": round(spare / sides["chat"]["requests"], 1),
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=2, help="fresh stacks to run the study on")
    args = parser.parse_args()
    runs = []
    for number in range(1, args.runs + 1):
        runs.append(one_run())
        figures = {
            task: {
                way: {**found.summary(), "waits": [[what, round(s, 2)] for what, s in found.waits]}
                for way, found in sides.items()
            }
            for task, sides in runs[-1].items()
        }
        print(json.dumps({"run": number, "jobs": figures}, ensure_ascii=False), flush=True)
    summary = medians(runs)
    print(
        json.dumps(
            {"runs": len(runs), "klm_seconds": {"K": K, "P": P, "B": B, "H": H, "M": M}, "jobs": summary}
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
