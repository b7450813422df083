"""Convo read paths at size: a user with 10 000 conversations, a conversation of 1 000 messages.

Through the REST API of a real convo process (uvicorn, JWT, PostgreSQL), as the browser calls
it. Prints JSON: p50/p99 per call over repeated requests, and how the data was seeded.

    .venv/bin/python bench/convo.py [--requests 300]      # uses DATABASE_URL, or an embedded server
"""

import argparse
import asyncio
import json
import time
import uuid
from typing import Any

import httpx
import psycopg
from stats import percentiles

from sstools.convo.store import MIGRATIONS
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS, user_token
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.postgres import database_url
from sstools.devstack.testing import free_port, scratch_database, service_process

USER = "bench-user"


def seed(url: str, conversations: int, messages: int) -> str:
    """Many conversations for one user, one of them long; returns the long one's id."""
    long_id = uuid.uuid4()
    with psycopg.connect(url) as connection, connection.cursor() as cursor:
        with cursor.copy(
            "COPY agent_conversations (id, owner_id, title, message_count, updated_at) FROM STDIN"
        ) as copy:
            for number in range(conversations):
                cid = long_id if number == 0 else uuid.uuid4()
                copy.write_row(
                    (cid, USER, f"Разговор {number} о дашбордах", 0, f"2026-01-01 00:00:{number % 60:02d}+00")
                )
            for number in range(conversations // 10):  # other users' rows share the table
                copy.write_row((uuid.uuid4(), f"other-{number}", "чужой", 0, "2026-01-01"))
        with cursor.copy(
            "COPY agent_messages (id, conversation_id, seq, client_message_id, role, content) FROM STDIN"
        ) as copy:
            for seq in range(1, messages + 1):
                role = "user" if seq % 2 else "assistant"
                copy.write_row((uuid.uuid4(), long_id, seq, f"m{seq}", role, "Текст сообщения " * 20))
        cursor.execute("UPDATE agent_conversations SET message_count = %s WHERE id = %s", (messages, long_id))
        cursor.execute("ANALYZE")
    return str(long_id)


async def timed(client: httpx.AsyncClient, paths: list[str], requests: int) -> dict[str, float]:
    durations = []
    for index in range(requests):
        started = time.perf_counter()
        reply = await client.get(paths[index % len(paths)])
        durations.append((time.perf_counter() - started) * 1000)
        reply.raise_for_status()
    return percentiles(durations)


async def measure(port: int, long_id: str, requests: int) -> dict[str, Any]:
    token = user_token(USER)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as client:
        first_page = (await client.get("/api/assistant/conversations?limit=20")).json()
        deep_cursor = first_page["next_cursor"]
        for _ in range(200):  # a cursor 4 000 conversations down the list
            deep_cursor = (
                await client.get(f"/api/assistant/conversations?limit=20&cursor={deep_cursor}")
            ).json()["next_cursor"]
        history = (await client.get(f"/api/assistant/conversations/{long_id}/history?limit=50")).json()
        return {
            "list_first_page": await timed(client, ["/api/assistant/conversations?limit=20"], requests),
            "list_page_4000_deep": await timed(
                client, [f"/api/assistant/conversations?limit=20&cursor={deep_cursor}"], requests
            ),
            "list_title_search": await timed(
                client, ["/api/assistant/conversations?limit=20&q=1234"], requests
            ),
            "history_first_50": await timed(
                client, [f"/api/assistant/conversations/{long_id}/history?limit=50"], requests
            ),
            "history_page_after_cursor": await timed(
                client,
                [f"/api/assistant/conversations/{long_id}/history?limit=50&cursor={history['next_cursor']}"],
                requests,
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=1_000)
    args = parser.parse_args()
    with database_url(DATA_DIR / "pg-bench") as server_url, scratch_database(server_url) as url:
        MIGRATIONS.upgrade(url)
        started = time.perf_counter()
        long_id = seed(url, args.conversations, args.messages)
        seed_seconds = round(time.perf_counter() - started, 1)
        http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
        env = {
            "DATABASE_URL": url,
            "JWT_PRIVATE_KEY": PRIVATE_KEY,
            "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
            "LOG_LEVEL": "WARNING",
            "CONVO_HTTP_PORT": str(http_port),
            "CONVO_GRPC_PORT": str(grpc_port),
            "CONVO_METRICS_PORT": str(metrics_port),
        }
        with service_process("convo", env, metrics_port):
            results = asyncio.run(measure(http_port, long_id, args.requests))
    print(
        json.dumps(
            {
                "benchmark": "convo",
                "seeded": {
                    "conversations_of_user": args.conversations,
                    "messages_in_one": args.messages,
                    "seconds": seed_seconds,
                },
                "goal": "p99 <= 20 ms",
                "rest": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
