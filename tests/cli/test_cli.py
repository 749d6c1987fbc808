import os
import subprocess
import sys

import pyarena


def run_cli(*args, cwd):
    # Run outside the source tree, importing the same pyarena as this test.
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(pyarena.__file__)))
    return subprocess.run([sys.executable, "-m", "pyarena", *args],
                          capture_output=True, text=True, cwd=cwd, env=env)


def test_unknown_command_exits_nonzero(tmp_path):
    r = run_cli("frobnicate", cwd=tmp_path)
    assert r.returncode != 0
    assert "invalid choice" in r.stderr


def test_help_lists_commands(tmp_path):
    r = run_cli("--help", cwd=tmp_path)
    assert r.returncode == 0
    assert "demo" in r.stdout
