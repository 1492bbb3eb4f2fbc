"""Production: secrets and hosts must come from the environment; HTTPS everywhere."""

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .environment import env_bool, env_int, env_str

SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set to a random string of at least 50 characters")
DEBUG = False
if not os.environ.get("DJANGO_ALLOWED_HOSTS"):
    raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must name the hosts this deployment serves")

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
# The slider page is embedded by MTurk in an iframe (ExternalQuestion); frontend sets its own
# frame-ancestors for that page only. Everything else may not be framed.
X_FRAME_OPTIONS = "DENY"
