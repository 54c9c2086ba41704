"""The TensorBoard HPARAMS session of a run: the same columns for every run, written into the run's own events.

TensorBoard builds the HPARAMS table from the runs under its logdir. If any run carries an *experiment* summary it
arbitrarily takes the first one as the definition of the whole table, so runs of another loss (other
hyperparameters) or another plugin (other metrics) lose their columns. ``SummaryWriter.add_hparams`` writes such
an experiment summary, into a sub-directory, next to a ``hparam/*`` copy of every final metric.

Here each run writes only the session start (its hyperparameter values) and the session end (its status) with its
own writer, and always the same columns (:func:`hparam_columns`): ``plugin``, ``loss``, ``sampler``, ``encoder``,
``seed``, ``preset`` and ``loss.<name>`` for every hyperparameter of every registered loss, ``-`` where it does not
apply. TensorBoard then takes the union of the runs' columns, and the metric columns from the scalars the runs
logged (their last values).
"""

from __future__ import annotations

from typing import Any

NOT_APPLICABLE = "-"
"""Value of a ``loss.*`` column whose hyperparameter the run's loss does not have."""


def _scalar(value: Any) -> int | float | str | bool:
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def hparam_columns(plugin: str, config: Any, preset: str | None) -> dict[str, Any]:
    """``{column: value}`` for a run of ``plugin`` with ``config`` (a :class:`~contrastlab.platform.task.TaskConfig`).

    The ``loss.*`` columns are the union over every registered loss, so that runs of different losses (and plugins)
    in one TensorBoard logdir share the same table.
    """
    from contrastlab.platform.plugins import registry

    names: set[str] = set()
    for component in registry("loss"):
        names.update(hp.name for hp in component.hyperparameters)
    own = config.loss.hparams()
    names.update(own)
    columns: dict[str, Any] = {
        "plugin": plugin,
        "loss": config.loss.name,
        "sampler": config.sampler.name,
        "encoder": config.encoder.name,
        "seed": int(config.seed),
        "preset": preset or NOT_APPLICABLE,
    }
    for name in sorted(names):
        columns[f"loss.{name}"] = _scalar(own[name]) if name in own and own[name] is not None else NOT_APPLICABLE
    return columns


def write_session(writer: Any, columns: dict[str, Any]) -> None:
    """Write the HPARAMS session start (``columns``) and its successful end with ``writer`` (a ``SummaryWriter``).

    No experiment summary and no ``hparam/*`` scalars (see the module docstring).
    """
    from torch.utils.tensorboard.summary import hparams

    _experiment, start, end = hparams(columns, {})
    writer.file_writer.add_summary(start)
    writer.file_writer.add_summary(end)
