"""PNG chunks, for the character data SillyTavern keeps in a card's `tEXt` chunks (`chara`: V2, `ccv3`: V3)."""

from __future__ import annotations

import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_KEYWORDS = (b"chara", b"ccv3")


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, body) of each chunk up to IEND; a truncated chunk ends the list."""
    chunks = []
    position = len(PNG_SIGNATURE)
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        if position + 12 + length > len(data):
            break
        chunks.append((kind, data[position + 8 : position + 8 + length]))
        position += 12 + length
        if kind == b"IEND":
            break
    return chunks


def png_join(chunks: list[tuple[bytes, bytes]]) -> bytes:
    parts = [PNG_SIGNATURE]
    for kind, body in chunks:
        parts.append(struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body)))
    return b"".join(parts)


def _is_card_chunk(kind: bytes, body: bytes) -> bool:
    return kind == b"tEXt" and body.partition(b"\x00")[0].lower() in CARD_KEYWORDS


def png_text_chunks(data: bytes) -> dict[bytes, bytes]:
    """The `tEXt` chunks by keyword (lower-cased; the first of a keyword wins)."""
    texts: dict[bytes, bytes] = {}
    for kind, body in png_chunks(data):
        if kind == b"tEXt" and b"\x00" in body:
            keyword, _, text = body.partition(b"\x00")
            texts.setdefault(keyword.lower(), text)
    return texts


def png_without_card(data: bytes) -> bytes:
    """The image alone: the PNG without its character data chunks."""
    return png_join([(kind, body) for kind, body in png_chunks(data) if not _is_card_chunk(kind, body)])


def png_with_card(data: bytes, chara: bytes) -> bytes:
    """The PNG with `chara` (base64 text) as its only character data, in a `tEXt` chunk just before IEND, as
    SillyTavern writes a card (any earlier `chara` or `ccv3` chunk is dropped, so none contradicts it)."""
    chunks = [(kind, body) for kind, body in png_chunks(data) if not _is_card_chunk(kind, body)]
    end = next((i for i, (kind, _) in enumerate(chunks) if kind == b"IEND"), len(chunks))
    chunks.insert(end, (b"tEXt", b"chara\x00" + chara))
    if end == len(chunks) - 1:
        chunks.append((b"IEND", b""))
    return png_join(chunks)
