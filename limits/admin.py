"""django-axes' lockout list: its *Clean up expired attempts* action raised AttributeError (a 500) outside a
login, because axes reads the attempt time that its handler sets on a login's request only; here the action
prepares the request as axes' own handler does. (``frontend.admin`` then shows the lockout tables, this action
included, to superusers only: docs/reference/permissions.md.)"""

from __future__ import annotations

from axes.admin import AccessAttemptAdmin
from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.contrib import admin


class LockoutAdmin(AccessAttemptAdmin):
    actions = ["cleanup_expired_attempts"]

    @admin.action(description="Clean up expired attempts")
    def cleanup_expired_attempts(self, request, queryset):
        AxesProxyHandler.update_request(request)  # the attempt time the clean-up measures expiry from
        return super().cleanup_expired_attempts(request, queryset)


if admin.site.is_registered(AccessAttempt):  # AXES_ENABLE_ADMIN
    admin.site.unregister(AccessAttempt)
    admin.site.register(AccessAttempt, LockoutAdmin)
