"""Characters' avatars: checked by their content (Pillow decodes them), kept under the owner's folder of MEDIA,
never served directly (apps/chats/views/characters.py serves one to its owner)."""

from __future__ import annotations

import io
from typing import BinaryIO

from django.core.files.base import ContentFile
from django.db import transaction
from PIL import Image, UnidentifiedImageError

from apps.chats.models import Character
from apps.common.exceptions import ApplicationError

MAX_AVATAR_BYTES = 5 * 1024 * 1024
# Far beyond any avatar, and far below what would take the server's memory to decode.
MAX_AVATAR_PIXELS = 40_000_000
FORMATS = {"PNG": ("png", "image/png"), "JPEG": ("jpg", "image/jpeg"), "WEBP": ("webp", "image/webp")}
CONTENT_TYPES = {suffix: content_type for suffix, content_type in FORMATS.values()}


def _avatar_error(problem: str) -> ApplicationError:
    return ApplicationError(problem, {"field": "avatar"})


def avatar_format(data: bytes) -> str:
    """ "PNG", "JPEG" or "WEBP", read from the image itself (whatever its name says), after decoding it whole: a
    file that is not such an image, or a truncated one, is refused."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = image.format
            if kind not in FORMATS:
                raise _avatar_error(f"The avatar is a {kind or 'unknown'} image: use PNG, JPEG or WebP.")
            if image.width * image.height > MAX_AVATAR_PIXELS:
                raise _avatar_error(f"The avatar is too large: {image.width}×{image.height} pixels.")
            image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise _avatar_error("Not an image: the avatar must be a PNG, JPEG or WebP picture.") from exc
    return kind


def avatar_read(stream: BinaryIO) -> bytes:
    data = stream.read(MAX_AVATAR_BYTES + 1)
    if len(data) > MAX_AVATAR_BYTES:
        raise ApplicationError("The avatar is larger than 5 MB.", {"field": "avatar"}, status=413)
    if not data:
        raise _avatar_error("The avatar file is empty.")
    return data


def _forget(character: Character) -> None:
    """Delete the file the character had, once the change is committed (a rollback keeps it)."""
    name = character.avatar.name
    if name:
        storage = character.avatar.storage
        transaction.on_commit(lambda: storage.delete(name))


@transaction.atomic
def character_avatar_set(*, character: Character, data: bytes) -> Character:
    """Make `data` (a PNG, JPEG or WebP image, checked by its content) the character's avatar, in place of the one it
    had."""
    suffix = FORMATS[avatar_format(data)][0]
    # The row locked and its file read again: of two uploads at once, the second forgets the first's file, so none
    # is left behind on disk.
    character.avatar.name = Character.objects.select_for_update().values_list("avatar", flat=True).get(pk=character.pk)
    _forget(character)
    character.avatar.save(f"avatar.{suffix}", ContentFile(data), save=False)
    character.save(update_fields=["avatar", "updated_at"])
    return character


@transaction.atomic
def character_avatar_upload(*, character: Character, stream: BinaryIO) -> Character:
    """An uploaded avatar: at most 5 MB, PNG, JPEG or WebP by its content; a bad one is a 400 naming `avatar`."""
    return character_avatar_set(character=character, data=avatar_read(stream))


@transaction.atomic
def character_avatar_clear(*, character: Character) -> Character:
    if character.avatar:
        _forget(character)
        character.avatar = ""
        character.save(update_fields=["avatar", "updated_at"])
    return character


def avatar_content_type(character: Character) -> str:
    suffix = character.avatar.name.rsplit(".", 1)[-1].lower()
    return CONTENT_TYPES.get(suffix, "application/octet-stream")


def avatar_bytes(character: Character) -> bytes | None:
    """The avatar's file, or None when the character has none (or its file is gone)."""
    if not character.avatar:
        return None
    try:
        with character.avatar.open("rb") as stream:
            return stream.read()
    except (FileNotFoundError, OSError):
        return None
