"""The reference storage honours every method of backends.md §4."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.core.errors import InvalidInputError, NotFoundError
from recallstack.core.messages import Message
from recallstack.core.records import Include, Resource, Thread

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def msg(i: int, thread: str = "t1", at: int | None = None) -> Message:
    return Message(
        id=f"m{i:02d}",
        thread_id=thread,
        role="user" if i % 2 else "assistant",
        content=f"message {i}",
        created_at=T0 + timedelta(minutes=i if at is None else at),
    )


@pytest.fixture
def storage() -> InMemoryStorage:
    s = InMemoryStorage()
    s.save_thread(Thread(id="t1", resource_id="r1", title="one", created_at=T0))
    s.save_thread(Thread(id="t2", resource_id="r1", created_at=T0 + timedelta(days=1)))
    s.save_thread(Thread(id="t3", resource_id="r2", created_at=T0 + timedelta(days=2)))
    s.save_messages([msg(i) for i in range(10)])
    s.save_messages([msg(i, "t2") for i in range(10, 15)])
    s.save_messages([msg(i, "t3") for i in range(20, 23)])
    return s


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def test_resources() -> None:
    s = InMemoryStorage()
    assert s.get_resource("r") is None
    s.save_resource(Resource(id="r", metadata={"name": "Ada"}))
    s.save_resource(Resource(id="r", metadata={"name": "Grace"}))
    resource = s.get_resource("r")
    assert resource is not None and resource.metadata == {"name": "Grace"}


def test_thread_crud(storage: InMemoryStorage) -> None:
    thread = storage.get_thread("t1")
    assert thread is not None and thread.title == "one"
    updated = storage.update_thread("t1", title="renamed", metadata={"topic": "x"})
    assert (updated.title, updated.metadata) == ("renamed", {"topic": "x"})
    assert updated.updated_at >= thread.updated_at
    assert storage.get_thread("t1") == updated
    with pytest.raises(NotFoundError, match="'nope'"):
        storage.update_thread("nope", title="x")


def test_delete_thread_cascades(storage: InMemoryStorage) -> None:
    storage.delete_thread("t1")
    assert storage.get_thread("t1") is None
    assert storage.get_messages(["m00", "m10"]) == storage.get_messages(["m10"])
    assert storage.list_messages("t1").total == 0


def test_list_threads(storage: InMemoryStorage) -> None:
    page = storage.list_threads("r1")
    assert [t.id for t in page.items] == ["t2", "t1"]
    assert (page.total, page.has_more) == (2, False)
    first = storage.list_threads("r1", per_page=1, order="asc")
    assert ([t.id for t in first.items], first.has_more) == (["t1"], True)
    assert storage.list_threads("nobody").items == []


def test_messages_need_their_thread_and_take_its_resource(storage: InMemoryStorage) -> None:
    saved = storage.save_messages([msg(50)])
    assert saved[0].resource_id == "r1"
    with pytest.raises(NotFoundError, match="thread 'ghost'"):
        storage.save_messages([msg(51, "ghost")])
    wrong = msg(52).model_copy(update={"resource_id": "r2"})
    with pytest.raises(InvalidInputError, match="differs from its thread"):
        storage.save_messages([wrong])
    with pytest.raises(InvalidInputError, match="repeats"):
        storage.save_messages([msg(53), msg(53)])
    assert storage.get_messages(["m51", "m52", "m53"]) == []


def test_upsert_and_move(storage: InMemoryStorage) -> None:
    storage.save_messages([msg(3).model_copy(update={"content": "edited"})])
    assert storage.get_messages(["m03"])[0].text == "edited"
    storage.save_messages([msg(3, "t2")])
    assert "m03" not in ids(storage.list_messages("t1").items)
    assert "m03" in ids(storage.list_messages("t2").items)


def test_pagination_and_order(storage: InMemoryStorage) -> None:
    everything = storage.list_messages("t1")
    assert ids(everything.items) == [f"m{i:02d}" for i in range(10)]
    assert (everything.total, everything.has_more) == (10, False)
    page1 = storage.list_messages("t1", page=1, per_page=4)
    assert ids(page1.items) == ["m04", "m05", "m06", "m07"]
    assert page1.has_more
    newest = storage.list_messages("t1", per_page=3, order="desc")
    assert ids(newest.items) == ["m09", "m08", "m07"]
    assert storage.list_messages("t1", per_page=0).items == []
    assert storage.list_messages("t1", page=5, per_page=4).items == []


def test_ties_are_ordered_by_id() -> None:
    s = InMemoryStorage()
    s.save_thread(Thread(id="t", resource_id="r"))
    s.save_messages([msg(i, "t", at=0) for i in (3, 1, 2)])
    assert ids(s.list_messages("t").items) == ["m01", "m02", "m03"]


def test_date_range(storage: InMemoryStorage) -> None:
    page = storage.list_messages(
        "t1", start=T0 + timedelta(minutes=2), end=T0 + timedelta(minutes=4)
    )
    assert ids(page.items) == ["m02", "m03", "m04"]
    assert page.total == 3


def test_include_windows(storage: InMemoryStorage) -> None:
    page = storage.list_messages(
        "t1",
        resource_id="r1",
        per_page=0,
        include=[
            Include(id="m05", before=1, after=2),
            Include(id="m10", before=3, after=1),  # another thread of the same resource
            Include(id="m00", before=2),
            Include(id="m20", before=1, after=1),  # another resource: ignored
            Include(id="ghost", before=1),
        ],
    )
    assert ids(page.items) == ["m00", "m04", "m05", "m06", "m07", "m10", "m11"]


def test_include_merges_with_page(storage: InMemoryStorage) -> None:
    page = storage.list_messages(
        "t1", per_page=2, order="desc", include=[Include(id="m02", before=1)]
    )
    assert ids(page.items) == ["m09", "m08", "m02", "m01"]
    assert page.total == 10


def test_delete_messages(storage: InMemoryStorage) -> None:
    storage.delete_messages(["m00", "ghost"])
    storage.delete_messages([])
    assert storage.get_messages(["m00", "m01"]) == storage.get_messages(["m01"])


@pytest.mark.parametrize(
    "kwargs", [{"page": -1}, {"per_page": -1}, {"order": "sideways"}, {"page": True}]
)
def test_bad_paging(storage: InMemoryStorage, kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        storage.list_messages("t1", **kwargs)  # type: ignore[arg-type]
