"""Connecting to Ray for the Ray backend (:mod:`.ray_runner`), checked before anything is written.

* :func:`check_address` refuses, within a few seconds and in one line, a ``HOST:PORT`` where nothing listens or
  where something listens that is not a Ray head (``ray.init`` would retry there for many minutes).
* :func:`connect_checked` connects and refuses a run size the cluster can never schedule, naming the cluster's
  real address also for ``--address auto``.
* :func:`connect` installs the SIGINT hook of :mod:`.interrupts` (Ctrl-C also stops grids running outside the
  main thread).
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from contrastlab.experiments.interrupts import hook_interrupts
from contrastlab.platform.errors import ConfigError

INSTALL_HINT = "the ray backend needs Ray: pip install 'contrastlab[ray]'"
PROBE_TIMEOUT = 3.0
"""Seconds a ``HOST:PORT`` has to answer as a Ray head (GCS) before ``--address`` is refused."""
_CONNECT_LOCK = threading.Lock()  # `platform tune --parallel N` connects from several threads

def import_ray() -> Any:
    """``ray``, or a one-line :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def check_address(address: str | None) -> None:
    """Refuse an unreachable ``HOST:PORT`` within a few seconds (Ray itself would retry for a long time)."""
    if address in (None, "auto", "local") or address.startswith(("ray://", "anyscale://")):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--address '{address}': expected auto or HOST:PORT, e.g. --address 10.0.0.5:6379")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT):
            pass
    except OSError as exc:
        raise ConfigError(f"--address {address}: no Ray cluster reachable ({exc.strerror or exc})") from None
    if not answers_as_ray_head(address):
        raise ConfigError(
            f"--address {address}: no Ray cluster answers there (a port is open but it is not a Ray head); "
            "start one with `ray start --head`"
        )


def answers_as_ray_head(address: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether the GCS of a Ray head answers at ``address`` within ``timeout`` seconds (one gRPC call).

    ``ray.init`` at an open port that is not a Ray head retries for many minutes, printing warnings. A refused
    call (authentication) still comes from a Ray head; ``True`` too when the probe cannot be made (Ray's
    generated gRPC code moved), leaving the answer to ``ray.init``."""
    try:
        import grpc
        from ray._private.gcs_utils import create_gcs_channel
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:  # pragma: no cover - another Ray layout
        return True
    channel = create_gcs_channel(address)
    try:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        return code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
    finally:
        channel.close()
    return True


def connect(address: str | None) -> Any:
    """Connect to the Ray cluster at ``address`` (``auto``, ``HOST:PORT``), or start a local one when ``None``.
    On the main thread it also installs the SIGINT hook (:func:`hook_interrupts`)."""
    check_address(address)
    ray = import_ray()
    with _CONNECT_LOCK:
        ray = _connect(ray, address)
    hook_interrupts()
    return ray


def _connect(ray: Any, address: str | None) -> Any:
    if ray.is_initialized():
        return ray
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    # ray.init installs its own SIGTERM handler (sys.exit) in the main thread, replacing compare's, which stops the
    # grid and prints the resume hint (exit 143): put compare's back
    main_thread = threading.current_thread() is threading.main_thread()
    on_sigterm = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        # no --address: a private instance. Plain `ray.init()` would join a cluster that `ray start` left on this
        # machine (/tmp/ray/ray_current_cluster), and wait many minutes when that cluster is gone; "local" never does
        ray.init(address="local" if address is None else address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        where = f"--address {address}: cannot connect to Ray" if address else "the local Ray instance: cannot start it"
        raise ConfigError(f"{where} ({first[:200]})") from None
    finally:
        if main_thread and on_sigterm is not None:
            signal.signal(signal.SIGTERM, on_sigterm)
    return ray


def check_resources(resources: dict[str, float], address: str | None, cpus: float, gpus: float,
                    nodes: Sequence[Mapping[str, float]] | None = None) -> None:
    """Refuse a run size the cluster can never schedule (Ray would wait for it forever): ``--gpus-per-run G > 0``
    with fewer than G GPUs in the whole cluster, ``--cpus-per-run C`` above its total CPUs, or (with ``nodes``, each
    alive node's resources) a run that no single node can hold, since a run executes on one node. ``resources`` is
    ``ray.cluster_resources()``; ``address`` the cluster's real address (not ``auto``)."""
    where = f"the Ray cluster at {address}" if address else "the local Ray instance"
    shown = {"CPU": "CPU {:g}", "GPU": "GPU {:g}", "memory": "memory {:.1f} GiB"}
    have = ", ".join(shown[k].format(v / (2**30 if k == "memory" else 1)) for k, v in sorted(resources.items())
                     if k in shown) or "none"
    total_gpus, total_cpus = float(resources.get("GPU", 0.0)), float(resources.get("CPU", 0.0))
    if gpus > 0 and total_gpus < gpus:
        amount = "no GPUs" if total_gpus == 0 else f"only {total_gpus:g} GPU(s)"
        raise ConfigError(f"--gpus-per-run {gpus:g}: {where} has {amount} (resources: {have})")
    if cpus > total_cpus:
        raise ConfigError(f"--cpus-per-run {cpus:g}: {where} has only {total_cpus:g} CPU(s) (resources: {have})")
    if nodes and not any(n.get("GPU", 0.0) >= gpus and n.get("CPU", 0.0) >= cpus for n in nodes):
        listed = "; ".join(", ".join(f"{k} {n[k]:g}" for k in ("CPU", "GPU") if k in n) or "none" for n in nodes[:8])
        raise ConfigError(f"--gpus-per-run {gpus:g} with --cpus-per-run {cpus:g}: no node of {where} has that much "
                          f"at once (its nodes: {listed}{' …' if len(nodes) > 8 else ''}); a run executes on one node")


def connect_checked(address: str | None, cpus: float, gpus: float) -> Any:
    """:func:`connect`, then :func:`check_resources` against the connected cluster."""
    ray = connect(address)
    nodes = [dict(node.get("Resources", {})) for node in ray.nodes() if node.get("Alive", True)]
    check_resources(dict(ray.cluster_resources()), real_address(ray, address), cpus, gpus, nodes=nodes)
    return ray


def real_address(ray: Any, address: str | None) -> str | None:
    """``address``, or for ``auto`` the GCS address of the cluster it found (what error messages name)."""
    if address != "auto":
        return address
    try:
        return str(ray.get_runtime_context().gcs_address) or address
    except Exception:  # pragma: no cover - older Ray without RuntimeContext.gcs_address
        return address
