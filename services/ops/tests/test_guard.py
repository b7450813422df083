"""Ops' guard (:mod:`sstools.ops.api.guard`) on a small app of its own: endpoints that declare
``guard.permit(tool)`` as ops' routes do, the real audit log and confirmation codec on a scratch
database, the caller named by the test. What must hold: an environment that is not configured is
refused first; the policy table decides who may call what, production raising it; a change runs
only with a confirmation of exactly that request; a heavy call, once allowed, is counted against
the person's budget a minute, and in ops' metrics by tool; every decision and outcome is in the
audit."""

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI, HTTPException, Request
from prometheus_client import CollectorRegistry
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.catalogue import ENDPOINTS, Role, Tier
from sstools.common.confirmation import AUDIENCE, HEADER, Confirmation, ConfirmationCodec, request_fingerprint
from sstools.common.policy import Decision, RiskLevel
from sstools.common.sql import classify
from sstools.common.tokens import JwtCodec, TokenType
from sstools.common.tool_args import SQL_SHAPE, CommitBody, DashboardBody, DeployBody, SqlBody, SqlStatement
from sstools.devstack.policy_table import MUTATING_SQL, POLICY_TABLE, RANKS, allowed
from sstools.ops.api.app import _operation_error
from sstools.ops.api.auth import Caller
from sstools.ops.api.guard import Guard, HeavyReads
from sstools.ops.environments import Environment
from sstools.ops.errors import NotFound, OperationError
from sstools.ops.store.audit import AuditLog
from sstools.ops.store.limits import Limits
from sstools.ops.store.tables import audit
from sstools.ops.telemetry import HeavyReadMetrics

from .conftest import CONFIRMATION_SECRET, USER_HEADER, USERS, named_caller


def _environment(env_id: str, *, production: bool = False) -> Environment:
    return Environment.model_validate(
        {"id": env_id, "name": env_id.title(), "url": f"http://{env_id}.invalid", "password_env": "UNUSED"}
        | {"production": production}
    )


# "live" is production by its configuration only (its id does not say so); listed out of order.
ENVIRONMENTS = {"live": _environment("live", production=True), "dev": _environment("dev")}
# What the policy calls each environment, written by hand.
KIND = {"dev": "dev", "live": "prod"}

DEPLOY = ENDPOINTS["deploy_dashboard"].path
SEARCH = ENDPOINTS["search_dashboards"].path
DEPLOY_BODY = {"dashboard_id": 7, "source_env": "dev"}
CODEC = ConfirmationCodec(CONFIRMATION_SECRET)  # the agent's gate signs with the same secret
HEAVY_PER_MINUTE = 3
HEALTH = ENDPOINTS["get_health_summary"].path


@dataclass
class Guarded:
    """The test's app behind the guard, and what its endpoints did."""

    engine: AsyncEngine
    guard: Guard
    registry: CollectorRegistry  # the guard's metrics
    http: httpx.AsyncClient = field(init=False)
    ran: list[tuple[str, str]] = field(default_factory=list)  # (endpoint, user) of each run
    failure: Exception | None = None  # what the next operations raise, if anything

    async def audit(self) -> list[tuple[Any, ...]]:
        """Ops' audit trail, oldest first: service, username, action, target_env, outcome, detail."""
        columns = (audit.c.service, audit.c.username, audit.c.action, audit.c.target_env)
        query = select(*columns, audit.c.outcome, audit.c.detail).order_by(audit.c.at)
        async with self.engine.connect() as connection:
            return [tuple(row) for row in await connection.execute(query)]


def _app(guarded: Guarded) -> FastAPI:
    """Endpoints declared as ops' routes declare them (the same paths, tools and bodies)."""
    app = FastAPI()
    app.add_exception_handler(OperationError, _operation_error)
    guard = guarded.guard

    def operation(name: str, caller: Caller) -> dict[str, str]:
        guarded.ran.append((name, caller.username))
        if guarded.failure is not None:
            raise guarded.failure
        return {"done": name}

    @app.get(SEARCH)
    async def search_dashboards(
        env_id: str, caller: Annotated[Caller, guard.permit("search_dashboards")]
    ) -> dict[str, str]:
        return operation("search_dashboards", caller)

    @app.get(HEALTH)
    async def health_summary(
        env_id: str, caller: Annotated[Caller, guard.permit("get_health_summary")]
    ) -> dict[str, str]:
        return operation("get_health_summary", caller)

    @app.get(ENDPOINTS["superset_audit_permissions"].path)
    async def audit_permissions(
        env_id: str, caller: Annotated[Caller, guard.permit("superset_audit_permissions")]
    ) -> dict[str, str]:
        return operation("superset_audit_permissions", caller)

    @app.get(ENDPOINTS["run_backup"].path)
    async def list_backups(
        env_id: str, caller: Annotated[Caller, guard.permit("run_backup")]
    ) -> dict[str, str]:
        return operation("list_backups", caller)

    @app.post(DEPLOY)
    async def deploy(
        env_id: str, body: DeployBody, caller: Annotated[Caller, guard.permit("deploy_dashboard")]
    ) -> dict[str, str]:
        return operation("deploy_dashboard", caller)

    @app.post(ENDPOINTS["superset_create_dashboard"].path)
    async def create_dashboard(
        env_id: str, body: DashboardBody, caller: Annotated[Caller, guard.permit("superset_create_dashboard")]
    ) -> dict[str, str]:
        return operation("superset_create_dashboard", caller)

    @app.post(SQL_SHAPE.path)
    async def sql_shape(
        env_id: str,
        body: SqlStatement,
        caller: Annotated[Caller, guard.permit("superset_execute_sql", audited_as="sql_shape")],
    ) -> dict[str, str]:
        return operation("sql_shape", caller)

    @app.post(ENDPOINTS["superset_execute_sql"].path)
    async def execute_sql(
        request: Request,
        env_id: str,
        body: SqlBody,
        caller: Annotated[Caller, guard.permit("superset_execute_sql")],
    ) -> dict[str, str]:
        # as ops' route does: a statement that may write takes its own policy and a confirmation
        if not classify(body.sql).read_only:
            await guard.admit(request, caller, "superset_execute_sql", env_id, mutating_sql=True)
        return operation("superset_execute_sql", caller)

    @app.post(ENDPOINTS["commit_changes"].path)
    async def commit(
        body: CommitBody, caller: Annotated[Caller, guard.permit("commit_changes")]
    ) -> dict[str, str]:
        return operation("commit_changes", caller)

    return app


@asynccontextmanager
async def guarded_app(
    engine: AsyncEngine, environments: Mapping[str, Environment], heavy_per_minute: int = 1000
) -> AsyncIterator[Guarded]:
    """The app over ``environments``, with the real audit log, confirmation codec and budget of
    heavy calls (one no test reaches unless it says otherwise)."""
    registry = CollectorRegistry()
    heavy_reads = HeavyReads(Limits(engine), heavy_per_minute, HeavyReadMetrics(registry))
    guarded = Guarded(
        engine, Guard(AuditLog(engine), Depends(named_caller), environments, CODEC, heavy_reads), registry
    )
    transport = httpx.ASGITransport(_app(guarded))
    async with httpx.AsyncClient(transport=transport, base_url="http://ops") as http:
        guarded.http = http
        yield guarded


@pytest.fixture
async def ops(emptied_engine: AsyncEngine) -> AsyncIterator[Guarded]:
    async with guarded_app(emptied_engine, ENVIRONMENTS) as guarded:
        yield guarded


def _deploy(
    ops: Guarded, username: str = "root", path: str = "/api/envs/dev/deployments", key: str | None = "call-1"
) -> httpx.Request:
    """The agent's deploy call for ``username``, not yet confirmed."""
    headers = {USER_HEADER: username} | ({"Idempotency-Key": key} if key is not None else {})
    return ops.http.build_request("POST", path, json=DEPLOY_BODY, headers=headers)


def _confirmation(
    request: httpx.Request,
    *,
    user: str | None = None,
    tool: str = "deploy_dashboard",
    call: str | None = None,
    method: str | None = None,
    target: bytes | None = None,
    body: bytes | None = None,
) -> Confirmation:
    """What the agent's gate confirms for ``request`` (as sstools.devstack.confirming signs it),
    with the claims given here in place of the request's own."""
    fingerprint = request_fingerprint(
        method or request.method,
        request.url.raw_path if target is None else target,
        request.content if body is None else body,
    )
    key = request.headers.get("Idempotency-Key", "") if call is None else call
    return Confirmation(user or request.headers[USER_HEADER], tool, key, fingerprint)


def _confirmed(request: httpx.Request, **claims: Any) -> httpx.Request:
    request.headers[HEADER] = CODEC.sign(_confirmation(request, **claims))
    return request


def _row(user: str, action: str, env: str, outcome: str, detail: dict[str, Any]) -> tuple[Any, ...]:
    return ("agent", user, action, env, outcome, detail)


def _denied(tool: str, env: str | None, required: Role, user: str) -> dict[str, Any]:
    body = {"code": "permission_denied", "tool": tool, "env": env}
    return {"detail": body | {"required_role": required.value, "user_role": USERS[user].value}}


COMMIT_BODY = {"branch": "b", "env_id": "dev", "dashboard_ids": [1], "message": "m"}
SQL_BODY = {"database_id": 1, "sql": "SELECT 1"}
# The endpoints of the matrix: tool, method, path ({env}: each environment), body.
MATRIX = [
    ("search_dashboards", "GET", "/api/envs/{env}/dashboards", None),
    ("superset_audit_permissions", "GET", "/api/envs/{env}/permissions", None),
    ("run_backup", "GET", "/api/envs/{env}/backups", None),
    ("deploy_dashboard", "POST", "/api/envs/{env}/deployments", DEPLOY_BODY),
    ("superset_create_dashboard", "POST", "/api/envs/{env}/dashboards", {"title": "Sales"}),
    ("superset_execute_sql", "POST", "/api/envs/{env}/sql/shape", SQL_BODY),
    ("superset_execute_sql", "POST", "/api/envs/{env}/sql", SQL_BODY),
    ("commit_changes", "POST", "/api/git/commits", COMMIT_BODY),
]
# The endpoints not named after their tool: their name in ``ran``, the action of their records.
NAMED = {
    "/api/envs/{env}/backups": ("list_backups", "run_backup"),
    "/api/envs/{env}/sql/shape": ("sql_shape", "sql_shape"),
}


async def test_the_policy_table_decides_who_may_call_each_endpoint_in_each_environment(ops: Guarded) -> None:
    expected_rows = []
    for tool, method, template, body in MATRIX:
        tier, lowest, lowest_in_prod = POLICY_TABLE[tool]
        endpoint, action = NAMED.get(template, (tool, tool))
        for env in ("dev", "live") if "{env}" in template else (None,):
            path = template.format(env=env)
            for user, role in USERS.items():
                headers = {USER_HEADER: user, "Idempotency-Key": f"{user}-{path}"}
                request = ops.http.build_request(method, path, json=body, headers=headers)
                # a change is sent confirmed, as the agent sends it once the person confirmed
                if method == "POST" and tier is not Tier.READ:
                    _confirmed(request, tool=tool)
                ops.ran.clear()
                reply = await ops.http.send(request)
                answer = (reply.status_code, reply.json(), ops.ran)
                if allowed(tool, role, prod=env == "live"):
                    assert answer == (200, {"done": endpoint}, [(endpoint, user)]), (path, user)
                    expected_rows.append(_row(user, action, env or "", "ok", {}))
                else:
                    required = lowest_in_prod if env == "live" else lowest
                    denial = _denied(tool, KIND[env] if env else None, required, user)
                    assert answer == (403, denial, []), (path, user)
                    # a denial is recorded under the tool's name, whatever the endpoint
                    expected_rows.append(
                        _row(user, tool, env or "", "denied", {"required_role": required.value})
                    )
    assert await ops.audit() == expected_rows


async def test_an_environment_that_is_not_configured_is_refused_before_the_policy(ops: Guarded) -> None:
    # vera may not deploy anywhere, yet she is told the environment does not exist
    reply = await ops.http.send(_deploy(ops, "vera", "/api/envs/staging/deployments"))
    message = "no environment 'staging'; configured: dev, live"
    assert (reply.status_code, reply.json()) == (
        404,
        {"detail": {"code": "invalid_environment", "message": message}},
    )
    long_id = "x" * 70  # told and recorded in its first 64 characters only
    reply = await ops.http.get(f"/api/envs/{long_id}/dashboards", headers={USER_HEADER: "vera"})
    message = f"no environment '{'x' * 64}'; configured: dev, live"
    assert (reply.status_code, reply.json()) == (
        404,
        {"detail": {"code": "invalid_environment", "message": message}},
    )
    assert ops.ran == []
    assert await ops.audit() == [
        _row("vera", "deploy_dashboard", "staging", "refused", {"code": "invalid_environment"}),
        _row("vera", "search_dashboards", "x" * 64, "refused", {"code": "invalid_environment"}),
    ]


async def test_with_no_environment_configured_the_refusal_says_none(emptied_engine: AsyncEngine) -> None:
    async with guarded_app(emptied_engine, {}) as ops:
        reply = await ops.http.get("/api/envs/dev/dashboards", headers={USER_HEADER: "vera"})
        detail = {"code": "invalid_environment", "message": "no environment 'dev'; configured: none"}
        assert (reply.status_code, reply.json()) == (404, {"detail": detail})


async def test_the_decision_reads_production_from_the_configuration_and_sql_as_a_read(ops: Guarded) -> None:
    guard = ops.guard
    # the agent's authorize question about execute_sql gets the read policy (table: analyst)
    read = Decision("superset_execute_sql", "dev", Tier.READ, RiskLevel.SAFE, Role.ANALYST, False)
    assert guard.decision("superset_execute_sql", "dev") == read
    # a write into prod is dangerous, for the table's prod role
    write = Decision(
        "superset_create_dashboard", "prod", Tier.DANGEROUS, RiskLevel.DANGEROUS, Role.OPERATOR, True
    )
    assert guard.decision("superset_create_dashboard", "live") == write
    # an environment that is not configured is what its id says (here: nothing)
    backup = Decision("run_backup", None, Tier.WRITE, RiskLevel.GUARDED, Role.OPERATOR, True)
    assert guard.decision("run_backup", "elsewhere") == backup
    assert guard.decision("run_backup", None) == backup


async def test_sql_that_may_write_takes_its_own_policy_and_a_confirmation(ops: Guarded) -> None:
    _, lowest, _ = MUTATING_SQL
    _, lowest_to_read, _ = POLICY_TABLE["superset_execute_sql"]
    body = {"database_id": 1, "sql": "DELETE FROM sales"}
    headers = {"Idempotency-Key": "k"}
    expected_rows, expected_runs = [], []
    for user, role in USERS.items():
        request = ops.http.build_request("POST", "/api/envs/dev/sql", json=body, headers=headers)
        request.headers[USER_HEADER] = user
        reply = await ops.http.send(request)
        # who may not run SQL at all is refused by the endpoint's guard before the statement is read
        if RANKS[role] < RANKS[lowest_to_read]:
            denial = _denied("superset_execute_sql", "dev", lowest_to_read, user)
            assert (reply.status_code, reply.json()) == (403, denial), user
            expected_rows.append(
                _row(user, "superset_execute_sql", "dev", "denied", {"required_role": lowest_to_read.value})
            )
            continue
        # the endpoint's own refusal is recorded once more by the guard around it, with its status
        if RANKS[role] < RANKS[lowest]:
            denial = _denied("superset_execute_sql", "dev", lowest, user)
            assert (reply.status_code, reply.json()) == (403, denial), user
            expected_rows += [
                _row(user, "superset_execute_sql", "dev", "denied", {"required_role": lowest.value}),
                _row(user, "superset_execute_sql", "dev", "denied", {"status": 403}),
            ]
            continue
        assert (reply.status_code, reply.json()["detail"]["code"]) == (409, "confirmation_required"), user
        confirmed = await ops.http.send(_confirmed(request, tool="superset_execute_sql"))
        assert (confirmed.status_code, confirmed.json()) == (200, {"done": "superset_execute_sql"}), user
        expected_runs.append(("superset_execute_sql", user))
        expected_rows += [
            _row(user, "superset_execute_sql", "dev", "refused", {"code": "confirmation_required"}),
            _row(user, "superset_execute_sql", "dev", "refused", {"status": 409}),
            _row(user, "superset_execute_sql", "dev", "ok", {}),
        ]
    assert ops.ran == expected_runs
    assert await ops.audit() == expected_rows


async def test_a_change_without_a_confirmation_is_refused(ops: Guarded) -> None:
    empty = _deploy(ops)
    empty.headers[HEADER] = ""  # a confirmation header with nothing in it is none
    for unconfirmed in (_deploy(ops), empty):
        reply = await ops.http.send(unconfirmed)
        detail = reply.json()["detail"]
        # a refusal's shape, as every other: its code, and a message for the person
        assert (reply.status_code, detail["code"], sorted(detail)) == (
            409,
            "confirmation_required",
            ["code", "message"],
        )
    assert ops.ran == []
    refused = _row("root", "deploy_dashboard", "dev", "refused", {"code": "confirmation_required"})
    assert await ops.audit() == [refused] * 2


async def test_a_confirmation_of_exactly_this_request_lets_it_run(ops: Guarded) -> None:
    requests = [
        _deploy(ops, path="/api/envs/live/deployments?force=true&note=a%20b"),
        # the path as it was sent, escapes and all, is what was confirmed
        _deploy(ops, path="/api/envs/d%65v/deployments"),
        # a call without an Idempotency-Key matches a confirmation of no call id
        _deploy(ops, key=None),
    ]
    for request in requests:
        reply = await ops.http.send(_confirmed(request))
        assert (reply.status_code, reply.json()) == (200, {"done": "deploy_dashboard"})
    assert ops.ran == [("deploy_dashboard", "root")] * 3
    assert await ops.audit() == [
        _row("root", "deploy_dashboard", "live", "ok", {}),
        _row("root", "deploy_dashboard", "dev", "ok", {}),
        _row("root", "deploy_dashboard", "dev", "ok", {}),
    ]


async def test_a_confirmation_of_another_call_is_refused_naming_what_differs(ops: Guarded) -> None:
    other_body = b'{"dashboard_id":8,"source_env":"dev"}'
    cases: list[tuple[dict[str, Any], dict[str, Any], str]] = [
        ({}, {"user": "oleg"}, "user"),
        ({}, {"tool": "execute_migration"}, "tool"),
        ({}, {"call": "call-2"}, "call"),
        ({"key": None}, {"call": "call-1"}, "call"),  # confirmed with a key the request lacks
        ({}, {"body": other_body}, "request"),
        ({}, {"target": b"/api/envs/live/deployments"}, "request"),
        (
            {"path": "/api/envs/dev/deployments?force=true"},
            {"target": b"/api/envs/dev/deployments"},
            "request",
        ),
        ({}, {"target": b"/api/envs/dev/deployments?force=true"}, "request"),
        ({}, {"method": "PUT"}, "request"),
        ({}, {"user": "oleg", "body": other_body}, "user, request"),
        (
            {},
            {"user": "oleg", "tool": "run_backup", "call": "x", "method": "PUT"},
            "user, tool, call, request",
        ),
    ]
    for sent, confirmed, wrong in cases:
        reply = await ops.http.send(_confirmed(_deploy(ops, **sent), **confirmed))
        detail = {"code": "confirmation_invalid", "message": f"the confirmation is for another {wrong}"}
        assert (reply.status_code, reply.json()) == (403, {"detail": detail}), confirmed
    assert ops.ran == []
    refused = _row("root", "deploy_dashboard", "dev", "refused", {"code": "confirmation_invalid"})
    assert await ops.audit() == [refused] * len(cases)


def _token(
    confirmation: Confirmation,
    *,
    secret: str = CONFIRMATION_SECRET,
    audience: str = AUDIENCE,
    token_type: TokenType = TokenType.CONFIRMATION,
    claims: tuple[str, ...] = ("tool", "call", "req"),
    issued: datetime | None = None,
) -> str:
    """A token carrying ``confirmation``, signed as the gate does except where told otherwise."""
    values = {
        "tool": confirmation.tool,
        "call": confirmation.idempotency_key,
        "req": confirmation.fingerprint,
    }
    return JwtCodec(secret).issue(
        confirmation.username,
        token_type=token_type,
        audience=audience,
        ttl=timedelta(seconds=120),
        claims={claim: values[claim] for claim in claims},
        now=issued,
    )


async def test_a_token_that_is_not_a_valid_confirmation_is_refused_with_its_code(ops: Guarded) -> None:
    cases: dict[str, dict[str, Any]] = {
        "token_expired": {"issued": datetime.now(UTC) - timedelta(minutes=5)},
        "token_signature_invalid": {"secret": "another-secret-ops-does-not-trust-" + "x" * 16},
        "token_audience_invalid": {"audience": "sstools"},
        "token_type_invalid": {"token_type": TokenType.USER},
        "token_claim_missing": {"claims": ("tool", "call")},
    }
    for code in [*cases, "token_malformed"]:
        request = _deploy(ops)
        how = cases.get(code)
        request.headers[HEADER] = "not-a-token" if how is None else _token(_confirmation(request), **how)
        reply = await ops.http.send(request)
        detail = reply.json()["detail"]
        assert (reply.status_code, detail["code"], detail["message"].split(": ")[0]) == (
            403,
            "confirmation_invalid",
            code,
        )
    assert ops.ran == []
    refused = _row("root", "deploy_dashboard", "dev", "refused", {"code": "confirmation_invalid"})
    assert await ops.audit() == [refused] * (len(cases) + 1)


async def test_a_get_of_a_tool_that_needs_confirmation_needs_none(ops: Guarded) -> None:
    reply = await ops.http.get("/api/envs/dev/backups", headers={USER_HEADER: "oleg"})
    assert (reply.status_code, ops.ran) == (200, [("list_backups", "oleg")])
    assert await ops.audit() == [_row("oleg", "run_backup", "dev", "ok", {})]


async def test_an_operation_error_is_recorded_as_failed_with_its_body(ops: Guarded) -> None:
    ops.failure = NotFound("no dashboard 7", dashboard_id=7)
    reply = await ops.http.get("/api/envs/dev/dashboards", headers={USER_HEADER: "vera"})
    body = {"code": "not_found", "message": "no dashboard 7", "dashboard_id": 7}
    assert (reply.status_code, reply.json()) == (404, {"detail": body})
    assert await ops.audit() == [_row("vera", "search_dashboards", "dev", "failed", body)]


async def test_an_unexpected_error_is_recorded_as_failed_not_ok(ops: Guarded) -> None:
    ops.failure = RuntimeError("a bug in the operation")
    with pytest.raises(RuntimeError):  # the in-process transport re-raises what the app did not handle
        await ops.http.get("/api/envs/dev/dashboards", headers={USER_HEADER: "vera"})
    assert await ops.audit() == [
        _row("vera", "search_dashboards", "dev", "failed", {"error": "RuntimeError"})
    ]


async def test_an_endpoint_s_refusal_is_recorded_denied_for_403_else_refused(ops: Guarded) -> None:
    for status in (403, 404, 422):
        ops.failure = HTTPException(status, {"code": "refused_here"})
        reply = await ops.http.get("/api/envs/live/dashboards", headers={USER_HEADER: "vera"})
        assert (reply.status_code, reply.json()) == (status, {"detail": {"code": "refused_here"}})
    assert await ops.audit() == [
        _row("vera", "search_dashboards", "live", "denied", {"status": 403}),
        _row("vera", "search_dashboards", "live", "refused", {"status": 404}),
        _row("vera", "search_dashboards", "live", "refused", {"status": 422}),
    ]


async def test_audited_as_names_the_action_of_the_call_s_records(ops: Guarded) -> None:
    body = {"database_id": 1, "sql": "SELECT 1"}
    reply = await ops.http.post("/api/envs/dev/sql/shape", json=body, headers={USER_HEADER: "anna"})
    assert (reply.status_code, ops.ran) == (200, [("sql_shape", "anna")])
    ops.failure = NotFound("no database 1")
    await ops.http.post("/api/envs/dev/sql/shape", json=body, headers={USER_HEADER: "anna"})
    assert await ops.audit() == [
        _row("anna", "sql_shape", "dev", "ok", {}),
        _row("anna", "sql_shape", "dev", "failed", {"code": "not_found", "message": "no database 1"}),
    ]


async def test_heavy_calls_are_counted_against_each_persons_budget_a_minute(
    emptied_engine: AsyncEngine,
) -> None:
    async with guarded_app(emptied_engine, ENVIRONMENTS, HEAVY_PER_MINUTE) as ops:
        anna, oleg = {USER_HEADER: "anna"}, {USER_HEADER: "oleg"}
        sql = {"database_id": 1, "sql": "SELECT 1"}
        spent = [
            await ops.http.get("/api/envs/dev/health", headers=anna),
            await ops.http.post("/api/envs/dev/sql", json=sql, headers=anna),
            await ops.http.get("/api/envs/live/health", headers=anna),  # every environment counts
        ]
        # a question before a call is no call, nor is a call of a tool that is not heavy
        asked = [await ops.http.post("/api/envs/dev/sql/shape", json=sql, headers=anna) for _ in range(4)]
        listed = [await ops.http.get("/api/envs/dev/dashboards", headers=anna) for _ in range(4)]
        assert [reply.status_code for reply in spent + asked + listed] == [200] * 11
        over = [
            await ops.http.get("/api/envs/dev/health", headers=anna),
            await ops.http.post("/api/envs/dev/sql", json=sql, headers=anna),
        ]
        for reply in over:
            detail = reply.json()["detail"]
            assert (reply.status_code, detail["code"]) == (429, "read_budget_exceeded"), reply.json()
            assert 1 <= int(reply.headers["Retry-After"]) == detail["retry_after"] <= 60
            assert str(HEAVY_PER_MINUTE) in detail["message"]
        # another person's budget is their own
        assert (await ops.http.get("/api/envs/dev/health", headers=oleg)).status_code == 200
        ran = [name for name, user in ops.ran if user == "anna" and name != "search_dashboards"]
        assert ran == ["get_health_summary", "superset_execute_sql", "get_health_summary"] + ["sql_shape"] * 4
        records = [row for row in await ops.audit() if row[4] == "refused"]
        assert records == [
            _row("anna", "get_health_summary", "dev", "refused", {"code": "read_budget_exceeded"}),
            _row("anna", "superset_execute_sql", "dev", "refused", {"code": "read_budget_exceeded"}),
        ]
        # ops' metrics count every call the budget counted, by tool and outcome, naming no one
        counted = {
            (sample.labels["tool"], sample.labels["outcome"]): sample.value
            for family in ops.registry.collect()
            for sample in family.samples
            if sample.name == "sstools_ops_heavy_reads_total"
        }
        assert counted == {
            ("get_health_summary", "spent"): 3,
            ("superset_execute_sql", "spent"): 1,
            ("get_health_summary", "over_budget"): 1,
            ("superset_execute_sql", "over_budget"): 1,
        }


async def test_a_call_the_policy_refuses_spends_nothing_of_the_budget(emptied_engine: AsyncEngine) -> None:
    async with guarded_app(emptied_engine, ENVIRONMENTS, HEAVY_PER_MINUTE) as ops:
        vera = {USER_HEADER: "vera"}  # a viewer: SQL is an analyst's
        sql = {"database_id": 1, "sql": "SELECT 1"}
        denied = [await ops.http.post("/api/envs/dev/sql", json=sql, headers=vera) for _ in range(4)]
        assert {reply.status_code for reply in denied} == {403}
        health = [await ops.http.get("/api/envs/dev/health", headers=vera) for _ in range(HEAVY_PER_MINUTE)]
        assert [reply.status_code for reply in health] == [200] * HEAVY_PER_MINUTE
