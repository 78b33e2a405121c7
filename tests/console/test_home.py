from django.conf import settings


def test_anonymous_visitor_is_redirected_to_login_with_next(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == f"{settings.LOGIN_URL}?next=/"


def test_a_viewer_sees_the_home_page(client, django_user_model):
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username="ada", password="s3cret-pass")
    user.groups.add(Group.objects.get(name="viewer"))
    client.force_login(user)

    response = client.get("/")

    assert response.status_code == 200
    assert "home.html" in [t.name for t in response.templates]
    assert b"Tidemark" in response.content
    assert b"ada" in response.content


def test_login_page_renders_for_anonymous_visitor(client):
    response = client.get(settings.LOGIN_URL)

    assert response.status_code == 200
    assert "registration/login.html" in [t.name for t in response.templates]


def test_a_user_without_a_role_gets_403_on_the_home_page(client, django_user_model):
    user = django_user_model.objects.create_user(username="nobody", password="s3cret-pass")
    client.force_login(user)

    assert client.get("/").status_code == 403
