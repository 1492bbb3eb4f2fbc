"""A Content-Security-Policy on every HTML response.

No page runs a script that is not one of our own static files (no inline ``<script>``, no ``onclick=``,
no ``javascript:`` links, none from another site), no plugin, no ``<base>`` elsewhere, forms post only to
us, and no other site may frame a page. The Django admin (5.2) uses only external scripts; inline
``<style>`` blocks (the admin's change list, the research pages) stay allowed.

The slider page (``hit-page``) is the exception on two directives: MTurk shows it in a frame (the view
sets ``frame-ancestors`` to MTurk's sites, kept as is), and after saving it posts the assignment to
MTurk's ``externalSubmit`` (``form-action`` allows the submit hosts of ``ANNOTATION_TURK_SUBMIT_HOSTS`` and
MTurk's own sites, where that post is redirected). A header a view has set is merged: directives it
names are kept, the missing ones are added.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"
POLICY = {
    "script-src": "'self'",
    "style-src": "'self' 'unsafe-inline'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
# views whose page posts its form to MTurk (annotation.web.views.hit_page)
MTURK_FORM_VIEWS = {"hit-page"}
MTURK_SITES = "https://*.mturk.com"


def _mturk_form_action() -> str:
    from annotation.web.views import DEFAULT_TURK_HOSTS

    hosts = getattr(settings, "ANNOTATION_TURK_SUBMIT_HOSTS", DEFAULT_TURK_HOSTS)
    return " ".join(["'self'", *(f"https://{h}" for h in hosts), MTURK_SITES])


def csp_parse(header: str) -> dict[str, str]:
    """``{directive: value}`` of a policy string (directive names lower-cased; the first one wins)."""
    directives: dict[str, str] = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition(" ")
        if name:
            directives.setdefault(name.lower(), value.strip())
    return directives


def csp_merge(existing: str, policy: dict[str, str]) -> str:
    """``existing`` with every directive of ``policy`` it does not name added."""
    directives = csp_parse(existing)
    for name, value in policy.items():
        directives.setdefault(name, value)
    return "; ".join(f"{name} {value}".strip() for name, value in directives.items())


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not response.get("Content-Type", "").lower().startswith("text/html"):
            return response
        policy = dict(POLICY)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.url_name in MTURK_FORM_VIEWS:
            policy["form-action"] = _mturk_form_action()
        response[HEADER] = csp_merge(response.get(HEADER, ""), policy)
        return response
