"""Threads and resources: who owns a conversation and how it is titled."""

from __future__ import annotations

from datetime import datetime
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from recallstack.core.inputs import Document, Id, Text
from recallstack.core.messages import Message, as_utc, utc_now
from recallstack.core.model import Model


class Thread(Model):
    """One conversation, owned by a resource (usually a user)."""

    model_config = ConfigDict(frozen=True)

    id: Id
    resource_id: Id
    title: Text | None = None
    metadata: Document = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime = Field(default_factory=utc_now)

    _utc = field_validator("created_at", "updated_at")(as_utc)


class Resource(Model):
    """The owner of threads; resource-scoped recall searches all its threads."""

    model_config = ConfigDict(frozen=True)

    id: Id
    metadata: Document = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime = Field(default_factory=utc_now)

    _utc = field_validator("created_at", "updated_at")(as_utc)


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a listing."""

    items: list[T]
    total: int
    page: int
    per_page: int | None
    has_more: bool


class Include(Model):
    """Ask a message listing for a message and its neighbours in its own thread."""

    model_config = ConfigDict(frozen=True)

    id: Id
    before: int = Field(default=0, ge=0)
    after: int = Field(default=0, ge=0)


MessagePage = Page[Message]
ThreadPage = Page[Thread]
