"""A multilayer perceptron encoder for vector or small image inputs (the nnPU/puNCE MNIST-style model).

It is registered for the Python API (``cl.make_encoder("mlp", ...)``) and custom tasks; the ``pu`` plugin's
image encoders are ``small_cnn`` and the ResNets.

puNCE (Acharya et al.) uses "an MLP with ReLU" on MNIST without stating its size; the defaults follow the
nnPU reference model (Kiryo et al., NeurIPS 2017: fully connected layers of width 300 with batch norm and ReLU),
shortened to 3 layers for CPU runs. Inputs of any shape ``[B, *]`` are flattened to ``[B, in_dim]``.
"""

from __future__ import annotations

from torch import Tensor, nn

from contrastlab.platform.registry import HParam, int_in
from contrastlab.platform.task import MAX_WIDTH


class MLPEncoder(nn.Module):
    """``[B, *] → [B, out_dim]``: ``layers`` linear layers with ``hidden_dim`` units, (batch norm,) ReLU."""

    name = "mlp"
    description = ("MLP encoder (flattens the input), nnPU/puNCE-style; for the Python API and custom tasks "
                   "(the pu plugin uses small_cnn or resnet)")
    hyperparameters = (
        HParam("hidden_dim", 300, "width of every hidden layer", f"[1, {MAX_WIDTH}]",
               "nnPU MNIST model (Kiryo et al. 2017): width 300", int_in(1, MAX_WIDTH)),
        HParam("out_dim", 128, "size of the representation", f"[1, {MAX_WIDTH}]",
               "SimCLR/DCL feature size 128", int_in(1, MAX_WIDTH)),
        HParam("layers", 3, "number of linear layers (1 = a single linear map)", "[1, 32]",
               "nnPU uses 6; 3 for CPU smoke runs", int_in(1, 32)),
        HParam("batch_norm", True, "batch norm after every hidden linear layer", "true | false",
               "nnPU MNIST model", lambda v: isinstance(v, bool)),
    )

    def __init__(self, hidden_dim: int = 300, out_dim: int = 128, layers: int = 3, batch_norm: bool = True,
                 in_dim: int = 784) -> None:
        super().__init__()
        self.in_dim = int(in_dim)
        """Flattened input size (784 for 28×28 images); not a hyperparameter."""
        self.out_dim = int(out_dim)
        """Size of the representation."""
        mods: list[nn.Module] = []
        width = self.in_dim
        for _ in range(int(layers) - 1):
            mods += [nn.Linear(width, hidden_dim, bias=not batch_norm)]
            mods += [nn.BatchNorm1d(hidden_dim)] if batch_norm else []
            mods += [nn.ReLU(inplace=True)]
            width = hidden_dim
        mods.append(nn.Linear(width, self.out_dim))
        self.net = nn.Sequential(*mods)

    @property
    def feature_dim(self) -> int:
        """Alias of :attr:`out_dim`."""
        return self.out_dim

    def forward(self, x: Tensor) -> Tensor:
        """``x``: ``[B, *]`` with ``prod(*) == in_dim`` → ``[B, out_dim]``."""
        return self.net(x.reshape(x.shape[0], -1))


ENCODERS = (MLPEncoder,)
