"""Conformance: auto_replicate_inputs_size as the reference's tests/test_auto_replicate_inputs.py states it —
a single input set below the target size is used as the original plus int(target / size) deep copies (every
tensor of every copy a distinct buffer), 0 disables replication, and user-provided lists of input sets are used
as they are. Counted the same way: the distinct data pointers a target sees."""

from __future__ import annotations

import pytest
import torch

from kernelfoundry.utils import performance

MB64 = 64 * 2**20


def tensors(n, numel):
    return [torch.rand(numel) for _ in range(n)]


CASES = [
    ("args_and_kwargs", lambda: (tensors(4, 2**18), {f"arg{i}": torch.rand(2**19) for i in range(4)}, MB64)),
    ("kwargs_only", lambda: (None, {f"arg{i}": torch.rand(2**19) for i in range(4)}, MB64)),
    ("args_list_only", lambda: (tensors(4, 2**18), None, MB64)),
    ("replication_off", lambda: (tensors(4, 2**18), {f"arg{i}": torch.rand(2**19) for i in range(4)}, 0)),
]


class PointerTarget:
    """Records the data pointer of every tensor it is called with."""

    def __init__(self):
        self.pointers = set()

    def __call__(self, *args, **kwargs):
        for x in list(args) + [kwargs[k] for k in sorted(kwargs)]:
            if isinstance(x, torch.Tensor):
                self.pointers.add(x.data_ptr())
        return x


def expected_pointers(args, kwargs, target_size):
    n = (len(args) if args is not None else 0) + (len(kwargs) if kwargs is not None else 0)
    if target_size == 0:
        return n
    return n * (int(target_size / performance._get_size_in_bytes([args, kwargs])) + 1)


@pytest.mark.parametrize("name, make", CASES, ids=[c[0] for c in CASES])
def test_single_input_set_is_replicated_to_the_target_size(name, make):
    args, kwargs, target_size = make()
    target = PointerTarget()
    performance.measure_runtime_torch(target=target, device=torch.device, args=args, kwargs=kwargs,
                                      perf_trials_min_time=0.1, warmup_min_time=0.05,
                                      auto_replicate_inputs_size=target_size)
    assert len(target.pointers) == expected_pointers(args, kwargs, target_size)


def test_user_provided_input_sets_are_not_replicated():
    args = [tensors(3, 2**18), tensors(3, 2**18)]
    target = PointerTarget()
    performance.measure_runtime_torch(target=target, device=torch.device, args=args, kwargs=len(args) * [{}],
                                      perf_trials_min_time=0.1, warmup_min_time=0.05, auto_replicate_inputs_size=MB64)
    assert len(target.pointers) == len(args) * len(args[0])


def test_size_rule_and_copy_cap():
    x = torch.zeros(1024, dtype=torch.float32)  # 4 KiB
    assert performance._get_size_in_bytes([(x,), {"k": x.clone()}]) == 8192
    assert performance._get_size_in_bytes(("abcd", b"xy", 3, None)) == 6
    args_list, kwargs_list = performance._replicate_inputs((x,), {}, 4096 * 10)
    assert len(args_list) == len(kwargs_list) == 11 and args_list[0][0] is x
    assert len({a[0].data_ptr() for a in args_list}) == 11
    assert len(performance._replicate_inputs((x,), {}, 10**12, max_repeats=7)[0]) == 8
    assert len(performance._replicate_inputs((x,), {}, 4096)[0]) == 1  # already at the target
    # kf (B17): zero-size inputs are used as they are (the reference divided by zero).
    assert len(performance._replicate_inputs((torch.zeros(0),), {}, 4096)[0]) == 1
