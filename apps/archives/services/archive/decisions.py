"""A memory's history of decisions (why it is here, why it left: apps/memories/models.py `Decision`) in an account
archive: decisions.jsonl, a decision a line, its memories named by uid. An import adds those the account does not
hold yet (a decision is the same when it names the same memories, outcome and moment), so a restore or a second
import adds none twice; the model call a decision was made with is not kept."""

from __future__ import annotations

import json
import zipfile
from typing import Any

from django.contrib.auth.models import AbstractUser
from rest_framework import serializers

from apps.archives.services.archive.format import BATCH, ArchiveError
from apps.archives.services.archive.merge import ArchiveImport
from apps.archives.services.archive.records import record_check
from apps.common.serializers import MomentField, StorableInputSerializer
from apps.memories.models import Decision, Kind, Memory

NAME = "decisions.jsonl"
FIELDS = ("outcome", "kind", "content", "method", "similarity", "scores", "reason")


def decisions_write(archive: zipfile.ZipFile, user: AbstractUser) -> int:
    uids = dict(Memory.objects.filter(user=user).exclude(kind=Kind.MESSAGE).values_list("id", "uid"))
    written = 0
    rows = Decision.objects.filter(user=user).order_by("id").values("memory_id", "related_id", "created_at", *FIELDS)
    with archive.open(NAME, "w") as out:
        for row in rows.iterator(chunk_size=BATCH):
            memory, related = uids.get(row.pop("memory_id")), uids.get(row.pop("related_id"))
            if memory is None and related is None:
                continue  # of message memories only, which an archive leaves out
            line = {**row, "memory": memory and str(memory), "related": related and str(related)}
            line["created_at"] = row["created_at"].isoformat()
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
            written += 1
    return written


class DecisionRecordSerializer(StorableInputSerializer):
    memory = serializers.UUIDField(allow_null=True, required=False, default=None)
    related = serializers.UUIDField(allow_null=True, required=False, default=None)
    outcome = serializers.ChoiceField(choices=Decision.Outcome.choices)
    kind = serializers.ChoiceField(choices=Kind.choices)
    content = serializers.CharField(allow_blank=True, required=False, default="", max_length=200_000)
    method = serializers.CharField(allow_blank=True, required=False, default="", max_length=20)
    similarity = serializers.FloatField(allow_null=True, required=False, default=None)
    scores = serializers.DictField(required=False, default=dict)
    reason = serializers.CharField(allow_blank=True, required=False, default="", max_length=10_000)
    created_at = MomentField()

    class Meta:
        ref_name = None


def decisions_in(job: ArchiveImport) -> None:
    """After the memories (job.uids): each decision naming memories of the archive, unless held already."""
    ids = dict(Memory.objects.filter(user=job.user).values_list("uid", "id"))
    held = set(Decision.objects.filter(user=job.user).values_list("memory_id", "related_id", "outcome", "created_at"))
    fresh: list[tuple[Decision, Any]] = []
    for number, row in job.archive.lines(NAME):
        record = record_check(DecisionRecordSerializer, row, file=NAME, line=number)
        linked = []
        for field in ("memory", "related"):
            archived = record[field]
            if archived is not None and archived not in job.uids:
                raise ArchiveError(f"its {field} is not in the archive", file=NAME, line=number)
            linked.append(ids.get(job.uids[archived]) if archived is not None else None)
        if linked == [None, None]:
            job.count("decisions", "deleted here")  # of memories the archive's tombstones kept out
            continue
        key = (*linked, record["outcome"], record["created_at"])
        if key in held:
            job.count("decisions", "same")
            continue
        held.add(key)
        values = {field: record[field] for field in FIELDS}
        fresh.append((Decision(user=job.user, memory_id=linked[0], related_id=linked[1], **values), key[-1]))
        job.count("decisions", "created")
    made = Decision.objects.bulk_create([decision for decision, _ in fresh], batch_size=BATCH)
    for decision, (_, at) in zip(made, fresh, strict=True):
        decision.created_at = at  # as the archive has it: bulk_create stamps now (auto_now_add)
    Decision.objects.bulk_update(made, ["created_at"], batch_size=BATCH)
