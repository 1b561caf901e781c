# SPDX-License-Identifier: GPL-2.0
"""kvcache.vllm.interface without vLLM: a vLLM whose connector interface
moved (a method gone, renamed parameters) is named in the decline; one
that only added parameters with defaults is served."""

from __future__ import annotations

import sys
import types

import pytest

from kvcache.vllm import interface


def _base(**override):
    """A stand-in KVConnectorBase_V1 with every method relied on."""
    ns = {}
    for name, params in {**interface.SCHEDULER, **interface.WORKER}.items():
        args = ", ".join(("self",) + params)
        exec(f"def {name}({args}): pass", ns)
    ns.update(override)
    return type("Base", (), {k: v for k, v in ns.items()
                             if not k.startswith("__")})


class HMA:
    def request_finished_all_groups(self, request, block_ids):
        pass


@pytest.fixture(autouse=True)
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.__version__ = "9.9-test"
    monkeypatch.setitem(sys.modules, "vllm", vllm)


def test_the_interface_relied_on_passes():
    interface.check_interface(_base(), HMA)


def test_added_parameters_with_defaults_pass():
    def start_load_kv(self, forward_context, new_flag=False, **kw):
        pass

    interface.check_interface(_base(start_load_kv=start_load_kv), HMA)


def test_a_gone_method_is_named():
    base = _base()
    del base.wait_for_save
    with pytest.raises(ValueError, match=r"9\.9-test.*wait_for_save\(\) "
                                         r"is gone"):
        interface.check_interface(base, HMA)


def test_renamed_parameters_are_named():
    def update_state_after_alloc(self, request, kv_blocks, n):
        pass

    with pytest.raises(ValueError, match="update_state_after_alloc"
                                         r"\(request, kv_blocks, n\)"):
        interface.check_interface(
            _base(update_state_after_alloc=update_state_after_alloc), HMA)


def test_hma_call_checked_too():
    class Old:
        pass

    with pytest.raises(ValueError, match="request_finished_all_groups"):
        interface.check_interface(_base(), Old)
