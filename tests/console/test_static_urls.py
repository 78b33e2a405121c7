"""console.assets.StaticStorage keeps ``{% static %}``'s answers: the same URLs as
whitenoise's storage gives, DEBUG's plain names apart from the hashed ones."""

from __future__ import annotations

import pytest
from django.test import override_settings
from whitenoise.storage import CompressedManifestStaticFilesStorage

from console.assets import StaticStorage

NAMES = ["css/tidemark.css", "js/theme.js", "favicon.svg", "a b&c.js"]


@pytest.mark.parametrize("name", NAMES)
def test_static_url_is_whitenoises_url(name):
    kept, plain = StaticStorage(), CompressedManifestStaticFilesStorage()

    with override_settings(DEBUG=True):
        assert kept.url(name) == kept.url(name) == plain.url(name)


def test_a_name_missing_from_the_manifest_raises_each_time_debug_is_off():
    storage = StaticStorage()
    storage.hashed_files = {}
    with override_settings(DEBUG=True):
        assert storage.url("js/missing.js") == "/static/js/missing.js"

    with override_settings(DEBUG=False):
        for _ in range(2):
            with pytest.raises(ValueError):
                storage.url("js/missing.js")


def test_debug_off_gives_the_hashed_name():
    storage = StaticStorage()
    storage.hashed_files = {"js/theme.js": "js/theme.0123456789ab.js"}
    with override_settings(DEBUG=True):
        assert storage.url("js/theme.js") == "/static/js/theme.js"

    with override_settings(DEBUG=False):
        assert storage.url("js/theme.js") == "/static/js/theme.0123456789ab.js"
