"""``platform/sysinfo``: what a summary.json and the benchmarks' headers record about the machine."""

from __future__ import annotations

import pytest

from contrastlab.platform.sysinfo import TIMING_VARIABLES, describe_timing_environment, hardware_info


@pytest.fixture
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in TIMING_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_speed_relevant_variables_are_recorded(bare_environment: pytest.MonkeyPatch) -> None:
    """The SimCLR and PU benchmark figures could not say which thread settings they ran under."""
    bare_environment.setenv("OMP_NUM_THREADS", "1")
    bare_environment.setenv("OMP_WAIT_POLICY", "PASSIVE")
    bare_environment.setenv("HOME_OF_NOTHING", "x")  # not a timing variable: left out
    assert hardware_info()["environment"] == {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    assert describe_timing_environment() == "env OMP_NUM_THREADS=1, OMP_WAIT_POLICY=PASSIVE"


def test_no_variable_set_is_said(bare_environment: pytest.MonkeyPatch) -> None:
    assert hardware_info()["environment"] == {}
    assert describe_timing_environment() == "env: no thread/allocator variables set"
