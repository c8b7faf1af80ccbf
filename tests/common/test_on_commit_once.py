"""apps/common/tasks.py `on_commit_once`: work asked for again and again by one transaction (each write of a chat
wakes its indexing and extraction) is sent once, when it commits."""

import ast
import json
import threading
import time

import pytest
import redis
from django.db import transaction

from apps.chats.services.patch import chat_patch
from apps.chats.services.writes import chat_append
from apps.common.tasks import hooks_drain, on_commit_once


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
    assert hooks_drain()  # what making the chat sent is in the queue before it is emptied
    queue.delete("celery")
    with transaction.atomic():
        chat = chat_append(chat=chat, messages=[{"name": "You", "is_user": True, "mes": "One"}],
                           integrity=chat.integrity).chat  # fmt: skip
        chat = chat_append(chat=chat, messages=[{"name": "Mira", "mes": "Two"}], integrity=chat.integrity).chat
        chat_patch(chat=chat, operations=[{"op": "replace", "path": "/0/mes", "value": "Zero"}],
                   integrity=chat.integrity)  # fmt: skip

    assert hooks_drain()  # sent from the process's sender thread, off the writer's path
    sent = [json.loads(raw)["headers"] for raw in queue.lrange("celery", 0, -1)]
    for_chat = sorted(headers["task"] for headers in sent if ast.literal_eval(headers["argsrepr"]) == (chat.pk,))
    assert for_chat == ["extraction.run_chat", "memories.index_chat"]


@pytest.mark.django_db(transaction=True)
def test_a_commits_sends_leave_from_the_sender_thread_in_order_without_the_writer_waiting(broker):
    release, ran = threading.Event(), []

    def send(value):
        if value == 1:
            assert release.wait(timeout=30)  # a broker slow to answer
        ran.append((value, threading.current_thread().name))

    with transaction.atomic():
        on_commit_once(send, 1)
        on_commit_once(send, 2)
    on_commit_once(send, 3)  # outside a transaction: handed over at once
    assert ran == []  # the writer went on while the first send still waits
    started = time.monotonic()
    assert not hooks_drain(timeout=0.2)  # the drain's time limit holds while a send hangs
    assert 0.15 < time.monotonic() - started < 5 and ran == []
    release.set()
    assert hooks_drain()
    assert ran == [(1, "task-sender"), (2, "task-sender"), (3, "task-sender")]


@pytest.mark.django_db(transaction=True)
def test_a_failing_send_leaves_the_sender_to_run_the_next(broker):
    ran = []

    def fail():
        raise RuntimeError("the broker fell over")

    on_commit_once(fail)
    on_commit_once(ran.append, "next")
    assert hooks_drain() and ran == ["next"]
