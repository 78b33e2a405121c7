"""Event streams: expected-version appends, command-id uniqueness, reading a stream."""

from __future__ import annotations

import pytest

from storeadapter.engine import (
    DuplicateCommandError,
    InvalidMessageError,
    MessageStore,
    MessageTooLargeError,
    QueueFrozenError,
    StreamTopicError,
    TopicNotFoundError,
    WrongExpectedVersionError,
)
from tests.engine.storetools import read_all, small_config

TOPIC = "accounts"


@pytest.fixture
def streams(open_store) -> MessageStore:
    """An open store with stream topic ``accounts`` of 4 queues."""
    store = open_store()
    store.create_stream_topic(TOPIC, queues=4)
    return store


def _versions(store: MessageStore, stream: str, **kwargs) -> list[int]:
    return [event.version for event in store.read_stream(TOPIC, stream, **kwargs)]


def test_the_first_event_of_a_stream_is_version_1(streams):
    result = streams.append_event(TOPIC, "a-1", b"opened", expected_version=0)

    assert result.version == 1
    assert result.stream_id == "a-1"
    assert result.status == "OK"
    assert streams.stream_version(TOPIC, "a-1") == 1


def test_an_append_at_the_expected_version_moves_the_stream_on(streams):
    streams.append_event(TOPIC, "a-1", b"opened", expected_version=0)

    result = streams.append_event(TOPIC, "a-1", b"deposited", expected_version=1)

    assert result.version == 2
    assert _versions(streams, "a-1") == [1, 2]


def test_a_wrong_expected_version_is_refused_with_the_current_version(streams):
    streams.append_event(TOPIC, "a-1", b"opened", expected_version=0)
    streams.append_event(TOPIC, "a-1", b"deposited", expected_version=1)

    with pytest.raises(WrongExpectedVersionError) as refused:
        streams.append_event(TOPIC, "a-1", b"late", expected_version=1)

    assert refused.value.current_version == 2
    assert refused.value.expected_version == 1
    assert "at version 2" in str(refused.value)
    assert _versions(streams, "a-1") == [1, 2]


def test_expecting_a_new_stream_when_it_has_events_is_refused(streams):
    streams.append_event(TOPIC, "a-1", b"opened")

    with pytest.raises(WrongExpectedVersionError) as refused:
        streams.append_event(TOPIC, "a-1", b"opened again", expected_version=0)

    assert refused.value.current_version == 1


def test_no_expected_version_appends_at_the_next_version(streams):
    versions = [streams.append_event(TOPIC, "a-1", b"x").version for _ in range(5)]

    assert versions == [1, 2, 3, 4, 5]


def test_a_used_command_id_is_refused_with_the_version_it_produced_every_time(streams):
    streams.append_event(TOPIC, "a-1", b"opened", command_id="open")
    streams.append_event(TOPIC, "a-1", b"deposited", command_id="cmd-81")
    streams.append_event(TOPIC, "a-1", b"withdrawn", command_id="cmd-82")

    for _ in range(3):
        with pytest.raises(DuplicateCommandError) as refused:
            streams.append_event(TOPIC, "a-1", b"deposited again", command_id="cmd-81")
        assert refused.value.version == 2
        assert refused.value.command_id == "cmd-81"
    assert streams.stream_version(TOPIC, "a-1") == 3


def test_a_retried_command_is_a_duplicate_even_with_its_old_expected_version(streams):
    streams.append_event(TOPIC, "a-1", b"opened", expected_version=0, command_id="open")
    streams.append_event(TOPIC, "a-1", b"deposited", expected_version=1, command_id="c2")

    with pytest.raises(DuplicateCommandError) as refused:
        streams.append_event(TOPIC, "a-1", b"opened", expected_version=0, command_id="open")

    assert refused.value.version == 1


def test_a_command_id_is_unique_per_stream_not_per_topic(streams):
    streams.append_event(TOPIC, "a-1", b"x", command_id="same")

    result = streams.append_event(TOPIC, "a-2", b"x", command_id="same")

    assert result.version == 1


def test_events_appended_together_are_one_group_under_one_command(streams):
    streams.append_event(TOPIC, "a-1", b"opened", command_id="open")

    results = streams.append_events(
        TOPIC, "a-1", [b"one", b"two", b"three"], expected_version=1, command_id="batch"
    )

    assert [r.version for r in results] == [2, 3, 4]
    with pytest.raises(DuplicateCommandError) as refused:
        streams.append_events(TOPIC, "a-1", [b"one", b"two"], command_id="batch")
    assert (refused.value.first_version, refused.value.version) == (2, 4)
    events = streams.read_stream(TOPIC, "a-1")
    assert [e.command_id for e in events] == ["open", "batch", "batch", "batch"]


def test_a_refused_group_stores_none_of_its_events(streams):
    streams.append_event(TOPIC, "a-1", b"opened")
    queue = streams.append_event(TOPIC, "a-1", b"deposited").queue
    before = streams.queue_range(TOPIC, queue)

    with pytest.raises(WrongExpectedVersionError):
        streams.append_events(TOPIC, "a-1", [b"x", b"y", b"z"], expected_version=1)

    assert streams.queue_range(TOPIC, queue) == before
    assert streams.stream_version(TOPIC, "a-1") == 2


def test_each_event_of_a_group_can_have_its_own_type(streams):
    streams.append_events(
        TOPIC,
        "a-1",
        [{"body": b"o", "event_type": "Opened"}, {"body": "d"}],
        event_type="Deposited",
    )

    events = streams.read_stream(TOPIC, "a-1")

    assert [(e.event_type, e.body) for e in events] == [("Opened", b"o"), ("Deposited", b"d")]


def test_a_streams_events_stay_in_one_queue_in_version_order(streams):
    for i in range(30):
        streams.append_event(TOPIC, f"s-{i % 3}", f"{i}".encode())

    for stream in ("s-0", "s-1", "s-2"):
        events = streams.read_stream(TOPIC, stream)
        assert len({e.queue for e in events}) == 1
        assert [e.queue_offset for e in events] == sorted(e.queue_offset for e in events)
        in_queue = [
            m.properties["STREAM_VERSION"]
            for m in read_all(streams, TOPIC, events[0].queue)
            if m.properties["STREAM_ID"] == stream
        ]
        assert in_queue == [str(v) for v in range(1, 11)]


def test_a_long_stream_is_read_page_by_page(streams):
    for i in range(300):
        streams.append_event(TOPIC, "long", f"e{i + 1}".encode(), expected_version=i)

    pages = []
    version = 1
    while True:
        page = streams.read_stream(TOPIC, "long", from_version=version, max_count=7)
        if not page:
            break
        pages.append([e.version for e in page])
        version = page[-1].version + 1

    assert [v for page in pages for v in page] == list(range(1, 301))
    assert all(len(page) == 7 for page in pages[:-1])
    assert streams.read_stream(TOPIC, "long", from_version=257, max_count=1)[0].body == b"e257"


def test_a_read_past_the_newest_version_is_empty_and_says_where_the_stream_is(streams):
    streams.append_event(TOPIC, "a-1", b"x")

    events = streams.read_stream(TOPIC, "a-1", from_version=5)

    assert list(events) == []
    assert events.stream_version == 1


def test_a_stream_with_no_events_is_at_version_0(streams):
    assert streams.stream_version(TOPIC, "nobody") == 0
    assert list(streams.read_stream(TOPIC, "nobody")) == []


def test_a_stored_event_says_what_it_is(streams):
    result = streams.append_event(
        TOPIC, "a-1", b'{"amount": 5}', command_id="cmd-1", event_type="Deposited"
    )

    (event,) = streams.read_stream(TOPIC, "a-1")

    assert event.stream_id == "a-1"
    assert event.version == 1
    assert event.command_id == "cmd-1"
    assert event.event_type == "Deposited"
    assert event.body == b'{"amount": 5}'
    assert event.message_id == result.message_id
    assert event.store_time_ms == result.store_time_ms


def test_events_are_ordinary_messages_of_their_topic(streams):
    result = streams.append_event(TOPIC, "a-1", b"x", command_id="c", event_type="Opened")

    message = streams.get(result.message_id)
    assert (message.topic, message.tag, message.keys) == (TOPIC, "Opened", [])
    assert message.properties == {"STREAM_ID": "a-1", "STREAM_VERSION": "1", "COMMAND_ID": "c"}
    assert streams.read(TOPIC, result.queue, result.queue_offset)[0].body == b"x"
    streams.commit_offset("g", TOPIC, result.queue, result.queue_offset + 1)
    assert streams.committed_offset("g", TOPIC, result.queue) == result.queue_offset + 1


def test_an_ordinary_append_to_a_stream_topic_is_refused(streams):
    with pytest.raises(StreamTopicError):
        streams.append(TOPIC, b"x")
    with pytest.raises(StreamTopicError):
        streams.append_batch(TOPIC, [b"x", b"y"])


def test_events_go_only_to_stream_topics(streams):
    streams.create_topic("plain", queues=2)

    with pytest.raises(StreamTopicError):
        streams.append_event("plain", "a-1", b"x")
    with pytest.raises(StreamTopicError):
        streams.read_stream("plain", "a-1")
    with pytest.raises(TopicNotFoundError):
        streams.append_event("missing", "a-1", b"x")


@pytest.mark.parametrize(
    "arguments",
    [
        {"stream_id": ""},
        {"stream_id": "a\x1fb"},
        {"stream_id": "x" * 257},
        {"stream_id": 7},
        {"command_id": ""},
        {"command_id": "a\x02b"},
        {"expected_version": -1},
        {"expected_version": True},
        {"expected_version": "3"},
        {"event_type": ""},
        {"body": 42},
    ],
)
def test_bad_arguments_are_refused_with_a_sentence(streams, arguments):
    call = {"stream_id": "a-1", "body": b"x", **arguments}

    with pytest.raises(InvalidMessageError) as refused:
        streams.append_event(TOPIC, **call)

    assert str(refused.value)
    assert streams.stream_version(TOPIC, "a-1") == 0


def test_a_group_too_big_for_one_segment_is_refused_whole(streams):
    with pytest.raises(MessageTooLargeError):
        streams.append_events(TOPIC, "a-1", [b"x" * 900] * 10)

    assert streams.stream_version(TOPIC, "a-1") == 0


def test_a_group_that_does_not_fit_the_segment_goes_whole_to_the_next(streams, store_path):
    streams.append_event(TOPIC, "pad", b"p" * 700)
    streams.append_event(TOPIC, "pad", b"p" * 700)

    results = streams.append_events(TOPIC, "a-1", [b"x" * 600] * 5)

    segment_size = 4096
    assert len({r.commit_offset // segment_size for r in results}) == 1
    assert [e.version for e in streams.read_stream(TOPIC, "a-1")] == [1, 2, 3, 4, 5]


def test_bad_read_arguments_are_refused(streams):
    with pytest.raises(InvalidMessageError):
        streams.read_stream(TOPIC, "a-1", from_version=0)
    with pytest.raises(Exception, match="max_count"):
        streams.read_stream(TOPIC, "a-1", max_count=0)


def test_a_stream_in_a_frozen_queue_takes_no_events(streams):
    queue = streams.append_event(TOPIC, "a-1", b"x").queue
    streams.freeze_queue(TOPIC, queue)

    with pytest.raises(QueueFrozenError):
        streams.append_event(TOPIC, "a-1", b"y")
    assert streams.read_stream(TOPIC, "a-1")[0].body == b"x"


def test_a_new_stream_avoids_frozen_queues(streams):
    for queue in (0, 1, 2):
        streams.freeze_queue(TOPIC, queue)

    results = [streams.append_event(TOPIC, f"s-{i}", b"x") for i in range(10)]

    assert {r.queue for r in results} == {3}


def test_a_stream_keeps_its_queue_when_queues_are_added(streams):
    queue = streams.append_event(TOPIC, "a-1", b"x").queue
    streams.add_queues(TOPIC, 5)

    assert {streams.append_event(TOPIC, "a-1", b"y").queue for _ in range(3)} == {queue}


def test_a_recreated_stream_topic_starts_its_streams_over(streams):
    streams.append_event(TOPIC, "a-1", b"x", command_id="c")
    streams.delete_topic(TOPIC)
    streams.create_stream_topic(TOPIC, queues=2)

    assert streams.stream_version(TOPIC, "a-1") == 0
    assert streams.append_event(TOPIC, "a-1", b"y", command_id="c").version == 1


def test_the_topic_says_it_holds_streams(streams):
    assert streams.topic(TOPIC).streams is True
    streams.create_topic("plain")
    assert streams.topic("plain").streams is False


def test_appends_to_several_streams_are_checked_and_refused_one_by_one(streams):
    streams.append_event(TOPIC, "a-1", b"opened", command_id="open")

    outcomes = streams.append_to_streams(
        TOPIC,
        [
            {"stream_id": "a-2", "events": [b"x", b"y"], "expected_version": 0},
            {"stream_id": "a-1", "events": [b"late"], "expected_version": 0},
            ("a-1", [b"again"], None, "open"),
            ("a-3", [b"z"], 0, "c3", "Opened"),
            {"stream_id": "a-2", "events": [b"w"], "expected_version": 2},
        ],
    )

    assert [r.version for r in outcomes[0]] == [1, 2]
    assert isinstance(outcomes[1], WrongExpectedVersionError)
    assert outcomes[1].current_version == 1
    assert isinstance(outcomes[2], DuplicateCommandError)
    assert outcomes[2].version == 1
    assert outcomes[3][0].version == 1
    assert outcomes[4][0].version == 3
    assert [e.body for e in streams.read_stream(TOPIC, "a-2")] == [b"x", b"y", b"w"]
    assert streams.read_stream(TOPIC, "a-3")[0].event_type == "Opened"


def test_a_bad_append_among_several_stores_none_of_them(streams):
    with pytest.raises(InvalidMessageError):
        streams.append_to_streams(
            TOPIC, [{"stream_id": "a-1", "events": [b"x"]}, {"stream_id": "", "events": [b"y"]}]
        )

    assert streams.stream_version(TOPIC, "a-1") == 0


def test_appends_to_several_streams_in_sync_mode_are_acknowledged_after_the_fsync(open_store):
    store = open_store(cfg=small_config(flush_mode="sync"))
    store.create_stream_topic(TOPIC, queues=2)

    outcomes = store.append_to_streams(TOPIC, [("s-1", [b"a"], 0), ("s-2", [b"b", b"c"], 0)])

    assert [[r.status for r in o] for o in outcomes] == [["OK"], ["OK", "OK"]]
    assert store.stream_version(TOPIC, "s-2") == 2


@pytest.mark.parametrize("slots", [3, 1 << 12])
def test_a_batch_of_streams_stores_what_the_same_appends_one_by_one_store(
    open_store, tmp_path, slots
):
    """One batch is laid out and written together where it can be: streams sharing a slot
    (three slots: nearly all of them), a stream met twice, refusals among them and
    segment rolls between them give the results, the streams and an index the checker
    finds clean, as the same appends made one call each do."""
    from storeadapter.engine.checks import check_event_index

    appends = []
    for n in range(60):
        stream = f"s-{n % 23}"
        command = f"c-{n}" if n % 3 else None
        if n % 11 == 5 and n > 23:
            command = f"c-{n - 23}"  # one the stream used, if it was given
        events = [bytes([n]) * (50 + 40 * (n % 4))] * (1 + n % 4)
        appends.append((stream, events, None if n % 5 else 0, command, "T"))
    outcomes = []
    for cfg_path, batched in ((tmp_path / "batched", True), (tmp_path / "one-by-one", False)):
        store = open_store(cfg_path, small_config(stream_index_slots=slots))
        store.create_stream_topic(TOPIC, queues=3)
        if batched:
            found = store.append_to_streams(TOPIC, appends)
        else:
            found = []
            for append in appends:
                try:
                    found.append(store.append_to_streams(TOPIC, [append])[0])
                except Exception as error:  # noqa: BLE001 - compared below
                    found.append(error)
        outcomes.append(
            [
                [(r.stream_id, r.version, r.queue, r.queue_offset) for r in o]
                if type(o) is list
                else type(o)
                for o in found
            ]
        )
        streams = {
            s: [(e.version, e.body, e.command_id) for e in store.read_stream(TOPIC, s)]
            for s in {a[0] for a in appends}
        }
        outcomes.append(streams)
        store.close()
        assert check_event_index(cfg_path) == []
    assert outcomes[0] == outcomes[2]
    assert outcomes[1] == outcomes[3]
    assert any(type(o) is not list for o in outcomes[0])  # some were refused
