"""One chat command — a message sent, or a person's answer to a card — as a pipeline read in one
direction, each stage a module taking and returning typed values:

    admit → gather → run the graph → stream → record

- **admit** (:mod:`.admit`): whether the command runs now — the checkpoints ready, one send at a
  time per page session, the user's message budget, one command per conversation (a lock in this
  process, convo's lease across pods), a send's files the user's own uploads here; ``Refusal``
  says why not, before anything of it ran.
- **gather** (:mod:`.gather`): what the graph is run with — for a send the environments, the
  turn's context, the router's tools, the user's role, the message kept in convo, the files read
  and the dashboards fetched ahead; for an answer the card it names, its edits checked, the role
  ops gives the user now. A :class:`~sstools.agent.context.RunContext` and the graph's input.
- **run the graph**: :func:`sstools.agent.stream.graph_events`, whose gate
  (:mod:`sstools.agent.gate`) decides every tool call.
- **stream**: each event in the person's language, without what only the audit reads
  (:mod:`sstools.agent.stream`; the events are declared in :mod:`sstools.agent.events`).
- **record** (:mod:`.record`): the answer kept in convo, however it ended, and one audit record
  of the command.

:class:`sstools.agent.chat.ChatService` only composes them.

**Exactly once.** A change a person confirmed runs at most once, whatever is sent again, from
which tab, to which replica, across restarts:

1. One command per conversation at a time: the process lock and convo's lease (admit); a dead
   pod's lease lapses after its TTL, so a conversation is never stuck.
2. A card is a paused call kept in the checkpoint, with a digest of everything it shows; a confirm
   names the call and the digest (:func:`sstools.agent.admission.card_answered`): an answer to
   another card, or to one changed since, is refused; edits that change what the card shows make
   a new card, never a run.
3. A call's result keeps the answer it had (``gate.ANSWERED``): the same answer sent again is told
   that result, nothing run (``replayed``).
4. The call goes to ops with an Idempotency-Key of the conversation, the model's message, the
   call and the digest (:func:`sstools.agent.tools.idempotency_key`): ops answers a repeat — a
   resume after a restart — with the first result instead of running it again.
5. A confirmed call carries a confirmation signed for this user, tool, key and exact request
   (``gate._grant``); ops refuses a change that needs one without it.
"""

from dataclasses import dataclass
from functools import cached_property

from sstools.agent.context import Focus
from sstools.agent.language import DEFAULT_LANG, Lang, language_of


@dataclass(frozen=True)
class Turn:
    """One command as the page submitted it (the Gradio edge has checked its form)."""

    username: str
    user_token: str
    conversation_id: str
    text: str = ""
    action: str = "send"  # send | confirm | reject
    env_id: str | None = None
    ui_env_id: str | None = None
    focus: Focus | None = None  # the object the page shows
    page_lang: Lang = DEFAULT_LANG
    session_id: str = ""  # the Gradio session: one send at a time in each
    files: tuple[str, ...] = ()  # ids of this user's uploads in convo attached to the message

    @cached_property
    def lang(self) -> Lang:
        """The language the person is answered in: their message's; the page's for a card's
        answer. Read once a turn (the events, the config and the card all use it)."""
        return language_of(self.text, self.page_lang) if self.action == "send" else self.page_lang

    @property
    def env(self) -> str | None:
        """The environment the turn is about: the one submitted, else the page's context."""
        return self.env_id or self.ui_env_id
