"""The connection page's "Generation" fieldset (context size, reply length, samplers, stop strings one per line)
and its presets block: save the samplers in the form as a preset (htmx fragment, or a redirect), apply one, delete
one; another user's preset or connection is a 404."""

import pytest
from django.test import Client

from apps.llm.models import Connection, SamplerPreset
from apps.llm.services import connection_update, sampler_preset_save

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def _body(response) -> str:
    return response.content.decode()


def _form(connection, **change) -> dict:
    data = {
        "name": connection.name,
        "api": connection.api,
        "base_url": connection.base_url,
        "model": connection.model,
        "profile": connection.profile,
        "reply_tokens": "300",
    } | change
    return {k: v for k, v in data.items() if v is not None}


# ------------------------------------------------------------------------------------------------ the fieldset


def test_the_edit_page_shows_the_generation_fieldset_with_the_stored_values(web, llm):
    connection_update(
        connection=llm,
        data={"context_window": 16384, "reply_tokens": 420, "sampler": {"temperature": 0.7, "stop": ["\nAda:", "##"]}},
    )
    html = _body(web.get(f"/llm/{llm.pk}/"))
    assert "<legend>Generation</legend>" in html
    assert 'name="context_window" value="16384"' in html and "Context size" in html
    assert 'name="reply_tokens" value="420"' in html and "Reply length" in html
    assert 'name="temperature" value="0.7"' in html
    for name in ("top_p", "top_k", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty", "seed"):
        assert f'name="{name}"' in html
    assert ">\n\\nAda:\n##</textarea>" in html  # one per line, a line break inside one written \n
    assert 'name="viewport" content="width=device-width' in html  # the page is laid out for a phone's width


def test_the_add_form_has_the_generation_fieldset_with_the_default_reply_length(web):
    html = _body(web.get("/llm/"))
    assert "<legend>Generation</legend>" in html and 'name="reply_tokens" value="300"' in html
    assert "Save as preset" not in html  # presets belong to the page of a connection


def test_saving_the_form_stores_the_samplers_and_the_stop_strings_one_per_line(web, llm):
    data = _form(llm, reply_tokens="512", temperature="0.9", top_k="40", seed="", stop="\\nAda:\r\n\r\nEND\r\n")
    response = web.post(f"/llm/{llm.pk}/", data)
    assert response.status_code == 302
    llm.refresh_from_db()
    assert (llm.reply_tokens, llm.sampler) == (512, {"temperature": 0.9, "top_k": 40, "stop": ["\nAda:", "END"]})


def test_a_form_without_reply_length_keeps_the_stored_one(web, llm):
    connection_update(connection=llm, data={"reply_tokens": 777})
    assert web.post(f"/llm/{llm.pk}/", _form(llm, reply_tokens="")).status_code == 302
    llm.refresh_from_db()
    assert llm.reply_tokens == 777


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"temperature": "2.5"}, "temperature", "temperature is between 0 and 2."),
        ({"top_p": "7"}, "top_p", "top_p is between 0 and 1."),
        ({"stop": "\n".join(f"s{i}" for i in range(17))}, "stop", "stop holds at most 16 strings."),
        ({"reply_tokens": "0"}, "reply_tokens", "Ensure this value is greater than or equal to 1."),
        ({"context_window": "1024", "reply_tokens": "2000"}, "reply_tokens", "leaves no room for the chat"),
    ],
)
def test_a_bad_sampler_answers_400_with_the_error_on_its_field(web, llm, change, field, message):
    response = web.post(f"/llm/{llm.pk}/", _form(llm, **change))
    assert response.status_code == 400
    html = _body(response)
    field_html = html[html.index(f'name="{field}"') :]
    assert message in field_html[: field_html.index("</div>")]
    llm.refresh_from_db()
    assert (llm.sampler, llm.reply_tokens) == ({}, 300)


# ------------------------------------------------------------------------------------------------ presets


def test_the_presets_block_lists_only_the_users_presets(web, llm, other_user):
    sampler_preset_save(user=llm.user, name="Creative", values={"temperature": 1.2, "stop": ["A"]})
    sampler_preset_save(user=other_user, name="Bob's secret", values={})
    html = _body(web.get(f"/llm/{llm.pk}/"))
    assert 'id="presets"' in html and "Creative" in html and "temperature 1.2 · 1 stop string" in html
    assert "Bob's secret" not in html


def test_saving_a_preset_takes_the_samplers_as_they_stand_in_the_form_and_answers_the_block(web, llm):
    data = _form(llm, temperature="1.1", min_p="0.05", stop="END", preset_name="Creative")

    response = web.post(f"/llm/{llm.pk}/presets/save/", data, **HX)

    assert response.status_code == 200
    html = _body(response)
    assert html.lstrip().startswith('<section class="card" id="presets">') and "<html" not in html
    assert "Preset “Creative” saved." in html and "temperature 1.1 · min_p 0.05 · 1 stop string" in html
    preset = SamplerPreset.objects.get()
    assert (preset.user, preset.values) == (llm.user, {"temperature": 1.1, "min_p": 0.05, "stop": ["END"]})
    llm.refresh_from_db()
    assert llm.sampler == {}  # the connection itself is saved by its own button


@pytest.mark.parametrize(
    ("change", "message"),
    [({"temperature": "9"}, "Temperature: temperature is between 0 and 2."), ({"preset_name": ""}, "needs a name")],
)
def test_a_preset_that_cannot_be_saved_answers_the_block_with_the_reason(web, llm, change, message):
    data = _form(llm, temperature="1", preset_name="Hot") | change
    response = web.post(f"/llm/{llm.pk}/presets/save/", data, **HX)
    assert response.status_code == 400
    assert "Preset not saved:" in _body(response) and message in _body(response)
    assert not SamplerPreset.objects.exists()


def test_saving_a_preset_without_htmx_redirects_to_the_page_with_a_message(web, llm):
    response = web.post(f"/llm/{llm.pk}/presets/save/", _form(llm, top_p="0.9", preset_name="Focused"))
    assert response.status_code == 302 and response["Location"] == f"/llm/{llm.pk}/"
    assert "Preset “Focused” saved." in _body(web.get(f"/llm/{llm.pk}/"))
    assert SamplerPreset.objects.get().values == {"top_p": 0.9}


def test_applying_a_preset_puts_its_samplers_on_the_connection(web, llm):
    connection_update(connection=llm, data={"reply_tokens": 444, "sampler": {"seed": 5}})
    preset = sampler_preset_save(user=llm.user, name="Creative", values={"temperature": 1.2})

    response = web.post(f"/llm/{llm.pk}/presets/apply/", {"preset": preset.pk})

    assert response.status_code == 302 and response["Location"] == f"/llm/{llm.pk}/"
    llm.refresh_from_db()
    assert (llm.sampler, llm.reply_tokens) == ({"temperature": 1.2}, 444)
    page = _body(web.get(f"/llm/{llm.pk}/"))
    assert "Preset “Creative” applied: temperature 1.2." in page and 'name="temperature" value="1.2"' in page


def test_deleting_a_preset_answers_the_block_to_htmx_and_redirects_otherwise(web, llm):
    first = sampler_preset_save(user=llm.user, name="First", values={})
    second = sampler_preset_save(user=llm.user, name="Second", values={})

    response = web.post(f"/llm/{llm.pk}/presets/{first.pk}/delete/", **HX)
    assert response.status_code == 200 and "First" not in _body(response) and "Second" in _body(response)

    response = web.post(f"/llm/{llm.pk}/presets/{second.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == f"/llm/{llm.pk}/"
    assert not SamplerPreset.objects.exists()
    assert "Preset “Second” deleted." in _body(web.get(f"/llm/{llm.pk}/"))


def test_another_users_preset_or_connection_is_404(web, llm, theirs, other_user):
    their_preset = sampler_preset_save(user=other_user, name="Theirs", values={"temperature": 2})
    mine = sampler_preset_save(user=llm.user, name="Mine", values={"temperature": 0.1})

    assert web.post(f"/llm/{llm.pk}/presets/apply/", {"preset": their_preset.pk}).status_code == 404
    assert web.post(f"/llm/{llm.pk}/presets/apply/", {"preset": "x"}).status_code == 404
    assert web.post(f"/llm/{llm.pk}/presets/{their_preset.pk}/delete/").status_code == 404
    assert web.post(f"/llm/{theirs.pk}/presets/apply/", {"preset": mine.pk}).status_code == 404
    assert web.post(f"/llm/{theirs.pk}/presets/{mine.pk}/delete/").status_code == 404
    assert web.post(f"/llm/{theirs.pk}/presets/save/", _form(theirs, preset_name="Mine")).status_code == 404

    assert SamplerPreset.objects.count() == 2
    assert Connection.objects.get(pk=theirs.pk).sampler == {} and Connection.objects.get(pk=llm.pk).sampler == {}


def test_preset_pages_need_sign_in_and_post(web, llm):
    anonymous = Client()
    preset = sampler_preset_save(user=llm.user, name="Mine", values={})
    for url in (
        f"/llm/{llm.pk}/presets/save/",
        f"/llm/{llm.pk}/presets/apply/",
        f"/llm/{llm.pk}/presets/{preset.pk}/delete/",
    ):
        assert anonymous.post(url)["Location"].startswith("/accounts/login/")
        assert web.get(url).status_code == 405
    assert SamplerPreset.objects.count() == 1
