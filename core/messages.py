"""Messages: the unit of conversation that memory saves, embeds and recalls."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from recallstack.core.errors import InvalidInputError
from recallstack.core.inputs import Document, Id, Text, ToolArguments, ToolResult
from recallstack.core.model import Model

Role = Literal["user", "assistant", "system", "tool"]


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Aware datetimes are converted to UTC; naive ones are taken as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class TextPart(Model):
    model_config = ConfigDict(frozen=True)
    type: Literal["text"] = "text"
    text: Text


class ToolCallPart(Model):
    model_config = ConfigDict(frozen=True)
    type: Literal["tool_call"] = "tool_call"
    id: Text
    name: Text
    arguments: ToolArguments = Field(default_factory=dict)


class ToolResultPart(Model):
    model_config = ConfigDict(frozen=True)
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: Text
    result: ToolResult = None


Part = Annotated[TextPart | ToolCallPart | ToolResultPart, Field(discriminator="type")]


class Message(Model):
    """A saved message. Messages of a thread are ordered by (created_at, id)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Id = Field(default_factory=lambda: str(uuid.uuid4()))
    thread_id: Id
    resource_id: Id | None = None
    role: Role
    content: Text | list[Part]
    created_at: datetime = Field(default_factory=utc_now)
    metadata: Document | None = None
    source: Literal["memory"] | None = Field(default=None, exclude=True)
    """Set on messages that recall added to an input; never persisted."""

    _utc = field_validator("created_at")(as_utc)

    @property
    def text(self) -> str:
        """The text parts joined with newlines: what is embedded and searched."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def sort_key(self) -> tuple[datetime, str]:
        return (self.created_at, self.id)

    def to_openai(self) -> dict[str, Any]:
        """An OpenAI-style chat message dict."""
        if isinstance(self.content, str):
            return {"role": self.role, "content": self.content}
        calls = [p for p in self.content if isinstance(p, ToolCallPart)]
        results = [p for p in self.content if isinstance(p, ToolResultPart)]
        out: dict[str, Any] = {"role": self.role, "content": self.text or None}
        if calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ]
        if results:
            out["tool_call_id"] = results[0].tool_call_id
            result = results[0].result
            out["content"] = result if isinstance(result, str) else json.dumps(result)
        return out

    @classmethod
    def from_openai(
        cls,
        data: dict[str, Any],
        *,
        thread_id: str,
        resource_id: str | None = None,
        **fields: Any,
    ) -> Message:
        """Build a message from an OpenAI-style chat message dict."""
        role = data.get("role")
        if role not in ("user", "assistant", "system", "tool"):
            raise InvalidInputError(f"unknown chat message role {role!r}")
        content = data.get("content")
        if isinstance(content, list):  # OpenAI content parts
            content = "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
        parts: list[TextPart | ToolCallPart | ToolResultPart] = []
        if role == "tool":
            parts.append(ToolResultPart(tool_call_id=data.get("tool_call_id", ""), result=content))
        elif content:
            parts.append(TextPart(text=content))
        for call in data.get("tool_calls") or []:
            function = call.get("function", {})
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError as exc:
                raise InvalidInputError(
                    f"tool call {call.get('id')!r}: arguments are not valid JSON"
                ) from exc
            parts.append(ToolCallPart(id=call["id"], name=function["name"], arguments=arguments))
        body: str | list[TextPart | ToolCallPart | ToolResultPart] = parts
        if not parts:
            body = ""
        elif len(parts) == 1 and isinstance(parts[0], TextPart):
            body = parts[0].text
        return cls(thread_id=thread_id, resource_id=resource_id, role=role, content=body, **fields)
