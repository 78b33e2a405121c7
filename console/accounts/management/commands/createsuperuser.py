"""Django's createsuperuser, refusing a name another user has in any spelling
(console/accounts/usernames.py) with a sentence instead of a database error."""

from __future__ import annotations

from django.contrib.auth.management.commands import createsuperuser

from console.accounts.usernames import duplicate_error


class Command(createsuperuser.Command):
    def _validate_username(self, username, verbose_field_name, database):
        error = duplicate_error(username) if username else None
        if error is not None:
            return error.message
        return super()._validate_username(username, verbose_field_name, database)
