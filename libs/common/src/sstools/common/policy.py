"""The risk and role rules of DESIGN.md, over the catalogue: one implementation for the agent's
guard and for ops' RBAC, so the two can never disagree.

- An environment is production when its configuration says ``production: true`` or its id
  names it so (containing prod/production); otherwise it normalises by name: stag/test →
  ``staging``; dev/local → ``dev``; anything else → none. Configuration can only add
  production, never take it from an id that names it.
- A tool's tier is its catalogue tier, except that SQL execution is ``dangerous`` unless ops,
  which parses it in the target database's own dialect, said it only reads; and a ``write``
  into prod is raised to ``dangerous``.
- Risk levels for confirmations: read → ``safe``, write → ``guarded``, dangerous → ``dangerous``.
- The lowest role is the catalogue's, or its prod column when the target is prod.
"""

from dataclasses import dataclass
from enum import StrEnum

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


def is_production(env_id: str | None, production: bool = False) -> bool:
    return production or normalise_env(env_id) == "prod"


@dataclass(frozen=True)
class Decision:
    tool: str
    env: str | None  # the environment's kind: prod, staging, dev, or none
    tier: Tier
    risk_level: RiskLevel
    required_role: Role
    needs_confirmation: bool

    def allows(self, role: Role) -> bool:
        return role.at_least(self.required_role)

    @property
    def production(self) -> bool:
        return self.env == "prod"


def decide(
    tool_name: str, env_id: str | None = None, *, production: bool = False, mutating_sql: bool = False
) -> Decision:
    """What calling ``tool_name`` against ``env_id`` takes — ``production`` being what that
    environment's configuration says; ``KeyError`` for an unknown tool."""
    spec = tool(tool_name)
    policy: Policy = spec.mutating_sql_policy if mutating_sql and spec.mutating_sql_policy else spec.policy
    env = "prod" if is_production(env_id, production) else normalise_env(env_id)
    tier = policy.tier
    if env == "prod" and tier == Tier.WRITE:
        tier = Tier.DANGEROUS
    required = policy.min_role_prod if env == "prod" else policy.min_role
    return Decision(tool_name, env, tier, _RISK_LEVELS[tier], required, needs_confirmation=tier != Tier.READ)
