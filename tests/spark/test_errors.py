"""A failed Spark job's long text comes down to the sentence the task raised."""

from __future__ import annotations

from storeadapter.spark.errors import SegmentNotVisibleError, our_sentence, sentence_of


def test_the_sentence_a_task_raised_is_found_in_spark_s_text():
    spark_text = (
        "An error occurred while calling o93.collectToPython.\n"
        "org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
        '  File "/work/storeadapter/spark/scanning.py", line 153, in _open\n'
        "storeadapter.spark.errors.SegmentNotVisibleError: cannot read bytes 0-4096 of "
        "commit-log segment /s/commitlog/00000000000000000000 on host h1: the file does not "
        "exist there\n\tat org.apache.spark.api.python..."
    )
    found = our_sentence(RuntimeError(spark_text))
    assert found == (
        "SegmentNotVisibleError: cannot read bytes 0-4096 of commit-log segment "
        "/s/commitlog/00000000000000000000 on host h1: the file does not exist there"
    )
    assert sentence_of(SegmentNotVisibleError("gone")) == "SegmentNotVisibleError: gone"
    assert our_sentence(OSError("disk full")) is None
    assert sentence_of(OSError("disk full\nmore")) == "OSError: disk full"
