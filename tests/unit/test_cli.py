"""``parka --help``: every command on a line of its own with what it does, and no layer imported."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from parka import cli


def test_help_gives_every_command_a_line_saying_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for name, command in cli.COMMANDS.items():
        matching = [line for line in lines if line.split()[:1] == [name]]
        assert len(matching) == 1, f"{name!r} has no line of its own in parka --help:\n{out}"
        description = matching[0].split(None, 1)[1] if len(matching[0].split(None, 1)) == 2 else ""
        assert description == command.summary
        assert len(description.split()) >= 5, f"{name!r}: {description!r} does not say what it does"


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_each_command_module_is_that_command(name: str) -> None:
    # the table in cli.py names modules by string; a moved or renamed module fails here, not in a user's shell
    module = importlib.import_module(cli.COMMANDS[name].module)
    assert callable(module.main)
    assert module.build_parser().prog == f"parka {name}"


def test_no_command_or_an_unknown_one_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "no command given" in capsys.readouterr().err
    assert cli.main(["ingets"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'ingets'" in err
    assert "ingest, spark-ingest, optimize" in err


def test_help_imports_no_command_module() -> None:
    # run in a fresh interpreter: this test process may have imported them already
    code = (
        "import sys; from parka import cli; cli.main(['--help']); "
        "print([m for m in sys.modules if m.startswith(('parka.consumer', 'parka.spark_ext', 'parka.producer'))])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("argv", "code", "stream", "text"),
    [(["--help"], 0, "stdout", "commands:"), (["no-such-command"], 2, "stderr", "unknown command 'no-such-command'")],
)
def test_the_console_script_ends_with_mains_code_and_its_output_flushed(
    argv: list[str], code: int, stream: str, text: str
) -> None:
    # run() ends the process with os._exit (no interpreter shutdown): what main() printed to a pipe
    # must still arrive, and the exit code is main()'s
    program = f"import sys; from parka import cli; sys.argv = ['parka', *{argv!r}]; cli.run()"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert text in getattr(done, stream)
