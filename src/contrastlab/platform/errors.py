"""User-facing errors. The CLI prints any :class:`ContrastlabError` as one line and exits non-zero."""

from __future__ import annotations


class ContrastlabError(Exception):
    """Base class of every error caused by user input (bad names, values, files, devices, data)."""

    exit_code: int = 2


class UnknownNameError(ContrastlabError, KeyError, ValueError):
    """An unknown plugin, loss, sampler, encoder, preset or config key."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ConfigError(ContrastlabError, ValueError):
    """A config value of the wrong type or out of range, or a malformed config file."""


class IncompatibleError(ContrastlabError, ValueError):
    """A combination that cannot run, e.g. a label-aware loss on a plugin whose batches carry no labels."""


class DataMissingError(ContrastlabError, FileNotFoundError):
    """A dataset or archive that is missing or corrupt; the message says how to get it."""


class DeviceError(ContrastlabError, RuntimeError):
    """A requested device (e.g. ``cuda:1``) that is not available."""


class RunDirError(ContrastlabError, FileNotFoundError):
    """A directory given as a run that is not one (no ``config.yaml`` / ``run.json``)."""


class StorageError(ContrastlabError, OSError):
    """A file or directory that cannot be written: a read-only place, a path through a file, a full disk."""


class CheckpointError(ContrastlabError, OSError):
    """A checkpoint file that exists but cannot be read (cut short, emptied or overwritten); the message names it
    and the checkpoint that would be used once it is moved aside."""


class PluginError(ContrastlabError, TypeError):
    """A task plugin that broke its contract at run time (e.g. ``train`` returned a metric that is not a number):
    a bug for the plugin's author, said in one line that names the plugin; exit code 1, as for a crash."""

    exit_code = 1
