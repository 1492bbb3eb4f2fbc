"""The admin's model permissions, for the admin's actions and pages, the staff APIs and research pages.

Being staff only opens the admin's door; what a staff user may see is what their model permissions say
(a staff user without ``annotation.view_assignment`` sees no worker ids, in the admin or here), and what
they may do is what each action's own permission says (``jobs.view_job`` shows jobs, ``jobs.cancel_job``
cancels them). ``staff_has_perms`` is the rule; ``staff_with_perms`` is the same rule as a DRF permission
class, ``admin_permission`` as a ModelAdmin ``has_<name>_permission`` method (an admin action's
``permissions=[name]``). Every action, page and endpoint with what it needs: docs/reference/permissions.md
(tests/test_permissions.py walks that table)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.permissions import BasePermission


def staff_has_perms(user, perms: tuple[str, ...] | list[str]) -> bool:
    """Whether ``user`` is an active staff user holding every one of ``perms``."""
    return bool(user and user.is_active and user.is_staff and user.has_perms(perms))


def staff_with_perms(*perms: str) -> type[BasePermission]:
    """A DRF permission class: an active staff user holding every one of ``perms``."""

    class StaffWithPerms(BasePermission):
        def has_permission(self, request, view) -> bool:
            return staff_has_perms(request.user, perms)

    StaffWithPerms.__name__ = f"StaffWith({', '.join(perms)})"
    return StaffWithPerms


def admin_permission(*perms: str):
    """A ModelAdmin ``has_<name>_permission(request)`` method: an active staff user holding every one of
    ``perms`` (``@admin.action(permissions=[name])`` offers and runs the action only then)."""

    def check(model_admin, request) -> bool:
        return staff_has_perms(request.user, perms)

    return check


def permissions_grant_to_holders(apps, *, app_label: str, model: str, new: list[tuple[str, str]], held: str) -> None:
    """A data migration's step: create ``new`` permissions (codename, name) of ``app_label.model`` now (Django
    makes them only after all migrations) and grant them to every user and group holding ``held``, so that
    splitting an action off a permission takes it from no one who had it before."""
    content_types = apps.get_model("contenttypes", "ContentType")
    permission_model = apps.get_model("auth", "Permission")
    user_model = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    group_model = apps.get_model("auth", "Group")
    content_type, _ = content_types.objects.get_or_create(app_label=app_label, model=model)
    granted = [
        permission_model.objects.get_or_create(content_type=content_type, codename=codename, defaults={"name": name})[0]
        for codename, name in new
    ]
    old = permission_model.objects.filter(content_type=content_type, codename=held).first()
    if old is None:
        return
    for user in user_model.objects.filter(user_permissions=old):
        user.user_permissions.add(*granted)
    for group in group_model.objects.filter(permissions=old):
        group.permissions.add(*granted)


def staff_with_perms_by_method(by_method: dict[str, tuple[str, ...]]) -> type[BasePermission]:
    """A DRF permission class for a URL whose methods need different permissions (``GET`` lists, ``POST``
    starts a job): an active staff user holding every permission its method names; a method not named (the
    view answers 405) needs them all."""
    every = tuple(dict.fromkeys(p for perms in by_method.values() for p in perms))

    class StaffWithPermsByMethod(BasePermission):
        def has_permission(self, request, view) -> bool:
            method = "GET" if request.method == "HEAD" else request.method
            return staff_has_perms(request.user, by_method.get(method, every))

    StaffWithPermsByMethod.__name__ = (
        "StaffWith(" + "; ".join(f"{m}: {', '.join(p)}" for m, p in by_method.items()) + ")"
    )
    return StaffWithPermsByMethod
