from django.conf import settings

from console.accounts.roles import ensure_role_groups


def test_anonymous_visitor_is_redirected_to_login_with_next(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == f"{settings.LOGIN_URL}?next=/"


def test_a_viewer_sees_the_home_page(client, django_user_model, store):

    user = django_user_model.objects.create_user(username="ada", password="s3cret-pass")
    user.groups.add(ensure_role_groups()["viewer"])
    client.force_login(user)

    response = client.get("/")

    assert response.status_code == 200
    assert "home.html" in [t.name for t in response.templates]
    assert b"Dashboard" in response.content
    assert b"ada" in response.content


def test_login_page_renders_for_anonymous_visitor(client):
    response = client.get(settings.LOGIN_URL)

    assert response.status_code == 200
    assert "registration/login.html" in [t.name for t in response.templates]


def test_a_user_without_a_role_gets_403_on_the_home_page(client, django_user_model, store):
    user = django_user_model.objects.create_user(username="nobody", password="s3cret-pass")
    client.force_login(user)

    assert client.get("/").status_code == 403


def test_the_dashboard_counts_topics_messages_and_backlog(as_viewer, store):
    store.create_topic("orders", queues=2)
    store.append_batch("orders", [{"body": f"m{i}", "queue": i % 2} for i in range(6)])
    store.commit_offset("billing", "orders", 0, 1)

    body = as_viewer.get("/").content.decode()

    assert "6 messages" in body
    assert "5 messages not yet consumed" in body
    assert "billing" in body
