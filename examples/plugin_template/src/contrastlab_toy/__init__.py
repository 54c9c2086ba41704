"""contrastlab-toy: an example third-party contrastlab plugin (a loss and a tiny task plugin)."""

__version__ = "0.1.0"
