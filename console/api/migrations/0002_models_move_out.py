"""ApiToken moved to accounts (its table with it); reset previews moved to groups."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0001_initial"),
        ("accounts", "0002_apitoken"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel("ApiToken")]),
        migrations.DeleteModel("ResetPreview"),
    ]
