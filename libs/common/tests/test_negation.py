"""The language layer's negation scope, the one the router's keywords, the fast path and the
planner all read: what a person refuses, in Russian and in English, and what only sounds like it;
and chat shorthand, read as the words it stands for."""

import pytest

from sstools.common.language import affirmed, negated, words


def _refused(text: str, word: str) -> bool:
    message = words(text)
    index = next(i for i, item in enumerate(message) if item.text.lower() == word)
    return negated(message, index)


@pytest.mark.parametrize(
    ("text", "refused", "asked"),
    [
        ("не надо ничего деплоить, просто скажи, есть ли ошибки", "деплоить", "ошибки"),
        ("пока ничего не выкатывай, сначала посмотри, нет ли ошибок", "выкатывай", "ошибок"),
        ("пока не деплой, сначала проверь", "деплой", "проверь"),
        ("бэкап не делай, покажи окружения", "бэкап", "окружения"),
        ("бэкап не нужен, а вот отчёт покажи", "бэкап", "отчёт"),
        ("без бэкапа, просто задеплой", "бэкапа", "задеплой"),
    ],
)
def test_russian_a_refused_action_is_negated_and_the_one_asked_after_it_is_not(
    text: str, refused: str, asked: str
) -> None:
    assert _refused(text, refused)
    assert not _refused(text, asked)


@pytest.mark.parametrize(
    ("text", "refused", "asked"),
    [
        ("don't deploy anything, just tell me if there are errors", "deploy", "errors"),
        ("do not back up prod, list the environments instead", "back", "list"),
        ("don't bother to deploy it yet, first check it", "deploy", "check"),
        ("no need to deploy, only validate it", "deploy", "validate"),
        ("the backup is not needed, show the health", "backup", "health"),
        ("skip the backup and deploy", "backup", "deploy"),
    ],
)
def test_english_a_refused_action_is_negated_and_the_one_asked_after_it_is_not(
    text: str, refused: str, asked: str
) -> None:
    assert _refused(text, refused)
    assert not _refused(text, asked)


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("почему не работает дашборд", "дашборд"),  # a state, not a refusal
        ("найди дашборды не на проде, а на деве", "дашборды"),  # a place refused, not the action
        ("deploy it not to prod but to dev", "deploy"),
        ("нет ли ошибок на проде?", "ошибок"),  # "не … ли" asks
        ("the dashboard doesn't load, what is wrong", "wrong"),
        ("why is the dashboard not working", "dashboard"),
    ],
)
def test_a_negated_state_or_a_question_refuses_nothing(text: str, word: str) -> None:
    assert not _refused(text, word)


def test_the_embedding_tier_reads_only_the_clauses_a_negation_does_not_open() -> None:
    assert affirmed("не выкатывай на прод, покажи ошибки") == "покажи ошибки"
    assert affirmed("show errors, do not deploy them") == "show errors"


@pytest.mark.parametrize(
    ("shorthand", "written"),
    [("wat can u do 4 me", "what can you do 4 me"), ("скока строк щас", "сколько строк сейчас")],
)
def test_chat_shorthand_is_read_as_the_words_it_stands_for(shorthand: str, written: str) -> None:
    assert [word.stem for word in words(shorthand)] == [word.stem for word in words(written)]
    assert [word.text for word in words("r u sure")] == ["are", "you", "sure"]
