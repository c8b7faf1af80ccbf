"""World Info settings per account (docs/LOREBOOKS.md, "Settings"): SillyTavern's defaults until changed, saved
through the lorebooks page's form in the settings document, used by every chat's activation; a value out of range
refused naming it with nothing saved, one a client wrote out of range read as the default and shown."""

from __future__ import annotations

import pytest

from apps.accounts.services import settings_document_get, settings_document_patch
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.common.exceptions import ApplicationError
from apps.llm.tokens import count_tokens
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import lorebook_import
from apps.lorebooks.services.buffer import Settings
from apps.lorebooks.services.lore import chat_lore
from apps.lorebooks.services.settings import lore_settings_get, lore_settings_save
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


def _form(user, **changes) -> dict:
    values = {"depth": 2, "budget": 25, "budget_cap": 0, "min_activations": 0, "min_activations_depth_max": 0,
              "max_recursion_steps": 0, "character_strategy": 1, "include_names": "on", "recursive": "on",
              "match_whole_words": "on", "integrity": str(settings_document_get(user=user).integrity)}  # fmt: skip
    return {**values, **changes}


def test_the_defaults_are_sillytaverns_until_changed(user):
    assert lore_settings_get(user=user) == Settings()


def test_the_form_saves_them_and_a_chat_scans_as_deep_as_they_say(web, user):
    book = lorebook_import(user=user, name="Harbour", data={"entries": {
        "0": {"uid": 0, "key": ["storm"], "content": "Storms come from the west.", "position": 0}}})  # fmt: skip
    Lorebook.objects.filter(pk=book.pk).update(scope=Lorebook.Scope.GLOBAL)
    mira = CharacterFactory(user=user, name="Mira")
    chat = chat_create(user=user, title="Harbour", character_ids=[mira.pk])
    lines = ["A storm is coming.", "Let it.", "Bar the door.", "Done."]
    chat = chat_append(chat=chat, messages=[{"name": "Mira", "mes": text} for text in lines],
                       integrity=chat.integrity).chat  # fmt: skip

    def fired() -> list:
        activation, _ = chat_lore(chat=chat, character=mira, names=("Mira", "You"), persona="", max_context=8000,
                                  count_tokens=count_tokens, resolve=lambda text: text, dry_run=True)  # fmt: skip
        return [entry["uid"] for entry in activation.entries]

    assert fired() == []  # the storm is four messages back; SillyTavern scans two
    page = web.get("/lorebooks/").content.decode()
    assert "Activation settings" in page and 'name="depth"' in page
    response = web.post("/lorebooks/settings/", _form(user, depth=4))
    assert response.status_code == 302
    assert lore_settings_get(user=user).depth == 4 and lore_settings_get(user=user).case_sensitive is False
    assert fired() == [0]


def test_a_value_out_of_range_is_refused_naming_it_and_nothing_is_saved(web, user):
    before = settings_document_get(user=user).data
    response = web.post("/lorebooks/settings/", _form(user, budget=250))
    assert response.status_code == 400 and "Context share (%)" in response.content.decode()
    assert settings_document_get(user=user).data == before
    with pytest.raises(ApplicationError) as error:
        lore_settings_save(user=user, values={"depth": -1}, integrity=settings_document_get(user=user).integrity)
    assert error.value.extra == {"field": "depth"}
    with pytest.raises(ApplicationError) as error:
        lore_settings_save(user=user, values={"scan": 3}, integrity=settings_document_get(user=user).integrity)
    assert error.value.extra == {"field": "scan"}


def test_a_stale_form_saves_nothing(web, user):
    stale = _form(user, depth=7)
    document = settings_document_get(user=user)
    settings_document_patch(user=user, patch={"other": {"x": 1}}, kind="merge", integrity=document.integrity)
    web.post("/lorebooks/settings/", stale)
    assert lore_settings_get(user=user).depth == 2


def test_a_value_a_client_wrote_out_of_range_is_read_as_the_default_and_shown(web, user):
    document = settings_document_get(user=user)
    settings_document_patch(user=user, patch={"world_info": {"depth": "deep", "budget": 40}}, kind="merge",
                            integrity=document.integrity)  # fmt: skip
    settings = lore_settings_get(user=user)
    assert (settings.depth, settings.budget) == (2, 40)
    assert (
        "Scan depth (messages) is a whole number from 0 to 1000: the default is used."
        in web.get("/lorebooks/").content.decode()
    )
