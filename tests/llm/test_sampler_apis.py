"""The reply length and samplers through the connections API, and sampler presets under /api/v1/llm/presets/:
wiring, status codes, response shapes, errors naming the field, and tenancy (another user's preset is a 404)."""

import pytest
from rest_framework.test import APIClient

from apps.llm.models import Connection, SamplerPreset
from apps.llm.services import sampler_preset_save

pytestmark = pytest.mark.django_db

CONNECTIONS = "/api/v1/llm/connections/"
PRESETS = "/api/v1/llm/presets/"


def _detail(connection) -> str:
    return f"{CONNECTIONS}{connection.pk}/"


# ------------------------------------------------------------------------------------------------ connections


def test_a_connection_answers_its_reply_length_and_samplers(api, llm):
    body = api.get(_detail(llm)).json()
    assert (body["reply_tokens"], body["sampler"]) == (300, {})


def test_create_takes_the_reply_length_and_samplers(api, llm_server):
    data = {"name": "m", "base_url": llm_server.url, "model": "m", "reply_tokens": 640, "sampler": {"top_k": 40.0}}
    response = api.post(CONNECTIONS, data, format="json")
    assert response.status_code == 201
    assert (response.json()["reply_tokens"], response.json()["sampler"]) == (640, {"top_k": 40})


def test_patch_replaces_the_samplers_and_keeps_the_rest(api, llm):
    api.patch(_detail(llm), {"reply_tokens": 200, "sampler": {"temperature": 0.5, "seed": 3}}, format="json")
    response = api.patch(_detail(llm), {"sampler": {"min_p": 0.1, "stop": ["\nAda:"]}}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["reply_tokens"], body["sampler"]) == (200, {"min_p": 0.1, "stop": ["\nAda:"]})
    assert api.patch(_detail(llm), {"sampler": {}}, format="json").json()["sampler"] == {}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sampler": {"temperature": 3}}, "temperature"),
        ({"sampler": {"stop": ["x"] * 17}}, "stop"),
        ({"sampler": {"typical_p": 0.5}}, "typical_p"),
        ({"sampler": ["temperature"]}, "sampler"),
        ({"sampler": {"stop": ["a\u0000b"]}}, "sampler"),
        ({"reply_tokens": 0}, "reply_tokens"),
        ({"reply_tokens": "many"}, "reply_tokens"),
    ],
)
def test_bad_samplers_answer_400_naming_the_field_and_change_nothing(api, llm, change, field):
    response = api.patch(_detail(llm), change, format="json")
    assert response.status_code == 400
    body = response.json()
    assert (body["extra"]["field"] if "extra" in body else next(iter(body))) == field
    llm.refresh_from_db()
    assert (llm.sampler, llm.reply_tokens) == ({}, 300)


# ------------------------------------------------------------------------------------------------ presets


def test_presets_are_listed_by_name(api, user, other_user):
    sampler_preset_save(user=user, name="Steady", values={"temperature": 0.4})
    sampler_preset_save(user=user, name="Creative", values={"temperature": 1.2, "stop": ["END"]})
    sampler_preset_save(user=other_user, name="Theirs", values={})

    response = api.get(PRESETS)

    assert response.status_code == 200
    results = response.json()["results"]
    assert [(p["name"], p["values"]) for p in results] == [
        ("Creative", {"temperature": 1.2, "stop": ["END"]}),
        ("Steady", {"temperature": 0.4}),
    ]
    assert set(results[0]) == {"id", "name", "values", "created_at"}


def test_post_saves_a_preset_and_saves_over_one_of_the_same_name(api, user):
    first = api.post(PRESETS, {"name": "Creative", "values": {"temperature": 1.2}}, format="json")
    assert first.status_code == 201 and first.json()["values"] == {"temperature": 1.2}

    again = api.post(PRESETS, {"name": "creative", "values": {"top_p": 0.9}}, format="json")

    assert again.status_code == 201 and again.json()["id"] == first.json()["id"]
    assert list(SamplerPreset.objects.filter(user=user).values_list("name", "values")) == [
        ("creative", {"top_p": 0.9})
    ]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "Hot", "values": {"temperature": 2.5}}, "temperature"),
        ({"name": "  ", "values": {}}, "name"),
        ({"name": "x" * 101, "values": {}}, "name"),
        ({"values": {}}, "name"),
        ({"name": "Hot"}, "values"),
        ({"name": "Hot", "values": "hot"}, "values"),
    ],
)
def test_a_bad_preset_answers_400_naming_the_field(api, data, field):
    response = api.post(PRESETS, data, format="json")
    assert response.status_code == 400
    body = response.json()
    assert (body["extra"]["field"] if "extra" in body else next(iter(body))) == field
    assert not SamplerPreset.objects.exists()


def test_delete_removes_the_preset(api, user):
    preset = sampler_preset_save(user=user, name="Creative", values={})
    assert api.delete(f"{PRESETS}{preset.pk}/").status_code == 204
    assert not SamplerPreset.objects.exists()
    assert api.delete(f"{PRESETS}{preset.pk}/").status_code == 404


def test_another_users_preset_is_404(api, other_user):
    theirs = sampler_preset_save(user=other_user, name="Theirs", values={"temperature": 2})
    assert api.delete(f"{PRESETS}{theirs.pk}/").status_code == 404
    assert SamplerPreset.objects.filter(pk=theirs.pk).exists()


def test_presets_need_authentication(user):
    preset = sampler_preset_save(user=user, name="Creative", values={})
    anonymous = APIClient()
    assert anonymous.get(PRESETS).status_code == 401
    assert anonymous.post(PRESETS, {"name": "x", "values": {}}, format="json").status_code == 401
    assert anonymous.delete(f"{PRESETS}{preset.pk}/").status_code == 401
    assert SamplerPreset.objects.count() == 1 and not Connection.objects.exists()


def test_a_preset_post_with_an_idempotency_key_applies_once(api):
    headers = {"HTTP_IDEMPOTENCY_KEY": "preset-1"}
    first = api.post(PRESETS, {"name": "A", "values": {"seed": 1}}, format="json", **headers)
    second = api.post(PRESETS, {"name": "A", "values": {"seed": 1}}, format="json", **headers)
    assert (first.status_code, second.status_code) == (201, 201) and first.json() == second.json()
    assert SamplerPreset.objects.count() == 1


def test_a_huge_whole_number_or_a_nul_in_a_name_is_refused_naming_the_field(api):
    huge = api.post("/api/v1/llm/presets/", {"name": "Big", "values": {"temperature": 10**400}}, format="json")
    assert huge.status_code == 400 and huge.json()["extra"]["field"] == "temperature"
    nul = api.post("/api/v1/llm/presets/", {"name": "a\x00b", "values": {"temperature": 1}}, format="json")
    assert nul.status_code == 400
