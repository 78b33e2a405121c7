"""The messages reads build natively are left off the garbage collector's lists (issue 29,
"a lean message"), and are still ``StoredMessage``s in every other way."""

from __future__ import annotations

import copy
import gc
import pickle

from storeadapter.engine import StoredMessage


def _sample(store):
    store.append("t", b"plain", queue=0)
    store.append("t", b"keyed", key=["k1", "k2"], tag="red", properties={"a": "1"}, queue=0)
    return store.read("t", 0, 0, 10)


def test_read_messages_and_their_keys_are_not_tracked_by_the_collector(store):
    messages = _sample(store)
    assert len(messages) == 2
    for message in messages:
        assert not gc.is_tracked(message)
        assert not gc.is_tracked(message.keys)


def test_a_message_from_get_is_not_tracked_by_the_collector(store):
    sent = store.append("t", b"keyed", key="k", queue=1)
    message = store.get(sent.message_id)
    assert message.body == b"keyed"
    assert not gc.is_tracked(message)
    assert not gc.is_tracked(message.keys)


def test_append_results_are_not_tracked_by_the_collector(store):
    results = store.append_batch("t", [b"a", b"b"])
    assert [gc.is_tracked(result) for result in results] == [False, False]


def test_an_untracked_message_behaves_as_one_built_in_python(store):
    _plain, keyed = _sample(store)
    built = StoredMessage(*tuple(keyed))
    assert keyed == built
    assert type(keyed) is StoredMessage
    assert repr(keyed) == repr(built)
    assert pickle.loads(pickle.dumps(keyed)) == keyed
    assert copy.deepcopy(keyed) == keyed
    assert keyed._asdict()["keys"] == ["k1", "k2"]
    assert keyed._replace(body=b"x").body == b"x"
    assert keyed.properties == {"a": "1"} and keyed.tag == "red"


def test_a_message_whose_keys_list_is_changed_stays_usable_through_collections(store):
    messages = _sample(store)
    messages[1].keys.append("k3")
    messages[1].keys.append(object())
    gc.collect()
    assert messages[1].keys[:3] == ["k1", "k2", "k3"]
    assert store.read("t", 0, 1, 1)[0].keys == ["k1", "k2"]
