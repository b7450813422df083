"""The authoritative permission check on every tool's endpoint, and ops' audit of each call.

``permit(tool)`` is the dependency each operation declares: it authenticates both identities,
refuses an environment in the path that is not a configured one (``invalid_environment``, before
anything else looks at it), evaluates the user's role against the tool's policy for that
environment — production when its configuration or its id says so —, requires the person's
confirmation for a call that needs one, records a denial, and after the operation records its
outcome. The policy is the catalogue's, read through ``sstools.common.policy.decide`` — the same
function the agent's gate uses.

A confirmation is a token the agent's gate signed once the person confirmed the call
(:mod:`sstools.common.confirmation`): it must name this user, this tool, this request's
Idempotency-Key and this very request (method, path, query, body), else the call is refused.

A heavy call (the catalogue's ``heavy`` tools: a health check, a statement, a schema's walk; and
an environment's outline) is
counted against the person's budget of such calls per minute, once it is allowed (429
``read_budget_exceeded`` with ``Retry-After`` past it): one person cannot keep an environment's
databases busy, whatever their model asks for.
"""

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status

from sstools.common.catalogue import tool as catalogue_tool
from sstools.common.confirmation import HEADER, ConfirmationCodec, request_fingerprint
from sstools.common.policy import Decision, decide
from sstools.common.tokens import TokenError
from sstools.ops.api.auth import Caller
from sstools.ops.environments import Environment
from sstools.ops.errors import OperationError
from sstools.ops.store.audit import AuditLog
from sstools.ops.store.limits import Limits
from sstools.ops.telemetry import HeavyReadMetrics

BUDGET_WINDOW = timedelta(minutes=1)


@dataclass(frozen=True)
class HeavyReads:
    """Each person's budget of heavy calls per minute, counted in PostgreSQL so that every ops
    replica counts the same calls, and in this replica's metrics by tool."""

    limits: Limits
    per_minute: int
    metrics: HeavyReadMetrics

    async def spend(self, username: str, tool: str) -> int | None:
        """Count one call of ``tool``; the seconds to wait when it is one too many."""
        retry_after = await self.limits.hit(f"heavy:{username}", self.per_minute, BUDGET_WINDOW)
        self.metrics.count(tool, "spent" if retry_after is None else "over_budget")
        return retry_after


def denied(tool: str, decision: Decision, caller: Caller) -> HTTPException:
    return HTTPException(
        status.HTTP_403_FORBIDDEN,
        {
            "code": "permission_denied",
            "tool": tool,
            "env": decision.env,
            "required_role": decision.required_role.value,
            "user_role": caller.role.value,
        },
    )


async def _fingerprint(request: Request) -> str:
    """The request as it arrived: method, raw path and query string, body bytes."""
    target = request.scope.get("raw_path") or request.url.path.encode()
    if query := request.scope.get("query_string"):
        target += b"?" + query
    return request_fingerprint(request.method, target, await request.body())


class Guard:
    def __init__(
        self,
        audit: AuditLog,
        agent_for_user: Any,
        environments: Mapping[str, Environment],
        confirmations: ConfirmationCodec,
        heavy_reads: HeavyReads,
    ) -> None:
        self._audit = audit
        self._agent_for_user = agent_for_user
        self._environments = dict(environments)
        self._confirmations = confirmations
        self._heavy_reads = heavy_reads

    def decision(self, tool: str, env_id: str | None, *, mutating_sql: bool = False) -> Decision:
        """The policy for this call, with the environment as configured."""
        env = self._environments.get(env_id) if env_id else None
        production = env is not None and env.production
        return decide(tool, env_id, production=production, mutating_sql=mutating_sql)

    async def check(self, caller: Caller, tool: str, env_id: str | None, *, mutating_sql: bool) -> Decision:
        decision = self.decision(tool, env_id, mutating_sql=mutating_sql)
        if not decision.allows(caller.role):
            await self._record(
                caller, tool, env_id, "denied", {"required_role": decision.required_role.value}
            )
            raise denied(tool, decision, caller)
        return decision

    async def admit(
        self, request: Request, caller: Caller, tool: str, env_id: str | None, *, mutating_sql: bool = False
    ) -> None:
        """The policy's answer for this call and, for one that changes something, the person's
        confirmation of exactly this request; a refusal is recorded and raised."""
        decision = await self.check(caller, tool, env_id, mutating_sql=mutating_sql)
        # a GET only reads (a tool's list of what it made): nothing there to confirm
        if decision.needs_confirmation and request.method != "GET":
            await self.require_confirmation(request, caller, tool, env_id)

    async def require_confirmation(
        self, request: Request, caller: Caller, tool: str, env_id: str | None
    ) -> None:
        """Refuses the call unless it carries the person's confirmation of exactly this request:
        409 ``confirmation_required`` without one, 403 ``confirmation_invalid`` for one that is
        not valid or not this call's."""
        token = request.headers.get(HEADER)
        if not token:
            await self._record(caller, tool, env_id, "refused", {"code": "confirmation_required"})
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                {"code": "confirmation_required", "message": "this call changes data; confirm it first"},
            )
        try:
            confirmation = self._confirmations.verify(token)
        except TokenError as error:
            problem = f"{error.code}: {error}"
        else:
            expected = {
                "user": (confirmation.username, caller.username),
                "tool": (confirmation.tool, tool),
                "call": (confirmation.idempotency_key, request.headers.get("Idempotency-Key") or ""),
                "request": (confirmation.fingerprint, await _fingerprint(request)),
            }
            wrong = [name for name, (confirmed, actual) in expected.items() if confirmed != actual]
            if not wrong:
                return
            problem = f"the confirmation is for another {', '.join(wrong)}"
        await self._record(caller, tool, env_id, "refused", {"code": "confirmation_invalid"})
        raise HTTPException(status.HTTP_403_FORBIDDEN, {"code": "confirmation_invalid", "message": problem})

    async def _spend(self, caller: Caller, tool: str, env_id: str | None) -> None:
        retry_after = await self._heavy_reads.spend(caller.username, tool)
        if retry_after is None:
            return
        await self._record(caller, tool, env_id, "refused", {"code": "read_budget_exceeded"})
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            {
                "code": "read_budget_exceeded",
                "message": f"at most {self._heavy_reads.per_minute} health checks, statements and "
                f"explorations a minute; try again in {retry_after} s",
                "retry_after": retry_after,
            },
            headers={"Retry-After": str(retry_after)},
        )

    async def _record(
        self, caller: Caller, tool: str, env_id: str | None, outcome: str, detail: dict[str, Any]
    ) -> None:
        await self._audit.record(
            service=caller.service,
            username=caller.username,
            action=tool,
            target_env=env_id or "",
            outcome=outcome,
            detail=detail,
        )

    def permit(self, tool: str, *, audited_as: str | None = None, heavy: bool | None = None) -> Any:
        """The dependency of an endpoint of ``tool``. The record of its outcome names
        ``audited_as`` when the endpoint is not the tool's call itself (a question asked before
        it); a refusal before the endpoint runs is the tool's, and is recorded as such. ``heavy``
        says whether a call spends one of the person's heavy reads; unsaid, the call of a heavy
        tool itself does and a question before it does not."""
        action = audited_as or tool
        spends = catalogue_tool(tool).heavy and action == tool if heavy is None else heavy

        async def dependency(
            request: Request, caller: Annotated[Caller, self._agent_for_user]
        ) -> AsyncIterator[Caller]:
            env_id = request.path_params.get("env_id")
            if env_id is not None and env_id not in self._environments:
                await self._record(caller, tool, env_id[:64], "refused", {"code": "invalid_environment"})
                raise HTTPException(
                    status.HTTP_404_NOT_FOUND,
                    {
                        "code": "invalid_environment",
                        "message": f"no environment {env_id[:64]!r}; configured: "
                        + (", ".join(sorted(self._environments)) or "none"),
                    },
                )
            await self.admit(request, caller, tool, env_id)
            if spends:
                await self._spend(caller, tool, env_id)
            outcome, detail = "ok", {}
            try:
                yield caller
            except OperationError as error:
                outcome, detail = "failed", error.body()
                raise
            except HTTPException as error:
                outcome, detail = (
                    ("denied" if error.status_code == 403 else "refused"),
                    {"status": error.status_code},
                )
                raise
            except BaseException as error:  # a bug or a cancelled call did not end "ok"
                outcome, detail = "failed", {"error": type(error).__name__}
                raise
            finally:
                await self._record(caller, action, env_id, outcome, detail)

        dependency.__name__ = f"permit_{tool}"
        return Depends(dependency)
