"""Writing LLM connections: keys encrypted at rest, one default per user, names unique per user, provider URLs
checked against the deployment's private-hosts rule, the test action's outcome remembered; the hardware profile
each connection gets; the selectors' tenancy; pruning old calls."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone

from apps.common.exceptions import ApplicationError
from apps.common.secrets import secret_decrypt
from apps.llm import selectors
from apps.llm.models import Call, Connection
from apps.llm.profiles import detect_profile
from apps.llm.services import connection_create, connection_delete, connection_test, connection_update
from apps.llm.tasks import prune_calls
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

KEY = "sk-live-abcdefghijklmnop"


def _create(user, name="hosted", **fields):
    fields.setdefault("base_url", "https://api.example.com/v1")
    fields.setdefault("model", "gpt-4o-mini")
    return connection_create(user=user, name=name, **fields)


def _refused(field: str, **kwargs) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        kwargs.pop("service", connection_create)(**kwargs)
    assert caught.value.extra["field"] == field, caught.value.message
    return caught.value


def _defaults(user) -> list[str]:
    return list(Connection.objects.filter(user=user, is_default=True).values_list("name", flat=True))


# ---------------------------------------------------------------------------------------------------- keys


def test_the_key_is_stored_encrypted_with_only_its_last_four_characters_shown(user):
    connection = _create(user, api_key=KEY)
    stored = Connection.objects.get(pk=connection.pk)
    assert stored.api_key_encrypted and KEY not in stored.api_key_encrypted
    assert secret_decrypt(stored.api_key_encrypted) == KEY
    assert stored.api_key_hint == "mnop"


def test_only_a_key_of_twelve_characters_or_more_gets_a_hint(user):
    short = _create(user, "short", api_key="sk-short123")  # 11 characters: four of them would give too much away
    assert secret_decrypt(short.api_key_encrypted) == "sk-short123"
    assert short.api_key_hint == ""
    assert _create(user, "twelve", api_key="sk-twelve-12").api_key_hint == "e-12"


def test_no_key_stores_nothing(user):
    connection = _create(user)
    assert (connection.api_key_encrypted, connection.api_key_hint) == ("", "")


def test_update_without_a_key_keeps_it_and_an_empty_key_clears_it(user):
    connection = _create(user, api_key=KEY)

    connection = connection_update(connection=connection, data={"model": "gpt-4.1"})
    assert secret_decrypt(connection.api_key_encrypted) == KEY and connection.api_key_hint == "mnop"

    connection = connection_update(connection=connection, data={}, api_key="sk-other-0987654321zz")
    assert secret_decrypt(connection.api_key_encrypted) == "sk-other-0987654321zz"
    assert connection.api_key_hint == "21zz"

    connection = connection_update(connection=connection, data={}, api_key="")
    stored = Connection.objects.get(pk=connection.pk)
    assert (stored.api_key_encrypted, stored.api_key_hint, stored.model) == ("", "", "gpt-4.1")


# ------------------------------------------------------------------------------------------------ defaults


def test_no_connection_does_background_work_unless_ticked_not_even_the_first(user):
    first = _create(user, "first")
    second = _create(user, "second")
    assert (first.is_default, second.is_default) == (False, False)
    assert selectors.connection_default(user_id=user.pk) is None
    # A reply the person asks for needs no tick: the first connection answers it.
    assert selectors.connection_for_replies(user_id=user.pk) == first
    connection_update(connection=second, data={"is_default": True})
    assert selectors.connection_default(user_id=user.pk) == selectors.connection_for_replies(user_id=user.pk) == second


def test_a_new_default_unsets_the_old_one(user):
    _create(user, "first")
    _create(user, "second", is_default=True)
    assert _defaults(user) == ["second"]
    connection_update(connection=Connection.objects.get(name="first"), data={"is_default": True})
    assert _defaults(user) == ["first"]


def test_defaults_are_per_user(user, other_user):
    _create(user, "mine", is_default=True)
    _create(other_user, "theirs", is_default=True)
    assert (_defaults(user), _defaults(other_user)) == (["mine"], ["theirs"])


def test_the_database_refuses_a_second_default(user):
    _create(user, "first", is_default=True)
    second = _create(user, "second")
    with pytest.raises(IntegrityError), transaction.atomic():
        Connection.objects.filter(pk=second.pk).update(is_default=True)


def test_deleting_the_default_leaves_background_work_to_the_persons_next_choice(user):
    _create(user, "zeta")
    middle = _create(user, "middle", is_default=True)

    connection_delete(connection=middle)

    assert _defaults(user) == []  # no other connection starts spending on its own


def test_deleting_another_connection_keeps_the_default(user):
    _create(user, "first", is_default=True)
    connection_delete(connection=_create(user, "second"))
    assert _defaults(user) == ["first"]


def test_deleting_the_last_connection_leaves_no_default(user):
    connection_delete(connection=_create(user, "only"))
    assert selectors.connection_default(user_id=user.pk) is None


def test_deleting_a_connection_keeps_its_calls(llm):
    llm.server.on("Reply with OK", "OK")
    connection_test(connection=llm)
    connection_delete(connection=llm)
    call = Call.objects.get()
    assert (call.connection, call.purpose) == (None, "connection_test")


# ---------------------------------------------------------------------------------------------- validation


def test_a_duplicate_name_is_refused_whatever_its_case(user, other_user):
    _create(user, "Local Qwen")
    error = _refused("name", user=user, name="  local qwen ", base_url="http://localhost:11434", model="qwen3")
    assert error.message == "You already have a connection of that name."
    # Another user may use it, and a connection may keep its own name in another case.
    _create(other_user, "Local Qwen")
    renamed = connection_update(connection=Connection.objects.get(user=user), data={"name": "LOCAL QWEN"})
    assert renamed.name == "LOCAL QWEN"


def test_renaming_onto_another_connection_is_refused(user):
    _create(user, "first")
    second = _create(user, "second")
    _refused("name", service=connection_update, connection=second, data={"name": "First"})
    assert Connection.objects.get(pk=second.pk).name == "second"


def test_names_are_trimmed_and_a_blank_one_is_refused(user):
    assert _create(user, "  padded  ").name == "padded"
    _refused("name", user=user, name="   ", base_url="https://api.example.com/v1", model="m")


def test_an_empty_model_is_refused(user):
    _refused("model", user=user, name="no model", base_url="https://api.example.com/v1", model="  ")
    assert not Connection.objects.exists()


@pytest.mark.parametrize(("field", "value"), [("timeout", 0.5), ("timeout", 601), ("context_window", 511)])
def test_out_of_range_numbers_are_refused(user, field, value):
    _refused(field, user=user, name="x", base_url="https://api.example.com/v1", model="m", **{field: value})


@pytest.mark.parametrize("url", ["ftp://files.example.com/v1", "file:///etc/passwd", "http://", "api.example.com"])
def test_a_url_that_is_not_http_is_refused_always(user, url):
    error = _refused("base_url", user=user, name="x", base_url=url, model="m")
    assert error.message == "The URL must start with http:// or https:// and name a host."


def test_a_url_with_an_impossible_port_is_refused(user):
    _refused("base_url", user=user, name="x", base_url="http://api.example.com:99999/v1", model="m")


# ------------------------------------------------------------------------------------------- private hosts


def test_private_hosts_are_allowed_by_default(user, settings):
    assert settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS is True
    assert _create(user, base_url="http://127.0.0.1:11434").base_url == "http://127.0.0.1:11434"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:11434",
        "http://10.0.0.5",
        "http://192.168.1.20:8080/v1",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:8000/v1",
        "http://localhost:1234/v1",
        "http://0.0.0.0:6379",
    ],
)
def test_a_deployment_without_private_hosts_refuses_them(user, settings, url):
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False
    error = _refused("base_url", user=user, name="x", base_url=url, model="m")
    assert error.message == "This deployment does not call private or local network addresses."
    assert not Connection.objects.exists()


def test_a_deployment_without_private_hosts_still_takes_a_public_address(user, settings):
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False
    assert _create(user, base_url="https://8.8.8.8/v1").base_url == "https://8.8.8.8/v1"


def test_a_deployment_without_private_hosts_refuses_moving_a_connection_to_one(user, settings):
    connection = _create(user, base_url="https://8.8.8.8/v1")
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False
    _refused("base_url", service=connection_update, connection=connection, data={"base_url": "http://10.0.0.5/v1"})
    assert Connection.objects.get(pk=connection.pk).base_url == "https://8.8.8.8/v1"


# ------------------------------------------------------------------------------------------------- testing


def test_a_connection_test_that_answers_is_remembered(llm):
    llm.server.on("Reply with OK", "OK")

    connection = connection_test(connection=llm)

    assert connection.last_test_ok is True and connection.last_tested_at is not None
    assert connection.last_test_message.startswith("answered in ") and connection.last_test_message.endswith(": 'OK'")
    call = Call.objects.get()
    assert (call.purpose, call.template, call.status) == ("connection_test", "connection_test@v1", "ok")
    assert llm.server.requests[0]["body"]["max_tokens"] == 16


def test_a_connection_test_says_when_thinking_was_stripped(llm):
    llm.server.on("Reply with OK", "<think>Just say OK.</think>OK")
    connection = connection_test(connection=llm)
    assert connection.last_test_message.endswith(": 'OK' (thinking stripped)")


def test_a_connection_test_that_fails_is_remembered_with_the_reason(llm):
    llm.server.on("Reply with OK", Reply(status=401))

    connection = connection_test(connection=llm)

    assert connection.last_test_ok is False and connection.last_tested_at is not None
    assert connection.last_test_message.startswith("the server refused the request (401)")
    assert Call.objects.get().error == connection.last_test_message


def test_a_later_test_replaces_the_earlier_outcome(llm):
    llm.server.on("Reply with OK", Reply(status=400), times=1)
    assert connection_test(connection=llm).last_test_ok is False
    assert connection_test(connection=llm).last_test_ok is True


# ------------------------------------------------------------------------------------------------ profiles


@pytest.mark.parametrize(
    ("api", "url", "profile"),
    [
        ("ollama", "https://ollama.example.com", "A"),
        ("openai", "http://localhost:8000/v1", "A"),
        ("openai", "http://127.0.0.1:9000/v1", "A"),
        ("openai", "http://192.168.1.20/v1", "A"),
        ("openai", "http://10.1.2.3/v1", "A"),
        ("openai", "http://gpu-box.local/v1", "A"),
        ("openai", "http://[::1]:9000/v1", "A"),
        ("openai", "http://gpu.example.com:11434/v1", "A"),
        ("openai", "https://api.openai.com/v1", "B"),
        ("openai", "https://openrouter.ai/api/v1", "B"),
    ],
)
def test_detect_profile(api, url, profile):
    assert detect_profile(api, url) == profile


def test_effective_profile_is_detected_unless_overridden(user, llm_server):
    local = _create(user, "local", base_url=llm_server.url)
    hosted = _create(user, "hosted", base_url="https://api.openai.com/v1")
    assert (local.effective_profile, hosted.effective_profile) == ("A", "B")
    local = connection_update(connection=local, data={"profile": "B"})
    hosted = connection_update(connection=hosted, data={"profile": "A"})
    assert (local.effective_profile, hosted.effective_profile) == ("B", "A")


# ----------------------------------------------------------------------------------------------- selectors


def test_selectors_see_only_the_users_own(user, other_user, llm):
    theirs = _create(other_user, "theirs")
    assert list(selectors.connection_list(user=user)) == [llm]
    assert selectors.connection_get(user=user, connection_id=llm.pk) == llm
    with pytest.raises(Http404):
        selectors.connection_get(user=user, connection_id=theirs.pk)


def test_call_list_is_scoped_and_filtered_by_status(user, other_user, llm):
    llm.server.on("Reply with OK", Reply(status=400), times=1)
    connection_test(connection=llm)
    connection_test(connection=llm)
    assert [c.status for c in selectors.call_list(user=user)] == ["ok", "error"]
    assert [c.status for c in selectors.call_list(user=user, status="error")] == ["error"]
    assert not selectors.call_list(user=other_user).exists()


# ----------------------------------------------------------------------------------------------------- tasks


def test_prune_calls_removes_calls_older_than_the_kept_days(llm, settings):
    llm.server.on("Reply with OK", "OK")
    connection_test(connection=llm)
    connection_test(connection=llm)
    old_call, recent_call = Call.objects.order_by("id")
    days = settings.LOREKEEPER_LLM["keep_calls_days"]
    Call.objects.filter(pk=old_call.pk).update(created_at=timezone.now() - timedelta(days=days, minutes=1))

    assert prune_calls.delay().get() == 1

    assert list(Call.objects.all()) == [recent_call]
