"""/topics/: the topic list with search, sort and pages; admins create topics."""

import pytest

from console.audit.models import AuditEntry
from storeadapter.engine.admin import MAX_SHARED_QUEUES

pytestmark = pytest.mark.django_db

URL = "/topics/"


def listed(response) -> list[str]:
    return [topic.name for topic in response.context["page"]]


# Access


def test_anonymous_is_sent_to_login_with_next(client, store):
    response = client.get(URL)

    assert response.status_code == 302
    assert response.url == "/accounts/login/?next=/topics/"


def test_user_without_role_gets_403(as_nobody, store):
    assert as_nobody.get(URL).status_code == 403


def test_viewer_sees_the_topics(as_viewer, store):
    store.create_topic("orders", 3)
    store.append("orders", b"hello")

    response = as_viewer.get(URL)

    assert response.status_code == 200
    assert listed(response) == ["orders"]
    row = response.context["page"][0]
    assert (row.queues, row.messages) == (3, 1)
    assert 'href="/topics/orders/"' in response.content.decode()


def test_list_shows_last_write_as_utc_time(as_viewer, store):
    store.create_topic("orders", 1)
    store.append("orders", b"hello")

    content = as_viewer.get(URL).content.decode()

    assert " UTC</time>" in content


def test_viewer_sees_no_create_form(as_viewer, store):
    content = as_viewer.get(URL).content.decode()

    assert "Create a topic" not in content
    assert 'name="queues"' not in content
    assert content.count("csrfmiddlewaretoken") == 1  # only the log-out form


def test_operator_sees_no_create_form(as_operator, store):
    content = as_operator.get(URL).content.decode()

    assert 'name="queues"' not in content


def test_admin_sees_the_create_form(as_admin, store):
    content = as_admin.get(URL).content.decode()

    assert 'name="queues"' in content
    assert 'name="name"' in content


# Search, sort, pages


def test_search_keeps_names_containing_q(as_viewer, store):
    for name in ("orders", "order-events", "payments"):
        store.create_topic(name, 1)

    response = as_viewer.get(URL, {"q": "ORDER"})

    assert listed(response) == ["order-events", "orders"]


def test_search_with_no_match_says_so(as_viewer, store):
    store.create_topic("orders", 1)

    response = as_viewer.get(URL, {"q": "zzz"})

    assert listed(response) == []
    assert "No topic name contains" in response.content.decode()


def test_sort_by_name_descending(as_viewer, store):
    for name in ("b", "a", "c"):
        store.create_topic(name, 1)

    assert listed(as_viewer.get(URL, {"sort": "-name"})) == ["c", "b", "a"]


def test_sort_by_queues_most_first(as_viewer, store):
    store.create_topic("few", 1)
    store.create_topic("many", 8)
    store.create_topic("some", 4)

    assert listed(as_viewer.get(URL, {"sort": "queues"})) == ["many", "some", "few"]


def test_sort_by_messages_most_first(as_viewer, store):
    for name, count in (("quiet", 0), ("busy", 5), ("mid", 2)):
        store.create_topic(name, 1)
        for _ in range(count):
            store.append(name, b"x")

    assert listed(as_viewer.get(URL, {"sort": "messages"})) == ["busy", "mid", "quiet"]


def test_sort_by_last_write_newest_first_and_never_written_last(as_viewer, store):
    for name in ("empty", "older", "newer"):
        store.create_topic(name, 1)
    store.append("older", b"x")
    store.append("newer", b"x")

    names = listed(as_viewer.get(URL, {"sort": "last_write"}))

    assert names[-1] == "empty"
    assert names.index("newer") <= names.index("older")


def test_invalid_sort_falls_back_to_name(as_viewer, store):
    for name in ("b", "a"):
        store.create_topic(name, 1)

    response = as_viewer.get(URL, {"sort": "bogus;drop"})

    assert response.status_code == 200
    assert listed(response) == ["a", "b"]
    assert response.context["sort"] == "name"


def test_sixty_topics_make_two_pages_of_fifty_and_ten(as_viewer, store):
    for number in range(60):
        store.create_topic(f"t{number:02d}", 1)

    first = as_viewer.get(URL)
    second = as_viewer.get(URL, {"page": 2})

    assert len(listed(first)) == 50
    assert listed(second) == [f"t{n:02d}" for n in range(50, 60)]


def test_page_links_keep_search_and_sort(as_viewer, store):
    for number in range(60):
        store.create_topic(f"t{number:02d}", 1)

    content = as_viewer.get(URL, {"q": "t", "sort": "-name"}).content.decode()

    assert 'href="?q=t&amp;sort=-name&amp;page=2"' in content


def test_bad_page_number_shows_a_page(as_viewer, store):
    store.create_topic("orders", 1)

    response = as_viewer.get(URL, {"page": "x"})

    assert response.status_code == 200
    assert listed(response) == ["orders"]


# Create


def test_admin_creates_a_topic_and_is_redirected_to_it(as_admin, store):
    response = as_admin.post(URL, {"name": "orders", "queues": "6"})

    assert response.status_code == 302
    assert response.url == "/topics/orders/"
    assert store.topic("orders").queues == 6


def test_create_writes_an_audit_row(as_admin, store):
    as_admin.post(URL, {"name": "orders", "queues": "6"})

    entry = AuditEntry.objects.get(action="topic.create")
    assert entry.username == "ada"
    assert entry.target == "topic orders"
    assert entry.after == {"name": "orders", "queues": 6, "kind": "plain"}


def test_create_flashes_a_message(as_admin, store):
    response = as_admin.post(URL, {"name": "orders", "queues": "2"}, follow=True)

    assert "Created topic orders with 2 queues." in response.content.decode()


def test_create_with_a_bad_name_is_a_form_error(as_admin, store):
    response = as_admin.post(URL, {"name": "no spaces/allowed", "queues": "2"})

    assert response.status_code == 200
    assert "is not valid" in response.context["form"].errors["name"][0]
    assert store.topics() == []
    assert not AuditEntry.objects.exists()


def test_create_an_existing_topic_is_a_form_error(as_admin, store):
    store.create_topic("orders", 2)

    response = as_admin.post(URL, {"name": "orders", "queues": "5"})

    assert "already exists" in response.context["form"].errors["name"][0]
    assert store.topic("orders").queues == 2
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("queues", ["0", str(MAX_SHARED_QUEUES + 1), "many", ""])
def test_create_with_a_bad_queue_count_is_a_form_error(as_admin, store, queues):
    response = as_admin.post(URL, {"name": "orders", "queues": queues})

    assert response.status_code == 200
    assert response.context["form"].errors["queues"]
    assert store.topics() == []
    assert not AuditEntry.objects.exists()


def test_create_more_than_1024_queues_makes_a_shared_topic(as_admin, store):
    response = as_admin.post(URL, {"name": "wide", "queues": "50000"})

    assert response.status_code == 302
    info = store.topic("wide")
    assert (info.queues, info.layout) == (50_000, "shared")


def test_viewer_create_gets_403_and_creates_nothing(as_viewer, store):
    response = as_viewer.post(URL, {"name": "orders", "queues": "2"})

    assert response.status_code == 403
    assert store.topics() == []
    assert not AuditEntry.objects.exists()


def test_operator_create_gets_403_and_creates_nothing(as_operator, store):
    response = as_operator.post(URL, {"name": "orders", "queues": "2"})

    assert response.status_code == 403
    assert store.topics() == []


def test_anonymous_create_is_sent_to_login_and_creates_nothing(client, store):
    response = client.post(URL, {"name": "orders", "queues": "2"})

    assert response.status_code == 302
    assert store.topics() == []


def test_rates_and_sizes_share_one_look_up_of_the_samples(as_viewer, store, monkeypatch):
    from console.monitoring import current

    calls = []
    latest_two = current.latest_two
    monkeypatch.setattr(current, "latest_two", lambda: calls.append(1) or latest_two())
    store.create_topic("orders", 1)

    assert as_viewer.get(URL).status_code == 200
    assert len(calls) == 1
