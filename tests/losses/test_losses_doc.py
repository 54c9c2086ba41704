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


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_table_defaults_match_the_registry():
    """Every hyperparameter named in a row's hyperparameter cell has its registry default in bold, and no loss
    hyperparameter is left out."""
    rows = {}
    for line in DOC.read_text().split("## The losses", 1)[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[3]
    assert set(rows) == {"infonce", "dcl", "hcl", "bcl", "pucl", "punce", "debiased_pos", "supcon", "unbiased"}
    for name, cell in rows.items():
        documented = {}
        for part in cell.split("; "):
            found = re.match(r"`(\w+)`.*?\*\*([^*]+)\*\*", part)
            if found:
                documented[found.group(1)] = found.group(2)
        hps = cl.registry("loss").get(name).hyperparameters
        assert documented == {h.name: _shown(h.default) for h in hps}, name


def test_sampler_defaults_match_the_registry():
    """The bold defaults of the "Samplers" bullets (`temperature` **0.5**, ...) are the registry's."""
    section = DOC.read_text().split("## Samplers", 1)[1].split("\n## ", 1)[0]
    bullets = re.findall(r"^\* \*\*`(\w+)`\*\*(.*?)(?=^\S|\Z)", section, re.S | re.M)
    assert {name for name, _ in bullets} == {"two_view", "multi_view", "query_key", "queue"}
    for name, body in bullets:
        documented = dict(re.findall(r"`(\w+)`\s+\*\*([^*]+)\*\*", body))
        defaults = {h.name: _shown(h.default) for h in cl.registry("sampler").get(name).hyperparameters}
        assert documented and documented == {k: defaults[k] for k in documented}, name
