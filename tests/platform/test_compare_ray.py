"""``platform compare --backend ray`` on a real local Ray cluster (one head, 2 CPUs, started by this module).

One 2 × 2 recsys grid (two losses × two seeds, tiny synthetic data): a Ray worker is SIGKILLed mid-run, the run is
retried and the table is complete; a second invocation skips every run. A one-run grid with ``--no-shared-fs``
checks that run directories are shipped back to the driver. Ctrl-C stops compare and tune and their Ray tasks;
``--address`` errors are one line within seconds. Each grid run is a real ``platform train``.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

SRC = str(Path(__file__).resolve().parents[2] / "src")
TINY = [
    "--preset", "smoke", "--set", "train.epochs=2", "--set", "eval.every_epochs=1",
    "--set", "data.synthetic.users=100", "--set", "data.synthetic.items=100",
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    path = os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes Ray use 127.0.0.1 for every node address (Ray 2.60 otherwise
    # advertises the machine's interface address despite --node-ip-address): the test cluster stays on loopback.
    # RAY_AUTH_MODE=disabled: a private `ray.init()` instance (compare/tune without --address) saves
    # ~/.ray/auth_token, and with that file present and the mode unset, the drivers' connections to this `ray start`
    # cluster failed with InvalidAuthToken (docs/compare.md); the mode set on both sides keeps the tests independent
    # of what earlier Ray use left on the machine
    return dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0",
                RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled")


def start_head(log: Path) -> tuple[subprocess.Popen, int] | None:
    """``ray start --head --block`` on 127.0.0.1 with 2 CPUs on two ports that were free a moment ago; ``None`` if
    it stopped before it was up or in the seconds after (another process took a port in between).

    The head prints its ``--block`` line before its process monitor has looked at the subprocesses once: in a CI
    check the client server's port had been taken in between, the monitor stopped the whole head a second after
    that line, and every test of the module then found no cluster. So the head must still run 3 s later.
    """
    port, client = free_port(), free_port()
    ray_cli = Path(sys.executable).parent / "ray"
    cmd = [
        str(ray_cli), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
        f"--ray-client-server-port={client}", "--num-cpus=2", "--num-gpus=0", "--disable-usage-stats",
        "--include-dashboard=false",
    ]  # fmt: skip
    with open(log, "w") as fh:
        head = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env(), start_new_session=True)
    deadline = time.monotonic() + 90
    up_since = None
    while up_since is None or time.monotonic() < up_since + 3:
        if up_since is None and "--block" in log.read_text():
            up_since = time.monotonic()
        if time.monotonic() > deadline:
            pytest.fail(f"ray head did not start:\n{log.read_text()[-2000:]}")
        if head.poll() is not None or "exited unexpectedly" in log.read_text():
            with contextlib.suppress(ProcessLookupError):  # whatever it had started (its own session) goes too
                os.killpg(head.pid, signal.SIGKILL)
            head.wait()
            return None
        time.sleep(0.5)
    return head, port


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Ray head on loopback (:func:`start_head`, up to three tries); SIGTERM to it stops the whole cluster."""
    log = tmp_path_factory.mktemp("ray") / "head.log"
    started = None
    for _ in range(3):
        started = start_head(log)
        if started is not None:
            break
    if started is None:
        pytest.fail(f"ray head did not start in three tries:\n{log.read_text()[-2000:]}")
    head, port = started
    assert "Local node IP: 127.0.0.1" in log.read_text(), "the test cluster must stay on loopback"
    yield f"127.0.0.1:{port}"
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)


def restore_sigint() -> None:
    """``preexec_fn``: SIGINT at its default, so that the child's Python raises KeyboardInterrupt on it (a shell
    without job control starts background jobs, and so maybe this pytest, with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def train_pids(out: Path) -> list[int]:
    """Processes whose command line names ``out`` and ``train`` (the runs' ``platform train`` processes)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if b"train" in args and any(str(out).encode() in a for a in args):
            pids.append(int(entry.name))
    return pids


def compare(out: Path, address: str, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "contrastlab.cli", "compare", "--plugin", "recsys", *TINY, "--out", str(out)]
    cmd += ["--backend", "ray", "--address", address, *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env())


def statuses(out: Path) -> dict[str, str]:
    with open(out / "results.csv") as fh:
        return {f"{r['loss']}-s{r['seed']}": r["status"] for r in csv.DictReader(fh)}


@pytest.mark.slow
def test_ray_grid_survives_a_killed_worker_and_skips_finished_runs(cluster, tmp_path):
    out = tmp_path / "grid"
    proc = compare(out, cluster, "--loss", "infonce,dcl", "--seeds", "2", "--max-retries", "2")
    logs = out / "logs" / "recsys"
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        for log in sorted(logs.glob("*/*.log")) if logs.is_dir() else []:
            m = re.search(r"# ray task on \S+ pid (\d+)", log.read_text())
            run_dir = out / "runs" / "recsys" / log.parent.name / log.stem
            # mid-run: training has logged and not finished (a Ray worker runs tasks one after another, so the pid
            # of a finished run's log may already be running another task)
            if m and (run_dir / "metrics.jsonl").is_file() and not (run_dir / "summary.json").is_file():
                os.kill(int(m.group(1)), signal.SIGKILL)
                killed = log
                break
        time.sleep(0.2)
    text, _ = proc.communicate(timeout=240)
    assert killed is not None, text
    assert proc.returncode == 0, text
    assert killed.read_text().count("# ray task on") == 2, killed.read_text()  # the retry
    assert set(statuses(out).values()) == {"completed"} and len(statuses(out)) == 4
    assert (out / "curves.png").is_file() and (out / "tensorboard").is_dir()

    before = {p: p.read_text() for p in logs.glob("*/*.log")}
    again = compare(out, cluster, "--loss", "infonce,dcl", "--seeds", "2")
    text, _ = again.communicate(timeout=120)
    assert again.returncode == 0, text
    assert "4 finished (skipped)" in text and "0 runs submitted" in text
    assert {p: p.read_text() for p in logs.glob("*/*.log")} == before  # nothing ran


def test_ray_ships_run_directories_back_without_a_shared_filesystem(cluster, tmp_path):
    out = tmp_path / "ship"
    proc = compare(out, cluster, "--loss", "dcl", "--no-shared-fs")
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, text
    (run_dir,) = (out / "runs" / "recsys" / "dcl").iterdir()
    assert {"config.yaml", "summary.json", "metrics.jsonl"} <= {p.name for p in run_dir.iterdir()}
    (log,) = (out / "logs" / "recsys" / "dcl").glob("*.log")
    assert "contrastlab-ray-" in log.read_text()  # it trained in the worker's scratch directory
    assert statuses(out) == {"dcl-s1": "completed"}


def test_ray_run_that_keeps_failing_is_retried_then_marked_failed(cluster, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA (the failing run asks for --device cuda)")
    out = tmp_path / "fail"
    proc = compare(out, cluster, "--loss", "dcl", "--set", "device=cuda", "--max-retries", "1")
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, text
    (log,) = (out / "logs" / "recsys" / "dcl").glob("*.log")
    assert log.read_text().count("# ray task on") == 2  # the first attempt and one retry
    assert statuses(out) == {"dcl-s1": "failed"}
    assert "CUDA is not available" in (out / "results.md").read_text()


@pytest.mark.slow
def test_tune_runs_its_trials_on_the_ray_backend(cluster: str, tmp_path: Path) -> None:
    """``platform tune --backend ray``: two trials, two at a time, each a Ray task; the study ends complete."""
    import optuna

    out = tmp_path / "tune"
    cmd = [sys.executable, "-m", "contrastlab.cli", "tune", "--plugin", "recsys", "--loss", "dcl", *TINY,
           "--search", "loss.tau_plus=uniform(0.01,0.3)", "--trials", "2", "--parallel", "2",
           "--backend", "ray", "--address", cluster, "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state.name for t in study.trials].count("COMPLETE") == 2
    assert (out / "best.yaml").is_file() and (out / "trials.md").is_file()


@pytest.mark.parametrize("command", ["compare", "tune"])
def test_gpus_per_run_on_a_cluster_without_gpus_is_one_line_before_anything_runs(cluster, tmp_path, command):
    """The test cluster has 2 CPUs and no GPU: Ray would keep a GPU task pending forever, so it is refused."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "contrastlab.cli", command, "--plugin", "recsys", "--loss", "dcl", *TINY]
    cmd += ["--search", "loss.tau_plus=uniform(0.01,0.3)"] if command == "tune" else []
    cmd += ["--out", str(out), "--backend", "ray", "--address", cluster, "--gpus-per-run", "0.25"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=120)
    text = (done.stdout + done.stderr).strip()
    assert done.returncode == 2, text
    assert f"--gpus-per-run 0.25: the Ray cluster at {cluster} has no GPUs (resources: CPU 2" in text, text
    assert len(text.splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("command", ["compare", "tune"])
def test_address_where_no_ray_head_answers_is_one_line_within_seconds(tmp_path, command):
    """An open port that is not a Ray head: ``ray.init`` would retry there for many minutes. The time is counted
    beyond that of the same command refused at once (a closed port): starting Python and importing the CLI took
    10-15 s of it on a loaded 2-core machine."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "contrastlab.cli", command, "--plugin", "recsys", "--loss", "dcl", *TINY]
    cmd += ["--search", "loss.tau_plus=uniform(0.01,0.3)"] if command == "tune" else []
    t0 = time.monotonic()
    refused = subprocess.run([*cmd, "--out", str(out), "--backend", "ray", "--address", f"127.0.0.1:{free_port()}"],
                             capture_output=True, text=True, env=env(), timeout=60)  # fmt: skip
    start_up = time.monotonic() - t0
    assert refused.returncode == 2 and "no Ray cluster reachable" in refused.stdout + refused.stderr
    with socket.socket() as dummy:
        dummy.bind(("127.0.0.1", 0))
        dummy.listen()
        address = f"127.0.0.1:{dummy.getsockname()[1]}"
        t0 = time.monotonic()
        done = subprocess.run([*cmd, "--out", str(out), "--backend", "ray", "--address", address],
                              capture_output=True, text=True, env=env(), timeout=60)  # fmt: skip
        seconds = time.monotonic() - t0
    text = (done.stdout + done.stderr).strip()
    assert done.returncode == 2, text
    assert text == (
        f"error: --address {address}: no Ray cluster answers there (a port is open but it is not a Ray head); "
        "start one with `ray start --head`"
    ), text
    assert seconds - start_up < 15, (seconds, start_up)  # the probe's 3 s, not Ray's minutes of retries
    assert not out.exists()


def test_address_auto_errors_name_the_cluster_it_found(cluster, tmp_path):
    """``--address auto`` (here found through RAY_ADDRESS): the message names the real address, not "auto"."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "contrastlab.cli", "compare", "--plugin", "recsys", "--loss", "dcl", *TINY]
    cmd += ["--out", str(out), "--backend", "ray", "--address", "auto", "--gpus-per-run", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**env(), "RAY_ADDRESS": cluster}, timeout=120)
    text = (done.stdout + done.stderr).strip()
    assert done.returncode == 2, text
    assert f"--gpus-per-run 1: the Ray cluster at {cluster} has no GPUs (resources: CPU 2, memory " in text, text
    assert "GiB)" in text and len(text.splitlines()) == 1 and not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["compare", "tune"])
def test_ctrl_c_cancels_the_ray_tasks_and_a_rerun_resumes(cluster, tmp_path, command):
    """SIGINT to the driver once a run trains: exit 130 with one line, and no ``platform train`` of this --out is
    left (Ray workers are outside the terminal's process group; their tasks must be cancelled). tune runs two
    trials at a time in threads, which never receive SIGINT themselves."""
    out = tmp_path / command
    long = [a.replace("train.epochs=2", "train.epochs=400") for a in TINY]  # ~20 s a run: still training then
    cmd = [sys.executable, "-m", "contrastlab.cli", command, "--plugin", "recsys", *long, "--out", str(out)]
    cmd += ["--backend", "ray", "--address", cluster]
    if command == "compare":
        cmd += ["--loss", "infonce,dcl"]
    else:
        cmd += ["--loss", "dcl", "--search", "loss.tau_plus=uniform(0.01,0.3)", "--trials", "2", "--parallel", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(),
                            preexec_fn=restore_sigint)  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(out.glob("**/metrics.jsonl")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None and train_pids(out), f"no run was training: {proc.poll() and proc.stdout.read()}"
    proc.send_signal(signal.SIGINT)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, text
    lines = text.strip().splitlines()
    assert sum("interrupted" in ln for ln in lines) == 1 and lines[-1].startswith("interrupted; run the same"), text
    assert "Traceback" not in text and "done " not in text, text  # no progress after the Ctrl-C
    time.sleep(3)
    assert train_pids(out) == [], "a platform train process outlived the Ctrl-C"
    if command == "compare":
        again = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, env=env(), timeout=120)
        assert again.returncode == 0, again.stdout + again.stderr
        assert re.search(r": 0 finished \(skipped\), [12] to resume", again.stderr), again.stderr
    else:
        import optuna

        study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
        states = sorted(t.state.name for t in study.trials)
        assert states == ["FAIL", "FAIL", "WAITING", "WAITING"], states  # both trials queued again
        assert "ray: " not in text  # tune does not announce each trial's one-run grid


def test_run_counts_are_pluralised() -> None:
    from contrastlab.experiments.grid import count

    assert [count(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]


def test_a_retry_of_a_run_that_already_completed_reports_it_without_training(tmp_path: Path) -> None:
    """The worker can die between the run's end and the task's return; Ray's retry must not start the run again
    (platform train refuses a completed run directory, so the retry failed and the grid reported a failure)."""
    import json

    from contrastlab.experiments.grid import GridPoint
    from contrastlab.experiments.ray_runner import MARKER, train_point
    from contrastlab.platform.rundir import RunDir

    out = tmp_path / "grid"
    point = GridPoint("recsys", "dcl", 1, "smoke")
    layout = RunDir(point.run_dir(out))
    layout.path.mkdir(parents=True)
    layout.config_yaml.write_text("seed: 1\n")
    layout.run_json.write_text(json.dumps({"plugin": "recsys", "status": "completed"}))
    layout.summary_json.write_text(json.dumps({"metrics": {"eval/ndcg@20": 0.2}}))
    (out / MARKER).write_text("token")
    result = train_point(point, str(out), "token", None, False, True, {})
    assert result["seconds"] < 5 and "nothing to train" in point.log_path(out).read_text()


def test_without_address_a_private_instance_is_started_never_a_leftover_cluster() -> None:
    """docs: no ``--address`` means "a private Ray instance on this machine only". Plain ``ray.init()`` joins the
    cluster that ``ray start`` recorded in /tmp/ray/ray_current_cluster, and when that cluster is gone (a head
    killed without ``ray stop``) it retried for 13 minutes, then said ``--address None: cannot connect``.
    ``address="local"`` always starts a new instance."""
    from contrastlab.experiments import ray_cluster
    from contrastlab.platform.errors import ConfigError

    class FakeRay:
        def __init__(self, fail: bool = False) -> None:
            self.calls: list[dict] = []
            self.fail = fail

        def is_initialized(self) -> bool:
            return False

        def init(self, **kwargs: object) -> None:
            self.calls.append(kwargs)
            if self.fail:
                raise ConnectionError("Failed to start the GCS\nmore")

    fake = FakeRay()
    ray_cluster._connect(fake, None)
    ray_cluster._connect(fake, "auto")
    assert [c["address"] for c in fake.calls] == ["local", "auto"]
    with pytest.raises(ConfigError, match=r"^the local Ray instance: cannot start it \(Failed to start the GCS\)$"):
        ray_cluster._connect(FakeRay(fail=True), None)
    with pytest.raises(ConfigError, match=r"^--address 10.0.0.5:6379: cannot connect to Ray \(Failed"):
        ray_cluster._connect(FakeRay(fail=True), "10.0.0.5:6379")


def test_connecting_keeps_compares_sigterm_handler() -> None:
    """``ray.init`` installs its own SIGTERM handler (``sys.exit(15)``): compare's, which stops the grid with the
    resume hint and exit 143, must survive connecting."""
    from contrastlab.experiments import ray_cluster

    class SigtermGrabbingRay:
        def is_initialized(self) -> bool:
            return False

        def init(self, **kwargs: object) -> None:
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(15))  # what ray.init does in the main thread

    def compares(*_: object) -> None:  # stands for compare's handler
        raise AssertionError("not called here")

    before = signal.signal(signal.SIGTERM, compares)
    try:
        ray_cluster._connect(SigtermGrabbingRay(), None)
        assert signal.getsignal(signal.SIGTERM) is compares
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_killed_worker_leaves_no_scratch_run_directory_in_the_temp_dir(tmp_path: Path) -> None:
    """Without a shared file system a task trains in a ``contrastlab-ray-*`` scratch directory; Ctrl-C's
    ``ray.cancel(force=True)`` SIGKILLs the worker, so its ``finally`` never removed it: every interrupted compare
    left its runs (checkpoints included) in the node's temp dir. Here the worker is a plain process running
    :func:`train_point` with a stand-in training command, killed once it trains."""
    temp, out = tmp_path / "temp", tmp_path / "out"
    temp.mkdir()
    script = (
        "import sys\nfrom contrastlab.experiments import runner, ray_runner\n"
        "from contrastlab.experiments.grid import GridPoint\n"
        "runner.train_command = lambda *a: [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        "ray_runner.train_point(GridPoint('recsys', 'dcl', 1, 'smoke'), sys.argv[1], 't', None, False, False, {})\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", script, str(out)], env=dict(env(), TMPDIR=str(temp)))
    deadline = time.monotonic() + 60
    while not list(temp.glob("contrastlab-ray-*/logs/**/*.log")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # its platform train stand-in started
    worker.kill()
    worker.wait()
    deadline = time.monotonic() + 15
    while list(temp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sorted(p.name for p in temp.iterdir()) == []


def test_start_head_does_not_take_a_head_that_dies_after_its_block_line_for_up(tmp_path, monkeypatch) -> None:
    """The cluster fixture's own check (a CI check lost all 9 cluster tests to a head stopped 1 s after it said it
    was up, its client server's port taken): a head whose client-server port is in use is not returned."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([free_port(), taken.getsockname()[1]])
        monkeypatch.setattr(sys.modules[__name__], "free_port", lambda: next(ports))
        assert start_head(tmp_path / "head.log") is None
