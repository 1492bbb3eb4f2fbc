"""django-axes' backend for the test settings only (config/settings/test.py).

``AxesStandaloneBackend`` refuses an ``authenticate()`` call without a request (it could not tell the
client's address), which is right for the site: every login view passes its request. Tests also call
Django's ``Client.login(username=..., password=...)`` and a bare ``authenticate(...)``, which pass none;
this backend lets those through to the next backend, unchecked, and checks every call with a request
exactly as ``AxesStandaloneBackend`` does (so the login tests see the real lockouts)."""

from axes.backends import AxesStandaloneBackend


class AxesBackendAllowingRequestlessCalls(AxesStandaloneBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
