"""Run the public request set through a running stack (``make run``) and print the share of
requests understood and the share answered in the right language, as JSON (with every miss).

    .venv/bin/python -m sstools.agent.eval [--url http://127.0.0.1:8080]
        [--password-file .data/ops-admin-password]

Each request gets a conversation of its own, or the one of the request it ``follows``. A card a
turn stops at is rejected, so nothing the set asks for changes anything.
"""

import argparse
import json
import sys
import uuid
from functools import cache
from pathlib import Path
from typing import Any

import httpx
from gradio_client import Client

from sstools.agent.eval import REQUESTS, Request, Turn, load, right_language, understood
from sstools.common.catalogue import tool

CHAT = "/api/agent/gradio/"


class Stack:
    def __init__(self, url: str, token: str) -> None:
        self._url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._http = httpx.Client(base_url=self._url, headers=self._headers, timeout=60)
        self._chat = Client(f"{self._url}{CHAT}", headers=self._headers, verbose=False)

    def turn(
        self, request: Request, conversation: str, action: str = "send", text: str | None = None
    ) -> list[Any]:
        context = json.dumps({"lang": request.page_lang, **({"envId": request.env} if request.env else {})})
        job = self._chat.submit(
            request.text if text is None else text,
            conversation,
            action,
            request.env or "",
            context,
            "",
            api_name="/chat",
        )
        return list(job.result(timeout=180))

    @cache  # noqa: B019 (one stack per run)
    def resolve(self, kind: str, name: str, env: str) -> int | None:
        if kind == "dashboard":
            found = self._http.get(
                f"/api/envs/{env}/dashboards", params={"query": name, "page_size": 100}
            ).json()
            return next((item["id"] for item in found["dashboards"] if item["title"] == name), None)
        found = self._http.get(f"/api/envs/{env}/databases").json()
        return next((item["id"] for item in found["databases"] if item["name"] == name), None)


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
    options = parser.parse_args()
    stack = Stack(
        options.url, _sign_in(options.url, options.username, options.password_file.read_text().strip())
    )
    conversations: dict[str, str] = {}
    missed, wrong_language, counted = [], [], 0
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
        calls = [{"tool": call.tool, "args": dict(call.args)} for call in turn.calls]
        if not understood(request, turn, stack.resolve, lambda name: tool(name).may_change):
            missed.append({"id": request.id, "text": request.text, "calls": calls, "state": turn.state})
        if not right_language(request, turn):
            wrong_language.append({"id": request.id, "text": request.text, "answer": turn.text[:200]})
        verdict = "MISSED" if missed and missed[-1]["id"] == request.id else "ok"
        print(f"{request.id}: {verdict}", file=sys.stderr)
    print(
        json.dumps(
            {
                "requests": counted,
                "understood": round(1 - len(missed) / counted, 3),
                "right_language": round(1 - len(wrong_language) / counted, 3),
                "missed": missed,
                "wrong_language": wrong_language,
            },
            ensure_ascii=False,
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
