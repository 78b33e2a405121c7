from django.conf import settings


def test_anonymous_visitor_is_redirected_to_login_with_next(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == f"{settings.LOGIN_URL}?next=/"


def test_logged_in_user_sees_home_page(client, django_user_model):
    user = django_user_model.objects.create_user(username="ada", password="s3cret-pass")
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
