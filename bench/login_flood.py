"""A login flood against ops: the CPU it takes, and whether a person still signs in, with the
sign-in limits (the defaults) beside ops without them (limits out of reach, every password
checked at once — what ops did before).

    .venv/bin/python bench/login_flood.py [--flooders 64] [--seconds 15]

Two floods, each for ``--seconds``: "attackers" (each flooder keeps its address, tries a new
name each time) and "botnet" (every try from a new address with a new name: the limits never
see the same key twice, only the bound on password checks holds). Addresses come through
X-Forwarded-For from loopback, a trusted proxy here. Meanwhile a person signs in with the right
password twice a second from an address of their own. Ops' CPU is read from /proc (user +
system time of the process over the wall time: 1.0 is one core busy); the flood runs in this
process on the same machine, so it competes for the cores too.
"""

import argparse
import asyncio
import itertools
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from stats import percentiles

from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.postgres import database_url
from sstools.devstack.testing import free_port, scratch_database, service_process
from sstools.ops.store import MIGRATIONS

ADMIN_PASSWORD = "bench-admin-password"
PERSON_ADDRESS = "192.0.2.1"
WITHOUT_LIMITS = {
    "OPS_LOGIN_FREE_FAILURES": "1000000000",
    "OPS_LOGIN_FREE_FAILURES_PER_ADDRESS": "1000000000",
    "OPS_PASSWORD_CHECKS_AT_ONCE": "1000",
    "OPS_PASSWORD_CHECKS_WAITING": "1000",
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


async def flood(ops_url: str, pid: int, flooders: int, seconds: float, botnet: bool) -> dict[str, Any]:
    addresses = itertools.count(1)
    statuses: Counter[int] = Counter()
    person: list[float] = []
    person_statuses: Counter[int] = Counter()
    deadline = time.monotonic() + seconds

    async def flooder(number: int, http: httpx.AsyncClient) -> None:
        own = f"10.{number // 250}.{number % 250}.1"
        for attempt in itertools.count():
            if time.monotonic() > deadline:
                return
            n = next(addresses)
            address = f"10.{128 + n // 62500}.{n // 250 % 250}.{n % 250 + 1}" if botnet else own
            reply = await http.post(
                "/api/auth/login",
                json={"username": f"guess-{number}-{attempt}", "password": "not-it"},
                headers={"X-Forwarded-For": address},
            )
            statuses[reply.status_code] += 1
            if reply.status_code == 429 and reply.json()["detail"]["code"] == "sign_in_busy":
                await asyncio.sleep(0.05)  # told to retry: a flooder does, at once

    async def signing_in(http: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            reply = await http.post(
                "/api/auth/login",
                json={"username": "admin", "password": ADMIN_PASSWORD},
                headers={"X-Forwarded-For": PERSON_ADDRESS},
            )
            person_statuses[reply.status_code] += 1
            if reply.status_code == 200:
                person.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.5)

    limits = httpx.Limits(max_connections=flooders + 4, max_keepalive_connections=flooders + 4)
    async with httpx.AsyncClient(base_url=ops_url, timeout=120, limits=limits) as http:
        cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
        await asyncio.gather(signing_in(http), *(flooder(n, http) for n in range(flooders)))
        cpu = (cpu_seconds(pid) - cpu_before) / (time.monotonic() - wall_before)
    wrong = statuses[401]
    return {
        "ops_cpu_cores": round(cpu, 2),
        "ops_rss_mib": rss_mib(pid),
        "passwords_checked_per_second": round(wrong / seconds, 1),
        "flood_answers": dict(sorted(statuses.items())),
        "person_answers": dict(sorted(person_statuses.items())),
        "person_signed_in_ratio": round(person_statuses[200] / max(1, sum(person_statuses.values())), 2),
        "person_sign_in": percentiles(person) if person else None,
    }


def run(url: str, settings: dict[str, str], flooders: int, seconds: float) -> dict[str, Any]:
    http_port, metrics_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="bench-login-") as folder, scratch_database(url) as database:
        MIGRATIONS.upgrade(database)
        env = {
            "DATABASE_URL": database,
            "JWT_PRIVATE_KEY": PRIVATE_KEY,
            "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
            "CONFIRMATION_SECRET": "bench-confirmations-" + "c" * 40,
            "LOG_LEVEL": "WARNING",
            "OPS_ADMIN_USERNAME": "admin",
            "OPS_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "OPS_HTTP_PORT": str(http_port),
            "OPS_METRICS_PORT": str(metrics_port),
            "OPS_BACKUP_DIR": str(Path(folder) / "backups"),
            "OPS_GIT_REPO": str(Path(folder) / "exports"),
            "OPS_TRUSTED_PROXIES": "127.0.0.1",
            **settings,
        }
        with service_process("ops", env, metrics_port) as process:
            time.sleep(1)  # the admin is created in the background right after readiness
            ops_url = f"http://127.0.0.1:{http_port}"
            return {
                scenario: asyncio.run(flood(ops_url, process.pid, flooders, seconds, scenario == "botnet"))
                for scenario in ("attackers", "botnet")
            }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flooders", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args()
    with database_url(DATA_DIR / "pg-bench") as url:
        limited = run(url, {}, args.flooders, args.seconds)
        unlimited = run(url, WITHOUT_LIMITS, args.flooders, args.seconds)
    print(
        json.dumps(
            {
                "benchmark": "login_flood",
                "baseline": "ops without sign-in limits (every password checked, all at once)",
                "flooders": args.flooders,
                "seconds": args.seconds,
                "cores": os.cpu_count(),
                "with_limits": limited,
                "without_limits": unlimited,
                "cpu_ratio": {
                    scenario: round(
                        limited[scenario]["ops_cpu_cores"] / unlimited[scenario]["ops_cpu_cores"], 2
                    )
                    for scenario in limited
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
