"""The settings page's form for the fields Lorekeeper knows (the injection settings, namespace smart_memory): it
writes only what was changed as a JSON Patch at the page's integrity, keeps every other key and extension, names
the field of a bad value, keeps what the person typed over a change made elsewhere; and the JSON view beside it."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser

import pytest

from apps.accounts.services import settings_document_get, settings_document_patch
from apps.injection.services.settings import injection_settings_get
from tests.browsers import screenshot, session_cookie, watched_page

pytestmark = pytest.mark.django_db

URL = "/settings/"


class _FormFields(HTMLParser):
    """The fields a browser would send from the page's known-settings form."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.select: str | None = None
        self.data: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.inside = "known-settings" in (attrs.get("class") or "")
        elif not self.inside:
            return
        elif tag == "input" and attrs.get("type") == "checkbox":
            if "checked" in attrs:
                self.data[attrs["name"]] = "on"
        elif tag == "input" and attrs.get("name") != "csrfmiddlewaretoken":
            self.data[attrs["name"]] = attrs.get("value") or ""
        elif tag == "select":
            self.select = attrs["name"]
        elif tag == "option" and self.select and "selected" in attrs:
            self.data[self.select] = attrs["value"]

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self.select = None


def form_of(response) -> dict[str, str]:
    parser = _FormFields()
    parser.feed(response.content.decode())
    assert parser.data, "no known-settings form on the page"
    return parser.data


def page_text(response) -> str:
    return html.unescape(response.content.decode())


def seed(user, data: dict) -> None:
    document = settings_document_get(user=user)
    settings_document_patch(
        user=user, patch=[{"op": "replace", "path": "", "value": data}], kind="json", integrity=document.integrity
    )


def test_the_page_needs_a_sign_in(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/login" in response["Location"]
    assert client.post(URL, {"triggered_limit": "3"}).status_code == 302


def test_the_form_shows_the_known_fields_with_their_values_and_lists_the_rest(web, user):
    seed(user, {"smart_memory": {"triggered_limit": 12, "mystery": 1}, "st_bme": {"theme": "dark"}})
    response = web.get(URL)
    text = page_text(response)
    assert response.status_code == 200
    for legend in ("Memory slots", "How memory is given", "Budgets", "Recall for each reply"):
        assert f"<legend>{legend}</legend>" in text
    data = form_of(response)
    assert data["triggered_limit"] == "12" and data["initial-triggered_limit"] == "12"
    assert data["slot_scenes_depth"] == "6" and data["slot_short_on"] == "on" and data["budget_mode"] == "advanced"
    assert 'type="number" name="slot_short_depth"' in text and 'min="0"' in text and 'max="100"' in text
    assert "<code>mystery</code>" in text  # a key of ours Lorekeeper does not know: kept, and said so
    assert "<code>st_bme</code>" in text and '"theme": "dark"' in text  # another extension's object, read-only
    assert "Advanced: edit as JSON" in text


def test_saving_writes_only_the_changed_fields_and_keeps_unknown_keys_and_other_extensions(web, user, other_user):
    seed(
        user,
        {
            "smart_memory": {"mystery": [1, 2], "slots": {"short": {"enabled": True, "note": "mine"}}},
            "st_bme": {"theme": "dark", "nested": {"a": None}},
        },
    )
    data = form_of(web.get(URL))
    data.update(slot_short_depth="7", budget_mode="simple", budget_canon="900")
    del data["slot_long_on"]  # unticked
    response = web.post(URL, data)
    assert response.status_code == 302 and response["Location"] == URL
    assert settings_document_get(user=user).data == {
        "smart_memory": {
            "mystery": [1, 2],
            "slots": {"short": {"enabled": True, "note": "mine", "depth": 7}, "long": {"enabled": False}},
            "budget_mode": "simple",
            "budgets": {"canon": 900},
        },
        "st_bme": {"theme": "dark", "nested": {"a": None}},
    }
    assert "Settings saved: 4 changes." in page_text(web.get(URL))
    assert settings_document_get(user=other_user).data == {}


def test_an_empty_document_gets_only_the_changed_field(web, user):
    data = form_of(web.get(URL))
    data["triggered_limit"] = "3"
    assert web.post(URL, data).status_code == 302
    assert settings_document_get(user=user).data == {"smart_memory": {"triggered_limit": 3}}
    assert injection_settings_get(user=user).triggered_limit == 3


def test_saving_an_unchanged_form_writes_nothing(web, user):
    seed(user, {"smart_memory": {"adaptive": True}})
    before = settings_document_get(user=user)
    response = web.post(URL, form_of(web.get(URL)))
    after = settings_document_get(user=user)
    assert response.status_code == 302 and after.integrity == before.integrity and after.data == before.data
    assert "Nothing changed." in page_text(web.get(URL))


def test_the_form_accepts_the_ranges_the_injection_settings_are_read_with(web, user):
    data = form_of(web.get(URL))
    data.update(
        slot_repair_depth="100", total_budget="128000", budget_long="32000", triggered_limit="50", recent_messages="0"
    )
    assert web.post(URL, data).status_code == 302
    read = injection_settings_get(user=user)
    assert read.problems == []
    assert (read.depths["repair"], read.total_budget, read.budgets["long"]) == (100, 128000, 32000)
    assert (read.triggered_limit, read.recent_messages) == (50, 0)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("slot_short_depth", "101", "Story so far: depth: A whole number from 0 to 100."),
        ("budget_canon", "lots", "Canon (tokens): A whole number from 0 to 32000."),
        ("total_budget", "99", "Total budget (tokens): A whole number from 100 to 128000."),
        ("triggered_limit", "", "Memories recalled at most: A whole number from 0 to 50."),
        ("budget_mode", "generous", "Budget mode: Choose simple or advanced."),
    ],
)
def test_a_bad_value_names_its_field_and_changes_nothing(web, user, name, value, message):
    seed(user, {"smart_memory": {"adaptive": True}, "other": {"x": 1}})
    before = settings_document_get(user=user)
    data = form_of(web.get(URL))
    data.update({name: value, "recent_messages": "40"})  # a good change beside it is not saved either
    response = web.post(URL, data)
    text = page_text(response)
    assert response.status_code == 400
    assert "Not saved, nothing was changed" in text and f"<li>{message}</li>" in text
    assert 'class="field-error" role="alert">' + message.split(": ")[-1] in text  # also beside the field
    after = settings_document_get(user=user)
    assert after.data == before.data and after.integrity == before.integrity
    assert form_of(response)["recent_messages"] == "40"  # what was typed is kept


def test_a_change_made_elsewhere_meanwhile_is_shown_and_the_typed_values_are_kept(web, user):
    seed(user, {"smart_memory": {"triggered_limit": 8}})
    data = form_of(web.get(URL))
    # Another client saves meanwhile: one field this person also changes, one they leave alone.
    document = settings_document_get(user=user)
    settings_document_patch(
        user=user,
        patch={"smart_memory": {"slots": {"short": {"depth": 9}}, "triggered_limit": 12}, "st_bme": {"on": True}},
        kind="merge",
        integrity=document.integrity,
    )
    theirs = settings_document_get(user=user)
    data.update(slot_short_depth="5", recent_messages="40")
    response = web.post(URL, data)
    text = page_text(response)
    assert response.status_code == 409
    assert "Not saved: these settings were changed elsewhere since you opened this page." in text
    assert settings_document_get(user=user).integrity == theirs.integrity  # nothing written
    shown = form_of(response)
    assert (shown["slot_short_depth"], shown["recent_messages"]) == ("5", "40")  # what was typed
    assert shown["triggered_limit"] == "12"  # what was saved elsewhere, where this person changed nothing
    assert "Changed elsewhere to 9; yours is kept here." in text and "Changed elsewhere to 12." in text
    assert shown["integrity"] == str(theirs.integrity)
    # Saving again applies this person's changes over the other client's, and keeps the rest of theirs.
    assert web.post(URL, shown).status_code == 302
    assert settings_document_get(user=user).data == {
        "smart_memory": {"triggered_limit": 12, "slots": {"short": {"depth": 5}}, "recent_messages": 40},
        "st_bme": {"on": True},
    }


def test_a_form_without_its_integrity_is_refused(web, user):
    data = form_of(web.get(URL))
    data.update(triggered_limit="3", integrity="")
    response = web.post(URL, data)
    assert response.status_code == 400 and "the form was incomplete" in page_text(response)
    assert settings_document_get(user=user).data == {}


def test_the_json_view_still_replaces_the_whole_document(web, user):
    seed(user, {"smart_memory": {"adaptive": True}})
    integrity = str(settings_document_get(user=user).integrity)
    text = json.dumps({"st_bme": {"theme": "light"}})
    assert web.post(URL, {"settings": text, "integrity": integrity}).status_code == 302
    assert settings_document_get(user=user).data == {"st_bme": {"theme": "light"}}
    stale = web.post(URL, {"settings": '{"x": {}}', "integrity": integrity})
    assert stale.status_code == 400 and "changed by another client" in page_text(stale)
    assert '{"x": {}}' in page_text(stale)  # the person's text is kept


def test_invalid_json_names_its_line_and_column_and_changes_nothing(web, user):
    integrity = str(settings_document_get(user=user).integrity)
    response = web.post(URL, {"settings": '{\n  "a": {},\n  nope\n}', "integrity": integrity})
    text = page_text(response)
    assert response.status_code == 400
    problem = "Expecting property name enclosed in double quotes at line 3, column 3"
    assert f"Not saved: the JSON is not valid: {problem}." in text
    assert '<details class="settings-json" open>' in text and "nope" in text
    assert settings_document_get(user=user).data == {}
    not_namespaced = web.post(URL, {"settings": '{"budget": 5}', "integrity": integrity})
    assert not_namespaced.status_code == 400 and "Settings are namespaced" in page_text(not_namespaced)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_page_fits_a_phone_and_saves_from_the_form(browser, live_server, client, user):
    seed(user, {"st_bme": {"a_rather_long_key_name_that_could_overflow_a_phone_screen": "x" * 200}})
    cookie = session_cookie(client, user)
    for width in (1100, 390):
        page = watched_page(browser, width, live_server, cookie)
        page.goto(f"{live_server.url}{URL}")
        page.locator(".settings-other summary").click()
        page.get_by_text("Advanced: edit as JSON").click()
        screenshot(page, f"settings-document-{width}")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        depth = page.get_by_label("Earlier scenes: depth")
        assert depth.input_value() == "6"
        depth.fill("4")
        page.get_by_label("Unified mode").check()
        page.get_by_role("button", name="Save changes").click()
        page.get_by_text("Settings saved: 2 changes.").wait_for()
        assert page.errors == []
        page.context.close()
        data = settings_document_get(user=user).data
        assert data["smart_memory"] == {"slots": {"scenes": {"depth": 4}}, "unified": True}
        assert data["st_bme"]
        seed(user, {"st_bme": data["st_bme"]})


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 390])
def test_json_a_person_types_wrong_is_refused_saying_where(browser, live_server, client, user, width):
    seed(user, {"st_bme": {"budget": 5}})
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}{URL}")
    page.get_by_text("Advanced: edit as JSON").click()
    page.get_by_label("Settings as JSON").fill('{\n  "st_bme": {"budget": 6},\n  nope\n}')
    page.get_by_role("button", name="Save JSON").click()
    problem = "Expecting property name enclosed in double quotes at line 3, column 3"
    page.get_by_text(f"Not saved: the JSON is not valid: {problem}.").wait_for()
    assert "nope" in page.get_by_label("Settings as JSON").input_value()  # what the person typed stays
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"settings-json-refused-{width}")
    assert settings_document_get(user=user).data == {"st_bme": {"budget": 5}}


def test_setting_fields_adds_missing_objects_and_replaces_one_that_is_not_an_object(user):
    from apps.accounts.services import settings_document_set

    seed(user, {"smart_memory": {"slots": "junk", "budgets": {"canon": 5}}, "a/b~c": {"kept": 1}})
    document = settings_document_set(
        user=user,
        values={
            ("smart_memory", "slots", "short", "depth"): 3,
            ("smart_memory", "slots", "short", "enabled"): False,
            ("smart_memory", "budgets", "long"): 7,
            ("a/b~c", "new"): True,
            ("fresh", "x", "y"): [1],
        },
        integrity=settings_document_get(user=user).integrity,
    )
    assert document.data == {
        "smart_memory": {"slots": {"short": {"depth": 3, "enabled": False}}, "budgets": {"canon": 5, "long": 7}},
        "a/b~c": {"kept": 1, "new": True},
        "fresh": {"x": {"y": [1]}},
    }


def test_an_unchanged_form_on_a_stale_page_is_no_conflict(web, user):
    data = form_of(web.get(URL))
    seed(user, {"st_bme": {"on": True}})
    response = web.post(URL, data)
    assert response.status_code == 302 and settings_document_get(user=user).data == {"st_bme": {"on": True}}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"st_bme": {"budget": NaN}}', "NaN is not valid JSON"),
        ('{"st_bme": {"budget": 1e400}}', "too large to store"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_json_postgresql_cannot_store_is_refused_on_the_page_and_changes_nothing(web, user, text, said):
    """Once a server error: the page parsed leniently, and PostgreSQL refused NaN and an infinite number, or the
    parser ran past its depth."""
    integrity = str(settings_document_get(user=user).integrity)
    response = web.post(URL, {"settings": text, "integrity": integrity})
    assert response.status_code == 400 and "Not saved: the JSON is not valid: " in page_text(response)
    assert said in page_text(response)
    assert settings_document_get(user=user).data == {}
