"""Tests: the same settings, with fast hashing; DATABASE_URL / CELERY_BROKER_URL pick the backends.

Each test run gets its own var/ directory (SQLite file, embedded broker, storage), so that two runs on
one machine never share state. Subprocesses (a real Celery worker) inherit it through the environment.
"""

import os
import tempfile

os.environ.setdefault("PARAFORGE_VAR_DIR", tempfile.mkdtemp(prefix="paraforge-test-"))

from .base import *  # noqa: F403
from .base import DATABASES, VAR_DIR

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so that a real Celery worker process can open the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-paraforge.sqlite3")}

# CLI tests call ``--wait`` commands with no worker up, on Redis too; the worker tests start one.
PARAFORGE_INLINE_WITHOUT_WORKER = True

# Client.login() and a bare authenticate() pass no request, which django-axes' backend refuses; the
# login views (tests/test_logins.py) still go through the lockout checks (limits/backends.py).
AUTHENTICATION_BACKENDS = [
    "limits.backends.AxesBackendAllowingRequestlessCalls",
    "django.contrib.auth.backends.ModelBackend",
]
