"""Entities that are one name in a registry, compared trimmed and in any case (" Corvin" and "Corvin"), become one
before 0008 makes the database refuse a second: the oldest is kept, the others' memories are linked to it, their
aliases become its aliases (their names are its own in another case or spacing), a type fills its empty one, and they
are deleted. Then every name is trimmed of the spaces around it.

Merged the way apps/memories/services/entities.py `entity_merge` merges (with its rules copied here, as a migration
must not import code that changes after it). The kept entities' memories get a new version, so the sync feed sends
them again with the entity as it is now."""

from django.db import migrations
from django.db.models import Count, F
from django.db.models.functions import Lower, Trim


def _aliases(name: str, aliases) -> list[str]:
    seen = {name.strip().casefold()}
    result = []
    for alias in aliases:
        alias = str(alias).strip()[:200].strip()
        if alias and alias.casefold() not in seen:
            seen.add(alias.casefold())
            result.append(alias)
    return result


def merge_duplicates(apps, schema_editor):
    Entity = apps.get_model("memories", "Entity")
    Memory = apps.get_model("memories", "Memory")
    through = Memory.entities.through
    keyed = Entity.objects.annotate(key=Lower(Trim("name")))
    groups = keyed.values("user_id", "character_id", "key").annotate(n=Count("id")).filter(n__gt=1)
    touched: set[int] = set()
    for group in groups:
        same = list(
            keyed.filter(user_id=group["user_id"], character_id=group["character_id"], key=group["key"]).order_by("id")
        )
        keep, others = same[0], same[1:]
        name = keep.name.strip(" ")  # as PostgreSQL's trim(), which the group's key and 0008's constraint use
        aliases = list(keep.aliases)
        kind = keep.type
        for other in others:
            moved = set(through.objects.filter(entity_id=other.pk).values_list("memory_id", flat=True))
            through.objects.bulk_create(
                [through(memory_id=memory_id, entity_id=keep.pk) for memory_id in sorted(moved)],
                ignore_conflicts=True,
            )
            # Its name is the kept one in another case or spacing, which _aliases leaves out as the same name.
            aliases += [other.name, *other.aliases]
            kind = kind or other.type
            other.delete()
        Entity.objects.filter(pk=keep.pk).update(name=name, aliases=_aliases(name, aliases), type=kind)
        touched |= set(through.objects.filter(entity_id=keep.pk).values_list("memory_id", flat=True))
    Entity.objects.exclude(name=Trim("name")).update(name=Trim("name"))
    if touched:
        Memory.objects.filter(pk__in=touched).update(version=F("version") + 1)


class Migration(migrations.Migration):
    dependencies = [("memories", "0006_sync")]

    operations = [migrations.RunPython(merge_duplicates, migrations.RunPython.noop)]
