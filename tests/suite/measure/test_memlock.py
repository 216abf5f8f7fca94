"""The memlock limit a pinned feature table is checked against: ``ulimit -l``, lifted by ``CAP_IPC_LOCK``."""

import resource

from suite.measure import host_memory


def test_the_soft_limit_counts_unless_the_process_may_lock_any_amount(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda which: (8 << 20, 8 << 20))
    monkeypatch.setattr(host_memory, "_can_lock_any", lambda: False)
    assert host_memory.memlock_bytes() == 8 << 20
    monkeypatch.setattr(host_memory, "_can_lock_any", lambda: True)
    assert host_memory.memlock_bytes() is None
    monkeypatch.setattr(host_memory, "_can_lock_any", lambda: False)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert host_memory.memlock_bytes() is None


def test_cap_ipc_lock_is_read_from_the_effective_capabilities(monkeypatch, tmp_path):
    status = tmp_path / "status"
    monkeypatch.setattr(host_memory, "PROC_STATUS", status)
    status.write_text("Name:\tpython\nCapEff:\t0000000000004000\n")
    assert host_memory._can_lock_any()
    status.write_text("Name:\tpython\nCapEff:\t0000000000000000\n")
    assert not host_memory._can_lock_any()
