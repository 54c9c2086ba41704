"""docs/losses.md: its Python example runs and its table covers every loss."""

from __future__ import annotations

import re
from pathlib import Path

import contrastlab as cl

DOC = Path(__file__).resolve().parents[2] / "docs" / "losses.md"


def test_python_example_runs():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    assert namespace["loss"].requires_grad is False or namespace["loss"].grad_fn is not None


def test_table_lists_every_loss_and_the_name_collisions():
    text = DOC.read_text()
    for name in cl.list_losses():
        if name in {"infonce", "dcl", "hcl", "bcl", "pucl", "punce", "debiased_pos", "supcon", "unbiased"}:
            assert f"| `{name}` |" in text
    assert "Decoupled" in text and "puCL" in text and "oracle" in text.lower()
