import subprocess
import sys

from pyarena.cli import main


def test_demo_runs_and_reports(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "weights" in out and "time per inference" in out


def test_unknown_command_exits_nonzero(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pyarena", "frobnicate"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0
    assert "invalid choice" in r.stderr
