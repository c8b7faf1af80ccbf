import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username="alice", password="correct horse battery", email="a@x.test")


@pytest.fixture
def other_user(db):
    return get_user_model().objects.create_user(username="bob", password="correct horse battery")


def _client_for(user) -> APIClient:
    client = APIClient()
    _, raw = api_token_create(user=user, name="tests")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def api(user) -> APIClient:
    return _client_for(user)


@pytest.fixture
def other_api(other_user) -> APIClient:
    return _client_for(other_user)


@pytest.fixture
def web(client, user):
    client.force_login(user)
    return client
