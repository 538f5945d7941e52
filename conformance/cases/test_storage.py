"""Group 8: storage of threads, messages and resources (docs/spec/backends.md §4)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from recallstack.core.contracts.storage import Storage
from recallstack.core.errors import InvalidInputError, NotFoundError, UnsupportedFeatureError
from recallstack.core.messages import Message, TextPart, ToolCallPart
from recallstack.core.records import Include, Resource, Thread

T0 = datetime(2024, 1, 1, tzinfo=UTC)
Ids = Callable[[str], str]


class World:
    """Three threads: two of resource r1 (10 and 5 messages), one of r2 (3 messages)."""

    def __init__(self, storage: Storage, ids: Ids) -> None:
        self.s, self.ids = storage, ids
        self.r1, self.r2 = ids("r1"), ids("r2")
        self.t1, self.t2, self.t3 = ids("t1"), ids("t2"), ids("t3")
        storage.save_thread(Thread(id=self.t1, resource_id=self.r1, title="one", created_at=T0))
        storage.save_thread(
            Thread(id=self.t2, resource_id=self.r1, created_at=T0 + timedelta(days=1))
        )
        storage.save_thread(
            Thread(id=self.t3, resource_id=self.r2, created_at=T0 + timedelta(days=2))
        )
        storage.save_messages([self.msg(i, self.t1) for i in range(10)])
        storage.save_messages([self.msg(i, self.t2) for i in range(10, 15)])
        storage.save_messages([self.msg(i, self.t3) for i in range(20, 23)])

    def m(self, i: int) -> str:
        return self.ids(f"m{i:02d}")

    def msg(self, i: int, thread: str, minute: int | None = None) -> Message:
        return Message(
            id=self.m(i),
            thread_id=thread,
            role="user" if i % 2 else "assistant",
            content=f"message {i}",
            created_at=T0 + timedelta(minutes=i if minute is None else minute),
            metadata={"i": i},
        )

    def names(self, messages: list[Message]) -> list[str]:
        prefix = self.ids("")
        return [m.id.removeprefix(prefix) for m in messages]


@pytest.fixture
def world(storage: Storage, ids: Ids) -> World:
    return World(storage, ids)


def test_resources(storage: Storage, ids: Ids) -> None:
    rid = ids("resource")
    assert storage.get_resource(rid) is None
    storage.save_resource(Resource(id=rid, metadata={"name": "Ada"}))
    storage.save_resource(Resource(id=rid, metadata={"name": "Grace", "n": [1, 2]}))
    resource = storage.get_resource(rid)
    assert resource is not None
    assert resource.metadata == {"name": "Grace", "n": [1, 2]}


def test_thread_crud(world: World) -> None:
    thread = world.s.get_thread(world.t1)
    assert thread is not None
    assert (thread.title, thread.resource_id, thread.created_at) == ("one", world.r1, T0)
    updated = world.s.update_thread(world.t1, title="renamed", metadata={"topic": "x"})
    assert (updated.title, updated.metadata) == ("renamed", {"topic": "x"})
    assert world.s.get_thread(world.t1) == updated
    with pytest.raises(NotFoundError):
        world.s.update_thread(world.ids("ghost"), title="x")
    assert world.s.get_thread(world.ids("ghost")) is None


def test_delete_thread_cascades(world: World) -> None:
    world.s.delete_thread(world.t1)
    assert world.s.get_thread(world.t1) is None
    assert world.names(world.s.get_messages([world.m(0), world.m(10)])) == ["m10"]
    assert world.s.list_messages(world.t1).total == 0


def test_list_threads(world: World) -> None:
    page = world.s.list_threads(world.r1)
    assert [t.id for t in page.items] == [world.t2, world.t1]
    assert (page.total, page.has_more) == (2, False)
    first = world.s.list_threads(world.r1, per_page=1, order="asc")
    assert ([t.id for t in first.items], first.has_more) == ([world.t1], True)
    assert world.s.list_threads(world.ids("nobody")).items == []


def test_every_thread_in_pages(world: World) -> None:
    """`all_threads` walks every resource's threads by id in code-point order; the
    store may hold other tests' threads, so only this test's are compared."""
    extra = [world.ids(n) for n in ("Zeta", "alpha", "ä-umlaut", "日本")]
    for n, thread_id in enumerate(extra):
        world.s.save_thread(Thread(id=thread_id, resource_id=world.ids(f"other{n}")))
    seen: list[str] = []
    after = None
    while page := world.s.all_threads(after=after, limit=2):
        assert len(page) <= 2
        seen += [t.id for t in page]
        after = page[-1].id
    assert seen == sorted(seen) and len(seen) == len(set(seen))
    ours = [world.t1, world.t2, world.t3, *extra]
    assert [i for i in seen if i in ours] == sorted(ours)
    first = world.s.all_threads(after=world.t1, limit=1)
    assert first[0].id > world.t1
    with pytest.raises(InvalidInputError):
        world.s.all_threads(limit=0)
    with pytest.raises(InvalidInputError):
        world.s.all_threads(after=3)  # type: ignore[arg-type]


def test_every_resource_in_pages(world: World) -> None:
    """`all_resources` walks every resource record by id in code-point order, those
    that own no thread included; only this test's are compared."""
    ours = [world.ids(n) for n in ("Zeta", "alpha", "ä-umlaut", "日本", "no-threads")]
    for n, resource_id in enumerate(ours):
        world.s.save_resource(Resource(id=resource_id, metadata={"n": n}))
    seen: list[str] = []
    metadata = {}
    after = None
    while page := world.s.all_resources(after=after, limit=2):
        assert len(page) <= 2
        seen += [r.id for r in page]
        metadata.update({r.id: r.metadata for r in page})
        after = page[-1].id
    assert seen == sorted(seen) and len(seen) == len(set(seen))
    assert [i for i in seen if i in ours] == sorted(ours)
    assert [metadata[i] for i in ours] == [{"n": n} for n in range(len(ours))]
    with pytest.raises(InvalidInputError):
        world.s.all_resources(limit=0)
    with pytest.raises(InvalidInputError):
        world.s.all_resources(after=3)  # type: ignore[arg-type]


def test_message_round_trip(world: World) -> None:
    rich = Message(
        id=world.ids("rich"),
        thread_id=world.t1,
        role="assistant",
        content=[TextPart(text="hi ✓"), ToolCallPart(id="c", name="f", arguments={"a": [1]})],
        created_at=datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC),
        metadata={"nested": {"x": None}},
    )
    world.s.save_messages([rich])
    (loaded,) = world.s.get_messages([rich.id])
    assert loaded == rich.model_copy(update={"resource_id": world.r1})


def test_messages_need_their_thread(world: World) -> None:
    with pytest.raises(NotFoundError):
        world.s.save_messages([world.msg(51, world.ids("ghost"))])
    wrong = world.msg(52, world.t1).model_copy(update={"resource_id": world.r2})
    with pytest.raises(InvalidInputError):
        world.s.save_messages([wrong])
    assert world.s.get_messages([world.m(51), world.m(52)]) == []


def test_upsert_and_move(world: World) -> None:
    world.s.save_messages([world.msg(3, world.t1).model_copy(update={"content": "edited"})])
    assert world.s.get_messages([world.m(3)])[0].text == "edited"
    assert world.s.list_messages(world.t1).total == 10
    world.s.save_messages([world.msg(3, world.t2)])
    assert "m03" not in world.names(world.s.list_messages(world.t1).items)
    assert "m03" in world.names(world.s.list_messages(world.t2).items)


def test_pagination_and_order(world: World) -> None:
    everything = world.s.list_messages(world.t1)
    assert world.names(everything.items) == [f"m{i:02d}" for i in range(10)]
    assert (everything.total, everything.has_more) == (10, False)
    page1 = world.s.list_messages(world.t1, page=1, per_page=4)
    assert world.names(page1.items) == ["m04", "m05", "m06", "m07"]
    assert page1.has_more
    newest = world.s.list_messages(world.t1, per_page=3, order="desc")
    assert world.names(newest.items) == ["m09", "m08", "m07"]
    empty = world.s.list_messages(world.t1, per_page=0)
    assert (empty.items, empty.total, empty.has_more) == ([], 10, True)
    assert world.s.list_messages(world.t1, page=5, per_page=4).items == []


def test_ties_are_ordered_by_id(storage: Storage, ids: Ids) -> None:
    world_thread = ids("tie")
    storage.save_thread(Thread(id=world_thread, resource_id=ids("r")))
    at = T0 + timedelta(hours=1)
    storage.save_messages(
        [
            Message(id=ids(n), thread_id=world_thread, role="user", content=n, created_at=at)
            for n in ("c", "a", "b")
        ]
    )
    listed = storage.list_messages(world_thread).items
    assert [m.id for m in listed] == [ids("a"), ids("b"), ids("c")]


def test_date_range(world: World) -> None:
    page = world.s.list_messages(
        world.t1, start=T0 + timedelta(minutes=2), end=T0 + timedelta(minutes=4)
    )
    assert world.names(page.items) == ["m02", "m03", "m04"]
    assert page.total == 3


def test_message_windows(world: World) -> None:
    windows = world.s.message_windows(
        [
            Include(id=world.m(5), before=1, after=2),
            Include(id=world.m(10), before=3, after=1),  # another thread, same resource
            Include(id=world.m(0), before=2),
            Include(id=world.m(20), before=1, after=1),  # another resource: never
            Include(id=world.ids("ghost"), before=1),
        ],
        resource_id=world.r1,
    )
    assert world.names(windows) == ["m00", "m04", "m05", "m06", "m07", "m10", "m11"]
    assert world.s.message_windows([]) == []
    with pytest.raises(InvalidInputError):
        world.s.message_windows([world.m(5)])  # type: ignore[list-item]


def test_message_windows_without_a_resource(world: World) -> None:
    windows = world.s.message_windows([Include(id=world.m(20), before=1, after=1)])
    assert world.names(windows) == ["m20", "m21"]


def test_delete_messages(world: World) -> None:
    world.s.delete_messages([world.m(0), world.ids("ghost")])
    world.s.delete_messages([])
    assert world.names(world.s.get_messages([world.m(0), world.m(1)])) == ["m01"]


@pytest.mark.parametrize("kwargs", [{"page": -1}, {"per_page": -1}, {"order": "sideways"}])
def test_bad_paging(world: World, kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        world.s.list_messages(world.t1, **kwargs)  # type: ignore[arg-type]


def test_index_ledger(world: World) -> None:
    index = world.ids("index")
    other = world.ids("other-index")
    assert {world.m(0), world.m(20)} <= {m.id for m in world.s.unindexed(index, limit=10_000)}
    world.s.mark_indexed([world.m(0), world.m(1)], index)
    world.s.mark_indexed([world.m(0)], other)
    missing = {m.id for m in world.s.unindexed(index, limit=10_000)}
    assert world.m(0) not in missing and world.m(1) not in missing and world.m(2) in missing
    assert {index, other} <= set(world.s.index_names())
    asked = [world.m(0), world.m(1), world.m(2), world.ids("never-saved")]
    assert world.s.recorded(asked, index) == {world.m(0), world.m(1)}
    assert world.s.recorded(asked, other) == {world.m(0)}
    assert world.s.recorded([], index) == set()
    # saving a message again forgets it: its text may have changed
    world.s.save_messages([world.msg(0, world.t1).model_copy(update={"content": "edited"})])
    assert world.m(0) in {m.id for m in world.s.unindexed(index, limit=10_000)}
    assert world.s.recorded([world.m(0), world.m(1)], index) == {world.m(1)}
    # deleting forgets too
    world.s.delete_messages([world.m(1)])
    world.s.delete_thread(world.t1)
    assert other not in world.s.index_names()
    oldest = world.s.unindexed(index, limit=2)
    assert len(oldest) == 2
    assert oldest == sorted(oldest, key=lambda m: m.sort_key)
    with pytest.raises(InvalidInputError):
        world.s.unindexed(index, limit=0)


def test_a_thread_never_changes_owner(world: World) -> None:
    with pytest.raises(InvalidInputError, match="another resource"):
        world.s.save_thread(Thread(id=world.t3, resource_id=world.r1, title="mine now"))
    thread = world.s.get_thread(world.t3)
    assert thread is not None and (thread.resource_id, thread.title) == (world.r2, None)
    assert world.names(world.s.list_messages(world.t3).items) == ["m20", "m21", "m22"]


def test_another_resources_message_is_never_overwritten(world: World) -> None:
    """Message ids are global: a batch naming another resource's message is refused
    whole, and that message stays as it was."""
    theirs = world.msg(20, world.t1)  # m20 is r2's, in t3; this would move it to r1
    with pytest.raises(InvalidInputError, match="another resource"):
        world.s.save_messages([world.msg(30, world.t1), theirs])
    (kept,) = world.s.get_messages([world.m(20)])
    assert (kept.thread_id, kept.resource_id) == (world.t3, world.r2)
    assert world.s.get_messages([world.m(30)]) == []


@pytest.mark.parametrize("hostile", [{"$ne": "x"}, ["r"], 7, None, "", "x" * 513, "a\x00"])
def test_ids_must_be_strings(world: World, hostile: object) -> None:
    """A dict as an id would become a filter operator: every id argument is checked
    before the backend sees it."""
    calls: list[Callable[[], object]] = [
        lambda: world.s.list_threads(hostile),  # type: ignore[arg-type]
        lambda: world.s.get_resource(hostile),  # type: ignore[arg-type]
        lambda: world.s.get_messages([hostile]),  # type: ignore[list-item]
        lambda: world.s.delete_messages([hostile]),  # type: ignore[list-item]
        lambda: world.s.list_messages(world.t1, resource_id=hostile or 0),  # type: ignore[arg-type]
    ]
    if hostile is not None:
        calls += [
            lambda: world.s.get_thread(hostile),  # type: ignore[arg-type]
            lambda: world.s.delete_thread(hostile),  # type: ignore[arg-type]
        ]
    for call in calls:
        with pytest.raises(InvalidInputError):
            call()
    assert len(world.s.list_messages(world.t1).items) == 10
    assert len(world.s.list_messages(world.t3).items) == 3


def test_keyword_search(storage: Storage, ids: Ids, request: pytest.FixtureRequest) -> None:
    """Hybrid recall's keyword signal: the resource's (or thread's) messages holding a
    word, best first by BM25, in step with every write; refused where not declared."""
    word = ids("x").split("_")[1]  # a word no other case stores: the ids' random part
    r1, r2, t1, t2, t3 = (ids(n) for n in ("kr1", "kr2", "kt1", "kt2", "kt3"))
    for thread, resource in ((t1, r1), (t2, r1), (t3, r2)):
        storage.save_thread(Thread(id=thread, resource_id=resource))
    texts = {
        "often": (t1, "user", f"{word} {word} {word}"),
        "once": (t1, "assistant", f"{word} and some other words here"),
        "none": (t1, "user", "nothing to find"),
        "other-thread": (t2, "user", f"{word.upper()} {word}"),
        "system": (t1, "system", word),
        "theirs": (t3, "user", f"{word} {word} {word} {word}"),
    }
    storage.save_messages(
        [
            Message(id=ids(name), thread_id=thread, role=role, content=text)  # type: ignore[arg-type]
            for name, (thread, role, text) in texts.items()
        ]
    )
    if not storage.keyword_search:
        with pytest.raises(UnsupportedFeatureError, match="keyword search"):
            storage.search_words(word, resource_id=r1)
        request.node.user_properties.append(("recallstack_unsupported", "keyword search"))
        return

    def found(query: str, resource: str = r1, thread_id: str | None = None) -> list[str]:
        hits = storage.search_words(query, resource_id=resource, thread_id=thread_id)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        assert all(s > 0 for _, s in hits)
        return [i.removeprefix(ids("")) for i, _ in hits]

    assert found(word) == ["often", "other-thread", "once"]
    assert found(word, thread_id=t2) == ["other-thread"]
    assert found(word, resource=r2) == ["theirs"]
    assert set(found(f"nothing {word}")) == {"often", "once", "none", "other-thread"}
    assert found("?!") == []
    storage.save_messages([Message(id=ids("often"), thread_id=t1, role="user", content="gone")])
    storage.delete_messages([ids("once")])
    assert found(word) == ["other-thread"]
    storage.delete_thread(t2)
    assert found(word) == []
    with pytest.raises(InvalidInputError):
        storage.search_words(word, resource_id={"$ne": ""})  # type: ignore[arg-type]
