import base64
import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.chats.models import Character
from apps.chats.services.avatars import MAX_AVATAR_BYTES, character_avatar_upload
from apps.chats.services.cards import character_import_card
from apps.chats.services.characters import character_delete
from apps.chats.services.png import png_text_chunks, png_with_card
from apps.common.exceptions import ApplicationError
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import image_bytes, pixels

pytestmark = pytest.mark.django_db


def card_png_bytes(name: str = "Seraphina") -> bytes:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": name}}
    return png_with_card(image_bytes("PNG", size=(6, 9)), base64.b64encode(json.dumps(card).encode()))


def test_a_png_cards_picture_becomes_the_avatar_without_the_card(user, media):
    character = character_import_card(user=user, stream=io.BytesIO(card_png_bytes()))
    assert character.avatar.name.startswith(f"avatars/{user.pk}/") and character.avatar.name.endswith(".png")
    stored = (media / character.avatar.name).read_bytes()
    assert png_text_chunks(stored) == {} and pixels(stored) == pixels(image_bytes("PNG", size=(6, 9)))


def test_a_json_card_or_a_png_whose_picture_does_not_decode_has_no_avatar(user, media):
    assert not character_import_card(user=user, stream=io.BytesIO(b'{"name": "Json"}')).avatar
    broken = png_with_card(image_bytes("PNG")[:40], base64.b64encode(b'{"name": "Broken"}'))
    character = character_import_card(user=user, stream=io.BytesIO(broken))
    assert character.name == "Broken" and not character.avatar


@pytest.mark.parametrize(
    ("kind", "content_type"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")]
)
def test_upload_and_serve_each_format(web, user, media, kind, content_type):
    character = CharacterFactory(user=user, name="Mira")
    upload = SimpleUploadedFile("whatever.bin", image_bytes(kind), "application/octet-stream")
    assert web.post(f"/characters/{character.pk}/avatar", {"avatar": upload}).status_code == 302
    response = web.get(f"/characters/{character.pk}/avatar")
    assert response.status_code == 200 and response["Content-Type"] == content_type
    assert b"".join(response.streaming_content) == image_bytes(kind)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (image_bytes("GIF"), "use PNG, JPEG or WebP"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'></svg>", "Not an image"),
        (image_bytes("PNG", size=(64, 64))[:60], "Not an image"),
        (b"", "empty"),
        (b"\x89PNG" + b"\x00" * MAX_AVATAR_BYTES, "larger than 5 MB"),
    ],
)
def test_a_bad_avatar_is_refused_naming_it_and_the_old_one_stays(user, media, data, problem):
    character = CharacterFactory(user=user, name="Mira")
    character_avatar_upload(character=character, stream=io.BytesIO(image_bytes("PNG")))
    before = Character.objects.get(pk=character.pk).avatar.name
    with pytest.raises(ApplicationError) as caught:
        character_avatar_upload(character=Character.objects.get(pk=character.pk), stream=io.BytesIO(data))
    assert problem in caught.value.message and caught.value.extra["field"] == "avatar"
    assert Character.objects.get(pk=character.pk).avatar.name == before and (media / before).exists()


def test_the_page_says_why_an_upload_was_refused(web, user, media):
    character = CharacterFactory(user=user, name="Mira")
    upload = SimpleUploadedFile("evil.png", b"not an image", "image/png")
    page = web.post(f"/characters/{character.pk}/avatar", {"avatar": upload}, follow=True).content.decode()
    assert "Avatar not changed: Not an image" in page and not Character.objects.get(pk=character.pk).avatar


def test_replacing_or_removing_an_avatar_deletes_the_old_file(web, user, media, django_capture_on_commit_callbacks):
    character = CharacterFactory(user=user, name="Mira")
    with django_capture_on_commit_callbacks(execute=True):
        character_avatar_upload(character=character, stream=io.BytesIO(image_bytes("PNG")))
    first = media / Character.objects.get(pk=character.pk).avatar.name
    with django_capture_on_commit_callbacks(execute=True):
        character_avatar_upload(character=character, stream=io.BytesIO(image_bytes("JPEG")))
    second = media / Character.objects.get(pk=character.pk).avatar.name
    assert not first.exists() and second.exists()
    with django_capture_on_commit_callbacks(execute=True):
        web.post(f"/characters/{character.pk}/avatar", {"remove": "on"})
    assert not second.exists() and not Character.objects.get(pk=character.pk).avatar
    assert web.get(f"/characters/{character.pk}/avatar").status_code == 404


def test_deleting_a_character_deletes_its_avatar(user, media, django_capture_on_commit_callbacks):
    character = character_import_card(user=user, stream=io.BytesIO(card_png_bytes()))
    path = Path(media) / character.avatar.name
    with django_capture_on_commit_callbacks(execute=True):
        character_delete(character=character)
    assert not path.exists()


def test_an_avatar_is_served_to_its_owner_only(web, client, other_user, user, media):
    character = character_import_card(user=user, stream=io.BytesIO(card_png_bytes()))
    url = f"/characters/{character.pk}/avatar"
    response = web.get(url)
    assert response.status_code == 200 and response["Cache-Control"].startswith("private")
    client.force_login(other_user)
    assert client.get(url).status_code == 404
    upload = SimpleUploadedFile("x.png", image_bytes("PNG"), "image/png")
    assert client.post(url, {"avatar": upload}).status_code == 404
    assert Character.objects.get(pk=character.pk).avatar.name == character.avatar.name
    client.logout()
    assert client.get(url)["Location"].startswith("/accounts/login/")


def test_no_avatar_is_a_404(web, user):
    character = CharacterFactory(user=user, name="Mira")
    assert web.get(f"/characters/{character.pk}/avatar").status_code == 404


def test_the_pages_show_the_avatar_or_the_initial(web, user, media):
    pictured = character_import_card(user=user, stream=io.BytesIO(card_png_bytes("Seraphina")))
    CharacterFactory(user=user, name="mira")
    listing = web.get("/characters/").content.decode()
    assert f'src="/characters/{pictured.pk}/avatar?v=' in listing
    assert 'class="avatar placeholder " aria-hidden="true">M</span>' in listing
    detail = web.get(f"/characters/{pictured.pk}/").content.decode()
    assert 'class="avatar large"' in detail and "Change the avatar" in detail


def test_the_api_says_where_the_avatar_is(api, user, media):
    pictured = character_import_card(user=user, stream=io.BytesIO(card_png_bytes()))
    plain = CharacterFactory(user=user, name="Plain")
    assert api.get(f"/api/v1/characters/{pictured.pk}/").json()["avatar"] == f"/characters/{pictured.pk}/avatar"
    assert api.get(f"/api/v1/characters/{plain.pk}/").json()["avatar"] is None
