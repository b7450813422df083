"""Sign-in limits against a real ops and PostgreSQL: attempts per user name and per client
address with a growing block, 429 with Retry-After, the same counters seen by every replica,
and service tokens per client."""

import asyncio
import time
from collections import Counter
from datetime import timedelta

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import func, select, update
from starlette.requests import Request

from sstools.common.db import create_engine
from sstools.ops.api.clients import TrustedProxies, client_address, parse_networks
from sstools.ops.signin import PasswordChecks, SignInRefused
from sstools.ops.store.limits import Backoff, Limits
from sstools.ops.store.tables import limits

from .conftest import ADMIN_PASSWORD, AGENT_SECRET, ops_on, ops_settings, password

PASSWORD = password("anna")


async def login(
    client: httpx.AsyncClient, username: str, password: str, *, via: str | None = None
) -> httpx.Response:
    headers = {"X-Forwarded-For": via} if via else {}
    return await client.post(
        "/api/auth/login", json={"username": username, "password": password}, headers=headers
    )


def retry_after(reply: httpx.Response) -> int:
    """The wait a 429 names, checked to be the same in the header and the body."""
    assert reply.status_code == 429, reply.text
    seconds = int(reply.headers["Retry-After"])
    assert reply.json()["detail"]["retry_after"] == seconds
    return seconds


async def _blocked_for(database: str, key: str) -> float:
    """How long the block of ``key`` has to run, by ops' database clock."""
    engine = create_engine(database)
    try:
        async with engine.connect() as connection:
            left = func.extract("epoch", limits.c.blocked_until - func.now())
            return float((await connection.execute(select(left).where(limits.c.key == key))).scalar_one())
    finally:
        await engine.dispose()


async def _end_the_blocks(database: str) -> None:
    """The blocks run out now: a wait moved on in the database, not slept through, so that a busy
    machine's slow burst cannot outlast a short block before the test looks at it."""
    engine = create_engine(database)
    try:
        async with engine.begin() as connection:
            await connection.execute(update(limits).values(blocked_until=func.now()))
    finally:
        await engine.dispose()


async def test_fifty_wrong_passwords_are_refused_with_retry_after_and_the_right_one_works_after_the_wait(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(
        database, tracer_provider, login_first_delay_seconds=30, login_max_delay_seconds=600
    ) as ops:
        # all at once: each attempt is counted before its password is checked, so a burst gets
        # no more tries than a sequence — the five free ones and the one that earns the block
        replies = await asyncio.gather(*(login(ops, "anna", f"guess-{n}") for n in range(50)))
        assert Counter(reply.status_code for reply in replies) == {401: 6, 429: 44}
        refused = [reply for reply in replies if reply.status_code == 429]
        assert {reply.json()["detail"]["code"] for reply in refused} == {"too_many_attempts"}
        assert all(1 <= retry_after(reply) <= 30 for reply in refused)

        # blocked: even the right password is not looked at, and Retry-After is the block's rest
        asked = time.monotonic()
        wait = retry_after(await login(ops, "anna", PASSWORD))
        left = await _blocked_for(database, "login:user:anna")
        # whole seconds rounded up, less what passed until the database was asked (a busy machine)
        assert wait - 1 - (time.monotonic() - asked) <= left <= wait
        await _end_the_blocks(database)
        # the next failure blocks twice as long
        assert (await login(ops, "anna", "one-more-guess")).status_code == 401
        wait = retry_after(await login(ops, "anna", PASSWORD))
        assert 30 < wait <= 60
        await _end_the_blocks(database)
        assert (await login(ops, "anna", PASSWORD)).status_code == 200
        # a right password starts the count over: the free failures are free again
        for _ in range(5):
            assert (await login(ops, "anna", "wrong")).status_code == 401
        assert (await login(ops, "anna", PASSWORD)).status_code == 200


async def test_a_name_is_blocked_whatever_its_case_and_others_still_sign_in(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider, login_first_delay_seconds=30) as ops:
        for name in ("anna", "ANNA", "Anna", "aNNa", "annA", "ANna"):
            assert (await login(ops, name, "wrong")).status_code == 401
        assert (await login(ops, "anna", PASSWORD)).status_code == 429
        assert (await login(ops, "root", ADMIN_PASSWORD)).status_code == 200


async def test_a_client_address_is_blocked_across_names_only_when_a_trusted_proxy_names_it(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(
        database,
        tracer_provider,
        login_free_failures_per_address=3,
        login_first_delay_seconds=30,
        trusted_proxies="127.0.0.0/8, 10.0.0.0/8",
        trusted_proxy_hops=2,
    ) as ops:
        # two proxies (both trusted) appended the client's address after one the client wrote itself
        attacker = "198.51.100.1, 203.0.113.7, 10.1.2.3"
        for n in range(4):
            assert (await login(ops, f"user-{n}", "wrong", via=attacker)).status_code == 401
        assert (await login(ops, "user-9", "wrong", via=attacker)).status_code == 429
        assert (await login(ops, "anna", PASSWORD, via=attacker)).status_code == 429
        # the part the client wrote is not who it is: changing it changes nothing
        assert (await login(ops, "anna", PASSWORD, via="192.0.2.50, 203.0.113.7")).status_code == 429
        # another address is another counter
        assert (await login(ops, "anna", PASSWORD, via="203.0.113.8")).status_code == 200

    async with ops_on(
        database, tracer_provider, login_free_failures_per_address=3, login_first_delay_seconds=30
    ) as ops:
        # no proxy trusted: the header is anyone's word, and the peer (loopback) is the client
        for n in range(4):
            assert (await login(ops, f"other-{n}", "wrong", via=f"192.0.2.{n}")).status_code == 401
        assert (await login(ops, "anna", PASSWORD, via="192.0.2.99")).status_code == 429


async def test_every_replica_sees_the_same_block(database: str, tracer_provider: TracerProvider) -> None:
    async with (
        ops_on(database, tracer_provider, login_first_delay_seconds=30) as first,
        ops_on(database, tracer_provider, login_first_delay_seconds=30) as second,
    ):
        for replica in (first, second, first, second, first, second):
            assert (await login(replica, "anna", "wrong")).status_code == 401
        assert retry_after(await login(second, "anna", PASSWORD)) > 1
        assert retry_after(await login(first, "anna", PASSWORD)) > 1


async def test_service_tokens_are_limited_per_client_and_wrong_secrets_per_address(
    database: str, tracer_provider: TracerProvider
) -> None:
    async def token(ops: httpx.AsyncClient, secret: str = AGENT_SECRET) -> httpx.Response:
        return await ops.post("/api/auth/service-token", json={"client_id": "agent", "client_secret": secret})

    async with ops_on(database, tracer_provider, service_tokens_per_minute=3) as ops:
        replies = [await token(ops) for _ in range(5)]
        assert [reply.status_code for reply in replies] == [200, 200, 200, 429, 429]
        assert replies[-1].json()["detail"]["code"] == "too_many_tokens"
        assert 1 <= retry_after(replies[-1]) <= 60

    async with ops_on(
        database, tracer_provider, login_free_failures_per_address=3, login_first_delay_seconds=30
    ) as ops:
        for _ in range(4):
            assert (await token(ops, "not-the-secret-000")).status_code == 401
        assert (await token(ops)).json()["detail"]["code"] == "too_many_attempts"


async def test_counters_of_names_that_stopped_failing_are_swept_and_blocks_are_kept(database: str) -> None:
    engine = create_engine(database)
    try:
        store = Limits(engine)
        backoff = Backoff(
            free=0, first_delay=timedelta(hours=1), max_delay=timedelta(hours=1), memory=timedelta(hours=1)
        )
        await store.attempt({"login:user:blocked": backoff})
        await store.hit("service:issued:idle", 10, timedelta(minutes=1))
        async with engine.begin() as connection:  # both last failed two hours ago
            await connection.execute(update(limits).values(since=func.now() - timedelta(hours=2)))
        assert await store.sweep(timedelta(hours=1)) == 1
        async with engine.connect() as connection:
            assert (await connection.scalars(select(limits.c.key))).all() == ["login:user:blocked"]
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("failures", "seconds"),
    [(1, None), (5, None), (6, 1.0), (7, 2.0), (8, 4.0), (15, 512.0), (16, 900.0), (10_000, 900.0)],
)
def test_the_block_doubles_past_the_free_failures_up_to_the_cap(failures: int, seconds: float | None) -> None:
    backoff = Backoff(
        free=5, first_delay=timedelta(seconds=1), max_delay=timedelta(seconds=900), memory=timedelta(hours=1)
    )
    delay = backoff.delay(failures)
    assert (delay.total_seconds() if delay else None) == seconds


async def test_password_checks_run_one_at_a_time_clean_ones_first_and_a_full_queue_refuses_suspects() -> None:
    checks = PasswordChecks(at_once=1, waiting=3)
    ran: list[str] = []
    release = asyncio.Event()

    async def sign_in(name: str, *, suspect: bool) -> None:
        try:
            async with checks.slot(suspect=suspect):
                ran.append(name)
                await release.wait()
        except SignInRefused as refused:
            ran.append(f"{name}: {refused.code}")

    tasks = []
    for name, suspect in (
        ("first", False),
        ("s1", True),
        ("s2", True),
        ("s3", True),
        ("s4", True),
        ("person", False),
    ):
        tasks.append(asyncio.create_task(sign_in(name, suspect=suspect)))
        await asyncio.sleep(0)  # each queues before the next arrives
    await asyncio.sleep(0.01)  # the evicted one hears it on its next turn of the loop
    assert ran == ["first", "s4: sign_in_busy", "s3: sign_in_busy"]  # the person took s3's place
    release.set()
    await asyncio.gather(*tasks)
    assert ran[3:] == ["person", "s1", "s2"]


async def test_a_sign_in_that_gives_up_while_waiting_or_once_its_turn_came_frees_its_place() -> None:
    checks = PasswordChecks(at_once=1, waiting=1)
    release = asyncio.Event()

    async def hold() -> None:
        async with checks.slot(suspect=False):
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiting = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiting.cancel()  # the client went away while queued
    await asyncio.gather(waiting, return_exceptions=True)
    release.set()
    await holder
    async with asyncio.timeout(1), checks.slot(suspect=True):  # the one slot is free again
        pass


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "hops", "client"),
    [
        ("203.0.113.9", "198.51.100.1", "", 1, "203.0.113.9"),  # no proxy trusted: the header is ignored
        ("10.0.0.5", "198.51.100.1", "", 1, "10.0.0.5"),
        ("10.0.0.5", "198.51.100.1", "10.0.0.0/8", 1, "198.51.100.1"),
        ("10.0.0.5", "6.6.6.6, 198.51.100.1", "10.0.0.0/8", 1, "198.51.100.1"),  # the client wrote 6.6.6.6
        ("10.0.0.5", "198.51.100.1, 10.9.9.9", "10.0.0.0/8", 2, "198.51.100.1"),  # two trusted hops
        ("10.0.0.5", "10.1.1.1", "10.0.0.0/8", 2, "10.1.1.1"),  # every hop trusted: the first one
        # not our proxy: its word is not taken
        ("203.0.113.9", "198.51.100.1", "10.0.0.0/8", 1, "203.0.113.9"),
        ("10.0.0.5", "not-an-address, x" + "y" * 100, "10.0.0.0/8", 1, "x" + "y" * 63),
        # a client inside the trusted range wrote 6.6.6.6; the one proxy in front appended its address
        ("10.0.0.5", "6.6.6.6, 10.1.2.3", "10.0.0.0/8", 1, "10.1.2.3"),
        ("10.0.0.5", "6.6.6.6, 10.1.2.3, 10.9.9.9", "10.0.0.0/8", 2, "10.1.2.3"),
    ],
)
def test_the_client_is_the_first_address_a_trusted_proxy_did_not_write(
    peer: str, forwarded: str, trusted: str, hops: int, client: str
) -> None:
    request = Request(
        {"type": "http", "client": (peer, 1234), "headers": [(b"x-forwarded-for", forwarded.encode())]}
    )
    assert client_address(request, TrustedProxies(parse_networks(trusted), hops)) == client


def test_a_trusted_proxy_that_is_not_an_address_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="not an address or CIDR range: 'ingress'"):
        ops_settings("postgresql://x@127.0.0.1/x", trusted_proxies="10.0.0.0/8, ingress")
