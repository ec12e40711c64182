"""Policy defaults, validation rules (DESIGN §3) and inheritance."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from storage_engine.errors import PolicyValidationError
from storage_engine.policies.bounds import unit_of
from storage_engine.policies.policy import (
    FIELDS,
    NAMESPACE_FIELDS,
    NODE_FIELDS,
    NamespacePolicy,
    NodePolicy,
    namespace_policy_from,
    node_policy_from,
    resolve_policy,
)


def errors_of(fn, values):
    with pytest.raises(PolicyValidationError) as caught:
        fn(values)
    return caught.value.errors


def test_design_defaults():
    node = NodePolicy()
    assert (node.disk_max_used_ratio, node.disk_clean_forcibly_ratio, node.disk_warning_ratio) == (0.75, 0.85, 0.90)
    assert (node.clean_interval_ms, node.file_reserved_ms, node.delete_when) == (10_000, 72 * 3_600_000, "04")
    assert (node.delete_batch_max, node.delete_interval_ms, node.destroy_forcibly_after_ms) == (10, 100, 120_000)
    ns = NamespacePolicy()
    assert (ns.scan_batch_size, ns.max_delete_per_scan) == (1_000, 100_000)
    assert (ns.min_cleanable_dirty_ratio, ns.delete_retention_ms, ns.ttl_check_interval_ms) == (
        0.5,
        86_400_000,
        300_000,
    )
    namespace_policy_from({})
    node_policy_from({})


def test_every_field_is_described():
    assert set(NAMESPACE_FIELDS) == {f.name for f in fields(NamespacePolicy)}
    assert set(NODE_FIELDS) == {f.name for f in fields(NodePolicy)}


@pytest.mark.parametrize(
    ("values", "field", "rule"),
    [
        ({"disk_max_used_ratio": 0.9}, "disk_max_used_ratio", "≤ disk_clean_forcibly_ratio"),
        ({"disk_clean_forcibly_ratio": 0.95}, "disk_clean_forcibly_ratio", "≤ disk_warning_ratio"),
        ({"disk_warning_ratio": 1.0}, "disk_warning_ratio", "< 1"),
        ({"delete_when": "4am"}, "delete_when", "list of hours"),
        ({"delete_batch_max": 0}, "delete_batch_max", "must be from 1 to 100000"),
        ({"clean_forcibly_enabled": "yes"}, "clean_forcibly_enabled", "true or false"),
        ({"bogus": 1}, "bogus", "unknown field"),
    ],
)
def test_node_rules_name_the_field(values, field, rule):
    assert rule in errors_of(node_policy_from, values)[field]


def test_ratios_may_be_equal():
    node_policy_from({"disk_max_used_ratio": 0.8, "disk_clean_forcibly_ratio": 0.8, "disk_warning_ratio": 0.8})


@pytest.mark.parametrize(
    ("values", "field", "rule"),
    [
        ({"min_compaction_lag_ms": 10, "max_compaction_lag_ms": 5}, "min_compaction_lag_ms", "≤ max_compaction"),
        ({"retention_ms": 1000, "backlog_quota_seconds": 5}, "retention_ms", "exceed the backlog quota"),
        ({"retention_bytes": 100, "backlog_quota_bytes": 100}, "retention_bytes", "exceed the backlog quota"),
        ({"cleanup_policy": "purge"}, "cleanup_policy", "one of"),
        ({"backlog_quota_policy": "drop"}, "backlog_quota_policy", "one of"),
        ({"segment_bytes": 10}, "segment_bytes", "must be from 1024 to 17179869184 bytes"),
        ({"ttl_ms": 0}, "ttl_ms", "must be at least 1 ms"),
        ({"ttl_ms": 1.5}, "ttl_ms", "integer"),
        ({"segment_ms": None}, "segment_ms", "null is not allowed"),
        ({"reclaim_dead_ratio": -0.1}, "reclaim_dead_ratio", "must be a ratio from 0 to 1"),
    ],
)
def test_namespace_rules_name_the_field(values, field, rule):
    assert rule in errors_of(namespace_policy_from, values)[field]


def test_every_broken_field_is_reported_at_once():
    errors = errors_of(namespace_policy_from, {"ttl_ms": -1, "segment_bytes": 1, "nope": 2})
    assert set(errors) == {"nope"}  # unknown fields are refused before anything else
    errors = errors_of(namespace_policy_from, {"ttl_ms": -1, "segment_bytes": 1})
    assert set(errors) == {"ttl_ms", "segment_bytes"}


def test_null_means_infinite_where_allowed():
    policy = namespace_policy_from({"retention_ms": None, "retention_bytes": None, "ttl_ms": None})
    assert policy.retention_ms is None


def test_inheritance_reports_value_and_source_per_field():
    policy, resolved = resolve_policy(
        NamespacePolicy,
        [("cluster", {"ttl_ms": 60_000, "retention_ms": 3_600_000}), ("namespace", {"retention_ms": None})],
    )
    assert policy.ttl_ms == 60_000 and resolved["ttl_ms"].source == "cluster"
    assert policy.retention_ms is None and resolved["retention_ms"].source == "namespace"
    assert resolved["segment_bytes"].source == "builtin"
    # Clearing the namespace override falls back to the cluster value.
    policy, resolved = resolve_policy(NamespacePolicy, [("cluster", {"retention_ms": 3_600_000}), ("namespace", {})])
    assert policy.retention_ms == 3_600_000 and resolved["retention_ms"].source == "cluster"


def test_inheritance_validates_the_merged_policy():
    with pytest.raises(PolicyValidationError) as caught:
        resolve_policy(
            NamespacePolicy,
            [("cluster", {"max_compaction_lag_ms": 100}), ("namespace", {"min_compaction_lag_ms": 200})],
        )
    assert "min_compaction_lag_ms" in caught.value.errors


def test_retention_ms_zero_is_valid():
    """Kafka accepts ``retention.ms=0``: every sealed segment is eligible at once."""
    assert namespace_policy_from({"retention_ms": 0}).retention_ms == 0
    policy, resolved = resolve_policy(NamespacePolicy, [("cluster", {}), ("namespace", {"retention_ms": 0})])
    assert policy.retention_ms == 0 and resolved["retention_ms"].source == "namespace"  # the control plane's path
    assert "retention_ms" in errors_of(namespace_policy_from, {"retention_ms": -1})


NAMESPACE_FLOATS = [f.name for f in fields(NamespacePolicy) if isinstance(f.default, float)]
NODE_FLOATS = [f.name for f in fields(NodePolicy) if isinstance(f.default, float)]
# Every numeric field of both policies, with the builder that validates it.
NUMERIC = [
    (build, name)
    for build, described in ((namespace_policy_from, NAMESPACE_FIELDS), (node_policy_from, NODE_FIELDS))
    for name, info in described.items()
    if info.unit not in ("bool", "choice", "hours")
]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize(("build", "field"), NUMERIC, ids=[f for _, f in NUMERIC])
def test_nan_and_infinity_are_refused_in_every_numeric_field(build, field, value):
    """NaN compares false with every bound, so it used to pass, be stored, and break every later answer."""
    floating = field in NAMESPACE_FLOATS or field in NODE_FLOATS
    [rule] = errors_of(build, {field: value}).values()
    assert rule.startswith("must be a finite number" if floating else "must be an integer from ")
    assert "^" not in rule  # the bounds in digits, as an operator types them
    if unit_of(field) not in ("", "ratio"):
        assert rule.endswith(f" {unit_of(field)}"), rule


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("ttl_ms", 0, "must be at least 1 ms"),
        ("ttl_ms", 1.5, "must be an integer from 1 to 9223372036854775807 ms"),
        ("retention_bytes", 1 << 63, "must be an integer from 1 to 9223372036854775807 bytes"),
        ("backlog_hold_timeout_ms", 600_001, "must be from 0 to 600000 ms"),
        ("reclaim_dead_ratio", 1.5, "must be a ratio from 0 to 1"),
        ("scan_batch_size", 0, "must be from 1 to 1000000"),
    ],
)
def test_number_rules_state_their_bounds_in_digits_and_their_unit(field, value, rule):
    assert errors_of(namespace_policy_from, {field: value}) == {field: rule}


def test_the_unit_read_from_a_fields_name_is_the_one_it_is_described_with():
    """One helper (storage_engine.policies.bounds.unit_of) words every unit; every field's description agrees."""
    described = {name: info.unit for name, info in FIELDS.items() if info.unit in ("ms", "bytes", "ratio")}
    assert len(described) > 25
    assert {name: unit_of(name).split(" ")[0] for name in described} == described


@pytest.mark.parametrize(("build", "field"), NUMERIC, ids=[f for _, f in NUMERIC])
def test_numbers_beyond_64_bits_and_booleans_are_refused(build, field):
    for value in (1 << 63, 10**5000, True):
        assert field in errors_of(build, {field: value}), value
    assert len(NUMERIC) > 30  # every numeric field of both policies is covered


def test_float_fields_take_ints_and_finite_floats():
    assert NAMESPACE_FLOATS and NODE_FLOATS
    assert namespace_policy_from({"reclaim_dead_ratio": 1}).reclaim_dead_ratio == 1
    assert node_policy_from({"urgent_expired_ratio": 0.25}).urgent_expired_ratio == 0.25


@pytest.mark.parametrize("value", [4, 4.0, ["04"], {"h": 4}, None])
def test_a_delete_when_that_is_not_a_string_is_a_validation_error(value):
    """A non-string ``delete_when`` used to crash the hour check (``.split`` on an int)."""
    assert "delete_when" in errors_of(node_policy_from, {"delete_when": value})


@pytest.mark.parametrize(("field", "value"), [("delete_when", "²"), ("delete_when", "٠٤"), ("off_peak_hours", "١-٥")])
def test_hours_take_ascii_digits_only(field, value):
    """``"²".isdigit()`` is true and ``int("²")`` raises: ASCII digits only, refused as a rule, not a crash."""
    assert "list of hours" in errors_of(node_policy_from, {field: value})[field]


def test_a_stored_policy_with_a_bad_value_loads_with_that_field_reset() -> None:
    """A NaN stored before validation refused it must not make the namespace unlistable."""
    from storage_engine.segment.index_records import NamespaceRecord

    raw = b'{"id": 3, "shards": 2, "created_at": 5, "policy": {"ttl_ms": 60000, "reclaim_dead_ratio": NaN, "nope": 1}}'
    record = NamespaceRecord.unpack("ns", raw)
    assert record.policy.ttl_ms == 60_000
    assert record.policy.reclaim_dead_ratio == NamespacePolicy().reclaim_dead_ratio
    assert (record.ns_id, record.shards, record.created_at) == (3, 2, 5)
