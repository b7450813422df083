"""The offline planner: the chat model a stack without an LLM endpoint runs on. :mod:`.reading`
reads a message with the language layer, :mod:`.steps` chooses the tool whose declared words the
message affirms and fills its frame — each argument by its type, from the words, the live system
(:mod:`.grounded`, :mod:`.asked_data`) and the conversation — or asks one precise question;
:mod:`.model` is the chat model the graph runs."""

from sstools.agent.planner.model import GROUND, NEEDS_CLARIFICATION, OFFLINE_MODEL_NAME, OfflinePlanner

__all__ = ["GROUND", "NEEDS_CLARIFICATION", "OFFLINE_MODEL_NAME", "OfflinePlanner"]
