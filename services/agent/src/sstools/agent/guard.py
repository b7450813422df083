"""The agent's RBAC guard (the first of two layers: ops checks again, under the user's own
token, and is the authority). A call the person's role may not make never reaches
confirmation: the stream says ``permission_denied``, with what they may ask instead."""

from typing import Any

from sstools.common.catalogue import ALTERNATIVES, ALWAYS_OFFERED, EXAMPLE_PROMPTS, Role
from sstools.common.policy import Decision, decide


def alternatives(tool_name: str, role: Role, env: str | None) -> list[dict[str, str]]:
    """The catalogue's suggestions for a denied tool that this role may run here, as prompts."""
    offered = [name for name in ALTERNATIVES.get(tool_name, ()) if decide(name, env).allows(role)]
    return [{"action": name, "prompt": EXAMPLE_PROMPTS[name]} for name in offered or [ALWAYS_OFFERED]]


def permission_denied(tool_name: str, decision: Decision, role: Role) -> dict[str, Any]:
    """The ``permission_denied`` event of data model §3."""
    return {
        "type": "permission_denied",
        "tool_name": tool_name,
        "required_role": decision.required_role.value,
        "user_role": role.value,
        "env_context": decision.env,
        "alternatives": alternatives(tool_name, role, decision.env),
    }
