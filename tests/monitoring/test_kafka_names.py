"""/metrics in the vocabulary existing dashboards read: Burrow's status codes, end and start
offsets, members, lost-to-retention and drain figures; and the recording rules, alerting
rules and Grafana dashboard in docs/deploy/ name only metrics that exist."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from console.monitoring.prometheus import (
    GROUP_STATUS_CODES,
    QUEUE_STATUS_CODES,
    queue_status_code,
)
from storeadapter.engine.membership import heartbeat as member_heartbeat
from tests.monitoring.test_prometheus import scrape, value

pytestmark = pytest.mark.django_db

DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "deploy"
RECORDING = DEPLOY / "tidemark-kafka-names.rules.yml"
ALERTING = DEPLOY / "tidemark.rules.yml"
DASHBOARD = DEPLOY / "tidemark-grafana-dashboard.json"
RECORDING_TEST = DEPLOY / "tidemark-kafka-names.test.yml"

#: Burrow's StatusConstant (core/protocol/evaluator.go), as its /metrics exports it.
BURROW = {"NOTFOUND": 0, "OK": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}


@pytest.fixture
def traffic(store, clock, sample_at):
    """orders (2 queues) read by billing, one queue behind; audit (2 queues) read by
    archiver on queue 0 only, with a live member; a sample of them."""
    store.create_topic("orders", queues=2)
    store.create_topic("audit", queues=2)
    clock.at(0)
    store.append_batch("orders", [{"body": b"m", "queue": q} for q in (0, 0, 0, 1, 1)])
    store.append_batch("audit", [{"body": b"a", "queue": q} for q in (0, 0, 0, 0, 1)])
    clock.at(5)
    store.commit_offset("billing", "orders", 0, 1)
    store.commit_offset("billing", "orders", 1, 2)
    store.commit_offset("archiver", "audit", 0, 4)
    member_heartbeat(store.path, "archiver", "worker-1", ["audit"], now_ms=clock.ms)
    sample_at(10)
    return store


def test_queue_status_codes_are_burrows(client, traffic):
    samples = scrape(client)

    ok = value(samples, "tidemark_queue_status", group="archiver", topic="audit", queue="0")
    assert ok == BURROW["OK"]
    assert value(samples, "tidemark_group_status_code", group="archiver") == BURROW["OK"]


@pytest.mark.parametrize("status", ["OK", "WARN", "STOP", "STALL", "REWIND"])
def test_each_queue_status_has_burrows_number(status):
    assert QUEUE_STATUS_CODES[status] == BURROW[status]


def test_a_queue_never_committed_on_reads_notfound():
    assert queue_status_code(None) == BURROW["NOTFOUND"]


@pytest.mark.parametrize("status", ["OK", "WARN", "ERR"])
def test_each_group_status_has_burrows_number(status):
    assert GROUP_STATUS_CODES[status] == BURROW[status]


def test_end_and_start_offsets_per_queue_match_the_store(client, traffic):
    samples = scrape(client)

    for topic in ("orders", "audit"):
        for queue, (start, end) in enumerate(traffic.queue_ranges(topic)):
            labels = {"topic": topic, "queue": str(queue)}
            assert value(samples, "tidemark_queue_end_offset", **labels) == end
            assert value(samples, "tidemark_queue_start_offset", **labels) == start
        assert value(samples, "tidemark_topic_queues", topic=topic) == 2


def test_live_members_per_group(client, traffic):
    samples = scrape(client)

    assert value(samples, "tidemark_group_members", group="archiver") == 1
    assert value(samples, "tidemark_group_members", group="billing") == 0


def test_each_queue_a_live_member_holds_names_it(client, traffic, clock):
    member_heartbeat(
        traffic.path, "archiver", "worker-1", ["audit"], queues=[("audit", 0)], now_ms=clock.ms
    )

    samples = scrape(client)

    (held,) = samples["tidemark_queue_member_info"]
    labels, one = held
    assert one == 1
    assert {k: labels[k] for k in ("group", "topic", "queue", "consumer_id")} == {
        "group": "archiver",
        "topic": "audit",
        "queue": "0",
        "consumer_id": "worker-1",
    }
    assert labels["member_host"]


def test_lost_to_retention_and_drain_figures_per_group(client, traffic):
    samples = scrape(client)

    assert value(samples, "tidemark_group_lost_messages", group="billing") == 0
    lost = value(
        samples, "tidemark_queue_lost_messages", group="billing", topic="orders", queue="0"
    )
    assert lost == 0
    assert value(samples, "tidemark_group_consumed_per_second", group="billing") >= 0
    assert value(samples, "tidemark_group_produced_per_second", group="billing") >= 0
    states = {
        labels["tidemark_group_drain"]: v
        for labels, v in samples["tidemark_group_drain"]
        if labels["group"] == "billing"
    }
    assert sum(states.values()) == 1
    assert set(states) == {"caught up", "draining", "not draining", "not measured yet"}


# ------------------------------------------------------------------ docs/deploy files

FUNCTIONS = {
    "abs", "absent", "avg", "avg_over_time", "bottomk", "ceil", "changes", "clamp_min",
    "count", "delta", "deriv", "floor", "group", "increase", "label_replace", "max",
    "max_over_time", "min", "min_over_time", "rate", "round", "sort_desc", "sum", "time",
    "topk", "vector", "humanizeDuration", "humanizePercentage", "scalar", "quantile",
}  # fmt: skip
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset", "inf", "nan"}  # fmt: skip


def promtool() -> str:
    """Prometheus' rule checker (Debian's prometheus package; ``make test`` installs it)."""
    found = shutil.which("promtool")
    assert found, "promtool is missing: apt-get install prometheus (make test does)"
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (strings, label matchers, grouping
    clauses, durations and functions taken out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', " ", expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\$\w+", " ", text)
    words = set(re.findall(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*", text))
    return {w for w in words if w not in FUNCTIONS and w.lower() not in KEYWORDS}


def exported_names(client, traffic) -> set[str]:
    """Every metric /metrics declares (a family without samples too) and every sample name,
    once the store has flushed."""
    traffic.flush()
    response = client.get("/metrics")
    names = {"up"}
    for family in text_string_to_metric_families(response.content.decode()):
        names.add(family.name)
        names |= {sample.name for sample in family.samples}
    return names | {name.removesuffix("_total") for name in names}


def recording_rules() -> list[dict]:
    rules = yaml.safe_load(RECORDING.read_text())
    return [rule for group in rules["groups"] for rule in group["rules"]]


def test_the_recording_rules_make_the_kafka_exporters_names():
    recorded = {rule["record"] for rule in recording_rules()}

    assert recorded >= {
        # kafka-lag-exporter
        "kafka_consumergroup_group_lag",
        "kafka_consumergroup_group_lag_seconds",
        "kafka_consumergroup_group_offset",
        "kafka_consumergroup_group_max_lag",
        "kafka_consumergroup_group_max_lag_seconds",
        "kafka_consumergroup_group_sum_lag",
        "kafka_consumergroup_group_topic_sum_lag",
        "kafka_partition_latest_offset",
        "kafka_partition_earliest_offset",
        # kafka_exporter
        "kafka_consumergroup_lag",
        "kafka_consumergroup_lag_sum",
        "kafka_consumergroup_current_offset",
        "kafka_consumergroup_current_offset_sum",
        "kafka_consumergroup_members",
        "kafka_topic_partitions",
        "kafka_topic_partition_current_offset",
        "kafka_topic_partition_oldest_offset",
        # Burrow
        "burrow_kafka_consumer_status",
        "burrow_kafka_consumer_lag_total",
        "burrow_kafka_topic_partition_status",
    }


def test_every_recording_rule_reads_metrics_that_exist(client, traffic):
    known = exported_names(client, traffic)

    for rule in recording_rules():
        missing = metric_names(rule["expr"]) - known
        assert not missing, (rule["record"], missing)
        known.add(rule["record"])  # later rules may read it


@pytest.mark.parametrize("rules", [RECORDING, ALERTING], ids=lambda path: path.name)
def test_promtool_takes_the_rules(rules):
    checked = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_recording_rules_make_what_their_promtool_unit_test_expects():
    tested = subprocess.run(
        [promtool(), "test", "rules", str(RECORDING_TEST)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=DEPLOY,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alerting_rule_reads_metrics_that_exist(client, traffic):
    known = exported_names(client, traffic) | {rule["record"] for rule in recording_rules()}
    rules = yaml.safe_load(ALERTING.read_text())

    for rule in (rule for group in rules["groups"] for rule in group["rules"]):
        missing = metric_names(rule["expr"]) - known
        assert not missing, (rule["alert"], missing)


def dashboard_targets() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    panels = []
    for panel in board["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    found = [
        (panel.get("title", ""), target["expr"])
        for panel in panels
        for target in panel.get("targets", [])
    ]
    for variable in board.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        values = re.match(r"^label_values\((.*),\s*\w+\)$", query or "")
        if values:
            found.append((variable["name"], values.group(1)))
    return found


def test_the_grafana_dashboard_reads_only_metrics_that_exist(client, traffic):
    known = exported_names(client, traffic) | {rule["record"] for rule in recording_rules()}
    targets = dashboard_targets()

    assert len(targets) >= 8
    for title, expr in targets:
        names = metric_names(expr)
        assert names, (title, expr)
        assert not names - known, (title, names - known)


def test_the_grafana_dashboard_reads_the_kafka_names():
    exprs = " ".join(expr for _, expr in dashboard_targets())
    for name in (
        "kafka_consumergroup_group_lag",
        "kafka_consumergroup_group_lag_seconds",
        "kafka_partition_latest_offset",
        "burrow_kafka_consumer_status",
    ):
        assert name in exprs


def test_the_metric_name_reader_sees_through_promql():
    expr = (
        'sum without (queue) (label_replace(tidemark_queue_lag_messages{queue!="all"}, '
        '"partition", "$1", "queue", "(.+)")) > on(group) group_left max by (group) '
        "(rate(kafka_x[5m]))"
    )
    assert metric_names(expr) == {"tidemark_queue_lag_messages", "kafka_x"}
