"""Background work of generation: thin tasks over apps.generation.services."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="generation.sweep", soft_time_limit=60, time_limit=90)
def sweep() -> int:
    """Generations whose process died mid-stream (their lease ran out) ended failed, keeping what had arrived."""
    from apps.generation.services.lease import generations_lapsed_end

    return generations_lapsed_end()
