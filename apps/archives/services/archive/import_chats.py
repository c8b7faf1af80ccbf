"""An archive's characters and chats, merged into the account (apps/archives/services/archive/importing.py runs them
in order). A chat already here whose integrity differs is kept, the archive's version saved beside it as a
revision; a restore does the opposite."""

from __future__ import annotations

import gzip
import io
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from apps.archives.services.archive.format import ArchiveError
from apps.archives.services.archive.merge import ArchiveImport, archived_uid
from apps.archives.services.archive.reader import ArchiveMember
from apps.archives.services.archive.records import CharacterRecordSerializer, ChatRecordSerializer, record_check
from apps.chats.jsonl import ImportLineError, is_header, iter_objects
from apps.chats.models import Character, Chat, ChatRevision
from apps.chats.services.avatars import avatar_read, character_avatar_clear, character_avatar_set
from apps.chats.services.characters import CHARACTER_FIELDS
from apps.chats.services.chats import chat_import
from apps.chats.services.writes import _replace_contents, _snapshot
from apps.common.exceptions import ApplicationError
from apps.sync.models import FeedType
from apps.sync.services.feed import feed_revive


def characters_in(job: ArchiveImport) -> None:
    name = "characters.jsonl"
    for number, row in job.archive.lines(name):
        archived = archived_uid(row.get("uid"), file=name, line=number)
        record = record_check(CharacterRecordSerializer, row, file=name, line=number)
        uid = job.local(Character, archived)
        fields = {field: record[field] for field in CHARACTER_FIELDS if field in record}
        stored = Character.objects.filter(user=job.user, uid=uid).first()
        if stored is None:
            if (FeedType.CHARACTER, uid) in job.tombstoned and not job.restore:
                job.count("characters", "deleted here")
                continue
            character = Character.objects.create(
                user=job.user,
                uid=uid,
                clock=record["clock"],
                changed_at=record["changed_at"],
                changed_by=record["changed_by"],
                source_instance=record["source_instance"],
                participating_instances=record["participating_instances"],
                **fields,
            )
            _avatar_in(job, character, row, record, line=number)
            if (FeedType.CHARACTER, uid) in job.tombstoned:
                feed_revive(user_id=job.user.pk, kind=FeedType.CHARACTER, uid=uid)
                job.count("characters", "revived")
            else:
                job.count("characters", "created")
            job.characters[str(archived)] = character.pk
            continue
        job.characters[str(archived)] = stored.pk
        side, kept_clock = job.winner(record["clock"], record["changed_at"], record["changed_by"], stored)
        if side == "archive":
            for field, value in fields.items():
                setattr(stored, field, value)
            stored.clock, stored.changed_at, stored.changed_by = (
                kept_clock,
                record["changed_at"],
                record["changed_by"],
            )
            stored.save()
            _avatar_in(job, stored, row, record, line=number)
            job.count("characters", "updated")
        else:
            if kept_clock != stored.clock:
                Character.objects.filter(pk=stored.pk).update(clock=kept_clock)
            job.count("characters", "kept")


def _avatar_in(job: ArchiveImport, character: Character, row: dict, record: dict, *, line: int) -> None:
    """The archived character's picture (its member, checked as an upload is) made its avatar; none, when the
    archive says it has none. An archive written before pictures were kept says nothing: the avatar stays."""
    if "avatar" not in row:
        return
    if record["avatar"] is None:
        character_avatar_clear(character=character)
        return
    member = job.archive.member(record["avatar"])
    if member is None:
        raise ArchiveError(f"the picture {record['avatar']} is not in the archive", file="characters.jsonl", line=line)
    with member:
        try:
            data = avatar_read(member)
        except ApplicationError as exc:
            raise ArchiveError(exc.message, file=record["avatar"]) from exc
    try:
        character_avatar_set(character=character, data=data)
    except ApplicationError as exc:
        raise ArchiveError(exc.message, file=record["avatar"]) from exc
    job.files.append((character.avatar.storage, character.avatar.name))


class _Tee:
    """A chat file read by the line reader while its bytes go, as they come, into the revision's gzip."""

    def __init__(self, member: ArchiveMember, out: gzip.GzipFile) -> None:
        self.member, self.out = member, out

    def read(self, size: int) -> bytes:
        data = self.member.read(size)
        self.out.write(data)
        return data


def _revision_of(member: ArchiveMember) -> tuple[bytes, int]:
    """A chat file kept as a revision: gzipped a chunk at a time, every line checked as a chat import checks it.
    Answers the gzip and its number of messages."""
    buffer = io.BytesIO()
    messages, first = 0, True
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6) as out:
        for _number, obj in iter_objects(_Tee(member, out), max_bytes=settings.LOREKEEPER_MAX_IMPORT_BYTES):
            if not (first and is_header(obj)):
                messages += 1
            first = False
    if first:
        raise ArchiveError("the chat file is empty: a SillyTavern chat has at least one line", file=member.name)
    return buffer.getvalue(), messages


@contextmanager
def _chat_file(job: ArchiveImport, path: str) -> Iterator[ArchiveMember]:
    """A chat file of the archive, streamed; what the chat import refuses in it is refused naming the file."""
    member = job.archive.member(path)
    try:
        with member:
            yield member
    except ArchiveError:
        raise
    except ImportLineError as exc:
        raise ArchiveError(exc.extra["problem"], file=path, line=exc.extra["line"]) from exc
    except ApplicationError as exc:
        raise ArchiveError(exc.message, file=path) from exc


def _chat_create(job: ArchiveImport, record: dict[str, Any], uid: uuid.UUID, path: str) -> int:
    """A chat new here: imported from its file as the chat import does, under the archive's uid and integrity."""
    characters = [job.characters[str(c)] for c in record["characters"] if str(c) in job.characters]
    with _chat_file(job, path) as member:
        chat = chat_import(
            user=job.user,
            stream=member,
            filename=path,
            title=record.get("title") or "",
            character_ids=characters,
        )
    same = {"uid": uid}
    if record.get("integrity"):  # the same version as archived
        same["integrity"] = record["integrity"]
    Chat.objects.filter(pk=chat.pk).update(**same)
    job.count("chats", "created")
    return chat.pk


def _chat_merge(job: ArchiveImport, stored: Chat, record: dict[str, Any], path: str, *, line: int) -> None:
    """A chat already here: the same version is left; a restore brings the archive's back (the current one saved
    as a revision), an import keeps the current one and saves the archive's as a revision."""
    if str(stored.integrity) == str(record.get("integrity")):
        job.count("chats", "same")
        return
    if job.restore:
        _snapshot(stored, reason="before restoring a backup")
        with _chat_file(job, path) as member:
            _replace_contents(stored, member)
        job.count("chats", "restored")
        return
    integrity = archived_uid(record.get("integrity"), file="chats.jsonl", line=line, field="integrity")
    with _chat_file(job, path) as member:
        jsonl_gzip, messages = _revision_of(member)
    ChatRevision.objects.create(
        chat=stored,
        reason="imported archive (kept beside the current chat)",
        integrity=integrity,
        message_count=messages,
        jsonl_gzip=jsonl_gzip,
    )
    job.count("chats", "kept, archive's version saved as a revision")


def chats_in(job: ArchiveImport) -> None:
    name = "chats.jsonl"
    total = job.expected("chats")
    for position, (number, row) in enumerate(job.archive.lines(name)):
        of = f" of {total}" if total else ""
        job.progress(f"chat {position + 1}{of}", 10 + int(40 * min(position / max(total, 1), 1)))
        archived = archived_uid(row.get("uid"), file=name, line=number)
        record = record_check(ChatRecordSerializer, row, file=name, line=number)
        uid = job.local(Chat, archived)
        path = record.get("file") or f"chats/{archived}.jsonl"
        if path not in job.archive.names:
            raise ArchiveError(f"the chat's file {path!r} is not in the archive", file=name, line=number)
        stored = Chat.objects.filter(user=job.user, uid=uid).first()
        if stored is None:
            job.chats[str(archived)] = _chat_create(job, record, uid, path)
        else:
            job.chats[str(archived)] = stored.pk
            _chat_merge(job, stored, record, path, line=number)
