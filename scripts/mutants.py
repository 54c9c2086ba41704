"""Mutation testing of one source file: do the tests notice when the code is wrong? (``make mutants``)

Each *mutant* is the file with one small change a slip of the pen could make: ``+`` for ``-``, ``<`` for ``<=``,
a constant off by one, ``.sum`` for ``.mean``, ``max`` for ``min``, a negated ``if``, swapped branches, a dropped
minus sign. For every mutant the given tests run (``pytest -x``); a mutant that passes them all *survives*, which
means either a test is missing or the change does not alter behaviour (an *equivalent* mutant, e.g. an epsilon
nothing reaches). Docstrings, error messages (``raise`` statements, f-strings) and annotations are never mutated.

The checkout is never modified: ``src/`` is copied to a temporary folder, the mutant is written there and the
tests import it through ``PYTHONPATH`` (no bytecode is written, so a stale ``.pyc`` cannot hide a mutant).

Before the mutants, the tests run once on the unmutated copy: when they fail there, every mutant would count as
caught, so the run stops (exit status 2). With ``--by-line`` that first run also records, through ``sys.settrace``
in every Python process it starts (a ``sitecustomize`` on the scratch path), which functions of the file each test
calls; each mutant then runs only the tests that call the function it sits in (a mutant at module or class level,
which runs at import, still runs them all), and one in a function no test calls is reported ``NOT REACHED``
without a run. Slow end-to-end tests can then stay in ``--tests``: they run only for the mutants they reach. A
process that ends through ``os._exit`` (a forked worker) records nothing, so leave ``--by-line`` out for code that
runs only there; and a test written while the run goes on is never selected by it (re-check a survivor with
``--lines`` once its test is in).

Examples::

    python scripts/mutants.py src/contrastlab/losses/dcl.py --tests tests/losses
    python scripts/mutants.py src/contrastlab/losses/dcl.py --list
    python scripts/mutants.py src/contrastlab/cli/train.py --tests tests/cli tests/platform --by-line
    python scripts/mutants.py src/contrastlab/experiments/stats.py --tests tests/platform/test_stats.py \\
        --lines 40-90 --jsonl /tmp/stats-mutants.jsonl

Exit status: 0 when every mutant was caught, 1 when some survived or were not reached, 2 for bad arguments or
tests that fail on the unmutated code.
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


def enclosing_function_line(source: str, mutant: Mutant) -> int | None:
    """The first line (``co_firstlineno``: its first decorator's, if any) of the innermost function or lambda whose
    body holds ``mutant``; ``None`` when the mutant runs at import (module or class level, a default argument or a
    decorator of a top-level function), where every test depends on it."""
    nodes = list(ast.walk(ast.parse(source)))
    parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
    child = nodes[mutant.node_index]
    parent = parents.get(id(child))
    while parent is not None:
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(s is child for s in parent.body):
            return min([parent.lineno, *(d.lineno for d in parent.decorator_list)])
        if isinstance(parent, ast.Lambda) and parent.body is child:
            return parent.lineno
        child, parent = parent, parents.get(id(parent))
    return None


# Written next to the scratch copy: Python imports ``sitecustomize`` at start-up from the path, so every process the
# tests start (with that PYTHONPATH) records the functions of the file it calls, under the test that runs.
TRACER = """import atexit, json, os, sys, threading

_target, _out, _calls = os.environ["MUTANTS_TRACE_TARGET"], os.environ["MUTANTS_TRACE_DIR"], {}


def _on_call(frame, event, arg):
    if frame.f_code.co_filename == _target:
        _calls.setdefault(os.environ.get("MUTANTS_TRACE_TEST", ""), set()).add(frame.f_code.co_firstlineno)


def _save():
    if _calls:
        with open(os.path.join(_out, f"calls-{os.getpid()}.json"), "w") as out:
            json.dump({test: sorted(lines) for test, lines in _calls.items()}, out)


sys.settrace(_on_call)
threading.settrace(_on_call)
atexit.register(_save)
"""

# A pytest plugin for the traced run: names the running test for the tracer, and saves the tests' order.
TRACE_PLUGIN = """import json, os

import pytest


def _test_id(item):
    return f"{item.path}::{item.nodeid.split('::', 1)[1]}"  # absolute: it runs from any rootdir


def pytest_collection_modifyitems(items):
    with open(os.path.join(os.environ["MUTANTS_TRACE_DIR"], "order.json"), "w") as out:
        json.dump([_test_id(item) for item in items], out)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    os.environ["MUTANTS_TRACE_TEST"] = _test_id(item)
    try:
        return (yield)
    finally:
        os.environ.pop("MUTANTS_TRACE_TEST", None)
"""


def pytest_run(tests: list[str], src_copy: Path, timeout: float, *, first_failure: bool = True,
               extra_path: list[Path] = (), env: dict[str, str] | None = None) -> str:
    """``PASSED``, ``FAILED`` or ``TIMEOUT``: pytest on ``tests`` with ``src_copy`` (then ``extra_path``) first on
    the import path, stopping at the first failure unless ``first_failure`` is false."""
    path = os.pathsep.join([str(src_copy), *map(str, extra_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = dict(os.environ, **(env or {}), PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    if first_failure:
        command.insert(3, "-x")
    if "MUTANTS_TRACE_DIR" in env:
        command[3:3] = ["-p", "_mutants_trace_plugin"]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "TIMEOUT"
    return "PASSED" if done.returncode == 0 else "FAILED"


def run_tests(tests: list[str], src_copy: Path, timeout: float) -> str:
    """``KILLED``, ``SURVIVED`` or ``TIMEOUT`` (counted as caught): ``pytest -x`` on ``tests`` with ``src_copy``
    first on the import path."""
    return {"PASSED": "SURVIVED", "FAILED": "KILLED"}.get(status := pytest_run(tests, src_copy, timeout), status)


def traced_calls(tests: list[str], src_copy: Path, copy_of_target: Path, timeout: float) -> dict[str, set[int]] | str:
    """Run ``tests`` once on the unmutated copy; ``{test id: first lines of the target's functions it called}`` in
    the tests' order, or ``FAILED``/``TIMEOUT``."""
    trace_dir = src_copy.parent / "trace"
    trace_dir.mkdir()
    (trace_dir / "sitecustomize.py").write_text(TRACER)
    (trace_dir / "_mutants_trace_plugin.py").write_text(TRACE_PLUGIN)
    env = {"MUTANTS_TRACE_TARGET": str(copy_of_target), "MUTANTS_TRACE_DIR": str(trace_dir)}
    status = pytest_run(tests, src_copy, timeout, first_failure=False, extra_path=[trace_dir], env=env)
    if status != "PASSED":
        return status
    calls: dict[str, set[int]] = {test: set() for test in json.loads((trace_dir / "order.json").read_text())}
    for saved in trace_dir.glob("calls-*.json"):
        for test, lines in json.loads(saved.read_text()).items():
            calls.setdefault(test, set()).update(lines)
    calls.pop("", None)  # calls at import or collection, outside any test
    return calls


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
    parser.add_argument("--by-line", action="store_true",
                        help="run for each mutant only the tests that call its function (traced once at the start)")
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
        start = time.monotonic()
        if args.by_line:
            calls = traced_calls(args.tests, src_copy, copy_of_target, 3 * args.timeout)
            baseline = calls if isinstance(calls, str) else "PASSED"
        else:
            baseline = pytest_run(args.tests, src_copy, args.timeout, first_failure=False)
        if baseline != "PASSED":
            print(f"error: the tests {'fail' if baseline == 'FAILED' else 'time out'} on the unmutated code "
                  f"(pytest {' '.join(args.tests)}); every mutant would count as caught", file=sys.stderr)
            return 2
        traced = "" if not args.by_line else f", traced which of its functions each of {len(calls)} tests calls"
        print(f"the tests pass on the unmutated code ({time.monotonic() - start:.1f} s{traced})", flush=True)
        for number, mutant in enumerate(mutants, 1):
            copy_of_target.write_text(mutated_source(source, mutant))
            start = time.monotonic()
            tests = args.tests
            if args.by_line and (function := enclosing_function_line(source, mutant)) is not None:
                tests = [test for test, lines in calls.items() if function in lines]
            status = run_tests(tests, src_copy, args.timeout) if tests else "NOT REACHED"
            seconds = time.monotonic() - start
            selected = f", {len(tests)} of {len(calls)} tests" if args.by_line and tests is not args.tests else ""
            print(f"[{number}/{len(mutants)}] {shown}:{mutant.line}: {mutant.description}: {status} "
                  f"({seconds:.1f} s{selected})", flush=True)
            if status in ("SURVIVED", "NOT REACHED"):
                survivors.append((mutant, status))
            if args.jsonl is not None:
                with args.jsonl.open("a") as out:
                    out.write(json.dumps({"file": str(shown), "line": mutant.line, "mutation": mutant.description,
                                          "status": status, "seconds": round(seconds, 1)}) + "\n")
    unreached = sum(status == "NOT REACHED" for _, status in survivors)
    print(f"{len(mutants) - len(survivors)} of {len(mutants)} mutants caught; {len(survivors)} survived"
          + (f" ({unreached} in code no test calls)" if unreached else "")
          + "".join(f"\n  {shown}:{m.line}: {m.description}" + (" (not reached)" if status == "NOT REACHED" else "")
                    for m, status in survivors))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
