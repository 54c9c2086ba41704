"""Mutation testing of one source file: do the tests notice when the code is wrong? (``make mutants``)

Each *mutant* is the file with one small change a slip of the pen could make: ``+`` for ``-``, ``<`` for ``<=``,
a constant off by one, ``.sum`` for ``.mean``, ``max`` for ``min``, a negated ``if``, swapped branches, a dropped
minus sign. For every mutant the given tests run (``pytest -x``); a mutant that passes them all *survives*, which
means either a test is missing or the change does not alter behaviour (an *equivalent* mutant, e.g. an epsilon
nothing reaches). Docstrings, error messages (``raise`` statements, f-strings) and annotations are never mutated.

The checkout is never modified: ``src/`` is copied to a temporary folder, the mutant is written there and the
tests import it through ``PYTHONPATH`` (no bytecode is written, so a stale ``.pyc`` cannot hide a mutant).

Examples::

    python scripts/mutants.py src/contrastlab/losses/dcl.py --tests tests/losses
    python scripts/mutants.py src/contrastlab/losses/dcl.py --list
    python scripts/mutants.py src/contrastlab/experiments/stats.py --tests tests/platform/test_stats.py \\
        --lines 40-90 --jsonl /tmp/stats-mutants.jsonl

Exit status: 0 when every mutant was caught, 1 when some survived, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BINARY_SWAPS: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
                                  ast.Pow: ast.Mult, ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv}
COMPARE_SWAPS: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
                                   ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
                                   ast.In: ast.NotIn, ast.NotIn: ast.In}
METHOD_SWAPS = {"sum": "mean", "mean": "sum", "max": "min", "min": "max", "amax": "amin", "amin": "amax",
                "argmax": "argmin", "argmin": "argmax", "logsumexp": "sum", "log1p": "log", "exp": "expm1",
                "clamp_min": "clamp_max", "clamp_max": "clamp_min", "cumsum": "cumprod", "detach": "clone"}
BUILTIN_SWAPS = {"max": "min", "min": "max", "any": "all", "all": "any"}


@dataclass(frozen=True)
class Mutant:
    """One change: the node's position in ``ast.walk`` order, its source line and what the change is."""

    node_index: int
    line: int
    kind: str
    description: str


def _untouchable(tree: ast.AST) -> set[int]:
    """``id`` of every node a mutation must leave alone: docstrings, ``raise`` statements, f-strings, annotations."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                roots.append(first)
        if isinstance(node, (ast.Raise, ast.JoinedStr)):
            roots.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            roots += [arg.annotation for arg in arguments if arg.annotation is not None]
            roots += [node.returns] if node.returns is not None else []
        if isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return {id(sub) for root in roots for sub in ast.walk(root)}


def _changed_number(value: int | float) -> int | float:
    """A numeric constant's replacement: ``n + 1`` for integers, twice the value (``1.0`` for zero) for floats."""
    if isinstance(value, int):
        return value + 1
    return value * 2 if value != 0 else 1.0


def _mutants_of(node: ast.AST) -> list[tuple[str, str]]:
    """``(kind, description)`` of each mutation of ``node`` itself."""
    found: list[tuple[str, str]] = []
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINARY_SWAPS:
        found.append(("operator", f"{type(node.op).__name__} -> {BINARY_SWAPS[type(node.op)].__name__}"))
    elif isinstance(node, ast.Compare):
        found += [(f"compare{k}", f"{type(op).__name__} -> {COMPARE_SWAPS[type(op)].__name__}")
                  for k, op in enumerate(node.ops) if type(op) in COMPARE_SWAPS]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        found.append(("unary", f"drop {type(node.op).__name__}"))
    elif isinstance(node, ast.BoolOp):
        found.append(("boolean", "and -> or" if isinstance(node.op, ast.And) else "or -> and"))
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        found.append(("constant", f"{node.value} -> {not node.value}"))
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        found.append(("constant", f"{node.value!r} -> {_changed_number(node.value)!r}"))
    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in METHOD_SWAPS:
        found.append(("method", f".{node.attr} -> .{METHOD_SWAPS[node.attr]}"))
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in BUILTIN_SWAPS:
        found.append(("builtin", f"{node.id} -> {BUILTIN_SWAPS[node.id]}"))
    elif isinstance(node, ast.IfExp):
        found.append(("branches", "conditional expression: branches swapped"))
    elif isinstance(node, (ast.If, ast.While)):
        found.append(("condition", f"{type(node).__name__.lower()}: condition negated"))
    return found


def find_mutants(source: str) -> list[Mutant]:
    """Every mutant of ``source``, in ``ast.walk`` order."""
    tree = ast.parse(source)
    skip = _untouchable(tree)
    return [Mutant(index, getattr(node, "lineno", 0), kind, description)
            for index, node in enumerate(ast.walk(tree)) if id(node) not in skip
            for kind, description in _mutants_of(node)]


def mutated_source(source: str, mutant: Mutant) -> str:
    """``source`` with ``mutant`` applied (through ``ast.unparse``: comments and layout are not kept)."""
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    node = nodes[mutant.node_index]
    if mutant.kind == "operator":
        node.op = BINARY_SWAPS[type(node.op)]()
    elif mutant.kind.startswith("compare"):
        k = int(mutant.kind.removeprefix("compare"))
        node.ops[k] = COMPARE_SWAPS[type(node.ops[k])]()
    elif mutant.kind == "unary":
        _replace_child(nodes, node, node.operand)
    elif mutant.kind == "boolean":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif mutant.kind == "constant":
        node.value = (not node.value) if isinstance(node.value, bool) else _changed_number(node.value)
    elif mutant.kind == "method":
        node.attr = METHOD_SWAPS[node.attr]
    elif mutant.kind == "builtin":
        node.id = BUILTIN_SWAPS[node.id]
    elif mutant.kind == "branches":
        node.body, node.orelse = node.orelse, node.body
    elif mutant.kind == "condition":
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    else:
        raise ValueError(f"unknown mutant kind {mutant.kind!r}")
    return ast.unparse(tree) + "\n"


def _replace_child(nodes: list[ast.AST], old: ast.AST, new: ast.AST) -> None:
    """Put ``new`` where ``old`` is in its parent (one of ``nodes``)."""
    for parent in nodes:
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[next(i for i, item in enumerate(value) if item is old)] = new
                return
    raise ValueError("the node to replace has no parent")


def run_tests(tests: list[str], src_copy: Path, timeout: float) -> str:
    """``KILLED``, ``SURVIVED`` or ``TIMEOUT`` (counted as caught): ``pytest -x`` on ``tests`` with ``src_copy``
    first on the import path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src_copy), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "TIMEOUT"
    return "SURVIVED" if done.returncode == 0 else "KILLED"


def _line_range(text: str) -> tuple[int, int]:
    """``"A-B"`` → ``(A, B)`` (argparse type)."""
    try:
        low, high = (int(part) for part in text.split("-"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST-LAST line numbers, e.g. 40-90, not {text!r}") from None
    return low, high


def main(argv: list[str] | None = None) -> int:
    """Run the mutants of one file (see the module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Exit status: 0 every mutant caught, 1 some survived, 2 bad arguments.")
    parser.add_argument("file", type=Path, help="a Python file under ./src to mutate")
    parser.add_argument("--tests", nargs="+", default=["tests"], help="pytest paths to run (default: tests)")
    parser.add_argument("--lines", type=_line_range, help="only mutants on lines FIRST-LAST, e.g. 40-90")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant before TIMEOUT (120)")
    parser.add_argument("--list", action="store_true", help="print the mutants without running the tests")
    parser.add_argument("--jsonl", type=Path, help="also append one JSON line per mutant to this file")
    args = parser.parse_args(argv)
    root = Path.cwd().resolve()
    target = args.file.resolve()
    if not target.is_file() or target.suffix != ".py" or not target.is_relative_to(root / "src"):
        parser.error(f"{args.file} is not a Python file under {root / 'src'} (run from the repository root)")
    source = target.read_text()
    mutants = [m for m in find_mutants(source) if args.lines is None or args.lines[0] <= m.line <= args.lines[1]]
    shown = target.relative_to(root)
    if args.list:
        for mutant in mutants:
            print(f"{shown}:{mutant.line}: {mutant.description}")
        print(f"{len(mutants)} mutants")
        return 0
    survivors = []
    # ``kill`` (SIGTERM) unwinds like Ctrl-C: the running pytest is killed and the scratch copy deleted (it stayed
    # behind in the temp folder, one copy of src/ per killed run).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with tempfile.TemporaryDirectory(prefix="contrastlab-mutants-") as scratch:
        src_copy = Path(scratch) / "src"
        shutil.copytree(root / "src", src_copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        copy_of_target = src_copy / target.relative_to(root / "src")
        for number, mutant in enumerate(mutants, 1):
            copy_of_target.write_text(mutated_source(source, mutant))
            start = time.monotonic()
            status = run_tests(args.tests, src_copy, args.timeout)
            seconds = time.monotonic() - start
            print(f"[{number}/{len(mutants)}] {shown}:{mutant.line}: {mutant.description}: {status} ({seconds:.1f} s)",
                  flush=True)
            if status == "SURVIVED":
                survivors.append(mutant)
            if args.jsonl is not None:
                with args.jsonl.open("a") as out:
                    out.write(json.dumps({"file": str(shown), "line": mutant.line, "mutation": mutant.description,
                                          "status": status, "seconds": round(seconds, 1)}) + "\n")
    print(f"{len(mutants) - len(survivors)} of {len(mutants)} mutants caught; {len(survivors)} survived"
          + "".join(f"\n  {shown}:{m.line}: {m.description}" for m in survivors))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
