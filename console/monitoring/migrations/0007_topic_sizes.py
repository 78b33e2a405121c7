from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0006_queue_chunk_lagging"),
    ]

    operations = [
        migrations.AddField(
            model_name="topicsample",
            name="size_bytes",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="TopicBytes",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("topic", models.CharField(max_length=255)),
                ("first_queue", models.PositiveIntegerField()),
                ("state", models.JSONField(default=dict)),
                ("updated_ms", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("topic", "first_queue"), name="mon_topic_bytes_once"
                    )
                ],
            },
        ),
    ]
