"""A queue file deleted by another process's retention between two steps of this process
looking at it: after it checked the file is there, before it opened it. What this
process does then is what it does with a file that was already gone."""

from __future__ import annotations

import os

from storeadapter.engine.consumequeue import ConsumeQueue, QueueFile
from storeadapter.engine.handles import HandleCache
from storeadapter.engine.queuebase import pack_entry

PER_FILE = 16


def _entries(first: int, count: int) -> bytes:
    return b"".join(pack_entry(100 * (first + i), 100, 0) for i in range(count))


def _writer(tmp_path, count: int) -> ConsumeQueue:
    queue = ConsumeQueue(tmp_path / "q", PER_FILE, HandleCache(8))
    queue.create_first_file()
    queue.write(0, _entries(0, count))
    return queue


def test_a_read_of_a_file_deleted_after_its_lookup_saw_it_ends_there(tmp_path, monkeypatch):
    reader = ConsumeQueue(tmp_path / "q", PER_FILE, HandleCache(8))
    _writer(tmp_path, 1)
    assert reader.max_offset == 1  # lists the first file only
    _writer(tmp_path, 40)  # another process: files 16 and 32
    reader.max_offset = 40
    existing = QueueFile.existing

    def deleted_after_the_check(path, entries, handles):
        os.unlink(path)  # retention elsewhere, just after ``path.exists()``
        return existing(path, entries, handles)

    monkeypatch.setattr(QueueFile, "existing", deleted_after_the_check)
    assert reader.read(20, 5) == b""
    assert reader.entry(20) is None


def test_listing_a_queue_whose_last_file_goes_before_its_end_is_read_lists_again(
    tmp_path, monkeypatch
):
    _writer(tmp_path, 20)  # files 0 and 16
    written_bound = QueueFile.written_bound
    raced = []

    def newer_file_then_retention(queue_file: QueueFile) -> int:
        if not raced:  # after the listing: another process appends into a new file,
            raced.append(queue_file.first_index)  # and retention deletes the old ones
            other = ConsumeQueue(tmp_path / "q", PER_FILE, HandleCache(8))
            other.write(20, _entries(20, 20))
            for name in ("00000000000000000000", "00000000000000000016"):
                os.unlink(tmp_path / "q" / name)
        return written_bound(queue_file)

    monkeypatch.setattr(QueueFile, "written_bound", newer_file_then_retention)
    queue = ConsumeQueue(tmp_path / "q", PER_FILE, HandleCache(8))
    assert (queue.min_offset, queue.max_offset) == (32, 40)
    assert raced == [16]
    assert queue.entry(39) == (3900, 100, 0)
