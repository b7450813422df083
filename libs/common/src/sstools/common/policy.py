"""The risk and role rules of DESIGN.md, over the catalogue: one implementation for the agent's
guard and for ops' RBAC, so the two can never disagree.

- Environments normalise by name: containing prod/production → ``prod``; stag/test →
  ``staging``; dev/local → ``dev``; anything else → none.
- A tool's tier is its catalogue tier, except that SQL execution is ``dangerous`` unless ops,
  which parses it in the target database's own dialect, said it only reads; and a ``write``
  into prod is raised to ``dangerous``.
- Risk levels for confirmations: read → ``safe``, write → ``guarded``, dangerous → ``dangerous``.
- The lowest role is the catalogue's, or its prod column when the target is prod.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sstools.common.catalogue import Policy, Role, Tier, tool


class RiskLevel(StrEnum):
    SAFE = "safe"
    GUARDED = "guarded"
    DANGEROUS = "dangerous"


_RISK_LEVELS = {Tier.READ: RiskLevel.SAFE, Tier.WRITE: RiskLevel.GUARDED, Tier.DANGEROUS: RiskLevel.DANGEROUS}


def normalise_env(env_id: str | None) -> str | None:
    if not env_id:
        return None
    name = env_id.lower()
    if "prod" in name:  # covers "production"
        return "prod"
    if "stag" in name or "test" in name:
        return "staging"
    if "dev" in name or "local" in name:
        return "dev"
    return None


def resolve_env(*candidates: str | None) -> str | None:
    """The first environment given, in the design's order: tool args, submit-time, UI context."""
    return next((candidate for candidate in candidates if candidate), None)


@dataclass(frozen=True)
class Decision:
    tool: str
    env: str | None
    tier: Tier
    risk_level: RiskLevel
    required_role: Role
    needs_confirmation: bool

    def allows(self, role: Role) -> bool:
        return role.at_least(self.required_role)


def decide(tool_name: str, env_id: str | None = None, *, mutating_sql: bool = False) -> Decision:
    """What calling ``tool_name`` against ``env_id`` takes; ``KeyError`` for an unknown tool."""
    spec = tool(tool_name)
    policy: Policy = spec.mutating_sql_policy if mutating_sql and spec.mutating_sql_policy else spec.policy
    env = normalise_env(env_id)
    tier = policy.tier
    if env == "prod" and tier == Tier.WRITE:
        tier = Tier.DANGEROUS
    required = policy.min_role_prod if env == "prod" else policy.min_role
    return Decision(tool_name, env, tier, _RISK_LEVELS[tier], required, needs_confirmation=tier != Tier.READ)


def decide_call(tool_name: str, args: Mapping[str, Any], *, sql_read_only: bool = False) -> Decision:
    """:func:`decide` for a call's own arguments: its ``env_id``, and for a tool that runs SQL
    whether that SQL was judged read-only (by ops, in the target's dialect): unless it was, it
    counts as a change."""
    env = args.get("env_id")
    return decide(tool_name, str(env) if env else None, mutating_sql=not sql_read_only)
