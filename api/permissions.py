"""The admin's model permissions, for the staff APIs and research pages outside the admin.

Being staff only opens the admin's door; what a staff user may see is what their model permissions say
(a staff user without ``annotation.view_assignment`` sees no worker ids, in the admin or here).
``staff_has_perms`` is the rule; ``staff_with_perms`` is the same rule as a DRF permission class."""

from __future__ import annotations

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
