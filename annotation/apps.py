from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"

    def ready(self):
        from django.core.checks import register

        from .campaigns.sample import register_generation_hooks
        from .providers import platform_notices  # noqa: F401  (the platforms follow disqualifications)
        from .providers.checks import mturk_configuration_check

        register(mturk_configuration_check)
        register_generation_hooks()  # evaluation samples become campaigns (annotation/campaigns/sample.py)
