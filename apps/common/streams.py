"""Request bodies read as streams: counted against a limit (413 past it), hashed, spooled to disk when large."""

from __future__ import annotations

import hashlib
import tempfile

from apps.common.exceptions import ApplicationError

CHUNK = 256 * 1024
SPOOL_IN_MEMORY = 8 * 1024 * 1024


class LimitedReader:
    """A stream that answers 413 once more than `limit` bytes have been read from it."""

    def __init__(self, stream, limit: int) -> None:
        self.stream, self.total, self.limit = stream, 0, limit

    def read(self, size: int = CHUNK) -> bytes:
        data = self.stream.read(size if size and size > 0 else CHUNK)
        self.total += len(data)
        if self.total > self.limit:
            raise ApplicationError(
                f"The request body is larger than this server accepts ({self.limit // (1024 * 1024)} MB).",
                {"max_bytes": self.limit},
                status=413,
            )
        return data


def spool_body(request, *, limit: int) -> tuple[tempfile.SpooledTemporaryFile, str]:
    """The raw body of a DRF request, read once into a spool (memory up to 8 MB, then disk), with its SHA-256.
    Later calls answer the same spool, rewound."""
    http_request = request._request
    cached = getattr(http_request, "_lorekeeper_spool", None)
    if cached is None:
        spool, digest = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY), hashlib.sha256()
        reader = LimitedReader(http_request, limit)
        while chunk := reader.read(CHUNK):
            spool.write(chunk)
            digest.update(chunk)
        cached = http_request._lorekeeper_spool = (spool, digest.hexdigest())
    cached[0].seek(0)
    return cached
