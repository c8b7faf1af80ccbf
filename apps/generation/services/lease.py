"""A streaming generation's lease, and how many may stream at once.

The process streaming a reply renews its lease every third of `lease_seconds`, saving the text so far with it. A
process that dies (killed, out of memory, a machine gone) renews nothing: once its lease has run out the generation
is ended failed, keeping the text last saved, stored as any failed reply is (apps/generation/services/store.py).
The sweep does it every half minute (beat), and a retry with the same Idempotency-Key does it when it finds one, so
that the retry answers how it ended instead of "still generating" forever.

Streams at once: a person may have `streams_per_user` generations streaming under a live lease (counted in
PostgreSQL, so across every web process; 429), and a process serves at most `streams_per_process` (503); both
answer `Retry-After`.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractUser
from django.db import connection as db_connection
from django.db import transaction
from django.utils import timezone

from apps.common.exceptions import ApplicationError
from apps.generation.models import Generation
from apps.generation.selectors import generations_streaming_count
from apps.generation.services.bounds import generation_settings
from apps.generation.services.store import reply_store

log = logging.getLogger(__name__)
LAPSED = "the server stopped in the middle of the reply; what had arrived is kept"
SWEEP_BATCH = 200
_LOCK_CLASS = 3303  # pg_advisory_xact_lock's first key: a person's new generations, counted one at a time


class StreamsBusy(ApplicationError):
    """Too many streams at once: the answer carries `Retry-After` (`headers`)."""

    def __init__(self, message: str, *, status: int, code: str) -> None:
        self.retry_after = int(generation_settings()["retry_after"])
        super().__init__(message, {"retry_after": self.retry_after}, status=status, code=code)

    def headers(self, *, may_close: bool = False) -> dict[str, str]:
        """The answer's headers. A full process also closes the connection where the server lets it (`may_close`,
        apps/common/views.py), so that the client's next try connects afresh and reaches a worker with room
        (apps/common/worker.py), not this one again."""
        headers = {"Retry-After": str(self.retry_after)}
        if self.status == 503 and may_close:
            headers["Connection"] = "close"
        return headers


def lease_seconds() -> float:
    return float(generation_settings()["lease_seconds"])


def lease_end(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=lease_seconds())


def lease_renew(*, generation_id: int, text: str) -> bool:
    """Renew a streaming generation's lease and save its text so far; False when it is no longer streaming (the
    sweep took it for dead, or it was stored)."""
    updated = Generation.objects.filter(pk=generation_id, state=Generation.State.STREAMING).update(
        lease_until=lease_end(), text=text
    )
    return updated == 1


def generation_lapse(*, generation_id: int, now: datetime | None = None) -> bool:
    """End a streaming generation whose lease ran out: failed, keeping the text its last renewal saved. True when
    it was ended here."""
    with transaction.atomic():
        generation = Generation.objects.select_for_update().select_related("chat").get(pk=generation_id)
        if generation.state != Generation.State.STREAMING or not _lapsed(generation, now or timezone.now()):
            return False
        reply_store(
            generation=generation,
            text=generation.text,
            state=Generation.State.FAILED,
            error=LAPSED,
            reason=Generation.Reason.LEASE,
        )
    log.warning("generation %s: its lease ran out while streaming; ended failed", generation.uid)
    return True


def _lapsed(generation: Generation, now: datetime) -> bool:
    return generation.lease_until is None or generation.lease_until < now


def generations_lapsed_end() -> int:
    """The sweep: every streaming generation whose lease ran out is ended failed. Answers how many."""
    now = timezone.now()
    ids = list(
        Generation.objects.filter(state=Generation.State.STREAMING, lease_until__lt=now).values_list("pk", flat=True)[
            :SWEEP_BATCH
        ]
    )
    return sum(generation_lapse(generation_id=pk, now=now) for pk in ids)


def streams_check(*, user: AbstractUser, open_in_process: int, locked: bool = False) -> None:
    """Refuse a new generation past the caps. `locked`: count under the person's lock, held until the transaction
    ends, so that two requests at once cannot both take the last place (the caller creates the generation next)."""
    conf = generation_settings()
    if open_in_process >= conf["streams_per_process"]:
        raise StreamsBusy(
            "This server is streaming as many replies as it can; try again in a few seconds.",
            status=503,
            code="server_busy",
        )
    if locked:
        with db_connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, user.pk % 2**31])
    if generations_streaming_count(user=user, now=timezone.now()) >= conf["streams_per_user"]:
        raise StreamsBusy(
            f"You have {conf['streams_per_user']} replies generating already; wait for one to end.",
            status=429,
            code="too_many_streams",
        )
