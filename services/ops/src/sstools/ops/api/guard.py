"""The authoritative permission check on every tool's endpoint, and ops' audit of each call.

``permit(tool)`` is the dependency each operation declares: it authenticates both identities,
refuses an environment in the path that is not a configured one (``invalid_environment``, before
anything else looks at it), evaluates the user's role against the tool's policy for that
environment, records a denial, and after the operation records its outcome. The policy is the
catalogue's, read through ``sstools.common.policy.decide`` — the same function the agent's gate
uses.
"""

from collections.abc import AsyncIterator, Collection
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status

from sstools.common.policy import Decision, decide
from sstools.ops.api.auth import Caller
from sstools.ops.errors import OperationError
from sstools.ops.store.audit import AuditLog


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


class Guard:
    def __init__(self, audit: AuditLog, agent_for_user: Any, environments: Collection[str]) -> None:
        self._audit = audit
        self._agent_for_user = agent_for_user
        self._environments = frozenset(environments)

    async def check(
        self, caller: Caller, tool: str, env_id: str | None, *, mutating_sql: bool = False
    ) -> Decision:
        decision = decide(tool, env_id, mutating_sql=mutating_sql)
        if not decision.allows(caller.role):
            await self._record(
                caller, tool, env_id, "denied", {"required_role": decision.required_role.value}
            )
            raise denied(tool, decision, caller)
        return decision

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

    def permit(self, tool: str) -> Any:
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
            await self.check(caller, tool, env_id)
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
            finally:
                await self._record(caller, tool, env_id, outcome, detail)

        dependency.__name__ = f"permit_{tool}"
        return Depends(dependency)
