"""The admin's front page: a *Research* box linking the pages that live outside the model lists (the campaigns'
results, the 37 constraint systems), *Recent actions* with what each action did, and the login lockout tables
(django-axes) for superusers only: they hold every address and username that tried to log in, which a
researcher neither needs nor should read."""

from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.admin.exceptions import NotRegistered

admin.site.index_template = "admin/paraforge_index.html"


def superusers_only(model_admin: type[admin.ModelAdmin]) -> type[admin.ModelAdmin]:
    """``model_admin`` that only active superusers see or touch, whatever permissions a staff member holds."""

    def is_superuser(request) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    class SuperusersOnly(model_admin):
        def has_module_permission(self, request):
            return is_superuser(request) and super().has_module_permission(request)

        def has_view_permission(self, request, obj=None):
            return is_superuser(request) and super().has_view_permission(request, obj)

        def has_add_permission(self, request, *args):
            return is_superuser(request) and super().has_add_permission(request, *args)

        def has_change_permission(self, request, obj=None):
            return is_superuser(request) and super().has_change_permission(request, obj)

        def has_delete_permission(self, request, obj=None):
            return is_superuser(request) and super().has_delete_permission(request, obj)

    SuperusersOnly.__name__ = SuperusersOnly.__qualname__ = model_admin.__name__
    return SuperusersOnly


for lockout_model in (AccessAttempt, AccessLog, AccessFailureLog):
    try:
        registered = admin.site.get_model_admin(lockout_model)
    except NotRegistered:  # AXES_ENABLE_ADMIN off: nothing to hide
        continue
    admin.site.unregister(lockout_model)
    admin.site.register(lockout_model, superusers_only(type(registered)))
