from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def run_command() -> str:
    out = StringIO()
    call_command("ensure_demo_admin", stdout=out)
    return out.getvalue()


def test_creates_admin_superuser_and_prints_its_password():
    output = run_command()

    user = get_user_model().objects.get()
    assert user.username == "admin"
    assert user.is_superuser
    password = output.split("password:")[1].split()[0]
    assert user.check_password(password)


def test_second_run_creates_nothing_and_prints_nothing():
    run_command()

    output = run_command()

    assert output == ""
    assert get_user_model().objects.count() == 1


def test_does_nothing_when_some_user_already_exists(django_user_model):
    django_user_model.objects.create_user(username="ada", password="s3cret-pass")

    output = run_command()

    assert output == ""
    assert not django_user_model.objects.filter(username="admin").exists()
