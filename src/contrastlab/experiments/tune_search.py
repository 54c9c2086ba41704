"""The search space of ``platform tune``: parsing ``--search KEY=DIST`` and checking the storage URL.

``KEY`` gets the grid's key checks (a dotted path), with messages that name ``--search``; the seeds and the loss
cannot be searched (``--seeds-per-trial`` and ``--loss`` fix them; one study per loss).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.experiments import grid as cmp
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.rundir import check_writable_dir

_DIST_RE = re.compile(r"^(?P<kind>[a-z-]+)\((?P<args>[^()]*)\)$")
_NUMERIC = {"uniform": float, "log-uniform": float, "int": int, "log-int": int}
_NOT_SEARCHED = {
    "seed": "seeds are not searched; use --seeds-per-trial",
    "loss": "the loss is fixed by --loss; run one study per loss",
    "loss.name": "the loss is fixed by --loss; run one study per loss",
}


@dataclass(frozen=True)
class SearchParam:
    """One ``--search KEY=DIST``."""

    key: str
    """Dotted config key, e.g. ``loss.tau_plus``."""
    kind: str
    """``uniform``, ``log-uniform``, ``int``, ``log-int`` or ``choice``."""
    args: tuple[Any, ...]
    """``(low, high)`` for the numeric kinds, the values (strings) for ``choice``."""

    def suggest(self, trial: Any) -> str:
        """Sample a value with ``trial`` and return it as ``--set`` text."""
        if self.kind == "choice":
            return str(trial.suggest_categorical(self.key, list(self.args)))
        low, high = self.args
        log = self.kind.startswith("log-")
        if self.kind.endswith("int"):
            return str(trial.suggest_int(self.key, low, high, log=log))
        return repr(float(trial.suggest_float(self.key, low, high, log=log)))

    def example(self) -> str:
        """A value inside the range (to validate the key before anything runs)."""
        return str(self.args[0])

    def check_values(self) -> list[str]:
        """Every value to validate before anything runs: each choice, or both bounds."""
        return [str(a) for a in self.args]

    @property
    def text(self) -> str:
        """The distribution as ``--search`` text, e.g. ``log-uniform(0.001,0.3)``."""
        return f"{self.kind}({','.join(str(a) for a in self.args)})"


def check_integer_key(param: SearchParam, resolved: Any) -> None:
    """Refuse a continuous distribution on a key whose resolved value (``resolved``, at a bound) is an integer:
    whole-number bounds pass the config's checks, but every sampled value in between would be refused."""
    if param.kind not in ("uniform", "log-uniform") or not isinstance(resolved, int) or isinstance(resolved, bool):
        return
    kind = "log-int" if param.kind == "log-uniform" else "int"
    bounds = ",".join(f"{a:g}" for a in param.args)
    raise ConfigError(
        f"--search '{param.key}={param.kind}({bounds})': {param.key} takes whole numbers, but {param.kind} samples "
        f"fractional values; use --search '{param.key}={kind}({bounds})'"
    )


def parse_search(spec: str) -> SearchParam:
    """Parse ``KEY=DIST``; a one-line :class:`ConfigError` for anything malformed."""
    hint = "e.g. --search 'loss.tau_plus=log-uniform(0.001,0.3)'"
    if "=" not in spec:
        raise ConfigError(f"--search '{spec}': expected KEY=DIST, {hint}")
    key, dist = (part.strip() for part in spec.split("=", 1))
    if key in _NOT_SEARCHED:
        raise ConfigError(f"--search {key}: {_NOT_SEARCHED[key]}")
    cmp.check_key(key, "--search", spec)  # the grid's key checks (dotted path)
    m = _DIST_RE.match(dist.replace(" ", ""))
    kinds = "uniform(a,b), log-uniform(a,b), int(a,b), log-int(a,b), choice(v1,v2,...)"
    if not m or (m["kind"] not in _NUMERIC and m["kind"] != "choice"):
        raise ConfigError(f"--search '{spec}': bad distribution '{dist}'; use one of {kinds}")
    args = [a for a in m["args"].split(",")]
    if any(not a for a in args):
        raise ConfigError(f"--search '{spec}': empty argument in '{dist}'")
    if m["kind"] == "choice":
        if len(set(args)) != len(args):
            raise ConfigError(f"--search '{spec}': duplicated choice in '{dist}'")
        return SearchParam(key, "choice", tuple(args))
    cast = _NUMERIC[m["kind"]]
    try:
        low, high = (cast(a) for a in args) if len(args) == 2 else (None, None)
    except ValueError:
        raise ConfigError(f"--search '{spec}': {m['kind']} needs two {cast.__name__} bounds, got '{dist}'") from None
    if low is None or not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise ConfigError(f"--search '{spec}': {m['kind']}(low,high) needs two finite bounds with low < high")
    if m["kind"].startswith("log-") and low <= 0:
        raise ConfigError(f"--search '{spec}': {m['kind']} needs low > 0")
    return SearchParam(key, m["kind"], (low, high))


def parse_fixed(spec: str) -> str:
    """One ``--set key=value`` of ``platform tune`` as ``key=value`` text: the grid's parser, with tune's own
    message for the seed and the loss (tune has no ``--seeds``/``--seed-list``)."""
    key = spec.split("=", 1)[0].strip()
    if key in _NOT_SEARCHED:
        hint = "use --seeds-per-trial" if key == "seed" else "the loss is fixed by --loss"
        raise ConfigError(f"--set {key}: cannot be set here; {hint}")
    key, value = cmp.parse_set(spec)
    return f"{key}={value}"


def check_storage(url: str) -> None:
    """Refuse a storage URL SQLAlchemy cannot use (syntax, driver, a SQLite folder missing or where nothing can be
    created) before writing."""
    try:
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        create_engine(parsed)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"--storage {url}: not a usable database URL ({first[:200]})") from None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        folder = Path(parsed.database).parent
        if not folder.is_dir():
            raise ConfigError(f"--storage {url}: folder {folder} does not exist")
        check_writable_dir(folder, "--storage", shown=url)  # /proc, a read-only mount: SQLite cannot create it
