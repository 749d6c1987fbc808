"""A scratch folder for the models and files a benchmark writes, removed
when the process exits (however the run ends but a kill)."""
import atexit
import shutil
import tempfile


def scratch_dir(prefix="pyarena-bench-"):
    """A new folder, removed at exit."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path
