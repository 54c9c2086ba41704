"""The CLI's shared plumbing: exit codes of one-line errors, OSError messages, which stream a line goes to."""

from __future__ import annotations

import pytest
import typer

from contrastlab.cli.common import fail, os_error_message, print_commands, say


def test_fail_exits_2_by_default_with_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``fail`` without a code is a usage-style error (exit 2), as a plugin that breaks at start-up reports it."""
    with pytest.raises(typer.Exit) as stop:
        fail("bad [value]")
    assert stop.value.exit_code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == "error: bad [value]"


def test_os_error_message_names_the_file_and_the_reason() -> None:
    """``/x/y: Permission denied``, not the exception's class name nor the bare reason without the file."""
    assert os_error_message(PermissionError(13, "Permission denied", "/x/y")) == "/x/y: Permission denied"
    assert os_error_message(OSError(28, "No space left on device")) == "No space left on device"
    assert os_error_message(OSError("cannot do it")) == "cannot do it"
    assert os_error_message(OSError()) == "OSError"


def test_say_and_print_commands_write_stdout_unless_asked_for_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """Results (a run directory, commands to copy) go to stdout, so ``| tail -1`` sees them; notes go to stderr."""
    say("on stdout")
    print_commands("copy:", "platform eval x")
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["on stdout", "copy:", "  platform eval x"] and captured.err == ""
    say("on stderr", stderr=True)
    print_commands("then:", "platform train --resume x", stderr=True)
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["on stderr", "then:", "  platform train --resume x"] and captured.out == ""


def test_a_usage_error_without_a_command_context_keeps_its_own_punctuation(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without a context there is no ``--help`` to point at: the message is printed as it is, a question included."""
    import click

    from contrastlab.cli.common import print_usage_error

    print_usage_error(click.UsageError("No such option: --x."))
    print_usage_error(click.UsageError("No such option: --sed. Did you mean --seed?"))
    assert capsys.readouterr().err.splitlines() == [
        "error: No such option: --x", "error: No such option: --sed. Did you mean --seed?"]


def test_reflow_command_help_leaves_an_explicit_help_alone() -> None:
    """Only a command without its own ``help=`` gets its docstring reflowed; a plugin's explicit help stays."""
    from contrastlab.cli.common import reflow_command_help

    app = typer.Typer()

    @app.command("mine", help="The plugin's own words.")
    def mine() -> None:
        """A docstring that
        is not the help."""

    @app.command("plain")
    def plain() -> None:
        """Wrapped at the
        source."""

    reflow_command_help(app)
    helps = {info.name: info.help for info in app.registered_commands}
    assert helps == {"mine": "The plugin's own words.", "plain": "Wrapped at the source."}


def test_a_paragraph_with_any_indented_line_keeps_its_line_breaks() -> None:
    """``Examples:`` followed directly by indented commands is an example block, not prose to join into one line."""
    from contrastlab.cli.common import reflow_help

    text = reflow_help("Do a thing\n    in one line.\n\n    Examples:\n      platform a\n      platform b\n    ")
    assert text == "Do a thing in one line.\n\n\n\nExamples:\n  platform a\n  platform b"


def test_a_closed_pipe_is_a_quiet_success_and_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """``platform config ... | head``: the reader leaving is no failure (exit 0); Ctrl-C is 130; an OSError no
    earlier check caught is one line and exit 1."""
    import io
    import sys

    from contrastlab.cli.common import user_errors

    def raising(exc: BaseException) -> None:
        raise exc

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with pytest.raises(SystemExit) as done:
        user_errors(raising)(BrokenPipeError())
    assert done.value.code == 0
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # the first one closed it
    with pytest.raises(SystemExit) as done:
        user_errors(raising)(KeyboardInterrupt())
    assert done.value.code == 130
    with pytest.raises(typer.Exit) as stop:
        user_errors(raising)(PermissionError(13, "Permission denied", "/x"))
    assert stop.value.exit_code == 1


def test_a_one_paragraph_help() -> None:
    from contrastlab.cli.common import reflow_help

    assert reflow_help("One paragraph\n    on two lines.") == "One paragraph on two lines."
