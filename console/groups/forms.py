"""The group pages' forms: an offset reset and the dead-letter redrive."""

from __future__ import annotations

import re

from django import forms

MODE_CHOICES = (
    ("earliest", "Earliest: consume everything still stored again"),
    ("latest", "Latest: skip the backlog"),
    ("offset", "An offset per queue"),
    ("time", "A point in time (UTC)"),
    ("shift", "Shift by ±N messages"),
)
#: The most queue=offset lines an offset reset takes (a topic has at most 1024 queues).
MAX_OFFSET_LINES = 1024
#: The most message ids one redrive of selected messages takes.
MAX_REDRIVE_IDS = 500
_WHOLE = re.compile(r"[0-9]{1,19}")


class ResetForm(forms.Form):
    topic = forms.ChoiceField(label="Topic")
    mode = forms.ChoiceField(label="Reset to", choices=MODE_CHOICES, initial="latest")
    offsets = forms.CharField(
        label="Offsets",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="For “an offset per queue”: one queue=offset a line; other queues stay.",
    )
    when = forms.DateTimeField(
        label="Time (UTC)",
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}),
        help_text="For “a point in time”: the first message stored then or later.",
    )
    shift = forms.IntegerField(
        label="Shift",
        required=False,
        min_value=-(10**12),
        max_value=10**12,
        help_text="For “shift”: negative to consume again, positive to skip.",
    )

    def __init__(self, *args, topics: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["topic"].choices = [(t, t) for t in topics]

    def clean_offsets(self) -> dict[int, int]:
        return parse_queue_offsets(self.cleaned_data["offsets"])

    def clean(self) -> dict:
        data = super().clean()
        mode = data.get("mode")
        if mode == "offset" and not data.get("offsets") and "offsets" not in self.errors:
            self.add_error("offsets", "Give at least one queue=offset line.")
        elif mode == "time" and data.get("when") is None and "when" not in self.errors:
            self.add_error("when", "Choose the point in time to reset to.")
        elif mode == "shift" and data.get("shift") is None and "shift" not in self.errors:
            self.add_error("shift", "Give the number of messages to shift by, like -100.")
        return data

    def reset_value(self) -> int | dict[int, int] | None:
        """The ``value`` for ``preview_reset`` in the chosen mode."""
        data = self.cleaned_data
        mode = data["mode"]
        if mode == "offset":
            return data["offsets"]
        if mode == "time":
            return int(data["when"].timestamp() * 1000)
        if mode == "shift":
            return data["shift"]
        return None


def parse_queue_offsets(text: str) -> dict[int, int]:
    """``queue=offset`` lines as {queue: offset}; blank lines skipped. Raises ValidationError."""
    offsets: dict[int, int] = {}
    errors = []
    lines = [(n, raw.strip()) for n, raw in enumerate(text.splitlines(), start=1) if raw.strip()]
    if len(lines) > MAX_OFFSET_LINES:
        raise forms.ValidationError(f"At most {MAX_OFFSET_LINES} lines, please.")
    for number, line in lines:
        queue, sep, offset = (part.strip() for part in line.partition("="))
        shown = line if len(line) <= 40 else line[:40] + "…"
        if not sep or not _WHOLE.fullmatch(queue) or not _WHOLE.fullmatch(offset):
            errors.append(f"Line {number} ({shown}) is not queue=offset with whole numbers ≥ 0.")
        elif int(queue) in offsets:
            errors.append(f"Line {number} repeats queue {int(queue)}.")
        else:
            offsets[int(queue)] = int(offset)
    if errors:
        raise forms.ValidationError(errors)
    return offsets
