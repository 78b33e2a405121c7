"""Pages of a big topic (more queues than TIDEMARK_BIG_TOPIC_QUEUES, lowered here so that a
shared topic of 20,000 queues is one): its queues are paged and jumped to, its totals and
its consumers' lag come from the latest sample and say how old it is, and the topic list,
the dashboard and the group pages take its figures from the sample too."""

from __future__ import annotations

import pytest

from console.monitoring.sampler import take_sample
from tests.console.bigtopic import QUEUES, make_wide

pytestmark = pytest.mark.django_db

URL = "/topics/wide/"


@pytest.fixture
def wide(settings, store):
    return make_wide(settings, store)


def sample() -> None:
    report = take_sample()
    assert report.written, report.skipped


def queues_shown(response) -> list[int]:
    return [row.queue for row in response.context["rows"]]


def test_the_topic_page_shows_one_page_of_queues_and_the_layout(as_viewer, wide):
    response = as_viewer.get(URL)

    assert response.status_code == 200
    assert queues_shown(response) == list(range(100))
    assert response.context["page"].paginator.num_pages == QUEUES // 100
    assert "shared (queues in blocks of shared files)" in response.content.decode()


def test_a_later_page_shows_its_queues(as_viewer, wide):
    response = as_viewer.get(URL, {"page": 123})

    assert queues_shown(response) == list(range(12_200, 12_300))
    row = response.context["rows"][0]
    assert (row.queue, row.messages, row.max_offset) == (12_200, 1, 1)


def test_a_queue_jump_shows_the_page_holding_it_and_marks_the_row(as_viewer, wide):
    response = as_viewer.get(URL, {"queue": 12_345})

    assert queues_shown(response) == list(range(12_300, 12_400))
    assert response.context["wanted_queue"] == 12_345
    assert 'id="queue-12345" class="tm-row-current" aria-current="true"' in (
        response.content.decode()
    )


def test_a_jump_to_a_queue_the_topic_lacks_says_so(as_viewer, wide):
    response = as_viewer.get(URL, {"queue": QUEUES}, follow=True)

    assert queues_shown(response) == list(range(100))
    assert f"has queues 0 to {QUEUES - 1}" in response.content.decode()


def test_totals_wait_for_the_first_sample(as_viewer, wide):
    response = as_viewer.get(URL)

    assert response.context["messages_total"] is None
    assert "the sampler has not sampled it yet" in response.content.decode()


def test_totals_and_consumers_lag_come_from_the_sample_and_say_its_age(as_viewer, wide):
    sample()
    wide.append_batch("wide", [{"body": b"late", "queue": 7}])  # after the sample

    response = as_viewer.get(URL)

    assert response.context["messages_total"] == QUEUES // 50  # the sample's figure
    text = response.content.decode()
    assert "from the sample at" in text
    assert " s ago)" in text
    [consumer] = response.context["consumers"]
    assert (consumer.group, consumer.lag, consumer.queues_behind) == (
        "billing",
        QUEUES // 50 - 20,
        QUEUES // 50 - 20,
    )
    assert consumer.queues == QUEUES


def test_a_rotating_sample_is_labelled_as_such(as_viewer, wide, settings):
    settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = 5_000
    sample()

    text = as_viewer.get(URL).content.decode()

    assert "sampled 5000 of 20000 queues this round" in text
    assert "some queues have not been read yet" in text


def test_latest_messages_are_those_of_the_page_shown(as_viewer, wide):
    response = as_viewer.get(URL, {"page": 51})

    latest = response.context["latest"]
    assert latest
    assert {m.queue for m in latest} <= set(range(5_000, 5_100))
    assert "on the queues of this page" in response.content.decode()


def test_the_topic_list_shows_the_sampled_figures(as_viewer, wide):
    sample()

    response = as_viewer.get("/topics/")

    [topic] = [t for t in response.context["page"] if t.name == "wide"]
    assert topic.messages == QUEUES // 50
    assert topic.sampled_ms
    assert "(sampled" in response.content.decode()


def test_the_dashboard_counts_the_sampled_messages_and_lag(as_viewer, wide):
    sample()

    context = as_viewer.get("/").context

    assert context["queues"] == QUEUES
    assert context["message_count"] == QUEUES // 50
    assert context["backlog"] == QUEUES // 50 - 20


def test_the_group_list_and_page_take_the_big_topics_lag_from_the_sample(as_viewer, wide):
    sample()
    wide.commit_offsets("billing", "wide", {q: 1 for q in range(1_000, 2_000, 50)})

    [row] = as_viewer.get("/groups/").context["rows"]
    assert (row.lag, row.sampled_ms is not None) == (QUEUES // 50 - 20, True)
    response = as_viewer.get("/groups/billing/")
    [table] = response.context["topic_tables"]
    assert table["lag"] == QUEUES // 50 - 20  # the sample's, not the live 40 less
    assert [r.queue for r in table["rows"]] == list(range(200))
    assert table["rows"][50].committed == 1  # the queues shown are read live


def test_the_group_page_pages_a_big_topics_queues(as_viewer, wide):
    response = as_viewer.get("/groups/billing/", {"topic": "wide", "page": 3})

    [table] = response.context["topic_tables"]
    assert [r.queue for r in table["rows"]] == list(range(400, 600))
    assert table["lag"] is None  # not sampled yet
    assert "lag not sampled yet" in response.content.decode()
    assert "?topic=wide&amp;page=4#lag" in response.content.decode()


def test_freezing_a_queue_returns_to_the_page_holding_it(as_operator, wide):
    response = as_operator.post(URL, {"action": "freeze", "queue": 5_001})

    assert response.status_code == 302
    assert response.url == "/topics/wide/?queue=5001#queue-5001"
    assert 5_001 in wide.topic("wide").frozen
    [row] = [r for r in as_operator.get(response.url).context["rows"] if r.queue == 5_001]
    assert row.frozen
