"""The /messages/ search form: one GET form with four modes.

- ``id``: a message id;
- ``key``: topic + key, optionally between two UTC times;
- ``range``: topic + queue + from/to queue offsets (``to`` not included);
- ``time``: topic + a UTC time.

Only the fields of the chosen mode are shown and checked. The form checks what it can
against the store (the topic and queue exist, the id is well formed); the search itself
may still fail with an engine error, which the view adds to the form.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django.utils import timezone

from console.messages.time_queues import TimeSearchTooWide, time_queues
from storeadapter.engine import MessageStore, StoreError, filters, parse_message_id

MODE_ID, MODE_KEY, MODE_RANGE, MODE_TIME = "id", "key", "range", "time"
MODE_FILTER = "filter"
MODES: tuple[tuple[str, str], ...] = (
    (MODE_ID, "By id"),
    (MODE_KEY, "By key"),
    (MODE_RANGE, "By queue range"),
    (MODE_TIME, "By time"),
    (MODE_FILTER, "By expression"),
)
MODE_NAMES = dict(MODES)

#: The fields each mode shows, in order.
MODE_FIELDS: dict[str, tuple[str, ...]] = {
    MODE_ID: ("id",),
    MODE_KEY: ("topic", "key", "since", "until"),
    MODE_RANGE: ("topic", "queue", "from", "to"),
    MODE_TIME: ("topic", "at", "first_queue", "last_queue"),
    MODE_FILTER: ("topic", "expression", "cursor"),
}
#: The fields each mode needs.
MODE_REQUIRED: dict[str, tuple[str, ...]] = {
    MODE_ID: ("id",),
    MODE_KEY: ("topic", "key"),
    MODE_RANGE: ("topic", "queue"),
    MODE_TIME: ("topic", "at"),
    MODE_FILTER: ("topic", "expression"),
}
#: Every query-string name the form reads; any of them (but `mode`) means "search now".
SEARCH_PARAMETERS = frozenset(name for names in MODE_FIELDS.values() for name in names)


class UTCDateTimeField(forms.DateTimeField):
    """A datetime-local input read as UTC, whatever the active time zone."""

    widget = forms.DateTimeInput(
        attrs={"type": "datetime-local", "step": "1"}, format="%Y-%m-%dT%H:%M:%S"
    )

    def to_python(self, value: Any) -> datetime | None:
        with timezone.override(UTC):
            result = super().to_python(value)
        if result is not None and result < datetime(1970, 1, 1, tzinfo=UTC):
            raise forms.ValidationError("Enter a time after 1970-01-01 00:00 UTC.")
        return result


def to_ms(when: datetime) -> int:
    """An aware datetime in milliseconds since the epoch."""
    return int(when.timestamp() * 1000)


class MessageSearchForm(forms.Form):
    """The search form. Pass the store: ``MessageSearchForm(request.GET, store=store)``."""

    mode = forms.ChoiceField(choices=MODES, required=False, widget=forms.HiddenInput)
    id = forms.CharField(
        label="Message id",
        required=False,
        max_length=64,
        help_text="24 hex digits, as shown by producers and in the results below.",
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "spellcheck": "false", "class": "tm-msg-mono"}
        ),
    )
    topic = forms.CharField(
        label="Topic",
        required=False,
        max_length=300,
        widget=forms.TextInput(
            attrs={"list": "tm-topic-names", "autocomplete": "off", "spellcheck": "false"}
        ),
    )
    key = forms.CharField(
        label="Key",
        required=False,
        max_length=1000,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    since = UTCDateTimeField(
        label="Stored from (UTC)", required=False, help_text="Optional; included."
    )
    until = UTCDateTimeField(
        label="Stored until (UTC)",
        required=False,
        help_text="Optional; included, to the end of that second.",
    )
    queue = forms.IntegerField(label="Queue", required=False, min_value=0)
    at = UTCDateTimeField(
        label="Stored at or after (UTC)",
        required=False,
        help_text="Shows the first 20 messages of each queue from this time, oldest first.",
    )
    first_queue = forms.IntegerField(
        label="First queue",
        required=False,
        min_value=0,
        help_text="Optional (needed on a topic of many queues); included.",
    )
    last_queue = forms.IntegerField(
        label="Last queue", required=False, min_value=0, help_text="Optional; included."
    )

    expression = forms.CharField(
        label="Expression",
        required=False,
        max_length=filters.MAX_EXPRESSION,
        strip=False,
        help_text="CEL over topic, queue, offset, commit_offset, born_ms, stored_ms, tag, key, "
        "keys, properties, text, body (JSON), body_size; e.g. body.order.total > 100 && "
        'tag == "paid". Scans at most 1,000,000 records or 5 seconds a page.',
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "spellcheck": "false", "class": "tm-msg-mono"}
        ),
    )
    cursor = forms.RegexField(
        filters.CURSOR_PATTERN,
        label="Go on from (queue:offset)",
        required=False,
        max_length=30,
        help_text="Optional: where a previous scan stopped.",
    )

    def __init__(self, *args: Any, store: MessageStore, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store = store

    @property
    def mode_value(self) -> str:
        """The mode to show: the one asked for when it is known, else by id."""
        if self.is_bound:
            asked = self.data.get("mode") or MODE_ID
        else:
            asked = self.initial.get("mode") or MODE_ID
        return asked if asked in MODE_NAMES else MODE_ID

    def active_fields(self) -> list[forms.BoundField]:
        """The bound fields of the mode shown, in order."""
        return [self[name] for name in MODE_FIELDS[self.mode_value]]

    def clean_id(self) -> str:
        message_id = self.cleaned_data.get("id", "").strip()
        if message_id and self.cleaned_data.get("mode", MODE_ID) in ("", MODE_ID):
            try:
                parse_message_id(message_id)
            except StoreError as error:
                raise forms.ValidationError(str(error)) from None
        return message_id

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        mode = cleaned.get("mode") or MODE_ID
        cleaned["mode"] = mode
        if mode not in MODE_NAMES:  # the ChoiceField has said so already
            return cleaned
        for name in MODE_REQUIRED[mode]:
            if name not in self.errors and cleaned.get(name) in (None, ""):
                self.add_error(name, self.fields[name].error_messages["required"])
        if mode != MODE_ID and cleaned.get("topic"):
            self._check_topic(cleaned["topic"])
        if mode == MODE_KEY:
            since, until = cleaned.get("since"), cleaned.get("until")
            if since and until and since > until:
                self.add_error("until", "This time is before the “from” time.")
        if mode == MODE_RANGE:
            self._check_range(cleaned)
        if mode == MODE_TIME and cleaned.get("topic") and "topic" not in self.errors:
            self._check_time_queues(cleaned)
        if mode == MODE_FILTER and cleaned.get("expression"):
            try:
                filters.compile_filter(cleaned["expression"])
            except filters.FilterSyntaxError as error:
                self.add_error("expression", str(error))
        return cleaned

    def _check_time_queues(self, cleaned: dict[str, Any]) -> None:
        topic = cleaned["topic"]
        try:
            cleaned["queues"] = time_queues(
                topic,
                self.store.topic(topic).queues,
                cleaned.get("first_queue"),
                cleaned.get("last_queue"),
            )
        except TimeSearchTooWide as error:
            self.add_error("first_queue", str(error))

    def _check_topic(self, topic: str) -> None:
        try:
            self.store.topic(topic)
        except StoreError as error:
            self.add_error("topic", str(error))

    def _check_range(self, cleaned: dict[str, Any]) -> None:
        start, end = cleaned.get("from"), cleaned.get("to")
        if start is not None and end is not None and start > end:
            self.add_error("to", "This offset is before the “from” offset.")
        topic, queue = cleaned.get("topic"), cleaned.get("queue")
        if topic and queue is not None and "topic" not in self.errors:
            try:
                self.store.queue_range(topic, queue)
            except StoreError as error:
                self.add_error("queue", str(error))

    @property
    def begin_ms(self) -> int | None:
        since = self.cleaned_data.get("since")
        return None if since is None else to_ms(since)

    @property
    def end_ms(self) -> int | None:
        until = self.cleaned_data.get("until")
        if until is None:
            return None
        # A time typed to the second covers that whole second.
        return to_ms(until) + (999 if until.microsecond == 0 else 0)


# "from" and "to" are Python keywords: add those two fields by name.
MessageSearchForm.base_fields["from"] = forms.IntegerField(
    label="From offset",
    required=False,
    min_value=0,
    help_text="Optional; the queue's first offset when empty.",
)
MessageSearchForm.base_fields["to"] = forms.IntegerField(
    label="To offset",
    required=False,
    min_value=0,
    help_text="Optional, not included; the queue's end when empty.",
)
