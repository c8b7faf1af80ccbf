"""A person's changes to a scene: its name, which recap version is current, a new recap version."""

from __future__ import annotations

from django.db import transaction

from apps.common.exceptions import ApplicationError
from apps.extraction.models import PipelineJob, Scene
from apps.extraction.services.jobs import job_queue
from apps.extraction.services.tiers.scenes import store_recap
from apps.llm.selectors import connection_default
from apps.memories.models import Memory, Status


@transaction.atomic
def scene_update(*, scene: Scene, name: str | None = None, current_version: int | None = None) -> Scene:
    """Rename a scene, or make another of its recap versions the current one (the recap memory follows: the one
    it replaces stays in its history)."""
    scene = Scene.objects.select_for_update().get(pk=scene.pk)
    if name is not None:
        scene.name = name.strip()[:200]
    if current_version is not None and current_version != scene.current_version:
        if not 0 <= current_version < len(scene.recap_versions):
            raise ApplicationError(
                f"current_version is between 0 and {len(scene.recap_versions) - 1}.", {"field": "current_version"}
            )
        scene.current_version = current_version
        scene.save(update_fields=["name", "current_version"])
        version = scene.recap_versions[current_version]
        previous = Memory.objects.filter(pk=scene.recap_memory_id, status=Status.ACTIVE).first()
        store_recap(
            chat=scene.chat, scene=scene, recap=version["content"], call=version.get("llm_call"), previous=previous
        )
    else:
        scene.save(update_fields=["name"])
    scene.refresh_from_db()
    return scene


@transaction.atomic
def scene_recap_again(*, scene: Scene) -> PipelineJob:
    """A new recap version from the model (queued: the chat's runner does it, after what it is doing)."""
    if connection_default(user_id=scene.user_id) is None:
        raise ApplicationError("Add a model connection first (Models page).", {"field": "scene"})
    return job_queue(chat=scene.chat, tier=PipelineJob.Tier.SCENES, params={"scene": scene.pk}, manual=True)
