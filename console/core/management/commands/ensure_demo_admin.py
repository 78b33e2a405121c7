"""Create a demo superuser, in the admin role group, when the database has no user yet."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from console.accounts.roles import ADMIN, ensure_role_groups


class Command(BaseCommand):
    help = (
        "Create the superuser 'admin' with a generated password, in the 'admin' role group, "
        "if no user exists, and print the login once. Does nothing when any user exists."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin", help="login to create (default admin)")

    def handle(self, *args, username: str, **options):
        user_model = get_user_model()
        password = secrets.token_urlsafe(12)
        with transaction.atomic():
            if user_model.objects.exists():
                return
            user = user_model.objects.create_superuser(
                username=username, email=f"{username}@localhost", password=password
            )
            user.groups.add(ensure_role_groups()[ADMIN])
        self.stdout.write(
            self.style.SUCCESS("Created demo superuser (the password is shown only this once):")
        )
        self.stdout.write(f"  login:    {username}")
        self.stdout.write(f"  password: {password}")
