"""A connection's reply length and samplers: `sampler_clean` (the one place their rules live), the request options
each API gets (`sampler_options`), the context size, the connection services that store them, and sampler presets
(save, overwrite by name, apply, delete, scoped to their owner)."""

import pytest
from django.db import IntegrityError
from django.http import Http404

from apps.common.exceptions import ApplicationError
from apps.llm.models import SamplerPreset
from apps.llm.profiles import connection_context_size
from apps.llm.sampler import sampler_clean, sampler_options
from apps.llm.selectors import sampler_preset_get, sampler_preset_list
from apps.llm.services import (
    connection_create,
    connection_update,
    sampler_preset_apply,
    sampler_preset_delete,
    sampler_preset_save,
)

pytestmark = pytest.mark.django_db

EVERY = {
    "temperature": 0.8,
    "top_p": 0.95,
    "top_k": 40,
    "min_p": 0.05,
    "frequency_penalty": 0.1,
    "presence_penalty": -0.2,
    "repetition_penalty": 1.1,
    "stop": ["\nAda:", "###"],
    "seed": 42,
}


def _connection(user, **fields):
    fields = {"name": "local", "api": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"} | fields
    return connection_create(user=user, **fields)


def _refusal(values: dict) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        sampler_clean(values)
    return caught.value


# ------------------------------------------------------------------------------------------------ sampler_clean


def test_every_sampler_in_range_is_kept_in_a_canonical_shape():
    assert sampler_clean(EVERY) == EVERY
    assert sampler_clean({"temperature": 1, "top_k": 40.0, "seed": 0}) == {"temperature": 1.0, "top_k": 40, "seed": 0}
    assert isinstance(sampler_clean({"temperature": 1})["temperature"], float)


def test_unset_values_are_left_out():
    assert sampler_clean({"temperature": None, "top_p": "", "stop": [], "seed": None}) == {}
    assert sampler_clean({"stop": ["", "END", ""]}) == {"stop": ["END"]}


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"temperature": 2.5}, "temperature", "temperature is between 0 and 2."),
        ({"temperature": -0.1}, "temperature", "temperature is between 0 and 2."),
        ({"top_p": 1.01}, "top_p", "top_p is between 0 and 1."),
        ({"min_p": -1}, "min_p", "min_p is between 0 and 1."),
        ({"top_k": -1}, "top_k", "top_k is between 0 and 1e+06."),
        ({"top_k": 4.5}, "top_k", "top_k must be a whole number."),
        ({"frequency_penalty": 2.1}, "frequency_penalty", "frequency_penalty is between -2 and 2."),
        ({"presence_penalty": -3}, "presence_penalty", "presence_penalty is between -2 and 2."),
        ({"repetition_penalty": 3.5}, "repetition_penalty", "repetition_penalty is between 0 and 3."),
        ({"seed": 2**64}, "seed", "seed must fit in 64 bits."),
        ({"seed": 1.5}, "seed", "seed must be a whole number."),
        ({"temperature": "hot"}, "temperature", "temperature must be a number."),
        ({"temperature": True}, "temperature", "temperature must be a number."),
        ({"temperature": float("nan")}, "temperature", "temperature must be a finite number."),
        ({"stop": "END"}, "stop", "stop is a list of strings."),
        ({"stop": ["END", 3]}, "stop", "stop is a list of strings."),
        ({"stop": [f"s{i}" for i in range(17)]}, "stop", "stop holds at most 16 strings."),
        ({"stop": ["x" * 101]}, "stop", "Each stop string is at most 100 characters."),
        ({"mirostat": 2}, "mirostat", "Unknown sampler setting 'mirostat'."),
    ],
)
def test_a_value_out_of_its_rule_is_refused_naming_the_field(values, field, message):
    error = _refusal(values)
    assert (error.extra["field"], error.message) == (field, message)


def test_the_limits_themselves_are_allowed():
    values = {"temperature": 2, "top_p": 0, "stop": ["x" * 100] * 16, "seed": -(2**63), "repetition_penalty": 3}
    assert sampler_clean(values)["stop"] == ["x" * 100] * 16


def test_the_samplers_are_an_object():
    assert _refusal(["temperature"]).extra["field"] == "sampler"


# ------------------------------------------------------------------------------------------------ request options


def test_openai_options_carry_only_what_was_set_and_the_others_as_extra_body(user):
    connection = _connection(user, reply_tokens=250, sampler=EVERY)
    assert sampler_options(connection) == {
        "max_tokens": 250,
        "temperature": 0.8,
        "top_p": 0.95,
        "frequency_penalty": 0.1,
        "presence_penalty": -0.2,
        "stop": ["\nAda:", "###"],
        "seed": 42,
        "extra_body": {"top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1},
    }
    connection = connection_update(connection=connection, data={"sampler": {"temperature": 0.3}})
    assert sampler_options(connection) == {"max_tokens": 250, "temperature": 0.3}


def test_ollama_options_use_ollamas_names(user):
    connection = _connection(user, api="ollama", base_url="http://127.0.0.1:1", reply_tokens=250, sampler=EVERY)
    assert sampler_options(connection) == {
        "options": {
            "num_predict": 250,
            "temperature": 0.8,
            "top_p": 0.95,
            "top_k": 40,
            "min_p": 0.05,
            "frequency_penalty": 0.1,
            "presence_penalty": -0.2,
            "repeat_penalty": 1.1,
            "stop": ["\nAda:", "###"],
            "seed": 42,
        }
    }
    connection = connection_update(connection=connection, data={"sampler": {}})
    assert sampler_options(connection) == {"options": {"num_predict": 250}}


def test_the_context_size_is_the_connections_own_or_its_profiles_default(user, settings):
    local = _connection(user)  # a loopback address: profile A
    hosted = _connection(user, name="hosted", base_url="https://api.example.com/v1")
    assert connection_context_size(local) == settings.LOREKEEPER_LLM["context_window"]["A"]
    assert connection_context_size(hosted) == settings.LOREKEEPER_LLM["context_window"]["B"]
    assert connection_context_size(connection_update(connection=local, data={"context_window": 32768})) == 32768
    forced = connection_update(connection=hosted, data={"profile": "A"})
    assert connection_context_size(forced) == settings.LOREKEEPER_LLM["context_window"]["A"]


# ------------------------------------------------------------------------------------------------ the connection


def test_a_new_connection_replies_in_300_tokens_with_the_models_own_samplers(user):
    connection = _connection(user)
    assert (connection.reply_tokens, connection.sampler) == (300, {})


def test_update_stores_the_reply_length_and_the_samplers_cleaned(user):
    connection = connection_update(
        connection=_connection(user), data={"reply_tokens": 512, "sampler": {"top_k": 40.0, "stop": ["", "END"]}}
    )
    connection.refresh_from_db()
    assert (connection.reply_tokens, connection.sampler) == (512, {"top_k": 40, "stop": ["END"]})


def test_update_with_a_bad_sampler_names_it_and_changes_nothing(user):
    connection = _connection(user, sampler={"temperature": 0.5})
    with pytest.raises(ApplicationError) as caught:
        connection_update(connection=connection, data={"sampler": {"temperature": 0.7, "top_p": 4}})
    assert caught.value.extra == {"field": "top_p"}
    connection.refresh_from_db()
    assert connection.sampler == {"temperature": 0.5}


@pytest.mark.parametrize("reply_tokens", [0, 100_001])
def test_a_reply_length_out_of_range_is_refused(user, reply_tokens):
    with pytest.raises(ApplicationError) as caught:
        _connection(user, reply_tokens=reply_tokens)
    assert caught.value.extra == {"field": "reply_tokens"}


def test_a_reply_length_that_fills_the_context_is_refused(user):
    with pytest.raises(ApplicationError) as caught:
        _connection(user, context_window=1024, reply_tokens=1024)
    assert caught.value.message == "The reply length leaves no room for the chat in the context size."
    assert _connection(user, context_window=1024, reply_tokens=1000).reply_tokens == 1000


# ------------------------------------------------------------------------------------------------ presets


def test_a_preset_keeps_its_values_cleaned(user):
    preset = sampler_preset_save(user=user, name="  Creative ", values={"temperature": 1, "stop": [""]})
    assert (preset.name, preset.values) == ("Creative", {"temperature": 1.0})
    assert preset.summary == "temperature 1"


def test_saving_under_a_known_name_in_any_case_replaces_that_preset(user):
    first = sampler_preset_save(user=user, name="Creative", values={"temperature": 1.2})
    again = sampler_preset_save(user=user, name="CREATIVE", values={"top_p": 0.9, "stop": ["A", "B"]})
    assert again.pk == first.pk
    again.refresh_from_db()
    summary = "top_p 0.9 · 2 stop strings"
    assert (again.name, again.values, again.summary) == ("CREATIVE", {"top_p": 0.9, "stop": ["A", "B"]}, summary)
    assert SamplerPreset.objects.filter(user=user).count() == 1


def test_presets_of_the_same_name_belong_to_each_user(user, other_user):
    sampler_preset_save(user=user, name="Creative", values={})
    sampler_preset_save(user=other_user, name="creative", values={})
    assert SamplerPreset.objects.count() == 2


def test_the_database_refuses_two_presets_of_one_name(user):
    SamplerPreset.objects.create(user=user, name="Steady")
    with pytest.raises(IntegrityError):
        SamplerPreset.objects.create(user=user, name="STEADY")


@pytest.mark.parametrize(
    ("name", "values", "field"),
    [("", {}, "name"), ("   ", {}, "name"), ("x" * 101, {}, "name"), ("Hot", {"temperature": 9}, "temperature")],
)
def test_a_bad_preset_is_refused_naming_the_field(user, name, values, field):
    with pytest.raises(ApplicationError) as caught:
        sampler_preset_save(user=user, name=name, values=values)
    assert caught.value.extra["field"] == field
    assert not SamplerPreset.objects.exists()


def test_applying_a_preset_replaces_the_samplers_and_keeps_the_reply_length(user):
    connection = _connection(user, reply_tokens=400, sampler={"temperature": 0.2, "seed": 1})
    preset = sampler_preset_save(user=user, name="Creative", values={"temperature": 1.1, "min_p": 0.1})

    connection = sampler_preset_apply(connection=connection, preset=preset)

    connection.refresh_from_db()
    assert (connection.sampler, connection.reply_tokens) == ({"temperature": 1.1, "min_p": 0.1}, 400)


def test_another_users_preset_cannot_be_applied(user, other_user):
    connection = _connection(user)
    preset = sampler_preset_save(user=other_user, name="Theirs", values={"temperature": 2})
    with pytest.raises(ApplicationError) as caught:
        sampler_preset_apply(connection=connection, preset=preset)
    assert caught.value.status == 404
    connection.refresh_from_db()
    assert connection.sampler == {}


def test_deleting_a_preset_leaves_the_connections_that_used_it(user):
    preset = sampler_preset_save(user=user, name="Creative", values={"temperature": 1.1})
    connection = sampler_preset_apply(connection=_connection(user), preset=preset)
    sampler_preset_delete(preset=preset)
    connection.refresh_from_db()
    assert not SamplerPreset.objects.exists() and connection.sampler == {"temperature": 1.1}


def test_preset_selectors_see_only_the_users_own(user, other_user):
    mine = sampler_preset_save(user=user, name="b", values={})
    sampler_preset_save(user=user, name="a", values={})
    theirs = sampler_preset_save(user=other_user, name="c", values={})
    assert [p.name for p in sampler_preset_list(user=user)] == ["a", "b"]
    assert sampler_preset_get(user=user, preset_id=mine.pk) == mine
    with pytest.raises(Http404):
        sampler_preset_get(user=user, preset_id=theirs.pk)
