from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0006_role_rules"),
    ]

    operations = [
        migrations.CreateModel(
            name="MaskRule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("pattern", models.CharField(max_length=255)),
                (
                    "part",
                    models.CharField(
                        choices=[("body", "body field"), ("property", "property"), ("key", "keys")],
                        max_length=10,
                    ),
                ),
                ("field", models.CharField(default="*", max_length=255)),
                (
                    "how",
                    models.CharField(
                        choices=[("mask", "mask"), ("remove", "remove")],
                        default="mask",
                        max_length=10,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["pattern", "part", "field", "pk"],
            },
        ),
    ]
