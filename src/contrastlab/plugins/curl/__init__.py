"""The `curl` task plugin: CURL-style pixel SAC on the DeepMind Control Suite with any registered loss.

Modules: ``config`` (typed config, presets), ``augment`` (batched crops on the device), ``buffer`` (frame-deduplicated
replay buffer), ``policy`` (SB3 SAC policy in CURL's encoder arrangement), ``agent`` (the SAC subclass with the
contrastive update), ``evaluate`` (episodes, videos) and ``task`` (the :class:`CurlTask` plugin).
"""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_plugins(register) -> None:
    """Register the `curl` task plugin."""
    from contrastlab.plugins.curl.task import CurlTask

    register(CurlTask)
