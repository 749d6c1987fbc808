"""The installed C header and libraries link a C program."""
import os
import shutil
import subprocess

import pytest

import pyarena

EXAMPLE = r"""
#include "pyarena.h"
#include <stdio.h>
int main(void) {
    pa_status_t st;
    pa_arena_t *a = pa_arena_create(NULL, &st);
    if (!a || st != PA_OK) return 1;
    char *p = pa_arena_alloc(a, 100, 256, &st);
    int ok = p != NULL && st == PA_OK && ((unsigned long)p % 256) == 0;
    if (pa_arena_destroy(a) != PA_OK) return 3;
    printf("%s\n", pa_status_string(PA_ERR_NOMEM));
    return ok ? 0 : 2;
}
"""


def test_get_include_has_header():
    inc = pyarena.get_include()
    assert os.path.isfile(os.path.join(inc, "pyarena.h"))


def test_get_library_kinds():
    with pytest.raises(ValueError, match="kind"):
        pyarena.get_library("dynamic")
    # each kind is the file it names, told by its content: an ar archive,
    # an ELF shared object (e_type ET_DYN = 3)
    with open(pyarena.get_library("static"), "rb") as f:
        assert f.read(8) == b"!<arch>\n"
    with open(pyarena.get_library("shared"), "rb") as f:
        head = f.read(18)
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 3


@pytest.mark.parametrize("kind", ["static", "shared"])
def test_c_program_links_the_installed_core(tmp_path, kind):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler on PATH: the C core cannot be checked")
    lib = pyarena.get_library(kind)
    src = tmp_path / "ex.c"
    src.write_text(EXAMPLE)
    exe = tmp_path / "ex"
    cmd = [cc, str(src), "-I", pyarena.get_include(), "-o", str(exe)]
    if kind == "static":
        cmd += [lib, "-lpthread"]
    else:
        cmd += [lib, "-Wl,-rpath," + os.path.dirname(lib)]
    subprocess.run(cmd, check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == "out of memory"
