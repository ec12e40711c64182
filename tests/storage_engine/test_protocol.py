"""The node boundary's lifecycle vocabulary (storage_engine.node_api.protocol): one definition of every
operation, requests checked when made, and results parsed back into the engine's dataclasses."""

from __future__ import annotations

import pytest

from storage_engine.api import DiskStatus, LifecycleResult
from storage_engine.errors import InvalidArgumentError
from storage_engine.node.lifecycle import CALLS
from storage_engine.node_api.protocol import ARGUMENTS, SPECS, Operation, Scope, StepRequest, operation_of, result_from


def test_every_operation_has_a_spec_and_an_engine_call():
    assert set(SPECS) == set(Operation) == set(CALLS)
    for spec in SPECS.values():
        assert spec.accepts <= set(ARGUMENTS)
        assert spec.dry_run == ("dry_run" in spec.accepts)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"operation": Operation.COMPACT}, "namespace"),
        ({"operation": Operation.CLEAN_FILES, "namespace": "n"}, "namespace"),
        ({"operation": Operation.EXPIRE_SCAN, "shard": 1}, "shard"),
        ({"operation": Operation.DISK_CHECK, "dry_run": True}, "dry_run"),
        ({"operation": Operation.RETENTION, "namespace": "n", "manual": True}, "manual"),
        ({"operation": Operation.CLEAN_FILES, "limit": 5}, "limit"),
        ({"operation": Operation.BACKLOG_QUOTA, "namespace": "n", "shard": 0}, "shard"),
    ],
)
def test_a_request_is_checked_when_made(kwargs, field):
    with pytest.raises(InvalidArgumentError) as refused:
        StepRequest(**kwargs)
    assert refused.value.field == field


def test_params_round_trip_and_unknown_ones_are_refused():
    request = StepRequest(Operation.RECLAIM, "orders", shard=2, limit=7, manual=True, dry_run=True)
    assert StepRequest.from_params("reclaim", "orders", request.params()) == request
    assert request.path == "/v1/namespaces/orders/lifecycle/reclaim"
    assert StepRequest(Operation.CLEAN_FILES).path == "/v1/node/lifecycle/clean-files"
    for params, field in (({"sahrd": "1"}, "sahrd"), ({"limit": "0"}, "limit"), ({"manual": "maybe"}, "manual")):
        with pytest.raises(InvalidArgumentError) as refused:
            StepRequest.from_params("reclaim", "orders", params)
        assert refused.value.field == field
    with pytest.raises(InvalidArgumentError) as unknown:
        operation_of("explode")
    assert unknown.value.field == "operation"


def test_results_come_back_as_the_engines_dataclasses():
    result = result_from(Operation.RECLAIM, {**LifecycleResult("reclaim", segments_deleted=3).to_dict(), "new": 1})
    assert isinstance(result, LifecycleResult) and result.segments_deleted == 3
    disk = DiskStatus(10, 100, 0.1, "quota", False, False, False, 0)
    assert result_from(Operation.DISK_CHECK, disk.to_dict()) == disk


def test_destructive_operations():
    assert SPECS[Operation.RETENTION].deletes(manual=False)
    assert not SPECS[Operation.CLEAN_FILES].deletes(manual=False) and SPECS[Operation.CLEAN_FILES].deletes(manual=True)
    assert SPECS[Operation.EXPIRE_SCAN].scope is Scope.ANY


def test_every_operation_that_changes_data_offers_a_dry_run():
    """DESIGN §3 "Dry runs": only the disk check (a measurement) has none."""
    assert {op for op, spec in SPECS.items() if not spec.dry_run} == {Operation.DISK_CHECK}
    for op in (Operation.SUBSCRIPTION_TTL, Operation.BACKLOG_QUOTA, Operation.OFFLOAD, Operation.COMPACT_DIRTIEST):
        namespace = None if SPECS[op].scope is Scope.NODE else "orders"
        request = StepRequest.from_params(op, namespace, {"dry_run": "true"})
        assert request.dry_run and request.params() == {"dry_run": "true"}


def test_offload_is_a_bounded_step_of_a_namespace_or_the_node_and_deletes_nothing_by_itself():
    spec = SPECS[Operation.OFFLOAD]
    assert (spec.scope, spec.accepts, spec.dry_run) == (Scope.ANY, frozenset({"shard", "limit", "dry_run"}), True)
    assert not spec.deletes(manual=True)  # it uploads, and drops only local copies of uploaded segments
    request = StepRequest.from_params("offload", "orders", {"shard": "1", "limit": "5"})
    assert (request.shard, request.limit, request.path) == (1, 5, "/v1/namespaces/orders/lifecycle/offload")
    assert StepRequest(Operation.OFFLOAD).path == "/v1/node/lifecycle/offload"
    with pytest.raises(InvalidArgumentError) as refused:
        StepRequest.from_params("offload", "orders", {"manual": "true"})
    assert refused.value.field == "manual"
