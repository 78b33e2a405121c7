"""The /streams/ form: a stream topic, a stream id, the version to start from and how to
show the bodies. A GET form; the engine checks the stream id and version again."""

from __future__ import annotations

from django import forms

from storeadapter.engine import MAX_STREAM_ID_LENGTH

VIEWS: tuple[tuple[str, str], ...] = (("text", "Text"), ("json", "JSON"), ("hex", "Hex"))
#: Every query-string name the form reads; any of them means "show the stream".
PARAMETERS = frozenset({"topic", "stream", "from_version", "view"})


class StreamForm(forms.Form):
    topic = forms.ChoiceField(label="Stream topic", choices=())
    stream = forms.CharField(
        label="Stream id",
        max_length=MAX_STREAM_ID_LENGTH,
        strip=False,
        widget=forms.TextInput(attrs={"spellcheck": "false", "autocomplete": "off"}),
    )
    from_version = forms.IntegerField(
        label="From version", min_value=1, max_value=0xFFFFFFFF, required=False
    )
    view = forms.ChoiceField(label="Show bodies as", choices=VIEWS, required=False)

    def __init__(self, *args, topics: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["topic"].choices = [(name, name) for name in topics]

    def clean_view(self) -> str:
        return self.cleaned_data.get("view") or "text"
