"""collectstatic's compression (console.assets.CompressOnce): each distinct content is
compressed once, its copies get the same bytes whitenoise's own compressor writes."""

from __future__ import annotations

import brotli
from whitenoise.compress import Compressor

from console.assets import CompressOnce


def test_a_file_and_its_hashed_copy_are_compressed_once(tmp_path, monkeypatch):
    body = b"var plotly = 1;\n" * 4096
    original, hashed = tmp_path / "plot.js", tmp_path / "plot.0123abcd.js"
    original.write_bytes(body)
    hashed.write_bytes(body)
    calls = []
    monkeypatch.setattr(Compressor, "compress_brotli", lambda data: calls.append(data) or b"B")

    compressor = CompressOnce(quiet=True)
    compressor.compress(str(original))
    compressor.compress(str(hashed))

    assert calls == [body]
    assert (tmp_path / "plot.0123abcd.js.br").read_bytes() == b"B"


def test_the_copies_hold_what_whitenoise_itself_writes(tmp_path):
    (tmp_path / "a.css").write_bytes(b"body { color: red }\n" * 500)
    (tmp_path / "b.css").write_bytes(b"body { color: blue }\n" * 500)

    CompressOnce(quiet=True).compress(str(tmp_path / "a.css"))
    CompressOnce(quiet=True).compress(str(tmp_path / "b.css"))

    for name in ("a.css", "b.css"):
        data = (tmp_path / name).read_bytes()
        assert brotli.decompress((tmp_path / f"{name}.br").read_bytes()) == data
        assert (tmp_path / f"{name}.gz").read_bytes() == Compressor.compress_gzip(data)
