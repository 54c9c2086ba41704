"""``--device`` specs on a CUDA machine, checked on any machine with ``torch.cuda`` faked."""

from __future__ import annotations

import pytest
import torch

from contrastlab.platform.devices import resolve_device
from contrastlab.platform.errors import DeviceError


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.cuda`` reports two devices (nothing is allocated on them)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


@pytest.mark.parametrize(("spec", "expected"), [("cuda", torch.device("cuda")), ("cuda:1", torch.device("cuda", 1)),
                                                ("cuda:00", torch.device("cuda", 0)),
                                                ("cuda:01", torch.device("cuda", 1)),
                                                (" CUDA:001 ", torch.device("cuda", 1))])
def test_cuda_specs_resolve_to_the_device_they_name(two_gpus: None, spec: str, expected: torch.device) -> None:
    """``cuda:01`` passed the spec check and reached ``torch.device("cuda:01")``, which refuses a leading zero: a
    RuntimeError traceback on a CUDA machine instead of device 1."""
    device = resolve_device(spec)
    assert device == expected and device.index == expected.index


def test_a_cuda_index_past_the_last_device_is_one_line(two_gpus: None) -> None:
    with pytest.raises(DeviceError, match=r"^device 'cuda:02' does not exist; this machine has 2 CUDA device\(s\)$"):
        resolve_device("cuda:02")


def test_plain_cuda_keeps_no_index(two_gpus: None) -> None:
    """``cuda`` stays index-less: the run then leaves the current device alone (``Run`` sets it for ``cuda:K``)."""
    assert resolve_device("cuda").index is None
    assert resolve_device("auto") == torch.device("cuda")
