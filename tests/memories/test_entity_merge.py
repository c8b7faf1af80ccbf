"""One entity per name in a registry: registration resolves a name trimmed, in any case, or as an alias (and the
database refuses a second one, a migration having merged those that were there); a person merges entities of one
registry and renames them, on the entity pages and over the API. Another user's entities are 404s."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor

from apps.chats.services.characters import character_create
from apps.common.exceptions import ApplicationError
from apps.memories.models import Entity, Memory
from apps.memories.services.entities import entities_ensure, entity_merge, entity_rename
from apps.memories.services.memories import memory_create
from apps.sync.services.feed import memory_payloads
from tests.browsers import screenshot, session_cookie, watched_page

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
BEFORE = [("memories", "0006_sync")]


@pytest.fixture(autouse=True)
def no_embeddings(settings):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"


def _fact(user, character, content, *names, **entity):
    return memory_create(
        user=user, character=character, kind="fact", content=content, entities=[{"name": n, **entity} for n in names]
    )


def _body(response) -> str:
    return response.content.decode()


def _linked(entity) -> set[str]:
    return set(Entity.objects.get(pk=entity.pk).memories.values_list("content", flat=True))


# ---------------------------------------------------------------------------------------------------- registration


def test_registration_resolves_a_name_trimmed_in_any_case_or_as_an_alias(user, character):
    _fact(user, character, "Corvin keeps the light.", "Corvin", type="person", aliases=["the old keeper"])
    _fact(user, character, "He climbs.", "  corvin ", aliases=["Old Ash", "OLD ASH", " "])
    _fact(user, character, "The keeper sleeps.", "The Old Keeper")
    both = _fact(user, character, "CORVIN and corvin.", "CORVIN", "corvin")
    [corvin] = Entity.objects.filter(user=user)
    assert (corvin.name, corvin.type, corvin.aliases) == ("Corvin", "person", ["the old keeper", "Old Ash"])
    assert _linked(corvin) == {"Corvin keeps the light.", "He climbs.", "The keeper sleeps.", "CORVIN and corvin."}
    assert list(both.entities.all()) == [corvin]

    # Another registry (the user-wide one) and another user's are registries of their own.
    wide = entities_ensure(user=user, character=None, entities=[{"name": "corvin"}, {"name": "Corvin "}])
    assert len(wide) == 1 and wide[0].character_id is None and wide[0].pk != corvin.pk
    assert Entity.objects.filter(user=user).count() == 2


def test_the_database_refuses_a_second_name_in_a_registry(user, character):
    Entity.objects.create(user=user, character=character, name="Corvin")
    Entity.objects.create(user=user, character=None, name="Tam")
    for registry, name in ((character, " CORVIN "), (None, "tam")):  # the user-wide registry (NULL) too
        with pytest.raises(IntegrityError), transaction.atomic():
            Entity.objects.create(user=user, character=registry, name=name)
    Entity.objects.create(user=user, character=None, name="Corvin")  # another registry: allowed


@pytest.mark.django_db(transaction=True)
def test_a_registration_racing_another_of_the_same_name_finds_its_entity(user, character):
    """The first transaction holds a new "Corvin" uncommitted; the second's insert waits on the unique index, fails
    when the first commits, and answers the entity the first made instead of an error."""
    made, release, found, errors = threading.Event(), threading.Event(), [], []

    def first():
        try:
            with transaction.atomic():
                Entity.objects.create(user=user, character=character, name="Corvin")
                made.set()
                release.wait(10)
        finally:
            connections.close_all()

    def second():
        try:
            with transaction.atomic():
                found.extend(entities_ensure(user=user, character=character, entities=[{"name": "corvin"}]))
        except Exception as exc:  # noqa: BLE001 - the failure the test is about
            errors.append(exc)
        finally:
            connections.close_all()

    one = threading.Thread(target=first)
    one.start()
    assert made.wait(10)
    two = threading.Thread(target=second)
    two.start()
    deadline = time.monotonic() + 10
    with connection.cursor() as cursor:  # the second waits on the first's row of the unique index
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the second registration never waited for the first")
    release.set()
    one.join(10)
    two.join(10)
    assert errors == []
    assert [e.name for e in found] == ["Corvin"] and Entity.objects.filter(user=user).count() == 1


# ---------------------------------------------------------------------------------------------------- services


def test_merge_moves_the_links_unions_the_names_and_deletes_the_merged(user, character):
    _fact(user, character, "Corvin keeps the light.", "Corvin", aliases=["the keeper"])
    both = _fact(user, character, "Ash and Corvin.", "Corvin", "Ash")
    moved = _fact(user, character, "Ash climbs.", "Ash", type="person", aliases=["Old Ash", "The Keeper"])
    unmoved = _fact(user, character, "Corvin alone.", "Corvin")
    other = _fact(user, character, "Tam rows.", "Tam")
    corvin, ash = Entity.objects.get(name="Corvin"), Entity.objects.get(name="Ash")
    clocks = {m.pk: Memory.objects.get(pk=m.pk).clock.get("server", 0) for m in (both, moved, unmoved)}

    kept = entity_merge(user=user, keep=corvin, merge=ash)

    assert kept.pk == corvin.pk and not Entity.objects.filter(pk=ash.pk).exists()
    kept.refresh_from_db()
    assert (kept.name, kept.type, kept.aliases) == ("Corvin", "person", ["the keeper", "Ash", "Old Ash"])
    assert _linked(kept) == {"Corvin keeps the light.", "Ash and Corvin.", "Ash climbs.", "Corvin alone."}
    assert list(Memory.objects.get(pk=both.pk).entities.all()) == [kept]
    # The memories whose entities changed have a new version, so the sync feed sends them with the kept entity.
    after = {m.pk: Memory.objects.get(pk=m.pk) for m in (both, moved, unmoved)}
    # Those of the kept entity too: its aliases changed, and the feed carries them.
    assert (after[both.pk].version, after[moved.pk].version, after[unmoved.pk].version) == (2, 2, 2)
    assert after[moved.pk].clock["server"] == clocks[moved.pk] + 1
    assert Memory.objects.get(pk=other.pk).version == 1
    payload = memory_payloads(user_id=user.pk, uids=[moved.uid])[moved.uid]
    assert [e["name"] for e in payload["data"]["entities"]] == ["Corvin"]
    # What named the merged entity now lands on the kept one.
    assert entities_ensure(user=user, character=character, entities=[{"name": "ash"}]) == [kept]


def test_merge_refuses_itself_another_registry_and_another_users_entity(user, other_user, character):
    _fact(user, character, "Corvin.", "Corvin")
    corvin = Entity.objects.get(name="Corvin")
    [wide] = entities_ensure(user=user, character=None, entities=[{"name": "Corvin"}])
    [theirs] = entities_ensure(user=other_user, character=None, entities=[{"name": "Zed"}])
    for keep, merge, words in (
        (corvin, corvin, "into itself"),
        (corvin, wide, "one registry"),
        (wide, theirs, "your own"),
    ):
        with pytest.raises(ApplicationError) as refused:
            entity_merge(user=user, keep=keep, merge=merge)
        assert words in refused.value.message and refused.value.extra["field"] == "into"
    assert Entity.objects.count() == 3 and _linked(corvin) == {"Corvin."}


def test_rename_keeps_the_old_name_as_an_alias_and_refuses_a_taken_name(user, character):
    corvins = _fact(user, character, "Corvin keeps the light.", "Corvin", aliases=["Old Ash"])
    memory = _fact(user, character, "Tam rows.", "Tam", aliases=["the rower"])
    corvin, tam = Entity.objects.get(name="Corvin"), Entity.objects.get(name="Tam")

    renamed = entity_rename(user=user, entity=corvin, name="  Corvin Ash ")
    assert (renamed.name, renamed.aliases) == ("Corvin Ash", ["Old Ash", "Corvin"])
    assert entities_ensure(user=user, character=character, entities=[{"name": "corvin"}]) == [renamed]
    # To one of its own aliases: that alias is its name now, and the old name an alias.
    renamed = entity_rename(user=user, entity=renamed, name="old ash")
    assert (renamed.name, renamed.aliases) == ("old ash", ["Corvin", "Corvin Ash"])
    # Only the case changed: no alias for it.
    renamed = entity_rename(user=user, entity=renamed, name="Old Ash")
    assert (renamed.name, renamed.aliases) == ("Old Ash", ["Corvin", "Corvin Ash"])

    for name, words in (("TAM", "Another entity already has that name."), ("The Rower", "“Tam” already goes by")):
        with pytest.raises(ApplicationError) as refused:
            entity_rename(user=user, entity=renamed, name=name)
        assert words in refused.value.message and "merge" in refused.value.message
        assert refused.value.extra == {"field": "name", "entity": tam.pk}
    with pytest.raises(ApplicationError):
        entity_rename(user=user, entity=renamed, name="   ")
    assert Entity.objects.get(pk=corvin.pk).name == "Old Ash"
    # Three renames, three new versions of Corvin's memory for the sync feed; Tam's did not change.
    assert (Memory.objects.get(pk=corvins.pk).version, Memory.objects.get(pk=memory.pk).version) == (4, 1)


# ---------------------------------------------------------------------------------------------------- web


@pytest.fixture
def registry(user, character):
    """Corvin and Ash in Mira's registry, Harbour in the user-wide one."""
    _fact(user, character, "Corvin keeps the light.", "Corvin")
    _fact(user, character, "Ash climbs the tower.", "Ash", aliases=["Old Ash"])
    entities_ensure(user=user, character=None, entities=[{"name": "Harbour"}])
    return {e.name: e for e in Entity.objects.filter(user=user)}


@pytest.fixture
def foreign(other_user):
    theirs = character_create(user=other_user, name="Bob's hero")
    _fact(other_user, theirs, "Bob's secret.", "Zed")
    _fact(other_user, theirs, "Bob's other secret.", "Yann")
    return {e.name: e for e in Entity.objects.filter(user=other_user)}


def test_entity_page_offers_rename_and_merge_into_its_own_registry(web, registry):
    html = _body(web.get(f"/memories/entities/{registry['Ash'].pk}/"))
    assert "<summary>Rename</summary>" in html and "<summary>Merge into…</summary>" in html
    assert f'<option value="{registry["Corvin"].pk}">Corvin (1 active memory)</option>' in html
    assert "Harbour" not in html  # another registry's
    alone = _body(web.get(f"/memories/entities/{registry['Harbour'].pk}/"))
    assert "No other entity in this registry to merge with." in alone


def test_rename_on_the_page(web, registry):
    ash = registry["Ash"]
    url = f"/memories/entities/{ash.pk}/rename/"
    response = web.post(url, {"name": "Ashwin"}, **HX)
    body = _body(response)
    assert response.status_code == 200 and "<html" not in body and 'id="entity-head"' in body
    assert "Renamed. “Ash” stays as an alias." in body and "<h1>Ashwin" in body
    assert Entity.objects.get(pk=ash.pk).aliases == ["Old Ash", "Ash"]

    clash = web.post(url, {"name": "corvin"}, **HX)
    assert clash.status_code == 400 and "Another entity already has that name." in _body(clash)
    assert '<details class="rename" open>' in _body(clash)
    empty = web.post(url, {"name": ""})
    assert empty.status_code == 400 and "<html" in _body(empty)
    plain = web.post(url, {"name": "Ash"})
    assert plain.status_code == 302 and plain["Location"] == f"/memories/entities/{ash.pk}/"
    assert "Renamed. “Ashwin” stays as an alias." in _body(web.get(plain["Location"]))
    assert Entity.objects.get(pk=ash.pk).name == "Ash"


def test_merge_on_the_page_asks_then_goes_to_the_entity_kept(web, user, registry):
    ash, corvin = registry["Ash"], registry["Corvin"]
    confirm = web.get("/memories/entities/merge/", {"merge": ash.pk, "into": corvin.pk}, **HX)
    body = _body(confirm)
    assert confirm.status_code == 200 and "<html" not in body and "Keep which one?" in body
    assert f'value="{corvin.pk}" required checked' in body and f'value="{ash.pk}" required>' in body
    assert "in Mira's registry" in body and Entity.objects.filter(pk=ash.pk).exists()

    done = web.post("/memories/entities/merge/", {"merge": [ash.pk], "into": corvin.pk})
    assert done.status_code == 302 and done["Location"] == f"/memories/entities/{corvin.pk}/"
    page = _body(web.get(done["Location"]))
    assert "Merged “Ash” into “Corvin”" in page and "Ash climbs the tower." in page
    assert not Entity.objects.filter(pk=ash.pk).exists()
    assert Entity.objects.get(pk=corvin.pk).aliases == ["Ash", "Old Ash"]


def test_the_list_merges_several_chosen_entities_of_one_registry(web, user, character, registry):
    _fact(user, character, "Tam rows.", "Tam")
    tam, ash, corvin = Entity.objects.get(name="Tam"), registry["Ash"], registry["Corvin"]
    listed = _body(web.get("/memories/entities/"))
    assert f'name="merge" value="{tam.pk}"' in listed and "Merge the chosen…" in listed

    chosen = {"merge": [tam.pk, ash.pk, corvin.pk]}
    page = _body(web.get("/memories/entities/merge/", chosen))
    assert "<html" in page and "Keep which one?" in page and "checked" not in page
    unchosen = web.post("/memories/entities/merge/", chosen)
    assert unchosen.status_code == 400 and "Choose the entity to keep." in _body(unchosen)
    assert Entity.objects.filter(user=user).count() == 4

    done = web.post("/memories/entities/merge/", {**chosen, "into": ash.pk}, **HX)
    assert done.status_code == 200 and done["HX-Redirect"] == f"/memories/entities/{ash.pk}/"
    assert list(Entity.objects.filter(user=user).order_by("name").values_list("name", flat=True)) == ["Ash", "Harbour"]
    assert _linked(ash) == {"Corvin keeps the light.", "Ash climbs the tower.", "Tam rows."}
    assert "Merged “Corvin” and “Tam” into “Ash”" in _body(web.get(f"/memories/entities/{ash.pk}/"))


def test_merge_page_refuses_bad_choices_and_changes_nothing(web, user, registry):
    corvin, harbour = registry["Corvin"], registry["Harbour"]
    for data, words in (
        ({"merge": [corvin.pk, harbour.pk]}, "Only entities of one registry"),
        ({"merge": [corvin.pk]}, "Choose at least two entities to merge."),
        ({"merge": ["x"]}, "Choose entities from the list."),
        # Spellings int() read as ids: a space before, a sign, Arabic-Indic digits.
        ({"merge": [f" {corvin.pk}", f"+{harbour.pk}"]}, "Choose entities from the list."),
        ({"merge": [str(corvin.pk), "".join(chr(0x660 + int(d)) for d in str(harbour.pk))]}, "Choose entities from"),
        ({"merge": [corvin.pk], "into": corvin.pk}, "Choose at least two entities to merge."),
    ):
        for method in (web.get, web.post):
            response = method("/memories/entities/merge/", {**data})
            assert response.status_code == 400 and words in _body(response), (data, method)
    assert Entity.objects.filter(user=user).count() == 3


def test_another_users_entities_are_404_on_the_pages(web, registry, foreign):
    zed, yann, corvin = foreign["Zed"], foreign["Yann"], registry["Corvin"]
    assert web.post(f"/memories/entities/{zed.pk}/rename/", {"name": "Mine"}).status_code == 404
    assert web.get("/memories/entities/merge/", {"merge": [zed.pk, yann.pk]}).status_code == 404
    assert web.post("/memories/entities/merge/", {"merge": [zed.pk], "into": yann.pk}).status_code == 404
    assert web.post("/memories/entities/merge/", {"merge": [zed.pk], "into": corvin.pk}).status_code == 404
    assert web.post("/memories/entities/merge/", {"merge": [corvin.pk], "into": zed.pk}).status_code == 404
    assert sorted(Entity.objects.filter(pk__in=[zed.pk, yann.pk]).values_list("name", flat=True)) == ["Yann", "Zed"]
    assert Entity.objects.filter(pk=corvin.pk).exists()


# ---------------------------------------------------------------------------------------------------- API


def test_api_merges_into_another_entity_of_the_registry(api, registry):
    ash, corvin, harbour = registry["Ash"], registry["Corvin"], registry["Harbour"]
    for body, field in (({}, "into"), ({"into": "x"}, "into"), ({"into": 0}, "into")):
        response = api.post(f"/api/v1/entities/{ash.pk}/merge/", body, format="json")
        assert response.status_code == 400 and field in response.json(), body
    for into, words in ((ash.pk, "into itself"), (harbour.pk, "one registry"), (10**9, "No such entity.")):
        response = api.post(f"/api/v1/entities/{ash.pk}/merge/", {"into": into}, format="json")
        assert response.status_code == 400 and response.json()["extra"]["field"] == "into"
        assert words in response.json()["message"]
    assert Entity.objects.filter(pk=ash.pk).exists()

    response = api.post(f"/api/v1/entities/{ash.pk}/merge/", {"into": corvin.pk}, format="json")
    assert response.status_code == 200, response.content
    kept = response.json()
    assert (kept["id"], kept["name"], kept["aliases"]) == (corvin.pk, "Corvin", ["Ash", "Old Ash"])
    assert {m["content"] for m in kept["memories"]} == {"Corvin keeps the light.", "Ash climbs the tower."}
    assert api.get(f"/api/v1/entities/{ash.pk}/").status_code == 404


def test_api_renames_through_patch(api, registry):
    ash, corvin = registry["Ash"], registry["Corvin"]
    response = api.patch(f"/api/v1/entities/{ash.pk}/", {"name": "Ashwin"}, format="json")
    assert response.status_code == 200 and (response.json()["name"], response.json()["aliases"]) == (
        "Ashwin",
        ["Old Ash", "Ash"],
    )
    # With the aliases given as well, the list given is the whole list.
    response = api.patch(f"/api/v1/entities/{ash.pk}/", {"name": "Ash", "aliases": []}, format="json")
    assert (response.json()["name"], response.json()["aliases"]) == ("Ash", [])
    clash = api.patch(f"/api/v1/entities/{ash.pk}/", {"name": " CORVIN"}, format="json")
    assert clash.status_code == 400 and clash.json()["extra"] == {"field": "name", "entity": corvin.pk}
    assert "merge" in clash.json()["message"]
    assert api.patch(f"/api/v1/entities/{ash.pk}/", {"name": ""}, format="json").json().keys() >= {"name"}
    assert Entity.objects.get(pk=ash.pk).name == "Ash"


def test_api_answers_404_for_another_users_entity(api, registry, foreign):
    zed, yann, corvin = foreign["Zed"], foreign["Yann"], registry["Corvin"]
    assert api.post(f"/api/v1/entities/{zed.pk}/merge/", {"into": yann.pk}, format="json").status_code == 404
    assert api.post(f"/api/v1/entities/{zed.pk}/merge/", {"into": corvin.pk}, format="json").status_code == 404
    assert api.patch(f"/api/v1/entities/{zed.pk}/", {"name": "Mine"}, format="json").status_code == 404
    theirs = api.post(f"/api/v1/entities/{corvin.pk}/merge/", {"into": zed.pk}, format="json")
    assert theirs.status_code == 400 and theirs.json()["message"] == "No such entity."  # as one that does not exist
    assert Entity.objects.filter(pk__in=[zed.pk, yann.pk, corvin.pk]).count() == 3


def test_the_schema_documents_the_merge():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/api/v1/entities/{entity_id}/merge/"]["post"]
    assert operation["operationId"] == "entities_merge"
    request = operation["requestBody"]["content"]["application/json"]["schema"]
    assert request["$ref"].endswith("/EntityMergeInputRequest")
    assert "old one as an alias" in schema["paths"]["/api/v1/entities/{entity_id}/"]["patch"]["description"]


# ---------------------------------------------------------------------------------------------------- migration


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


@pytest.mark.django_db(transaction=True)
def test_the_migration_merges_the_duplicates_there_were_before_the_constraint(user, other_user, character):
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    memories = {c: _fact(user, character, c) for c in ("one", "two", "three", "four")}
    try:
        old = _migrate(BEFORE).loader.project_state(BEFORE).apps
        Old = old.get_model("memories", "Entity")
        link = old.get_model("memories", "Memory").entities.through.objects.create

        def made(name, registry=character, owner=user, **fields):
            return Old.objects.create(
                user_id=owner.pk, character_id=registry.pk if registry else None, name=name, **fields
            )

        # Duplicates the old constraint (lower(name)) let through: names that differ by the spaces around them.
        first = made("Corvin", aliases=["the keeper"])
        spaced = made(" corvin ", type="person", aliases=["Old Ash", "The Keeper"])
        third = made("Corvin  ", aliases=["Lamplighter"])
        tam, tam_spaced = made("Tam", registry=None), made(" Tam", registry=None, aliases=["the rower"])
        harbour = made(" Harbour ")
        bobs = made("Tam", registry=None, owner=other_user)
        for entity, memory in (
            (first, "one"),
            (first, "four"),
            (spaced, "one"),
            (spaced, "two"),
            (third, "three"),
            (tam_spaced, "two"),
        ):
            link(entity_id=entity.pk, memory_id=memories[memory].pk)

        _migrate(leaves)

        corvin = Entity.objects.get(pk=first.pk)
        assert (corvin.name, corvin.type, corvin.aliases) == (
            "Corvin",
            "person",
            ["the keeper", "Old Ash", "Lamplighter"],
        )
        assert _linked(corvin) == {"one", "two", "three", "four"}
        assert not Entity.objects.filter(pk__in=[spaced.pk, third.pk, tam_spaced.pk]).exists()
        assert (Entity.objects.get(pk=tam.pk).aliases, _linked(tam)) == (["the rower"], {"two"})
        assert Entity.objects.get(pk=harbour.pk).name == "Harbour"
        assert Entity.objects.get(pk=bobs.pk).name == "Tam"  # another user's registry
        versions = dict(Memory.objects.filter(user=user).values_list("content", "version"))
        assert versions == {"one": 2, "two": 2, "three": 2, "four": 2}  # the kept entities' memories, once each
        for registry, name in ((character, "CORVIN "), (None, " tam")):
            with pytest.raises(IntegrityError), transaction.atomic():
                Entity.objects.create(user=user, character=registry, name=name)
    finally:
        _migrate(leaves)


# ---------------------------------------------------------------------------------------------------- browser


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_renaming_and_merging_in_a_browser_at_a_phones_width(browser, live_server, client, user, character):
    _fact(user, character, "Corvin keeps the light.", "Corvin")
    _fact(user, character, "Ash climbs the tower of the harbour at dusk, every evening.", "Ash")
    ash = Entity.objects.get(name="Ash")
    page = watched_page(browser, 390, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/memories/entities/{ash.pk}/")
    page.click("summary:has-text('Rename')")
    page.fill("#entity-head input[name=name]", "Ashwin the lamplighter of the northern harbour")
    page.click("#entity-head button:has-text('Rename')")
    page.wait_for_selector("#entity-head p.saved:has-text('Renamed.')")
    assert page.inner_text("#entity-crumb") == "Ashwin the lamplighter of the northern harbour"
    page.click("summary:has-text('Merge into')")
    page.select_option("#merge-into", label="Corvin (1 active memory)")
    page.click("button:has-text('Continue')")
    page.wait_for_selector("text=Keep which one?")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "entity-merge-390")
    page.click("button:has-text('Merge')")
    page.wait_for_selector("text=into “Corvin”")
    assert page.url.endswith(f"/memories/entities/{Entity.objects.get(name='Corvin').pk}/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    list_page = watched_page(browser, 390, live_server, session_cookie(client, user))
    list_page.goto(f"{live_server.url}/memories/entities/")
    assert list_page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(list_page, "entity-list-390")
    assert page.errors == [] and list_page.errors == []
