import subprocess
import sys



def test_unknown_command_exits_nonzero(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pyarena", "frobnicate"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0
    assert "invalid choice" in r.stderr
