"""Logins (/annotate/login/ and /admin/login/): django-axes locks a username and an address out after
AXES_FAILURE_LIMIT wrong passwords, and PARAFORGE_LOGIN_RATE refuses login POSTs per address before any
password is hashed (limits/middleware.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.test import Client

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore:No directory at:UserWarning")]

LOGIN_URLS = ["/annotate/login/", "/admin/login/"]


class CountingHasher(MD5PasswordHasher):
    """The test hasher, counting how often a password is hashed (checked or made)."""

    calls = 0

    def encode(self, password, salt, *args, **kwargs):
        type(self).calls += 1
        return super().encode(password, salt, *args, **kwargs)

    def verify(self, password, encoded):
        type(self).calls += 1
        return super().verify(password, encoded)


@pytest.fixture
def users(django_user_model):
    # staff, so that the admin login lets them in too
    return {
        name: django_user_model.objects.create_user(name, password=f"right-{name}", is_staff=True)
        for name in ("alice", "bob")
    }


def login(url: str, username: str, password: str, address: str, **extra):
    client = Client()
    response = client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address, **extra)
    return response, "_auth_user_id" in client.session


@pytest.mark.parametrize("url", LOGIN_URLS)
def test_wrong_passwords_lock_out_the_user_and_the_address_but_no_one_else(url, users, settings):
    settings.AXES_FAILURE_LIMIT = 5
    failures = [login(url, "alice", f"wrong-{i}", "198.51.100.1")[0].status_code for i in range(5)]
    assert failures == [200, 200, 200, 200, 429]  # the fifth failure is answered with the lockout page

    response, logged_in = login(url, "alice", "right-alice", "198.51.100.1")
    assert response.status_code == 429 and not logged_in
    assert "Too many failed logins" in response.content.decode()
    # the username is locked from every address, the address for every username
    assert login(url, "alice", "right-alice", "198.51.100.2")[0].status_code == 429
    assert login(url, "bob", "right-bob", "198.51.100.1")[0].status_code == 429
    # a different user on another address still logs in
    response, logged_in = login(url, "bob", "right-bob", "198.51.100.3")
    assert response.status_code == 302 and logged_in


def test_a_locked_out_address_is_the_one_behind_the_trusted_proxy(users, settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    for i in range(3):  # a client rotating the part of X-Forwarded-For that it writes itself
        login("/annotate/login/", f"nobody-{i}", "guess", "10.0.0.1", HTTP_X_FORWARDED_FOR=f"1.2.3.{i}, 203.0.113.9")
    assert (
        login("/annotate/login/", "bob", "right-bob", "10.0.0.1", HTTP_X_FORWARDED_FOR="1.2.3.99, 203.0.113.9")[
            0
        ].status_code
        == 429
    )
    assert login("/annotate/login/", "bob", "right-bob", "10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.10")[1]


@pytest.mark.parametrize("url", LOGIN_URLS)
def test_login_posts_past_the_rate_are_refused_before_any_password_is_hashed(url, users, settings):
    settings.PASSWORD_HASHERS = ["tests.test_logins.CountingHasher"]
    settings.PARAFORGE_LOGIN_RATE = "20/hour"
    settings.AXES_FAILURE_LIMIT = 1000  # this test is about the rate, not the lockout
    CountingHasher.calls = 0
    statuses = [login(url, f"user-{i}", "guess", "198.51.100.7")[0].status_code for i in range(20)]
    assert statuses == [200] * 20 and CountingHasher.calls == 20

    response, _ = login(url, "user-20", "guess", "198.51.100.7")
    assert response.status_code == 429 and CountingHasher.calls == 20  # refused unhashed
    assert "Too many login attempts" in response.content.decode()
    assert 1 <= int(response["Retry-After"]) <= 3600
    # the right password too, and a forged X-Forwarded-For changes nothing (no trusted proxy)
    assert login(url, "alice", "right-alice", "198.51.100.7")[0].status_code == 429
    assert login(url, "alice", "right-alice", "198.51.100.7", HTTP_X_FORWARDED_FOR="192.0.2.1")[0].status_code == 429
    assert CountingHasher.calls == 20
    # the page itself still shows, and another address logs in
    assert Client().get(url, REMOTE_ADDR="198.51.100.7").status_code == 200
    response, logged_in = login(url, "alice", "right-alice", "198.51.100.8")
    assert response.status_code == 302 and logged_in
