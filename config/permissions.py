"""The admin's model permissions, for the staff APIs and research pages outside the admin.

Being staff only opens the admin's door; what a staff user may see is what their model permissions say
(a staff user without ``annotation.view_assignment`` sees no worker ids, in the admin or here)."""
from __future__ import annotations

from rest_framework.permissions import BasePermission


def staff_with_perms(*perms: str) -> type[BasePermission]:
    """A DRF permission class: an active staff user holding every one of ``perms``."""

    class StaffWithPerms(BasePermission):
        def has_permission(self, request, view) -> bool:
            user = request.user
            return bool(user and user.is_active and user.is_staff and user.has_perms(perms))

    StaffWithPerms.__name__ = f"StaffWith({', '.join(perms)})"
    return StaffWithPerms
