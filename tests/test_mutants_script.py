"""scripts/mutants.py: the mutation tester finds the changes a test suite misses, and never touches the checkout."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "mutants.py"

MODULE = textwrap.dedent('''
    """A module docstring: never mutated."""


    def add(a, b):
        """Sum of a and b."""
        return a + b


    def clipped(x, low=0):
        if x < low:
            raise ValueError(f"x below {low + 1}")
        return x
''')


@pytest.fixture(scope="module")
def mutants():
    spec = importlib.util.spec_from_file_location("mutants_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def make_project(root: Path, test_body: str) -> Path:
    """A tiny project: src/toy/calc.py (MODULE) and tests/test_calc.py (``test_body``)."""
    (root / "src" / "toy").mkdir(parents=True)
    (root / "src" / "toy" / "__init__.py").write_text("")
    (root / "src" / "toy" / "calc.py").write_text(MODULE)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text("from toy.calc import add, clipped\n\n" + textwrap.dedent(test_body))
    return root / "src" / "toy" / "calc.py"


def run_script(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_every_mutant_kind_applies_and_changes_the_code(mutants):
    source = MODULE
    found = mutants.find_mutants(source)
    descriptions = {(m.line, m.description) for m in found}
    assert (7, "Add -> Sub") in descriptions
    assert (11, "Lt -> LtE") in descriptions
    assert (10, "0 -> 1") in descriptions  # the default of low
    assert (11, "if: condition negated") in descriptions
    for mutant in found:
        changed = mutants.mutated_source(source, mutant)
        assert ast.dump(ast.parse(changed)) != ast.dump(ast.parse(source)), mutant


def test_docstrings_messages_and_annotations_are_left_alone(mutants):
    source = 'def f(x: "int" = 2) -> int:\n    """Doc 3 + 4."""\n    raise ValueError(f"{x + 1} > 0")\n'
    lines = {m.line for m in mutants.find_mutants(source)}
    assert lines == {1}  # only the default value 2; nothing inside the docstring or the raise


@pytest.mark.parametrize(("source", "expected"), [
    ("y = -x\n", "y = x"),
    ("y = a if c else b\n", "y = b if c else a"),
    ("y = t.sum(1)\n", "y = t.mean(1)"),
    ("y = max(a, b)\n", "y = min(a, b)"),
    ("y = a and b\n", "y = a or b"),
    ("y = x ** 2\n", "y = x * 2"),
])
def test_each_mutation_is_the_change_it_names(mutants, source, expected):
    changed = [mutants.mutated_source(source, m).strip() for m in mutants.find_mutants(source)]
    assert expected in changed


def test_a_survivor_is_reported_and_exits_1_without_touching_the_checkout(tmp_path):
    target = make_project(tmp_path, """
        def test_add():
            assert add(2, 3) == 5
    """)
    done = run_script(tmp_path, "src/toy/calc.py", "--tests", "tests")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "src/toy/calc.py:7: Add -> Sub: KILLED" in done.stdout
    assert "src/toy/calc.py:11: Lt -> LtE: SURVIVED" in done.stdout  # clipped() is never tested
    assert "1 of 4 mutants caught; 3 survived" in done.stdout
    assert target.read_text() == MODULE


def test_a_complete_suite_catches_every_mutant_and_exits_0(tmp_path):
    make_project(tmp_path, """
        import pytest

        def test_add():
            assert add(2, 3) == 5

        def test_clipped():
            assert clipped(0) == 0
            assert clipped(5, low=5) == 5
            with pytest.raises(ValueError):
                clipped(-1)
            with pytest.raises(ValueError):
                clipped(4, 5)
    """)
    done = run_script(tmp_path, "src/toy/calc.py", "--tests", "tests", "--lines", "6-12")
    assert done.returncode == 0, done.stdout
    assert "4 of 4 mutants caught; 0 survived" in done.stdout


def test_list_mode_and_bad_arguments(tmp_path):
    make_project(tmp_path, "def test_nothing():\n    pass\n")
    listed = run_script(tmp_path, "src/toy/calc.py", "--list")
    assert listed.returncode == 0 and listed.stdout.strip().endswith("mutants")
    outside = tmp_path / "other.py"
    outside.write_text("x = 1\n")
    refused = run_script(tmp_path, "other.py")
    assert refused.returncode == 2 and "not a Python file under" in refused.stderr
    bad_range = run_script(tmp_path, "src/toy/calc.py", "--lines", "ten")
    assert bad_range.returncode == 2 and "FIRST-LAST" in bad_range.stderr


def test_sigterm_stops_the_run_and_deletes_its_scratch_copy(tmp_path):
    """``kill PID`` used to leave the scratch copy of src/ in the temp folder (one per killed run)."""
    project = tmp_path / "project"
    project.mkdir()
    make_project(project, """
        import time

        def test_add():
            time.sleep(60)
    """)
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "src/toy/calc.py", "--tests", "tests"], cwd=project,
                            env={**os.environ, "TMPDIR": str(scratch_root)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(scratch_root.glob("contrastlab-mutants-*/src/toy/calc.py")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # the first mutant's pytest is running (its test sleeps for a minute)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert list(scratch_root.iterdir()) == []


def test_a_run_stops_when_the_tests_fail_on_the_unmutated_code(tmp_path):
    """A failing test counted every mutant as caught: a broken selection looked like a perfect score."""
    make_project(tmp_path, """
        def test_add():
            assert add(2, 2) == 5
    """)
    for extra in ([], ["--by-line"]):
        done = run_script(tmp_path, "src/toy/calc.py", "--tests", "tests", *extra)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "error: the tests fail on the unmutated code (pytest tests)" in done.stderr
        assert "KILLED" not in done.stdout and "mutants caught" not in done.stdout


SCOPED = '''"""Doc."""
import functools

LIMIT = 10


@functools.lru_cache
def decorated(x, low=1):
    def inner(y):
        return y + low
    return inner(x) * 2


class Box:
    size = 3

    def area(self):
        return sorted([4, 1], key=lambda v: -v)


run = lambda z: z + 1
'''


@pytest.mark.parametrize(("line", "description", "expected"), [
    (4, "10 -> 11", None),  # module level: runs at import
    (8, "1 -> 2", None),  # a default argument is evaluated where the function is defined
    (11, "Mult -> Div", 7),  # co_firstlineno of a decorated function: its decorator's line
    (10, "Add -> Sub", 9),  # the nested function
    (15, "3 -> 4", None),  # class body: runs at import
    (18, "4 -> 5", 17),  # the method, not the lambda beside it
    (18, "drop USub", 18),  # inside the lambda's body
    (21, "Add -> Sub", 21),
])
def test_each_mutant_is_placed_in_the_function_that_runs_it(mutants, line, description, expected):
    (mutant,) = [m for m in mutants.find_mutants(SCOPED) if (m.line, m.description) == (line, description)]
    assert mutants.enclosing_function_line(SCOPED, mutant) == expected


def test_by_line_runs_each_mutant_only_with_the_tests_that_call_its_function(tmp_path):
    """``--by-line``: a function called only in a child process is still found; a function no test calls is
    NOT REACHED without a run; a module-level constant runs every test."""
    make_project(tmp_path, "")
    (tmp_path / "src" / "toy" / "calc.py").write_text(textwrap.dedent('''
        LIMIT = 10


        def add(a, b):
            return a + b


        def clipped(x):
            if x > LIMIT:
                return LIMIT
            return x


        def twice(x):
            return x * 2


        def unused(x):
            return x - 1
    '''))
    log = tmp_path / "add-runs.log"
    (tmp_path / "tests" / "test_calc.py").write_text(textwrap.dedent(f'''
        import subprocess
        import sys

        from toy.calc import add, clipped


        def test_add():
            with open({str(log)!r}, "a") as out:
                out.write("add\\n")
            assert add(2, 3) == 5


        def test_clipped():
            assert clipped(11) == 10 and clipped(3) == 3 and clipped(10) == 10


        def test_twice_in_a_child_process():
            subprocess.run([sys.executable, "-c", "from toy.calc import twice; assert twice(3) == 6"], check=True)
    '''))
    done = run_script(tmp_path, "src/toy/calc.py", "--tests", "tests", "--by-line")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "traced which of its functions each of 3 tests calls" in done.stdout
    for line, description, status in [(2, "10 -> 11", "KILLED"), (6, "Add -> Sub", "KILLED"),
                                      (10, "Gt -> GtE", "SURVIVED"),  # clipped(10) is 10 either way
                                      (16, "Mult -> Div", "KILLED"), (16, "2 -> 3", "KILLED"),
                                      (20, "Sub -> Add", "NOT REACHED"), (20, "1 -> 2", "NOT REACHED")]:
        assert f"src/toy/calc.py:{line}: {description}: {status}" in done.stdout, done.stdout
    assert "survived (2 in code no test calls)" in done.stdout
    assert re.search(r"calc.py:6: Add -> Sub: KILLED \(\d+\.\d s, 1 of 3 tests\)", done.stdout), done.stdout
    assert re.search(r"calc.py:2: 10 -> 11: KILLED \(\d+\.\d s\)", done.stdout), done.stdout  # all of them
    assert "src/toy/calc.py:20: Sub -> Add (not reached)" in done.stdout
    # test_add ran in the traced run and for the two mutants whose code it reaches (LIMIT, add), not for the others
    assert log.read_text().splitlines() == ["add"] * 3
