"""Reads of what sync keeps beside a chat; the chat itself comes from a user-scoped selector."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator

from django.db.models import QuerySet
from django.http import Http404

from apps.chats.models import Chat
from apps.sync.models import ChatRevision

REVISION_LIST_LIMIT = 100
CHUNK = 256 * 1024


def revision_list(*, chat: Chat) -> QuerySet[ChatRevision]:
    """The chat's kept versions, newest first, without their (possibly large) contents."""
    return ChatRevision.objects.filter(chat=chat).defer("jsonl_gzip")


def revision_get(*, chat: Chat, revision_id: int) -> ChatRevision:
    try:
        return ChatRevision.objects.get(chat=chat, pk=revision_id)
    except ChatRevision.DoesNotExist as exc:
        raise Http404("No such version of this chat.") from exc


def revision_lines(*, revision: ChatRevision) -> Iterator[bytes]:
    """The kept JSONL, decompressed a chunk at a time (a 100 MB chat is never held whole)."""
    with revision_stream(revision=revision) as stream:
        while chunk := stream.read(CHUNK):
            yield chunk


def revision_stream(*, revision: ChatRevision) -> gzip.GzipFile:
    return gzip.GzipFile(fileobj=io.BytesIO(bytes(revision.jsonl_gzip)))
