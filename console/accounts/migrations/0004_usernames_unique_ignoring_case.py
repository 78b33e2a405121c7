"""User names are unique ignoring case: a unique index on lower(username) of the user table
(SQLite and PostgreSQL both index an expression). console/accounts/usernames.py compares
names by their NFKC casefold before any user is created or renamed; this index is the
backstop for two creations at once. A database that already holds case twins is refused with
the twins named: rename or remove one of each pair, then migrate again."""

from django.conf import settings
from django.db import migrations

INDEX = "accounts_username_lower_uniq"


def _table_and_column(apps):
    model = apps.get_model(settings.AUTH_USER_MODEL)
    field = model._meta.get_field(getattr(model, "USERNAME_FIELD", "username"))
    return model, model._meta.db_table, field.column


def refuse_existing_twins(apps, schema_editor):
    model, _, column = _table_and_column(apps)
    seen: dict[str, str] = {}
    twins: list[str] = []
    for name in model._default_manager.values_list(column, flat=True):
        if name.lower() in seen:
            twins.append(f"{seen[name.lower()]} / {name}")
        seen.setdefault(name.lower(), name)
    if twins:
        raise RuntimeError(
            "User names must be unique ignoring case, and these differ only in case: "
            + ", ".join(twins)
            + ". Rename or remove one of each, then migrate again."
        )


def add_index(apps, schema_editor):
    _, table, column = _table_and_column(apps)
    quote = schema_editor.quote_name
    schema_editor.execute(
        f"CREATE UNIQUE INDEX {quote(INDEX)} ON {quote(table)} (LOWER({quote(column)}))"
    )


def drop_index(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(INDEX)}")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_token_expiry_scope_stamp"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(refuse_existing_twins, migrations.RunPython.noop),
        migrations.RunPython(add_index, drop_index),
    ]
