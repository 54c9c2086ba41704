"""``python -m contrastlab.cli``: the ``platform`` command."""

from contrastlab.cli.app import main

main()
