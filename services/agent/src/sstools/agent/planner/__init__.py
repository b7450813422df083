"""The offline planner: the chat model a stack without an LLM endpoint runs on."""

from sstools.agent.planner.model import NEEDS_CLARIFICATION, OFFLINE_MODEL_NAME, OfflinePlanner

__all__ = ["NEEDS_CLARIFICATION", "OFFLINE_MODEL_NAME", "OfflinePlanner"]
