import io
import json
from pathlib import Path

from PIL import Image

from apps.chats.models import Chat
from apps.chats.services.chats import chat_export_lines

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_FILES = sorted(p.name for p in FIXTURES.glob("*.jsonl"))


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def json_lines(data: bytes) -> list:
    """The JSON value of every non-blank line. Lines end at "\n" only, as SillyTavern splits them: U+0085 and
    U+2028 are ordinary characters inside JSON strings (str.splitlines would cut there)."""
    return [json.loads(line) for line in data.decode("utf-8").split("\n") if line.strip()]


def stream(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)


def fresh(chat) -> Chat:
    """The chat as stored now."""
    return Chat.objects.get(pk=chat.pk)


def exported(chat) -> list:
    """The chat's JSONL export as stored now, one JSON value per line."""
    return json_lines(b"".join(chat_export_lines(chat=Chat.objects.get(pk=chat.pk))))


def if_match(chat_or_integrity) -> dict:
    """If-Match with a chat's integrity (as the object in hand holds it) or with an integrity given as is."""
    integrity = getattr(chat_or_integrity, "integrity", chat_or_integrity)
    return {"HTTP_IF_MATCH": f'"{integrity}"'}


def image_bytes(kind: str = "PNG", size: tuple[int, int] = (8, 12), colour=(200, 60, 40)) -> bytes:
    """A small picture in a format Pillow writes (PNG, JPEG, WEBP, GIF…)."""
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format=kind)
    return buffer.getvalue()


def pixels(data: bytes) -> tuple[tuple[int, int], bytes]:
    """The picture's size and pixels (RGB), to compare pictures whatever their file."""
    with Image.open(io.BytesIO(data)) as image:
        return image.size, image.convert("RGB").tobytes()


# A Character Card V2 as SillyTavern's card editor writes one (the card tests start from it).
SERAPHINA_CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Seraphina",
        "description": "A guardian of the forest glade. 🌲",
        "personality": "kind, protective",
        "scenario": "You wake in her glade.",
        "first_mes": "*She tends your wounds.*",
        "mes_example": "<START>\n{{char}}: Rest.",
        "creator_notes": "Made for testing.",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": ["Hello again."],
        "character_book": {"entries": [{"keys": ["glade"], "content": "A magical clearing."}]},
        "tags": ["fantasy", "guardian"],
        "creator": "someone",
        "character_version": "1.1",
        "extensions": {"talkativeness": "0.5", "depth_prompt": {"prompt": "", "depth": 4}},
    },
}
