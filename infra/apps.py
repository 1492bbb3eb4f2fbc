from django.apps import AppConfig


class InfraConfig(AppConfig):
    """Infrastructure every app uses (storage, shards, text files); it imports none of the domain apps."""

    name = "infra"
    verbose_name = "Infrastructure"
