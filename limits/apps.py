from django.apps import AppConfig


class LimitsConfig(AppConfig):
    """Shared rate-limit counters (``limits.counters.hit_count``) and the login rate limit middleware."""

    name = "limits"

    def ready(self):
        from django.core.checks import register

        from .checks import counter_database_check

        register(counter_database_check)
