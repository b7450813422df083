"""Run the public request set through a running stack (``make run``) and print the share of
requests understood, the share answered in the right language and the heavy reads each request
cost, as JSON (with every miss, and each request's heavy reads).

    .venv/bin/python -m sstools.agent.eval [--url http://127.0.0.1:8080]
        [--password-file .data/ops-admin-password] [--ops-metrics http://127.0.0.1:9104/metrics]

Each request gets a conversation of its own, or the one of the request it ``follows``. A card a
turn stops at is rejected, so nothing the set asks for changes anything. Ops' budget of heavy
reads is left as it is and the run is not paced to it: a read refused for being over it is
counted (``over_budget``) and the request is judged on what the agent then did.
"""

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import httpx
from gradio_client import Client

from sstools.agent.eval import (
    REQUESTS,
    Cost,
    Request,
    Turn,
    cost_summary,
    heavy_reads,
    load,
    right_language,
    understood,
)
from sstools.agent.ui.app import CHAT_PATH
from sstools.agent.ui.client import chat_client
from sstools.common.catalogue import tool

MAKE_RUN_SUPERSETS = {"dev": "http://127.0.0.1:8088", "prod": "http://127.0.0.1:8089"}


class Stack:
    def __init__(self, url: str, sign_in: Callable[[], str], supersets: dict[str, "Superset"]) -> None:
        self._url = url.rstrip("/")
        self._sign_in = sign_in
        self._chat = self._client()
        self._supersets = supersets

    def _client(self) -> Client:
        headers = {"Authorization": f"Bearer {self._sign_in()}"}
        return chat_client(f"{self._url}{CHAT_PATH}/", headers)

    def turn(
        self, request: Request, conversation: str, action: str = "send", text: str | None = None
    ) -> list[Any]:
        """One turn, sent as a person's page sends it: past the turn limit it waits as told and
        sends again; when the session's token has ended it signs in anew (as the page renews)."""
        context = json.dumps({"lang": request.page_lang, **({"envId": request.env} if request.env else {})})
        while True:
            job = self._chat.submit(
                request.text if text is None else text,
                conversation,
                action,
                request.env or "",
                context,
                "",
                api_name="/chat",
            )
            messages = list(job.result(timeout=180))
            codes = {m["metadata"].get("code"): m["metadata"] for m in messages if m.get("metadata")}
            if "UNAUTHORIZED" in codes:
                self._chat = self._client()
            elif "RATE_LIMITED" in codes:
                time.sleep(float(codes["RATE_LIMITED"].get("retry_after", 1)) + 0.5)
            else:
                return messages

    def resolve(self, kind: str, name: str, env: str) -> int | None:
        """An object's id, from that environment's Superset itself (not through the agent)."""
        return self._supersets[env].ids(kind).get(name)


class Superset:
    """One environment's Superset, asked for its objects' ids by its admin."""

    def __init__(self, url: str, password: str) -> None:
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=30)
        login = {"username": "admin", "password": password, "provider": "db", "refresh": False}
        token = (
            self._http.post("/api/v1/security/login", json=login).raise_for_status().json()["access_token"]
        )
        self._http.headers["Authorization"] = f"Bearer {token}"

    @cache  # noqa: B019 (one instance per run)
    def ids(self, kind: str) -> dict[str, int]:
        path, field = {
            "dashboard": ("/api/v1/dashboard/", "dashboard_title"),
            "database": ("/api/v1/database/", "database_name"),
        }[kind]
        listing = self._http.get(path, params={"q": "(page_size:100)"}).raise_for_status().json()
        return {item[field]: int(item["id"]) for item in listing["result"]}


def _sign_in(url: str, username: str, password: str) -> str:
    answer = httpx.post(
        f"{url.rstrip('/')}/api/auth/login", json={"username": username, "password": password}
    )
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sstools.agent.eval")
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the page's origin under make run")
    parser.add_argument("--username", default="admin")
    parser.add_argument("--password-file", type=Path, default=Path(".data/ops-admin-password"))
    parser.add_argument("--requests", type=Path, default=REQUESTS)
    parser.add_argument(
        "--superset",
        action="append",
        default=[],
        metavar="ENV=URL",
        help="where an environment's Superset answers, to look ids up (default: make run's dev and prod)",
    )
    parser.add_argument("--superset-password-file", type=Path, default=Path(".data/superset/admin-password"))
    parser.add_argument(
        "--ops-metrics",
        default=f"http://127.0.0.1:{os.environ.get('OPS_METRICS_PORT', '9104')}/metrics",
        help="ops' /metrics, where it counts heavy reads (default: OPS_METRICS_PORT's, as make run sets it)",
    )
    options = parser.parse_args()
    password = options.superset_password_file.read_text().strip()
    urls = dict(item.split("=", 1) for item in options.superset) or MAKE_RUN_SUPERSETS
    supersets = {env: Superset(url, password) for env, url in urls.items()}
    password_ops = options.password_file.read_text().strip()
    stack = Stack(options.url, lambda: _sign_in(options.url, options.username, password_ops), supersets)
    conversations: dict[str, str] = {}
    missed, wrong_language, counted = [], [], 0
    costs: dict[str, Cost] = {}
    metrics = httpx.Client(timeout=30)

    def ops_reads() -> dict[str, float]:
        return heavy_reads(metrics.get(options.ops_metrics).raise_for_status().text)

    before = ops_reads()
    for request in load(options.requests):
        conversation = conversations.get(request.follows or "", str(uuid.uuid4()))
        conversations[request.id] = conversation
        messages = stack.turn(request, conversation)
        turn = Turn.of(messages)
        # A card is rejected, so nothing changes; what the agent then says is part of its answer.
        for card in [
            m["metadata"] for m in messages if (m.get("metadata") or {}).get("type") == "confirm_required"
        ]:
            answer = json.dumps({"call_id": card["call_id"], "digest": card["digest"]})
            turn = turn.then(Turn.of(stack.turn(request, conversation, "reject", answer)))
        counted += 1
        after = ops_reads()
        cost = costs[request.id] = Cost.between(before, after)
        before = after
        calls = [{"tool": call.tool, "args": dict(call.args)} for call in turn.calls]
        if not understood(request, turn, stack.resolve, lambda name: tool(name).may_change):
            missed.append(
                {
                    "id": request.id,
                    "text": request.text,
                    "calls": calls,
                    "state": turn.state,
                    "errors": turn.errors,
                    "heavy_reads": cost.reads,
                }
            )
        if not right_language(request, turn):
            wrong_language.append({"id": request.id, "text": request.text, "answer": turn.text[:200]})
        verdict = "MISSED" if missed and missed[-1]["id"] == request.id else "ok"
        print(f"{request.id}: {verdict}, {cost.reads} heavy reads", file=sys.stderr)
    print(
        json.dumps(
            {
                "requests": counted,
                "understood": round(1 - len(missed) / counted, 3),
                "right_language": round(1 - len(wrong_language) / counted, 3),
                "heavy_reads": cost_summary(list(costs.values())),
                "missed": missed,
                "wrong_language": wrong_language,
                "heavy_reads_per_request": {key: spent.reads for key, spent in costs.items()},
            },
            ensure_ascii=False,
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
