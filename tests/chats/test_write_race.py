"""Many writers holding the same integrity race on one chat (threads, each with its own PostgreSQL connection)."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from tests.chats.helpers import exported, if_match

WRITERS = 12
ROUNDS = 4


def _run_in_threads(functions):
    results = [None] * len(functions)
    barrier = threading.Barrier(len(functions))

    def run(i, fn):
        try:
            barrier.wait()
            results[i] = fn()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@pytest.mark.django_db(transaction=True)
def test_of_writers_holding_the_same_integrity_exactly_one_wins(user):
    chat = chat_create(user=user, title="Race")
    _, raw = api_token_create(user=user, name="race")
    winners = []
    for round_no in range(ROUNDS):
        integrity = Chat.objects.get(pk=chat.pk).integrity

        def writer(n, integrity=integrity, round_no=round_no):
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
            message = {"name": f"writer {n}", "mes": f"round {round_no} writer {n}"}
            response = client.post(
                f"/api/v1/chats/{chat.pk}/append", {"messages": [message]}, format="json", **if_match(integrity)
            )
            return response.status_code, message

        results = _run_in_threads([lambda n=n: writer(n) for n in range(WRITERS)])
        statuses = sorted(status for status, _ in results)
        assert statuses == [200] + [409] * (WRITERS - 1), statuses
        winners += [message for status, message in results if status == 200]
    lines = exported(chat)
    assert [{"name": m["name"], "mes": m["mes"]} for m in lines[1:]] == winners
    assert Chat.objects.get(pk=chat.pk).message_count == ROUNDS


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_idempotency_key_apply_once(user):
    chat = chat_create(user=user, title="Retries")
    _, raw = api_token_create(user=user, name="retries")
    integrity = chat.integrity

    def retry():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        response = client.post(
            f"/api/v1/chats/{chat.pk}/append",
            {"messages": [{"mes": "exactly once", "send_date": "t"}]},
            format="json",
            HTTP_IDEMPOTENCY_KEY="same-key",
            **if_match(integrity),
        )
        return response.status_code, response.json()

    results = _run_in_threads([retry] * 8)
    assert {status for status, _ in results} == {200}
    assert len({body["integrity"] for _, body in results}) == 1
    assert Chat.objects.get(pk=chat.pk).message_count == 1
