"""The agent's Prometheus metrics, read off each turn's stream: what people wait for (SC-002
first token), what was decided (SC-003 confirmations, SC-004 denials), what the tools did, and
how many turns stream now. (Its calls to the model server: :class:`GenAiClientMetrics`.)"""

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sstools.agent.clients.convo import AuditRecord

TOOL_OUTCOMES = {"tool_end": "ok", "tool_error": "error", "tool_timeout": "timeout"}
UNKNOWN_TOOL = "unknown"  # a name the model made up: kept out of the labels


class TurnMetrics:
    def __init__(self, registry: CollectorRegistry, tool_names: Iterable[str]) -> None:
        self._tools = frozenset(tool_names)
        self.commands = Counter(
            "sstools_agent_commands",
            "Chat commands by decision (allowed, needs_confirmation, confirmed, rejected, denied, "
            "refused) and final state.",
            ["decision", "outcome"],
            registry=registry,
        )
        self.active_turns = Gauge(
            "sstools_agent_active_turns",
            "Turns streaming now in this process (stopped and failed ones leave it as they end).",
            registry=registry,
        )
        self.first_event_seconds = Histogram(
            "sstools_agent_first_event_seconds",
            "Time from a command reaching the agent to the first event of its stream (the page's "
            "first sign of life; budget: p99 100 ms).",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5),
            registry=registry,
        )
        self.first_token_seconds = Histogram(
            "sstools_agent_first_token_seconds",
            "Time from a command reaching the agent to the first token of its answer (SC-002).",
            buckets=(0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0),
            registry=registry,
        )
        self.routes = Counter(
            "sstools_agent_routes",
            "Tool subsets chosen for a message, by tier (keyword, hybrid, fast-path, and "
            "local-keyword when the router could not answer).",
            ["tier"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "sstools_agent_tool_calls",
            "Tool calls that ended, by tool and outcome (ok, error, timeout).",
            ["tool", "outcome"],
            registry=registry,
        )
        self.permission_denials = Counter(
            "sstools_agent_permission_denials",
            "Tool calls the guard refused for the user's role (SC-004), by tool.",
            ["tool"],
            registry=registry,
        )

    def observe(
        self,
        record: AuditRecord,
        events: Iterable[Mapping[str, Any]],
        first_event_seconds: float | None,
        first_token_seconds: float | None,
    ) -> None:
        """One command: its audit record, the metadata of the events it streamed, and when its
        first event and its first token came (None when it had none, or was refused at the edge)."""
        self.commands.labels(record.decision, record.outcome).inc()
        if first_event_seconds is not None:
            self.first_event_seconds.observe(first_event_seconds)
        if first_token_seconds is not None:
            self.first_token_seconds.observe(first_token_seconds)
        for event in events:
            kind = event["type"]
            if kind == "routing":
                self.routes.labels(event["tier"]).inc()
            elif kind in TOOL_OUTCOMES:
                self.tool_calls.labels(self._tool(event["tool"]), TOOL_OUTCOMES[kind]).inc()
            elif kind == "permission_denied":
                self.permission_denials.labels(self._tool(event["tool_name"])).inc()

    def _tool(self, name: object) -> str:
        return name if isinstance(name, str) and name in self._tools else UNKNOWN_TOOL
