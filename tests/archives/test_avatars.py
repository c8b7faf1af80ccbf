"""A character's picture travels in the account's archive (avatars/<uid>.<suffix>) and comes back with it, checked
again as an upload is; an archive written before pictures were kept leaves the avatars there as they are."""

import io
import json
import zipfile

import pytest

from apps.archives.services.archive.export import archive_write
from apps.archives.services.archive.format import ArchiveError
from apps.archives.services.archive.importing import archive_import
from apps.chats.models import Character
from apps.chats.services.avatars import avatar_bytes, character_avatar_set
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import image_bytes

pytestmark = pytest.mark.django_db


def _written(user) -> bytes:
    target = io.BytesIO()
    archive_write(user=user, target=target)
    return target.getvalue()


def _rewritten(backup: bytes, change) -> io.BytesIO:
    """The archive with its characters.jsonl lines passed through `change` (and a member replaced or added)."""
    source, target = zipfile.ZipFile(io.BytesIO(backup)), io.BytesIO()
    with zipfile.ZipFile(target, "w") as out:
        for name in source.namelist():
            data = source.read(name)
            if name == "characters.jsonl":
                data = b"".join(json.dumps(change(json.loads(line))).encode() + b"\n" for line in data.splitlines())
            out.writestr(name, data)
    target.seek(0)
    return target


def test_a_pictures_character_comes_back_with_its_picture(user, other_user, media, scripted):
    picture = image_bytes("PNG", size=(6, 9))
    mira = character_avatar_set(character=CharacterFactory(user=user, name="Mira"), data=picture)
    CharacterFactory(user=user, name="Sera")  # none
    backup = _written(user)
    archive = zipfile.ZipFile(io.BytesIO(backup))
    lines = {row["name"]: row for row in map(json.loads, archive.read("characters.jsonl").splitlines())}
    assert lines["Mira"]["avatar"] == f"avatars/{mira.uid}.png" and lines["Sera"]["avatar"] is None
    assert archive.read(f"avatars/{mira.uid}.png") == picture

    counts = archive_import(user=other_user, source=io.BytesIO(backup))

    assert counts["characters"] == {"created": 2}
    theirs = Character.objects.get(user=other_user, name="Mira")
    assert avatar_bytes(theirs) == picture and theirs.avatar.name.startswith(f"avatars/{other_user.pk}/")
    assert not Character.objects.get(user=other_user, name="Sera").avatar


def test_an_archive_from_before_pictures_leaves_the_avatar_as_it_is(user, media, scripted):
    picture = image_bytes("PNG", size=(6, 9))
    mira = character_avatar_set(character=CharacterFactory(user=user, name="Mira"), data=picture)
    older = _rewritten(_written(user), lambda row: {key: value for key, value in row.items() if key != "avatar"})
    Character.objects.filter(pk=mira.pk).update(description="Changed since.")
    archive_import(user=user, source=older, restore=True)
    assert avatar_bytes(Character.objects.get(pk=mira.pk)) == picture


def test_a_picture_that_is_not_an_image_is_refused_naming_it_and_nothing_changes(user, other_user, media, scripted):
    mira = character_avatar_set(character=CharacterFactory(user=user, name="Mira"), data=image_bytes("PNG"))
    backup = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(_written(user))) as source, zipfile.ZipFile(backup, "w") as out:
        for name in source.namelist():
            out.writestr(name, b"<svg onload=alert(1)>" if name.startswith("avatars/") else source.read(name))
    backup.seek(0)
    with pytest.raises(ArchiveError) as refused:
        archive_import(user=other_user, source=backup)
    assert refused.value.message.startswith(f"avatars/{mira.uid}.png: Not an image")
    assert not Character.objects.filter(user=other_user).exists()


def test_a_character_naming_a_picture_the_archive_lacks_is_refused(user, other_user, media, scripted):
    mira = character_avatar_set(character=CharacterFactory(user=user, name="Mira"), data=image_bytes("PNG"))
    missing = _rewritten(_written(user), lambda row: row | {"avatar": f"avatars/{mira.uid}.webp"})
    with pytest.raises(ArchiveError, match=r"characters.jsonl, line 1: the picture avatars/.*\.webp is not in"):
        archive_import(user=other_user, source=missing)
    assert not Character.objects.filter(user=other_user).exists()


def test_pictures_stored_before_an_import_failed_are_not_left_on_disk(user, other_user, media, scripted):
    character_avatar_set(character=CharacterFactory(user=user, name="Mira"), data=image_bytes("PNG"))
    bad = character_avatar_set(character=CharacterFactory(user=user, name="Sera"), data=image_bytes("PNG"))
    backup = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(_written(user))) as source, zipfile.ZipFile(backup, "w") as out:
        for name in source.namelist():
            out.writestr(name, b"not a picture" if name == f"avatars/{bad.uid}.png" else source.read(name))
    backup.seek(0)
    with pytest.raises(ArchiveError, match="Not an image"):
        archive_import(user=other_user, source=backup)
    theirs = media / "avatars" / str(other_user.pk)
    assert not theirs.exists() or not any(theirs.iterdir()), list(theirs.iterdir())  # Mira's, stored first, gone
