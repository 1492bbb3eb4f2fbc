"""What later apps add to generation without generation importing them (dependencies follow the data flow
generation -> annotation -> scoring). annotation registers both in its ``AppConfig.ready()``: the campaign
of an evaluation sample takes the resource's name, and the resource admin links to that campaign."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import Resource

NameCheck = Callable[[str], "str | None"]  # a name -> why it is taken, or None
ResourceLink = Callable[["Resource"], "str | None"]  # a resource -> HTML of a link, or None

_NAME_CHECKS: list[NameCheck] = []
_SAMPLE_LINKS: list[ResourceLink] = []


def add_name_check(check: NameCheck) -> None:
    """Refuse a generation job's name that another app will give to what it makes from the job."""
    if check not in _NAME_CHECKS:
        _NAME_CHECKS.append(check)


def name_taken(name: str) -> str | None:
    """Why ``name`` cannot be a new resource's name in another app, or None."""
    for check in _NAME_CHECKS:
        reason = check(name)
        if reason:
            return reason
    return None


def add_sample_link(link: ResourceLink) -> None:
    """Show, in the resource admin, where a resource's evaluation sample went."""
    if link not in _SAMPLE_LINKS:
        _SAMPLE_LINKS.append(link)


def sample_link(resource: Resource) -> str:
    """The first link a registered app gives for the resource's evaluation sample, else ``"-"``."""
    for link in _SAMPLE_LINKS:
        html = link(resource)
        if html:
            return html
    return "-"
