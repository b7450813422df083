import asyncio
import uuid
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.paging import BadCursor
from sstools.convo.store.queries import (
    ConversationArchived,
    ConversationBusy,
    ConversationNotFound,
    ConversationStore,
    NewMessage,
)
from sstools.convo.store.uploads import UploadLimits, UploadStore


def _message(client_id: str, content: str = "", role: str = "user") -> NewMessage:
    return NewMessage(client_id, role, content or client_id, {"type": "token"})


async def test_title_is_the_first_user_message_cut_to_60_characters(store: ConversationStore) -> None:
    conversation = await store.create("alice")
    assert conversation["title"] == ""
    long_text = "покажи   дашборды с проблемами валидации в окружении production и staging пожалуйста"
    await store.append(
        "alice", conversation["id"], [_message("a1", "ok", role="system"), _message("u1", long_text)]
    )
    again = await store.get("alice", conversation["id"])
    assert again["title"] == " ".join(long_text.split())[:60]
    assert again["message_count"] == 2
    assert again["last_message_at"] is not None


async def test_fifty_concurrent_appends_keep_every_message_in_order_once(store: ConversationStore) -> None:
    conversation = await store.create("alice", "hi")
    ids = [f"m{number:02d}" for number in range(50)]
    await asyncio.gather(
        *(store.append("alice", conversation["id"], [_message(client_id)]) for client_id in ids)
    )
    await asyncio.gather(
        *(store.append("alice", conversation["id"], [_message(client_id)]) for client_id in ids[:10])
    )
    page = await store.history("alice", conversation["id"], limit=500)
    assert sorted(row["client_message_id"] for row in page.items) == ids
    assert [row["seq"] for row in page.items] == list(range(1, 51))
    assert (await store.get("alice", conversation["id"]))["message_count"] == 50


async def test_retried_append_returns_what_was_stored_and_stores_nothing_twice(
    store: ConversationStore,
) -> None:
    conversation = await store.create("alice")
    first = await store.append("alice", conversation["id"], [_message("x"), _message("y")])
    retried = await store.append("alice", conversation["id"], [_message("y"), _message("z"), _message("z")])
    assert [row["client_message_id"] for row in retried] == ["y", "z"]
    assert retried[0]["id"] == first[1]["id"]
    assert (await store.get("alice", conversation["id"]))["message_count"] == 3


async def test_history_pages_in_order(store: ConversationStore) -> None:
    conversation = await store.create("alice")
    await store.append("alice", conversation["id"], [_message(f"m{n}") for n in range(7)])
    seen, cursor = [], None
    while True:
        page = await store.history("alice", conversation["id"], limit=3, cursor=cursor)
        seen += [row["client_message_id"] for row in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"m{n}" for n in range(7)]
    with pytest.raises(BadCursor):
        await store.history("alice", conversation["id"], cursor="not-a-cursor")


async def test_listing_pages_filters_archived_and_searches_titles(store: ConversationStore) -> None:
    created = [await store.create("alice", f"report {number} about 100%_growth") for number in range(5)]
    await store.create("bob", "report of bob")
    await store.set_archived("alice", created[0]["id"], archived=True)
    names, cursor = [], None
    while True:
        page = await store.listing("alice", archived=False, limit=2, cursor=cursor)
        names += [row["title"] for row in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert names == [f"report {n} about 100%_growth" for n in (4, 3, 2, 1)]
    archived = await store.listing("alice", archived=True)
    assert [row["id"] for row in archived.items] == [created[0]["id"]]
    assert len((await store.listing("alice", archived=False, search="REPORT 3")).items) == 1
    assert len((await store.listing("alice", archived=False, search="100%_")).items) == 4
    assert (
        len((await store.listing("alice", archived=False, search="%")).items) == 4
    )  # literal, not a wildcard
    restored = await store.set_archived("alice", created[0]["id"], archived=False)
    assert not restored["is_archived"]
    assert restored["archived_at"] is None


async def test_search_finds_a_conversation_by_a_word_of_its_messages_too(store: ConversationStore) -> None:
    kept = await store.create("alice", "деплой в прод")
    await store.create("alice", "другое")
    await store.append("alice", kept["id"], [_message("u1", "проверь дашборд Квартальная выручка")])
    theirs = await store.create("bob", "bob's")
    await store.append("bob", theirs["id"], [_message("u1", "квартальная выручка у Боба")])
    found = await store.listing("alice", archived=False, search="КВАРТАЛЬНАЯ")
    assert [row["id"] for row in found.items] == [kept["id"]]  # hers only, whatever the case
    assert (await store.listing("alice", archived=False, search="выручка_")).items == []  # "_" is literal


async def test_someone_elses_conversation_does_not_exist_for_you(store: ConversationStore) -> None:
    conversation = await store.create("alice", "secret")
    for action in (
        store.get("bob", conversation["id"]),
        store.history("bob", conversation["id"]),
        store.append("bob", conversation["id"], [_message("x")]),
        store.set_archived("bob", conversation["id"], archived=True),
        store.acquire_lease("bob", conversation["id"], "pod-b", timedelta(seconds=30)),
        store.get("alice", uuid.uuid4()),
    ):
        with pytest.raises(ConversationNotFound):
            await action


async def test_one_lease_holder_at_a_time_until_it_expires_or_is_released(store: ConversationStore) -> None:
    conversation = await store.create("alice")
    cid = conversation["id"]
    first = await store.acquire_lease("alice", cid, "tab-1", timedelta(seconds=30))
    second = await store.acquire_lease("alice", cid, "tab-2", timedelta(seconds=30))
    assert first.acquired
    assert not second.acquired
    assert second.holder == "tab-1"
    assert (await store.acquire_lease("alice", cid, "tab-1", timedelta(seconds=30))).acquired  # re-entrant
    assert (await store.active_lease("alice", cid))["holder"] == "tab-1"  # type: ignore[index]
    assert await store.renew_lease(cid, "tab-2", timedelta(seconds=30)) is None
    assert await _ended(store, cid, "tab-1")
    assert await store.active_lease("alice", cid) is None
    assert (await store.acquire_lease("alice", cid, "tab-2", timedelta(milliseconds=1))).acquired
    await asyncio.sleep(0.05)
    assert await store.active_lease("alice", cid) is None  # a crashed holder does not lock forever
    taken = await store.acquire_lease("alice", cid, "tab-3", timedelta(seconds=30))
    assert taken.acquired
    assert await store.renew_lease(cid, "tab-2", timedelta(seconds=30)) is None  # lost to tab-3


async def test_an_archived_conversation_takes_no_message_lease_or_upload_until_restored(
    store: ConversationStore, engine: AsyncEngine
) -> None:
    conversation = await store.create("alice", "first")
    cid = conversation["id"]
    await store.append("alice", cid, [_message("u1", "first")])
    await store.set_archived("alice", cid, archived=True)
    uploads = UploadStore(engine, UploadLimits(max_files=5, max_bytes=10_000, ttl=timedelta(minutes=5)))
    for closed in (
        store.append("alice", cid, [_message("u2", "after the archive")]),
        store.acquire_lease("alice", cid, "pod-a", timedelta(seconds=30)),
        uploads.check_conversation("alice", cid),
        uploads.add("alice", cid, "notes.txt", b"text"),
    ):
        with pytest.raises(ConversationArchived):
            await closed
    assert [row["client_message_id"] for row in (await store.history("alice", cid)).items] == ["u1"]
    assert await store.active_lease("alice", cid) is None
    with pytest.raises(ConversationNotFound):  # to anyone else it still does not exist
        await store.acquire_lease("bob", cid, "pod-b", timedelta(seconds=30))

    await store.set_archived("alice", cid, archived=False)  # reopened, with its history
    assert (await store.acquire_lease("alice", cid, "pod-a", timedelta(seconds=30))).acquired
    await store.append("alice", cid, [_message("u2", "after the restore")])
    assert [row["client_message_id"] for row in (await store.history("alice", cid)).items] == ["u1", "u2"]


async def test_a_conversation_is_not_archived_under_a_running_turn_and_a_lapsed_turn_cannot_renew(
    store: ConversationStore,
) -> None:
    cid = (await store.create("alice", "hi"))["id"]
    assert (await store.acquire_lease("alice", cid, "turn-1", timedelta(seconds=30))).acquired
    with pytest.raises(ConversationBusy):
        await store.set_archived("alice", cid, archived=True)
    assert not (await store.get("alice", cid))["is_archived"]
    assert await _ended(store, cid, "turn-1")

    assert (await store.acquire_lease("alice", cid, "turn-2", timedelta(milliseconds=1))).acquired
    await asyncio.sleep(0.05)  # its holder went quiet: the lease lapsed
    assert (await store.set_archived("alice", cid, archived=True))["is_archived"]
    assert await store.renew_lease(cid, "turn-2", timedelta(seconds=30)) is None


async def test_archive_and_a_turn_racing_never_both_win(store: ConversationStore) -> None:
    """Taking the lease and archiving queue on the conversation's row: whichever is first, the
    other is refused; never an archived conversation with a turn running in it."""
    for round_number in range(20):
        cid = (await store.create("alice", f"race {round_number}"))["id"]
        lease, archive = await asyncio.gather(
            store.acquire_lease("alice", cid, "turn", timedelta(seconds=30)),
            store.set_archived("alice", cid, archived=True),
            return_exceptions=True,
        )
        turn_runs = not isinstance(lease, BaseException) and lease.acquired
        archived = not isinstance(archive, BaseException)
        assert turn_runs != archived, (lease, archive)
        assert isinstance(lease, ConversationArchived) or isinstance(archive, ConversationBusy)


async def test_creating_a_conversation_twice_returns_it_to_its_owner_only(store: ConversationStore) -> None:
    conversation_id = uuid.uuid4()
    first = await store.create("ann", "первое сообщение", conversation_id)
    again = await store.create("ann", "повтор", conversation_id)  # a retried create
    assert (again["id"], again["title"]) == (first["id"], "первое сообщение")
    with pytest.raises(ConversationNotFound):
        await store.create("bob", "чужой", conversation_id)


async def _ended(store: ConversationStore, conversation_id: uuid.UUID, holder: str) -> bool:
    """Whether the holder still had the lease its turn's end gave back."""
    ended = await store.end_turn(
        "alice", conversation_id, holder=holder, answer=None, audit_values={"decision": "allowed"}
    )
    return ended.released
