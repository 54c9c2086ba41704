"""``--device`` specs on a CUDA machine, checked on any machine with ``torch.cuda`` faked."""

from __future__ import annotations

import pytest
import torch

from contrastlab.platform.devices import check_device, is_main_process, resolve_device
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


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.cuda`` reports one device."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def test_plain_cuda_on_a_one_gpu_machine_is_its_device_0(one_gpu: None) -> None:
    assert resolve_device("cuda") == torch.device("cuda") and resolve_device("cuda:0") == torch.device("cuda", 0)


@pytest.mark.parametrize("spec", ["", None, " CPU ", "Auto"])
def test_cpu_auto_and_an_empty_spec_resolve_without_cuda(no_gpu: None, spec: str | None) -> None:
    """An empty spec (or ``None``) means auto: the CPU here, not an error that CUDA is missing."""
    assert resolve_device(spec) == torch.device("cpu")  # type: ignore[arg-type]


def test_cpu_stays_the_cpu_on_a_cuda_machine(two_gpus: None) -> None:
    assert resolve_device("cpu") == torch.device("cpu")


def test_cuda_without_cuda_is_one_line(no_gpu: None) -> None:
    with pytest.raises(DeviceError, match=r"^device 'cuda:1' requested but CUDA is not available here; use --device"):
        resolve_device("cuda:1")


@pytest.mark.parametrize("spec", ["cuda:x", "cuda:-1", "gpu", "cuda:", "cpu0"])
def test_check_device_refuses_any_other_string_in_one_line(spec: str) -> None:
    with pytest.raises(DeviceError, match=rf"^unknown device '{spec}'; valid: auto, cpu, cuda, cuda:K$"):
        check_device(spec)


@pytest.mark.parametrize("spec", ["auto", " CUDA:3 ", "cpu", "", None])
def test_check_device_accepts_the_valid_specs_whatever_the_machine(spec: str | None) -> None:
    check_device(spec)


@pytest.mark.parametrize(("rank", "main"), [(None, True), ("0", True), ("1", False), ("3", False)])
def test_only_rank_0_of_a_torchrun_job_is_the_main_process(monkeypatch, rank: str | None, main: bool) -> None:
    if rank is None:
        monkeypatch.delenv("RANK", raising=False)
    else:
        monkeypatch.setenv("RANK", rank)
    assert is_main_process() is main
