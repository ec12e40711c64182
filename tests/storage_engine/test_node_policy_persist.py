"""The node policy survives a restart (DESIGN §3: "The node policy is persisted by the node").

Adapters with a data directory write it to ``<data_dir>/NODE_POLICY`` atomically
before it takes effect, with a version that only grows; at open the persisted
policy wins over ``EngineConfig.node_policy``. The memory adapter keeps it in
memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage_engine import open_engine
from storage_engine.api import StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.config import EngineConfig
from storage_engine.errors import InvalidArgumentError, PolicyValidationError
from storage_engine.policies.policy import NodePolicy
from storage_engine.segment import datadir
from tests.storage_engine.conftest import OpenAdapter

CHOSEN = NodePolicy(delete_when="02;03", disk_max_used_ratio=0.6, disk_clean_forcibly_ratio=0.7, delete_batch_max=3)
CONFIGURED = NodePolicy(delete_when="05")


def policy_file(tmp_path: Path) -> Path:
    return tmp_path / "data" / datadir.NODE_POLICY_FILE


def reopen(open_adapter: OpenAdapter, engine: StorageAdapter, **config: object) -> StorageAdapter:
    engine.close()
    return open_adapter(**config)


def test_the_policy_and_its_version_survive_close_and_open(
    open_adapter: OpenAdapter, persistent_adapter_name: str, tmp_path: Path
) -> None:
    e = open_adapter(node_policy=CONFIGURED)
    assert (e.node_policy(), e.node_policy_version()) == (CONFIGURED, 0)  # never set: the configuration rules
    assert not policy_file(tmp_path).exists()
    e.set_node_policy(CHOSEN)
    assert e.node_policy_version() == 1
    e = reopen(open_adapter, e, node_policy=CONFIGURED)
    assert (e.node_policy(), e.node_policy_version()) == (CHOSEN, 1)  # once set, the persisted one wins
    e.set_node_policy(NodePolicy())  # the built-in defaults, set explicitly, are a policy like any other
    e = reopen(open_adapter, e, node_policy=CONFIGURED)
    assert (e.node_policy(), e.node_policy_version()) == (NodePolicy(), 2)


def test_the_same_values_again_keep_the_version(
    open_adapter: OpenAdapter, persistent_adapter_name: str, tmp_path: Path
) -> None:
    e = open_adapter()
    e.set_node_policy(CHOSEN)
    written = policy_file(tmp_path).read_bytes()
    assert e.set_node_policy(CHOSEN) == CHOSEN and e.node_policy_version() == 1  # a retried PUT
    assert json.loads(written) == {"version": 1, "policy": CHOSEN.to_dict()}
    e.set_node_policy(NodePolicy(delete_when="01"))
    assert e.node_policy_version() == 2


def test_a_torn_temp_file_is_ignored(open_adapter: OpenAdapter, persistent_adapter_name: str, tmp_path: Path) -> None:
    e = open_adapter()
    e.set_node_policy(CHOSEN)
    e.close()
    torn = policy_file(tmp_path).with_name(datadir.NODE_POLICY_FILE + datadir.TMP_SUFFIX)
    torn.write_bytes(b'{"version": 2, "policy": {"delete_wh')  # a crash in the middle of the next write
    e = open_adapter()
    assert (e.node_policy(), e.node_policy_version()) == (CHOSEN, 1)
    assert not torn.exists()


def test_a_failed_write_changes_nothing(
    open_adapter: OpenAdapter, persistent_adapter_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = open_adapter()
    e.set_node_policy(CHOSEN)

    def no_rename(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(datadir.os, "replace", no_rename)
    with pytest.raises(OSError):
        e.set_node_policy(NodePolicy(delete_when="01"))
    assert (e.node_policy(), e.node_policy_version()) == (CHOSEN, 1)  # not in effect unless durable
    monkeypatch.undo()
    e = reopen(open_adapter, e)
    assert (e.node_policy(), e.node_policy_version()) == (CHOSEN, 1)


def test_a_refused_policy_is_not_persisted(
    open_adapter: OpenAdapter, persistent_adapter_name: str, tmp_path: Path
) -> None:
    e = open_adapter()
    with pytest.raises(PolicyValidationError):
        e.set_node_policy(NodePolicy(disk_max_used_ratio=0.95))
    assert e.node_policy_version() == 0 and not policy_file(tmp_path).exists()


@pytest.mark.parametrize(
    "content",
    [b"not json", b'{"version": 0, "policy": {}}', b'{"version": 3, "policy": {"no_such_field": 1}}'],
)
def test_a_damaged_policy_file_fails_the_open_naming_it(
    open_adapter: OpenAdapter, persistent_adapter_name: str, tmp_path: Path, content: bytes
) -> None:
    open_adapter().close()
    policy_file(tmp_path).write_bytes(content)
    with pytest.raises(InvalidArgumentError) as err:
        open_adapter()
    assert err.value.field == "data_dir" and str(policy_file(tmp_path)) in err.value.rule
    policy_file(tmp_path).unlink()  # what the message says to do
    assert open_adapter().node_policy_version() == 0


def test_the_memory_adapter_keeps_it_in_memory(tmp_path: Path, clock: ManualClock) -> None:
    config = EngineConfig(adapter="memory", data_dir=tmp_path / "data", node_policy=CONFIGURED)
    e = open_engine(config, clock)
    e.set_node_policy(CHOSEN)
    assert (e.node_policy(), e.node_policy_version()) == (CHOSEN, 1)
    e.close()
    assert not policy_file(tmp_path).exists()
    again = open_engine(config, clock)
    assert (again.node_policy(), again.node_policy_version()) == (CONFIGURED, 0)
    again.close()
