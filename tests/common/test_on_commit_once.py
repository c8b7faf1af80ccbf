"""apps/common/tasks.py `on_commit_once`: work asked for again and again by one transaction (each write of a chat
wakes its indexing and extraction) is sent once, when it commits."""

import ast
import json

import pytest
import redis
from django.db import transaction

from apps.chats.services.patch import chat_patch
from apps.chats.services.writes import chat_append
from apps.common.tasks import on_commit_once


@pytest.mark.django_db(transaction=True)
def test_the_same_work_asked_three_times_in_a_transaction_runs_once_when_it_commits():
    ran = []
    with transaction.atomic():
        for value in (1, 2, 1, 1):
            on_commit_once(ran.append, value)
        assert ran == []
    assert ran == [1, 2]

    on_commit_once(ran.append, 3)  # outside a transaction: at once
    assert ran == [1, 2, 3]


@pytest.mark.django_db(transaction=True)
def test_work_dropped_with_a_rolled_back_savepoint_is_asked_for_again():
    ran = []
    with transaction.atomic():
        try:
            with transaction.atomic():
                on_commit_once(ran.append, 1)
                raise RuntimeError("the savepoint rolls back")
        except RuntimeError:
            pass
        on_commit_once(ran.append, 1)
    assert ran == [1]


@pytest.mark.django_db(transaction=True)
def test_three_writes_of_a_chat_in_one_transaction_send_its_tasks_once(broker, chat):
    queue = redis.Redis.from_url(broker)
    queue.delete("celery")
    with transaction.atomic():
        chat = chat_append(chat=chat, messages=[{"name": "You", "is_user": True, "mes": "One"}],
                           integrity=chat.integrity).chat  # fmt: skip
        chat = chat_append(chat=chat, messages=[{"name": "Mira", "mes": "Two"}], integrity=chat.integrity).chat
        chat_patch(chat=chat, operations=[{"op": "replace", "path": "/0/mes", "value": "Zero"}],
                   integrity=chat.integrity)  # fmt: skip

    sent = [json.loads(raw)["headers"] for raw in queue.lrange("celery", 0, -1)]
    for_chat = sorted(headers["task"] for headers in sent if ast.literal_eval(headers["argsrepr"]) == (chat.pk,))
    assert for_chat == ["extraction.run_chat", "memories.index_chat"]
