import base64
import html
import io
import json
import struct
import zlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.chats.models import Character
from apps.chats.services.cards import character_import_card
from apps.common.exceptions import ApplicationError
from tests.chats.helpers import SERAPHINA_CARD

pytestmark = pytest.mark.django_db


def png_with_text(chunks: dict[bytes, bytes]) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0))
    texts = b"".join(chunk(b"tEXt", key + b"\x00" + value) for key, value in chunks.items())
    return b"\x89PNG\r\n\x1a\n" + header + texts + chunk(b"IEND", b"")


def b64(card: dict) -> bytes:
    return base64.b64encode(json.dumps(card).encode())


def test_v2_json_card_fills_the_fields_and_keeps_the_card_verbatim(user):
    character = character_import_card(user=user, stream=io.BytesIO(json.dumps(SERAPHINA_CARD).encode()))
    assert character.name == "Seraphina" and character.first_mes == "*She tends your wounds.*"
    assert character.tags == ["fantasy", "guardian"] and character.creator_notes == "Made for testing."
    character.refresh_from_db()
    assert character.card_data == SERAPHINA_CARD


def test_png_card_prefers_the_v3_chunk(user):
    v3 = {
        **SERAPHINA_CARD,
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {**SERAPHINA_CARD["data"], "name": "Sera V3"},
    }
    data = png_with_text({b"chara": b64(SERAPHINA_CARD), b"ccv3": b64(v3)})
    assert character_import_card(user=user, stream=io.BytesIO(data)).name == "Sera V3"


def test_png_card_with_only_the_v2_chunk(user):
    assert (
        character_import_card(user=user, stream=io.BytesIO(png_with_text({b"chara": b64(SERAPHINA_CARD)}))).name
        == "Seraphina"
    )


def test_v1_and_tavernai_cards(user):
    v1 = {"name": "Aqua", "description": "Goddess.", "first_mes": "Hi!", "talkativeness": "0.5"}
    assert character_import_card(user=user, stream=io.BytesIO(json.dumps(v1).encode())).description == "Goddess."
    tavern = {"char_name": "Old", "char_persona": "From TavernAI.", "char_greeting": "Greetings."}
    old = character_import_card(user=user, stream=io.BytesIO(json.dumps(tavern).encode()))
    assert (old.name, old.description, old.first_mes) == ("Old", "From TavernAI.", "Greetings.")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "JSON object"),
        (b'{"description": "no name"}', "no name"),
        (png_with_text({b"Comment": b"hello"}), "no 'chara'"),
        (b'{"name": "x\\u0000"}', "NUL"),
    ],
)
def test_a_file_that_is_not_a_card_is_refused_naming_the_problem(user, data, problem):
    with pytest.raises(ApplicationError) as caught:
        character_import_card(user=user, stream=io.BytesIO(data))
    assert problem in caught.value.message and caught.value.extra["field"] == "file"
    assert not Character.objects.exists()


def test_card_import_api(api, other_api):
    upload = SimpleUploadedFile("sera.png", png_with_text({b"chara": b64(SERAPHINA_CARD)}), content_type="image/png")
    response = api.post("/api/v1/characters/import", {"file": upload}, format="multipart")
    assert response.status_code == 201
    assert response.json()["name"] == "Seraphina" and response.json()["card_data"] == SERAPHINA_CARD
    assert other_api.get(f"/api/v1/characters/{response.json()['id']}/").status_code == 404
    bad = api.post("/api/v1/characters/import", {"file": SimpleUploadedFile("x.json", b"{}")}, format="multipart")
    assert bad.status_code == 400 and bad.json()["extra"]["field"] == "file"


def test_character_pages(web, user, other_user):
    upload = SimpleUploadedFile("sera.json", json.dumps(SERAPHINA_CARD).encode())
    response = web.post("/characters/import/", {"file": upload})
    character = Character.objects.get(user=user)
    assert response.url == f"/characters/{character.pk}/"
    page = web.get(response.url).content.decode()
    assert "A guardian of the forest glade." in page and "The card as imported" in page
    # The card is shown as the JSON it is (escaped in the page), not as Python's repr of it.
    shown = html.unescape(page.split('<pre class="card-json">')[1].split("</pre>")[0])
    assert json.loads(shown) == character.card_data
    response = web.post(f"/characters/{character.pk}/", {"name": "Seraphina", "personality": "stern", "tags": "a, b"})
    character.refresh_from_db()
    assert character.personality == "stern" and character.tags == ["a", "b"]
    fragment = web.get("/characters/?q=sera", HTTP_HX_REQUEST="true").content.decode()
    assert "Seraphina" in fragment and "<html" not in fragment
    created = web.post("/characters/new/", {"name": "Brand new"})
    assert Character.objects.get(name="Brand new").user == user and created.status_code == 302
    theirs = Character.objects.create(user=other_user, name="Theirs")
    assert web.get(f"/characters/{theirs.pk}/").status_code == 404
    assert web.post(f"/characters/{theirs.pk}/", {"name": "Stolen"}).status_code == 404
    assert web.post(f"/characters/{theirs.pk}/delete/").status_code == 404
    assert "Theirs" not in web.get("/characters/").content.decode()
    assert web.post(f"/characters/{character.pk}/delete/").status_code == 302
    assert not Character.objects.filter(pk=character.pk).exists()


def test_a_bad_card_upload_in_the_page_says_why(web):
    response = web.post("/characters/import/", {"file": SimpleUploadedFile("x.json", b"nope")}, follow=True)
    assert "Not a character card" in response.content.decode()
