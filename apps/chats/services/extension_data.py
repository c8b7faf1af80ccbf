"""Per-message extension data (auto-recap's get_data / set_data, docs/GLOSSARY.md): `message.extra[namespace][key]`,
swipe-aware."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_lock, chat_touch
from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import unstorable_reason


@dataclass
class ExtensionData:
    message: Message
    namespace: str

    @property
    def data(self) -> Any:
        return self.message.extra.get(self.namespace)

    @property
    def swipe_data(self) -> Any:
        """The current swipe's own copy (`swipe_info[swipe_id].extra[namespace]`), when it has one."""
        extra = _current_swipe_extra(self.message, create=False)
        return extra.get(self.namespace) if extra is not None else None


def _current_swipe_extra(message: Message, *, create: bool) -> dict[str, Any] | None:
    info, swipe_id = message.swipe_info, message.swipe_id
    if not isinstance(info, list) or swipe_id is None or not 0 <= swipe_id < len(info):
        return None
    entry = info[swipe_id]
    if not isinstance(entry, dict):
        return None
    if not isinstance(entry.get("extra"), dict):
        if not create:
            return None
        entry["extra"] = {}
    return entry["extra"]


def extension_data_get(*, chat: Chat, index: int, namespace: str) -> ExtensionData:
    return ExtensionData(message=Message.objects.get(chat=chat, index=index), namespace=namespace)


@transaction.atomic
def extension_data_set(
    *, chat: Chat, index: int, namespace: str, values: dict[str, Any], integrity: uuid.UUID
) -> tuple[ExtensionData, Chat]:
    """set_data for several keys at once: each key of `values` is set in `extra[namespace]` (null is stored as
    null, as set_data does), then the whole namespace is copied into the current swipe's `swipe_info` entry, so
    each swipe keeps its own data. Switching swipes does not copy anything back: until the next write,
    `extra[namespace]` still shows the previous swipe's data, as with auto-recap's set_data."""
    if not isinstance(values, dict) or not values:
        raise ApplicationError("`values` must be a non-empty JSON object of keys to set.", {"field": "values"})
    reason = unstorable_reason({namespace: values})
    if reason:
        raise ApplicationError(f"`values` {reason}.", {"field": "values"})
    chat = chat_lock(chat=chat, integrity=integrity)
    message = Message.objects.get(chat=chat, index=index)
    current = message.extra.get(namespace)
    namespace_data = dict(current) if isinstance(current, dict) else {}
    namespace_data.update(values)
    message.extra[namespace] = namespace_data
    message.other_fields.pop("extra", None)  # a non-object `extra` kept verbatim gives way to the real one
    swipe_extra = _current_swipe_extra(message, create=True)
    if swipe_extra is not None:
        swipe_extra[namespace] = copy.deepcopy(namespace_data)
    if "extra" in message.absent_fields:
        message.absent_fields.remove("extra")
    message.save(update_fields=["extra", "swipe_info", "other_fields", "absent_fields"])
    return ExtensionData(message=message, namespace=namespace), chat_touch(chat=chat)


@transaction.atomic
def extension_data_put(
    *,
    chat: Chat,
    index: int,
    namespace: str,
    value: dict[str, Any] | None,
    integrity: uuid.UUID | None = None,
    mirror: bool = False,
) -> tuple[ExtensionData, Chat]:
    """Replace `extra[namespace]` whole (None removes it), in the message and in its current swipe's copy — for a
    namespace that is one record (ST-BME's `bme_recall`) rather than keys set one by one. `integrity` None: the
    server writes on its own behalf (the chat's row lock still orders it with every other write)."""
    if value is not None:
        reason = unstorable_reason({namespace: value})
        if reason:
            raise ApplicationError(f"The value {reason}.", {"field": namespace})
    chat = chat_lock(chat=chat, integrity=integrity)
    message = Message.objects.get(chat=chat, index=index)
    if not isinstance(message.extra, dict):
        message.extra = {}
    swipe_extra = _current_swipe_extra(message, create=value is not None)
    if value is None:
        message.extra.pop(namespace, None)
        if swipe_extra is not None:
            swipe_extra.pop(namespace, None)
    else:
        message.extra[namespace] = value
        message.other_fields.pop("extra", None)
        if swipe_extra is not None:
            swipe_extra[namespace] = copy.deepcopy(value)
        if "extra" in message.absent_fields:
            message.absent_fields.remove("extra")
    message.save(update_fields=["extra", "swipe_info", "other_fields", "absent_fields"])
    return ExtensionData(message=message, namespace=namespace), chat_touch(chat=chat, mirror=mirror)
