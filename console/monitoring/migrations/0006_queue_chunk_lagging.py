from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0005_lag_seconds_envelope_and_rule_timings"),
    ]

    operations = [
        migrations.AddField(
            model_name="queuechunk",
            name="lagging",
            field=models.JSONField(default=dict),
        ),
    ]
