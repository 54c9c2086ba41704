"""Built-in encoders, registered through the ``register_encoders`` hook exactly like a plugin package.

Each module lists its encoder classes in ``ENCODERS``; every class has ``name``, ``description`` and
``hyperparameters`` class attributes and maps inputs to embeddings.
"""

from __future__ import annotations

import importlib

from contrastlab.platform.hookspecs import hookimpl

_MODULES = ("gin", "mlp", "pixel_conv", "resnet", "small_cnn")


@hookimpl
def register_encoders(register) -> None:
    """Register the built-in encoders."""
    for module in _MODULES:
        for encoder in importlib.import_module(f"contrastlab.encoders.{module}").ENCODERS:
            register(encoder)
