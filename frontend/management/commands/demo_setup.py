"""Prepares the embedded-default demo: a superuser whose fresh password is printed, and demo data."""
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create (or reset) the demo superuser and load the demo data; prints the credentials."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")

    def handle(self, *args, username: str, **options):
        User = get_user_model()
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@localhost"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"demo superuser: {username}  password: {password}")
