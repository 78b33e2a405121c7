"""The topic pages' forms. Engine errors are added to them by the views."""

from __future__ import annotations

from django import forms

from console.core.forms import FixedUnboundMarkup
from storeadapter.engine import (
    MAX_COMMAND_ID_LENGTH,
    MAX_NAME_LENGTH,
    MAX_SHARED_QUEUES,
    MAX_STREAM_ID_LENGTH,
    TOPIC_SETTINGS,
    InvalidNameError,
    check_new_topic_name,
)
from storeadapter.engine import MAX_QUEUES_PER_TOPIC as MAX_FILE_QUEUES
from storeadapter.topic_kinds import CREATABLE_KINDS, PLAIN

# The engine's limits (it checks them again and says so in its own words): a topic of
# more than MAX_FILE_QUEUES queues is made shared (queues in blocks of shared files).
MAX_QUEUES_PER_TOPIC = MAX_SHARED_QUEUES
#: The most properties a test message may carry (a guard against pasted junk).
MAX_PROPERTIES = 64


class TopicCreateForm(FixedUnboundMarkup, forms.Form):
    # No max_length: the browser would cut a longer paste without a word (issue 30); the
    # engine's rule refuses it with a sentence instead.
    name = forms.CharField(
        help_text=(
            f"1 to {MAX_NAME_LENGTH} letters, digits, '.', '_' or '-'; not %RETRY%… or "
            "%DLQ%…, a group's own topics."
        ),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    queues = forms.IntegerField(
        label="Queues",
        min_value=1,
        max_value=MAX_QUEUES_PER_TOPIC,
        initial=4,
        help_text=(
            f"1 to {MAX_QUEUES_PER_TOPIC:,}; above {MAX_FILE_QUEUES:,} the topic keeps its "
            "queues in shared block files."
        ),
    )
    kind = forms.ChoiceField(
        label="Kind",
        choices=CREATABLE_KINDS,
        initial=PLAIN,
        required=False,
        help_text="A stream topic takes events appended to streams at their versions, not "
        "plain messages.",
    )

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or PLAIN

    def clean_name(self) -> str:
        try:
            return check_new_topic_name(self.cleaned_data["name"])
        except InvalidNameError as error:
            raise forms.ValidationError(_sentence(error)) from None


def _sentence(error: Exception) -> str:
    text = str(error)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


class QueueForm(forms.Form):
    """Which queue a freeze, unfreeze or remove button is for."""

    queue = forms.IntegerField(min_value=0)


class AddQueuesForm(forms.Form):
    count = forms.IntegerField(
        label="Queues to add",
        min_value=1,
        max_value=MAX_QUEUES_PER_TOPIC,
        initial=1,
    )


class DeleteTopicForm(forms.Form):
    confirm = forms.CharField(
        label="Type the topic name to confirm",
        max_length=300,
        strip=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def __init__(self, *args, topic: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.topic = topic

    def clean_confirm(self) -> str:
        typed = self.cleaned_data["confirm"]
        if typed != self.topic:
            raise forms.ValidationError(
                f"That is not the topic's name. Type {self.topic} exactly to delete it."
            )
        return typed


class TestMessageForm(forms.Form):
    body = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="Sent as UTF-8 text.",
    )
    key = forms.CharField(
        required=False,
        max_length=1000,
        help_text="Optional; messages with the same key go to the same queue.",
    )
    tag = forms.CharField(required=False, max_length=1000, help_text="Optional.")
    properties = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="Optional; one name=value a line.",
    )

    def clean_key(self) -> str | None:
        return self.cleaned_data["key"] or None

    def clean_tag(self) -> str | None:
        return self.cleaned_data["tag"] or None

    def clean_properties(self) -> dict[str, str]:
        return parse_properties(self.cleaned_data["properties"])


class AppendEventForm(forms.Form):
    """One event typed by an operator into a stream of a stream topic."""

    stream = forms.CharField(
        label="Stream id",
        max_length=MAX_STREAM_ID_LENGTH,
        strip=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    body = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="Stored as UTF-8 text.",
    )
    event_type = forms.CharField(
        label="Event type", required=False, max_length=1000, help_text="Optional."
    )
    expected_version = forms.IntegerField(
        label="Expected version",
        required=False,
        min_value=0,
        max_value=0xFFFFFFFF,
        help_text="Optional: the stream's version you saw (0: no events yet); the append is "
        "refused if the stream moved on. Blank: append at the next version.",
    )
    command_id = forms.CharField(
        label="Command id",
        required=False,
        max_length=MAX_COMMAND_ID_LENGTH,
        help_text="Optional: a command id already used in this stream is refused, so a "
        "retried append is not stored twice.",
    )

    def clean_event_type(self) -> str | None:
        return self.cleaned_data["event_type"] or None

    def clean_command_id(self) -> str | None:
        return self.cleaned_data["command_id"] or None


def parse_properties(text: str) -> dict[str, str]:
    """``name=value`` lines as a dict; blank lines are skipped. Raises ValidationError."""
    properties: dict[str, str] = {}
    errors = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not name:
            shown = line if len(line) <= 40 else line[:40] + "…"
            errors.append(f"Line {number} ({shown}) is not name=value.")
        elif name in properties:
            errors.append(f"Line {number} repeats the property {name}.")
        else:
            properties[name] = value.strip()
    if errors:
        raise forms.ValidationError(errors)
    if len(properties) > MAX_PROPERTIES:
        raise forms.ValidationError(f"At most {MAX_PROPERTIES} properties, please.")
    return properties


class TopicSettingsForm(forms.Form):
    """A topic's own settings, one field per row of the engine's table (TOPIC_SETTINGS);
    an empty field means the store's default."""

    def __init__(self, *args, own: dict[str, int], defaults: dict, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for setting in TOPIC_SETTINGS:
            self.fields[setting.name] = forms.IntegerField(
                label=f"{setting.label} ({setting.unit})",
                required=False,
                min_value=setting.low,
                max_value=setting.high,
                initial=own.get(setting.name),
                widget=forms.NumberInput(
                    attrs={"placeholder": f"store default: {setting.show(defaults[setting.name])}"}
                ),
                help_text=f"{setting.help} {setting.low:,} to {setting.high:,}; empty: the "
                f"store's default ({setting.show(defaults[setting.name])} {setting.unit}).",
            )

    def changes(self) -> dict[str, int | None]:
        """Every setting as the form gave it (None: the store's default)."""
        return {s.name: self.cleaned_data.get(s.name) for s in TOPIC_SETTINGS}
