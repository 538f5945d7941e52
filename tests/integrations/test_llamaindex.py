"""recallstack.integrations.llamaindex with LlamaIndex's own `Memory`: what Memory
flushes out of its short-term window is saved to recallstack, and a later session of
the same user gets what the memory recalls for the newest user message, in the
system message LlamaIndex builds from its memory blocks. On LibSQL and Postgres,
with the hash embedder. Run by `nox -s integration-llamaindex`."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from recallstack import AsyncMemory
from recallstack.core.errors import InvalidInputError
from recallstack.integrations.llamaindex import RecallstackMemoryBlock
from recallstack.integrations.recalled import NOTE


def session(memory: AsyncMemory, session_id: str, resource_id: str = "maya") -> Memory:
    """A LlamaIndex Memory whose short-term window holds about 30 words."""
    return Memory.from_defaults(
        session_id=session_id,
        token_limit=60,
        chat_history_token_ratio=0.5,
        token_flush_size=10,
        tokenizer_fn=str.split,  # a word is a token: offline, and easy to reason about
        memory_blocks=[RecallstackMemoryBlock(memory=memory, resource_id=resource_id)],
    )


TURNS = [
    ChatMessage(role="user", content="I am vegetarian and I never eat fish"),
    ChatMessage(role="assistant", content="Understood, no meat and no fish for you"),
    ChatMessage(role="user", content="We land in Kyoto on May 3 for a week"),
    ChatMessage(role="assistant", content="Kyoto in May is lovely, enjoy the trip"),
    ChatMessage(role="user", content="My cat Bob stays with my sister meanwhile"),
    ChatMessage(role="assistant", content="Good to know Bob is in safe hands"),
]


async def test_flushed_messages_are_saved_and_recalled_later(memory: AsyncMemory) -> None:
    first = session(memory, "week1")
    await first.aput_messages(TURNS)
    saved = (await memory.recall("week1", "maya", per_page=100)).messages
    assert saved, "Memory flushed nothing: the window is too large for the test"
    assert [m.text for m in saved] == [t.content for t in TURNS[: len(saved)]]
    assert [m.role for m in saved] == [t.role.value for t in TURNS[: len(saved)]]

    later = session(memory, "week2")
    built = await later.aget(input="is she vegetarian, does she eat fish?")
    system = built[0]
    assert system.role == "system" and NOTE in str(system.content)
    assert "user: I am vegetarian and I never eat fish" in str(system.content)


async def test_nothing_recalled_adds_no_block(memory: AsyncMemory) -> None:
    built = await session(memory, "s").aget(input="hello")
    assert all(NOTE not in str(m.content) for m in built)


async def test_recall_keeps_to_the_resource(memory: AsyncMemory) -> None:
    await session(memory, "week1").aput_messages(TURNS)
    built = await session(memory, "other", resource_id="sam").aget(input="vegetarian fish")
    assert all(NOTE not in str(m.content) for m in built)


async def test_a_thread_of_another_resource_is_refused(memory: AsyncMemory) -> None:
    await session(memory, "week1").aput_messages(TURNS)
    before = (await memory.recall("week1", "maya", per_page=100)).messages
    with pytest.raises(InvalidInputError, match="another resource"):
        await session(memory, "week1", resource_id="sam").aput_messages(TURNS)
    assert (await memory.recall("week1", "maya", per_page=100)).messages == before


def test_bad_ids_are_refused(memory: AsyncMemory) -> None:
    with pytest.raises(InvalidInputError, match="resource_id"):
        RecallstackMemoryBlock(memory=memory, resource_id="")
    with pytest.raises(InvalidInputError, match="AsyncMemory"):
        RecallstackMemoryBlock(memory="libsql:///x.db", resource_id="maya")  # type: ignore[arg-type]


async def test_messages_without_a_session_are_refused(memory: AsyncMemory) -> None:
    block = RecallstackMemoryBlock(memory=memory, resource_id="maya")
    with pytest.raises(InvalidInputError, match="session_id"):
        await block.aput([ChatMessage(role="user", content="hi")])


async def test_a_flush_of_thousands_of_messages(memory: AsyncMemory) -> None:
    """What Memory flushes at once is saved in one call, in order, and recalled."""
    block = RecallstackMemoryBlock(memory=memory, resource_id="maya")
    flushed = [
        ChatMessage(role="user" if n % 2 == 0 else "assistant", content=f"note {n} about boats")
        for n in range(5000)
    ]
    flushed[2500] = ChatMessage(role="user", content="my cat Bob hates the vet")
    await block.aput(flushed, session_id="long")
    saved = await memory.recall("long", "maya", per_page=5000)
    assert [m.text for m in saved.messages] == [str(m.content) for m in flushed]
    recalled = await block.aget([ChatMessage(role="user", content="cat Bob vet")], session_id="t")
    assert "user: my cat Bob hates the vet" in recalled
