"""Single sign-on into ops against a real OpenID Connect provider (tools/oidc) and a real ops on
PostgreSQL: the browser is two cookie jars (the provider's, ops'), its redirects followed by
hand, so every hop — ops' start, the provider's sign-in form, ops' callback, the page's hand-off —
is what a browser would do."""

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import select

from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.devstack.oidc import Client, Person, RunningProvider, only_form, running
from sstools.devstack.testing import free_port
from sstools.ops.store.tables import audit, oidc_handoffs, oidc_logins
from sstools.ops.store.users import UserStore

from .conftest import ops_on, password

CLIENT_ID = "sstools-ops"
CLIENT_SECRET = "ops-client-secret-for-tests"
START = "/api/auth/oidc/start"
SESSION = "/api/auth/oidc/session"
MAPPING = {"viewers": "viewer", "analysts": "analyst", "operators": "operator", "admins": "admin"}
PROVIDER_NAME = "Test SSO"

ANA = Person("ana", "ana-password", "ana@example.com", "Ana Analyst", ("analysts",))
MOVER = Person("mo", "mo-password", "mo@example.com", "Mo Mover", ("viewers",))
OUTSIDER = Person("otto", "otto-password", "otto@example.com", "Otto Outsider", ("contractors",))
BOSS = Person("boss", "boss-password", "boss@example.com", "Bo Boss", ("admins",))
PEOPLE = [ANA, MOVER, OUTSIDER, BOSS]


@pytest.fixture(scope="module")
def ops_port() -> int:
    """Every ops of this module listens here: the provider knows its callback in advance."""
    return free_port()


def callback_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/api/auth/oidc/callback"


def client_for(port: int) -> Client:
    return Client(CLIENT_ID, CLIENT_SECRET, (callback_url(port),))


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory, ops_port: int) -> Iterator[RunningProvider]:
    folder = tmp_path_factory.mktemp("oidc")
    with running(folder, free_port(), [client_for(ops_port)], PEOPLE, PROVIDER_NAME) as started:
        yield started


@pytest.fixture
def people(provider: RunningProvider) -> Iterator[RunningProvider]:
    """The provider, its people as PEOPLE again after the test (which may move them)."""
    try:
        yield provider
    finally:
        provider.write_people(PEOPLE)


def sso_settings(provider: RunningProvider, port: int, **more: Any) -> dict[str, Any]:
    return {
        "http_port": port,
        "oidc_issuer": provider.issuer,
        "oidc_client_id": CLIENT_ID,
        "oidc_client_secret": CLIENT_SECRET,
        "oidc_redirect_url": callback_url(port),
        "oidc_role_mapping": json.dumps(MAPPING),
        "oidc_provider_name": PROVIDER_NAME,
        **more,
    }


@asynccontextmanager
async def sso_ops(
    database: str, tracer_provider: TracerProvider, provider: RunningProvider, port: int, **more: Any
) -> AsyncIterator[httpx.AsyncClient]:
    async with ops_on(database, tracer_provider, **sso_settings(provider, port, **more)) as client:
        yield client


@pytest.fixture
async def ops(
    database: str, tracer_provider: TracerProvider, provider: RunningProvider, ops_port: int
) -> AsyncIterator[httpx.AsyncClient]:
    async with sso_ops(database, tracer_provider, provider, ops_port) as client:
        yield client


# --- the browser ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Landing:
    """Where ops' callback sent the browser: a path of the page, and its fragment."""

    location: str

    @property
    def path(self) -> str:
        return self.location.split("#", 1)[0]

    @property
    def fragment(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.location).fragment))


@dataclass
class Browser:
    """One person's browser: ops' cookies and the provider's apart, as two sites' are."""

    ops: httpx.AsyncClient
    idp: httpx.AsyncClient
    callback: str
    # the provider's pages this browser was shown (its sign-in form)
    pages: list[str] = field(default_factory=list)

    async def start(self, return_to: str | None = None, prompt: str | None = None) -> httpx.Response:
        params = {name: value for name, value in (("return_to", return_to), ("prompt", prompt)) if value}
        return await self.ops.get(START, params=params)

    async def at_provider(self, started: httpx.Response, person: Person | None) -> str:
        """From ops' redirect to the provider until the provider sends the browser back to ops'
        callback (signing ``person`` in if it shows its form); that callback URL."""
        assert started.status_code == 302, started.text
        reply = await self.idp.get(started.headers["location"])
        while True:
            if reply.is_redirect:
                location = urljoin(str(reply.url), reply.headers["location"])
                if location.startswith(self.callback):
                    return location
                reply = await self.idp.get(location)
                continue
            self.pages.append(str(reply.url))
            assert person is not None, f"the provider showed a page: {reply.status_code} {reply.text[:500]}"
            form = only_form(reply)
            reply = await self.idp.post(
                form.action, data={**form.fields, "username": person.username, "password": person.password}
            )
            person = None  # once: a second page is a failure

    async def land(self, callback: str) -> Landing:
        reply = await self.ops.get(callback)
        assert reply.status_code == 302, reply.text
        assert reply.headers["cache-control"] == "no-store"
        return Landing(reply.headers["location"])

    async def sign_in(
        self, person: Person | None, return_to: str | None = None, prompt: str | None = None
    ) -> Landing:
        return await self.land(await self.at_provider(await self.start(return_to, prompt), person))


@pytest.fixture
async def browser(ops: httpx.AsyncClient, ops_port: int) -> AsyncIterator[Browser]:
    async with new_browser(ops, ops_port) as made:
        yield made


@asynccontextmanager
async def new_browser(
    ops: httpx.AsyncClient, port: int, local_address: str | None = None
) -> AsyncIterator[Browser]:
    """A browser of its own; ``local_address``: one on another loopback address (127.x)."""
    transport = httpx.AsyncHTTPTransport(local_address=local_address) if local_address else None
    async with (
        httpx.AsyncClient(base_url=str(ops.base_url), timeout=30, transport=transport) as ops_side,
        httpx.AsyncClient(timeout=30) as idp_side,
    ):
        yield Browser(ops_side, idp_side, callback_url(port))


async def session(ops: httpx.AsyncClient, landing: Landing) -> dict[str, Any]:
    """The page's redeeming of the hand-off, by the browser's own ops client (its cookies)."""
    assert set(landing.fragment) == {"sso"}, landing.location
    reply = await ops.post(SESSION, json={"handoff": landing.fragment["sso"]})
    assert reply.status_code == 200, reply.text
    tokens: dict[str, Any] = reply.json()
    return tokens


async def me(ops: httpx.AsyncClient, access_token: str) -> dict[str, Any]:
    reply = await ops.get("/api/auth/me", headers={"Authorization": f"Bearer {access_token}"})
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


async def audit_rows(database: str) -> list[dict[str, Any]]:
    engine = create_engine(database)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                select(audit).where(audit.c.action == "sign_in.sso").order_by(audit.c.at)
            )
            return [dict(row) for row in rows.mappings()]
    finally:
        await engine.dispose()


@asynccontextmanager
async def users_of(database: str) -> AsyncIterator[UserStore]:
    engine = create_engine(database)
    try:
        yield UserStore(engine)
    finally:
        await engine.dispose()


# --- the tests -------------------------------------------------------------------------------


async def test_methods_name_the_provider_and_the_start(ops: httpx.AsyncClient) -> None:
    reply = await ops.get("/api/auth/methods")
    assert reply.status_code == 200
    assert reply.json() == {"password": True, "sso": {"name": PROVIDER_NAME, "start": START}}


async def test_without_an_issuer_sso_is_off(database: str, tracer_provider: TracerProvider) -> None:
    async with ops_on(database, tracer_provider) as ops:
        assert (await ops.get("/api/auth/methods")).json() == {"password": True, "sso": None}
        for reply in (
            await ops.get(START),
            await ops.get("/api/auth/oidc/callback", params={"state": "x", "code": "y"}),
            await ops.post(SESSION, json={"handoff": "x"}),
        ):
            assert reply.status_code == 404
            assert reply.json()["detail"]["code"] == "sso_off"


async def test_a_full_sign_in_gives_an_ordinary_session_with_the_mapped_role(
    ops: httpx.AsyncClient, browser: Browser, provider: RunningProvider, database: str
) -> None:
    started = await browser.start(return_to="/agent/chat?env=dev")
    assert started.status_code == 302
    authorize = urlsplit(started.headers["location"])
    assert f"{authorize.scheme}://{authorize.netloc}" == provider.issuer
    query = dict(parse_qsl(authorize.query))
    assert query["response_type"] == "code"
    assert query["client_id"] == CLIENT_ID
    assert query["redirect_uri"] == browser.callback
    assert query["code_challenge_method"] == "S256"
    assert set(query["scope"].split()) == {"openid", "profile", "email", "groups"}
    assert len(query["state"]) >= 43
    assert len(query["nonce"]) >= 43
    assert "prompt" not in query
    # the sign-in is bound to this browser by a cookie named after its state
    assert [cookie.name.startswith("sstools_sso_") for cookie in browser.ops.cookies.jar] == [True]

    landing = await browser.land(await browser.at_provider(started, ANA))
    assert browser.pages  # the provider's form was shown
    assert landing.path == "/agent/chat?env=dev"
    assert "code=" not in landing.location
    assert "token" not in landing.location
    # the state's cookie is spent with it; the hand-off has its own, for this browser alone
    (bound,) = browser.ops.cookies.jar
    assert bound.name.startswith("sstools_sso_handoff_")
    assert (bound.path, bound.has_nonstandard_attr("HttpOnly")) == ("/api/auth/oidc", True)

    tokens = await session(browser.ops, landing)
    assert list(browser.ops.cookies.jar) == []  # spent with the hand-off
    assert set(tokens) == {"access_token", "token_type", "expires_in", "refresh_token", "refresh_expires_in"}
    signed_in = await me(ops, tokens["access_token"])
    assert (signed_in["username"], signed_in["role"]) == ("ana", "analyst")
    # an ordinary ops session: the refresh token renews it
    renewed = await ops.post("/api/auth/refresh", json={"refresh_token": tokens["refresh_token"]})
    assert renewed.status_code == 200, renewed.text
    assert (await me(ops, renewed.json()["access_token"]))["role"] == "analyst"

    # the hand-off works once
    again = await browser.ops.post(SESSION, json={"handoff": landing.fragment["sso"]})
    assert again.status_code == 401
    assert again.json()["detail"]["code"] == "oidc_handoff_invalid"
    made_up = await ops.post(SESSION, json={"handoff": "not-a-hand-off-code"})
    assert made_up.status_code == 401
    assert made_up.json()["detail"]["code"] == "oidc_handoff_invalid"

    # nobody can sign in as the SSO user with a password
    for guess in ("", "ana-password", "x" * 12):
        refused = await ops.post("/api/auth/login", json={"username": "ana", "password": guess or "-"})
        assert refused.status_code == 401

    (row,) = await audit_rows(database)
    assert (row["username"], row["outcome"]) == ("ana", "signed_in")
    assert row["detail"] == {"prompt_none": False, "groups": ["analysts"], "role": "analyst"}
    engine = create_engine(database)
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(select(oidc_logins))).all() == []  # used: gone
            assert (await connection.execute(select(oidc_handoffs))).all() == []
    finally:
        await engine.dispose()


async def test_a_group_change_gives_the_new_role_at_the_next_sign_in(
    ops: httpx.AsyncClient, browser: Browser, people: RunningProvider
) -> None:
    first = await session(browser.ops, await browser.sign_in(MOVER))
    assert (await me(ops, first["access_token"]))["role"] == "viewer"
    people.write_people([replace(MOVER, groups=("analysts", "operators", "unmapped")), ANA])
    second = await session(browser.ops, await browser.sign_in(None, prompt="none"))
    assert (await me(ops, second["access_token"]))["role"] == "operator"  # the highest role wins
    # the role is the account's: the older session's token now says operator too
    assert (await me(ops, first["access_token"]))["role"] == "operator"
    people.write_people([replace(MOVER, groups=("viewers",))])
    await session(browser.ops, await browser.sign_in(None, prompt="none"))
    assert (await me(ops, second["access_token"]))["role"] == "viewer"


async def test_an_admin_sees_the_sso_sign_in_and_may_not_give_that_account_a_password(
    ops: httpx.AsyncClient, browser: Browser, people: RunningProvider, database: str
) -> None:
    people.write_people([replace(MOVER, groups=("viewers", "unmapped", "operators", "analysts"))])
    await session(browser.ops, await browser.sign_in(MOVER))
    root = await ops.post("/api/auth/login", json={"username": "root", "password": password("root")})
    admin = {"Authorization": f"Bearer {root.json()['access_token']}"}
    shown = (await ops.get("/api/admin/users/mo", headers=admin)).json()
    assert (shown["role"], shown["sso_only"]) == ("operator", True)
    last = shown["last_sign_in"]
    # the operators group gave the role: the highest mapped one
    assert (last["method"], last["address"], last["group"]) == ("sso", "127.0.0.1", "operators")

    # the provider alone lets this account in: an admin may not give it a password
    new_password = {"password": "mo-local-password"}
    refused = await ops.post("/api/admin/users/mo/password", json=new_password, headers=admin)
    assert (refused.status_code, refused.json()["detail"]["code"]) == (409, "sso_only")
    login = await ops.post("/api/auth/login", json={"username": "mo", **new_password})
    assert login.status_code == 401
    # the command line may (the way in when nothing else works); then it is a local account too
    async with users_of(database) as users:
        await users.reset_password("mo", new_password["password"], refuse_sso_only=False)
        account = await users.account("mo")
    assert account is not None
    assert account.sso_only is False
    login = await ops.post("/api/auth/login", json={"username": "mo", **new_password})
    assert login.status_code == 200
    assert (await ops.get("/api/admin/users/mo", headers=admin)).json()["last_sign_in"][
        "method"
    ] == "password"


async def test_a_person_in_no_mapped_group_is_refused(
    ops: httpx.AsyncClient, browser: Browser, database: str
) -> None:
    landing = await browser.sign_in(OUTSIDER, return_to="/agent/x")
    assert landing.location == "/agent/x#sso_error=oidc_unmapped"
    async with users_of(database) as users:
        assert await users.active("otto") is None  # no account was made
    (row,) = await audit_rows(database)
    assert (row["username"], row["outcome"]) == ("otto", "refused")
    assert row["detail"]["code"] == "oidc_unmapped"
    assert row["detail"]["groups"] == ["contractors"]


async def test_with_a_default_role_a_person_in_no_mapped_group_gets_it(
    database: str, tracer_provider: TracerProvider, provider: RunningProvider, ops_port: int
) -> None:
    async with (
        sso_ops(database, tracer_provider, provider, ops_port, oidc_default_role="viewer") as ops,
        new_browser(ops, ops_port) as browser,
    ):
        tokens = await session(browser.ops, await browser.sign_in(OUTSIDER))
        assert (await me(ops, tokens["access_token"]))["role"] == "viewer"
        async with users_of(database) as users:
            otto = await users.account("otto")
        assert otto is not None
        assert otto.last_sign_in is not None
        assert otto.last_sign_in.group is None  # no group gave the role: the default did
        # a mapped group still wins over the default
        async with new_browser(ops, ops_port) as other:
            boss = await session(other.ops, await other.sign_in(BOSS))
        assert (await me(ops, boss["access_token"]))["role"] == "admin"


async def test_a_disabled_user_is_refused_and_stays_disabled(
    ops: httpx.AsyncClient, browser: Browser, database: str
) -> None:
    tokens = await session(browser.ops, await browser.sign_in(ANA))
    async with users_of(database) as users:
        await users.change("ana", role=None, active=False)
    landing = await browser.sign_in(None, prompt="none")
    assert landing.fragment == {"sso_error": "oidc_user_disabled"}
    async with users_of(database) as users:
        assert await users.active("ana") is None
    refreshed = await ops.post("/api/auth/refresh", json={"refresh_token": tokens["refresh_token"]})
    assert refreshed.status_code == 401
    assert [row["detail"]["code"] for row in await audit_rows(database) if row["outcome"] == "refused"] == [
        "oidc_user_disabled"
    ]


async def test_a_hand_off_for_a_user_disabled_since_gives_no_session(
    ops: httpx.AsyncClient, browser: Browser, database: str
) -> None:
    landing = await browser.sign_in(ANA)
    async with users_of(database) as users:
        await users.change("ana", role=None, active=False)
    reply = await browser.ops.post(SESSION, json={"handoff": landing.fragment["sso"]})
    assert reply.status_code == 401
    assert reply.json()["detail"]["code"] == "user_inactive"


async def test_an_sso_sign_in_never_demotes_the_last_admin(
    ops: httpx.AsyncClient, browser: Browser, people: RunningProvider, database: str
) -> None:
    tokens = await session(browser.ops, await browser.sign_in(BOSS))
    assert (await me(ops, tokens["access_token"]))["role"] == "admin"
    async with users_of(database) as users:
        await users.change("root", role=None, active=False)  # boss is the last active admin
    people.write_people([replace(BOSS, groups=("viewers",))])
    landing = await browser.sign_in(None, prompt="none")
    assert landing.fragment == {"sso_error": "oidc_last_admin"}
    assert (await me(ops, tokens["access_token"]))["role"] == "admin"
    async with users_of(database) as users:
        await users.change("root", role=None, active=True)
    # with another admin, the mapping holds again
    demoted = await session(browser.ops, await browser.sign_in(None, prompt="none"))
    assert (await me(ops, demoted["access_token"]))["role"] == "viewer"


async def test_a_state_works_once_and_only_in_the_browser_that_started_it(
    ops: httpx.AsyncClient, browser: Browser, ops_port: int, database: str
) -> None:
    callback = await browser.at_provider(await browser.start(), ANA)
    # another browser (no binding cookie): a login CSRF; and the state is spent by it
    async with new_browser(ops, ops_port) as victim:
        assert (await victim.land(callback)).location == "/agent#sso_error=oidc_state_unknown"
    assert (await browser.land(callback)).location == "/agent#sso_error=oidc_state_unknown"

    callback = await browser.at_provider(await browser.start(prompt="none"), None)
    assert set((await browser.land(callback)).fragment) == {"sso"}
    assert (await browser.land(callback)).location == "/agent#sso_error=oidc_state_unknown"

    query = dict(parse_qsl(urlsplit(callback).query))
    for forged in ({**query, "state": "made-up"}, {"code": query["code"]}, {**query, "state": "s" * 5000}):
        reply = await browser.ops.get(f"{browser.callback}?{urlencode(forged)}")
        assert reply.status_code == 302
        assert reply.headers["location"] == "/agent#sso_error=oidc_state_unknown"
    codes = [row["detail"]["code"] for row in await audit_rows(database) if row["outcome"] == "refused"]
    assert codes == ["oidc_state_unknown"] * 6


async def test_silent_sign_in_with_a_provider_session_and_without(
    ops: httpx.AsyncClient, browser: Browser, ops_port: int, database: str
) -> None:
    await session(browser.ops, await browser.sign_in(ANA))
    assert len(browser.pages) == 1
    started = await browser.start(prompt="none", return_to="/agent")
    assert dict(parse_qsl(urlsplit(started.headers["location"]).query))["prompt"] == "none"
    tokens = await session(browser.ops, await browser.land(await browser.at_provider(started, None)))
    assert len(browser.pages) == 1  # no sign-in form this time
    assert (await me(ops, tokens["access_token"]))["username"] == "ana"

    async with new_browser(ops, ops_port) as stranger:
        landing = await stranger.sign_in(None, prompt="none", return_to="/agent/chat")
    assert landing.location == "/agent/chat#sso_error=oidc_denied"
    assert stranger.pages == []
    refused = [row for row in await audit_rows(database) if row["outcome"] == "refused"]
    assert [(row["detail"]["code"], row["detail"]["error"]) for row in refused] == [
        ("oidc_denied", "login_required")
    ]
    assert refused[0]["detail"]["prompt_none"] is True


async def test_password_sign_in_off_refuses_passwords_while_sso_works(
    database: str, tracer_provider: TracerProvider, provider: RunningProvider, ops_port: int
) -> None:
    async with (
        sso_ops(database, tracer_provider, provider, ops_port, password_sign_in=False) as ops,
        new_browser(ops, ops_port) as browser,
    ):
        assert (await ops.get("/api/auth/methods")).json() == {
            "password": False,
            "sso": {"name": PROVIDER_NAME, "start": START},
        }
        refused = await ops.post("/api/auth/login", json={"username": "anna", "password": "anna-pass-123"})
        assert refused.status_code == 403
        assert refused.json()["detail"]["code"] == "password_sign_in_off"
        tokens = await session(browser.ops, await browser.sign_in(ANA))
        assert (await me(ops, tokens["access_token"]))["role"] == "analyst"


@pytest.mark.parametrize(
    "return_to",
    [
        "//evil.example",
        "https://evil.example",
        "/\\evil.example",
        "/agent\\..\\evil",
        "http://127.0.0.1/agent",
        "/agentevil",
        "/api/auth/me",
        "/agent/%2e%2e/api",
        "/agent/../api",
        "/agent#sso=planted",
        " /agent",
    ],
)
async def test_return_to_never_leaves_the_page(
    ops: httpx.AsyncClient, browser: Browser, return_to: str
) -> None:
    landing = await browser.sign_in(ANA, return_to=return_to)
    assert landing.path == "/agent"
    assert set(landing.fragment) == {"sso"}


async def test_a_code_from_another_provider_is_refused(
    ops: httpx.AsyncClient, browser: Browser, ops_port: int, tmp_path: Path, database: str
) -> None:
    """Provider B (its own key, its own issuer) signs Ana in for the same client and sends the
    browser to ops' callback: with B's iss it is a mix-up; without it, ops exchanges B's code
    at its own provider, which refuses it. Either way no session."""
    with running(tmp_path, free_port(), [client_for(ops_port)], PEOPLE) as other:
        discovery = (await browser.idp.get(other.discovery_url)).json()
        for keep_iss in (True, False):
            started = await browser.start()
            query = urlsplit(started.headers["location"]).query
            at_other = f"{discovery['authorization_endpoint']}?{query}"
            elsewhere = httpx.Response(302, headers={"location": at_other})
            callback = await browser.at_provider(elsewhere, ANA if keep_iss else None)
            parts = urlsplit(callback)
            answer = dict(parse_qsl(parts.query))
            assert answer["iss"] == other.issuer
            if not keep_iss:
                del answer["iss"]
            landing = await browser.land(urlunsplit(parts._replace(query=urlencode(answer))))
            assert landing.fragment == {"sso_error": "oidc_token_invalid"}
    reasons = [row["detail"]["reason"] for row in await audit_rows(database)]
    assert reasons == ["the answer names another issuer", "the provider refused the code"]


async def test_too_many_sign_ins_under_way_are_refused(
    database: str, tracer_provider: TracerProvider, provider: RunningProvider, ops_port: int
) -> None:
    async with sso_ops(database, tracer_provider, provider, ops_port, oidc_pending_sign_ins=2) as ops:
        assert [(await ops.get(START)).status_code for _ in range(2)] == [302, 302]
        refused = await ops.get(START)
        assert refused.status_code == 429
        assert refused.json()["detail"]["code"] == "oidc_busy"
        assert int(refused.headers["retry-after"]) > 0


async def test_a_provider_out_of_reach_sends_the_page_an_error(
    database: str, tracer_provider: TracerProvider, provider: RunningProvider, ops_port: int
) -> None:
    gone = replace(provider, issuer=f"http://127.0.0.1:{free_port()}")
    async with sso_ops(database, tracer_provider, gone, ops_port) as ops:
        reply = await ops.get(START, params={"return_to": "/agent/chat"})
        assert reply.status_code == 302
        assert reply.headers["location"] == "/agent/chat#sso_error=oidc_unavailable"
    (row,) = await audit_rows(database)
    assert (row["outcome"], row["detail"]["code"]) == ("refused", "oidc_unavailable")
    engine = create_engine(database)
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(select(oidc_logins))).all() == []  # nothing kept
    finally:
        await engine.dispose()


async def test_a_hand_off_redeemed_from_another_browser_is_refused_and_used_up(
    ops: httpx.AsyncClient, browser: Browser, ops_port: int, database: str
) -> None:
    """Login CSRF: someone signs in as themselves, stops before their page redeems the hand-off,
    and sends a victim to ``/agent/#sso=<that code>``: the victim's browser holds no secret for
    it (even one with a hand-off of its own under way), so no session, and the code is spent."""
    planted = (await browser.sign_in(BOSS)).fragment["sso"]
    async with new_browser(ops, ops_port) as victim:
        await victim.sign_in(ANA)  # the victim's own hand-off, not yet redeemed: its cookie is there
        assert len(victim.ops.cookies.jar) == 1
        refused = await victim.ops.post(SESSION, json={"handoff": planted})
    assert refused.status_code == 401
    assert refused.json()["detail"]["code"] == "oidc_handoff_foreign"
    spent = await browser.ops.post(SESSION, json={"handoff": planted})
    assert spent.json()["detail"]["code"] == "oidc_handoff_invalid"
    outcomes = [
        (row["username"], row["outcome"], row["detail"].get("code")) for row in await audit_rows(database)
    ]
    assert outcomes == [
        ("boss", "signed_in", None),
        ("ana", "signed_in", None),
        ("boss", "refused", "oidc_handoff_foreign"),
    ]


async def test_an_account_is_its_provider_subject_s_never_a_name_s(
    ops: httpx.AsyncClient, browser: Browser, people: RunningProvider, ops_port: int, database: str
) -> None:
    async with users_of(database) as users:
        await users.create("ana", "ana-local-password", Role.VIEWER)  # a local account, same name
    assert (await browser.sign_in(ANA)).fragment == {"sso_error": "oidc_name_taken"}
    # someone at the provider calls themselves "root": the local admin is not theirs either
    mallory = Person("mallory", "mallory-password", "m@example.com", "Mal", ("admins",), "root")
    people.write_people([*PEOPLE, mallory])
    async with new_browser(ops, ops_port) as other:
        assert (await other.sign_in(mallory)).fragment == {"sso_error": "oidc_name_taken"}
    root = await ops.post("/api/auth/login", json={"username": "root", "password": password("root")})
    admin = {"Authorization": f"Bearer {root.json()['access_token']}"}
    for name, role in (("ana", "viewer"), ("root", "admin")):
        shown = (await ops.get(f"/api/admin/users/{name}", headers=admin)).json()
        assert (shown["role"], shown["sso_subject"]) == (role, None)
        assert (shown["last_sign_in"] or {}).get("method") != "sso"  # root's: the password just now

    # an admin links the local account to the provider's ana: her sign-ins are that account now
    linked = await ops.put("/api/admin/users/ana/sso", json={"subject": "ana"}, headers=admin)
    assert linked.status_code == 200, linked.text
    tokens = await session(browser.ops, await browser.sign_in(None, prompt="none"))
    assert ((await me(ops, tokens["access_token"]))["role"]) == "analyst"
    shown = (await ops.get("/api/admin/users/ana", headers=admin)).json()
    assert shown["sso_subject"] == {"issuer": people.issuer, "subject": "ana"}
    # a subject is one account's: linking it to a second is refused
    taken = await ops.put("/api/admin/users/root/sso", json={"subject": "ana"}, headers=admin)
    assert (taken.status_code, taken.json()["detail"]["code"]) == (409, "subject_linked")

    # a new subject whose name is free gets an account linked to it; the same subject is that
    # account at every later sign-in, whatever name the provider gives it then
    async with new_browser(ops, ops_port) as mo:
        await session(mo.ops, await mo.sign_in(MOVER))
        people.write_people([replace(MOVER, preferred_username="maurice"), mallory])
        again = await session(mo.ops, await mo.sign_in(None, prompt="none"))
    assert (await me(ops, again["access_token"]))["username"] == "mo"
    # and another subject naming itself "mo" is not mo
    people.write_people([replace(mallory, preferred_username="mo")])
    async with new_browser(ops, ops_port) as other:
        assert (await other.sign_in(mallory)).fragment == {"sso_error": "oidc_name_taken"}
    refusals = [row["detail"] for row in await audit_rows(database) if row["outcome"] == "refused"]
    assert [(row["code"], row["sub"]) for row in refusals] == [
        ("oidc_name_taken", "ana"),
        ("oidc_name_taken", "mallory"),
        ("oidc_name_taken", "mallory"),
    ]


async def test_many_addresses_cannot_lock_out_one_more(
    database: str, tracer_provider: TracerProvider, provider: RunningProvider, ops_port: int
) -> None:
    """Four addresses (distinct 127.x on loopback) start sign-ins until refused and fill every
    place; a fifth address still signs in, all the way, and the heaviest gave way for it."""
    async with sso_ops(database, tracer_provider, provider, ops_port, oidc_pending_sign_ins=12) as ops:
        refused_after = {}
        for host in range(2, 6):
            transport = httpx.AsyncHTTPTransport(local_address=f"127.0.0.{host}")
            async with httpx.AsyncClient(base_url=str(ops.base_url), transport=transport) as starter:
                codes = [(await starter.get(START)).status_code for _ in range(20)]
            assert set(codes) == {302, 429}
            refused_after[host] = codes.index(429)
        assert refused_after == {2: 12, 3: 6, 4: 4, 5: 3}  # each stops once it is the heaviest
        async with new_browser(ops, ops_port, local_address="127.0.0.9") as fresh:
            tokens = await session(fresh.ops, await fresh.sign_in(ANA))
        assert (await me(ops, tokens["access_token"]))["username"] == "ana"
        engine = create_engine(database)
        try:
            async with engine.connect() as connection:
                rows = (await connection.execute(select(oidc_logins.c.address))).scalars().all()
        finally:
            await engine.dispose()
        assert len(rows) == 11  # twelve places, the fresh one's used by its callback
        assert max(rows.count(address) for address in set(rows)) == 3


async def test_roles_are_the_catalogue_s() -> None:
    assert set(MAPPING.values()) == {role.value for role in Role}
