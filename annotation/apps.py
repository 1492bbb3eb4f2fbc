from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"

    def ready(self):
        from django.core.checks import register

        from .checks import mturk_configuration_check

        register(mturk_configuration_check)
