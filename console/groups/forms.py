"""The group page's offset reset form, built from the reset modes' table."""

from __future__ import annotations

import re

from django import forms

from console.core.bounds import BoundedDateTimeField
from storeadapter.engine import MAX_NAME_LENGTH
from storeadapter.reset_modes import MAX_NAMED_QUEUES, MAX_SHIFT, MODES_BY_NAME, RESET_MODES

MODE_CHOICES = tuple((mode.name, mode.label) for mode in RESET_MODES)
#: What to say when the chosen mode's field (its ``form_field``) is left empty.
_MISSING = {
    "offsets": "Give at least one queue=offset line.",
    "when": "Choose the point in time to reset to.",
    "shift": "Give the number of messages to shift by, like -100.",
    "source": "Name the group whose offsets to take.",
}
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
    when = BoundedDateTimeField(
        label="Time (UTC)",
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}),
        help_text="For “a point in time”: the first message stored then or later.",
    )
    shift = forms.IntegerField(
        label="Shift",
        required=False,
        min_value=-MAX_SHIFT,
        max_value=MAX_SHIFT,
        help_text="For “shift”: negative to consume again, positive to skip; from where "
        "the group is when you apply it.",
    )
    source = forms.CharField(
        label="Source group",
        required=False,
        max_length=MAX_NAME_LENGTH,
        help_text="For “the offsets of another group”: the group to take them from.",
    )

    def __init__(self, *args, topics: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["topic"].choices = [(t, t) for t in topics]

    def clean_offsets(self) -> dict[int, int]:
        return parse_queue_offsets(self.cleaned_data["offsets"])

    def clean(self) -> dict:
        data = super().clean()
        name = self.value_field()
        if name is not None and data.get(name) in (None, "", {}) and name not in self.errors:
            self.add_error(name, _MISSING[name])
        return data

    def value_field(self) -> str | None:
        """The field holding the chosen mode's value (None: the mode takes none)."""
        mode = MODES_BY_NAME.get(self.cleaned_data.get("mode", ""))
        return None if mode is None else mode.form_field

    def reset_value(self) -> int | str | dict[int, int] | None:
        """The ``value`` for ``preview_reset`` in the chosen mode."""
        name = self.value_field()
        if name is None:
            return None
        value = self.cleaned_data[name]
        if name == "when":
            return int(value.timestamp() * 1000)
        return value.strip() if name == "source" else value


def parse_queue_offsets(text: str) -> dict[int, int]:
    """``queue=offset`` lines as {queue: offset}; blank lines skipped. Raises ValidationError."""
    offsets: dict[int, int] = {}
    errors = []
    lines = [(n, raw.strip()) for n, raw in enumerate(text.splitlines(), start=1) if raw.strip()]
    if len(lines) > MAX_NAMED_QUEUES:
        raise forms.ValidationError(f"At most {MAX_NAMED_QUEUES} lines, please.")
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
