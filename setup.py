"""Build glue: the C core, the cffi extension and the native hot paths.

``pip install .`` compiles csrc/ once, with the flags of ``make -C csrc``
(csrc/flags.mk, read by pyarena/_native/build.py), into
``pyarena/lib/libpyarena.{a,so}`` with the public header copied to
``pyarena/include/``, so C programs link the very same core
(``pyarena.get_include()``, ``pyarena.get_library()``); the cffi extension
``pyarena._native._cffi`` links that libpyarena.a, and the glue extension
``pyarena._native._glue`` calls it through the cffi module.
"""
import importlib.util
import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(ROOT, "csrc")


def _load_build_module():
    """pyarena/_native/build.py by path (importing the package needs the build)."""
    spec = importlib.util.spec_from_file_location(
        "_pyarena_build", os.path.join(ROOT, "pyarena", "_native", "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPy(build_py):
    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "pyarena", "include")
        os.makedirs(dest, exist_ok=True)
        shutil.copy(os.path.join(CSRC, "pyarena.h"), dest)


class BuildExt(build_ext):
    """Build the C core first (libpyarena.a / libpyarena.so next to the
    extensions), then the extensions, pyarena._native._cffi linked against it."""

    def run(self):
        if self.inplace:
            pkg = os.path.join(ROOT, "pyarena")
            os.makedirs(os.path.join(pkg, "include"), exist_ok=True)
            shutil.copy(os.path.join(CSRC, "pyarena.h"), os.path.join(pkg, "include"))
        else:
            pkg = os.path.join(self.build_lib, "pyarena")
        build = _load_build_module()
        static = build.build_core(
            objdir=os.path.join(self.build_temp, "pyarena-core"),
            libdir=os.path.join(pkg, "lib"))
        # the trace replayer of `pyarena alloc-bench`, next to the library
        build.build_tool("pa_replay", static, os.path.join(pkg, "lib"))
        for ext in self.extensions:
            if ext.name == "pyarena._native._cffi" and static not in ext.extra_objects:
                ext.extra_objects.append(static)
                ext.depends.append(static)  # relink when the core changes
        super().run()


class _NumpyInclude(os.PathLike):
    """numpy's include dir, resolved only when the compiler needs it."""

    def __fspath__(self):
        import numpy
        return numpy.get_include()

    def __str__(self):
        return self.__fspath__()


setup(
    cffi_modules=["pyarena/_native/build.py:ffibuilder"],
    # The CPython/NumPy glue (pyarena/_native/glue*.c): handles that own the
    # C arena and pool, the native Arena.empty / Pool.empty, NumPy's
    # allocator (NEP 49).  Python glue, not the core: Python's own flags.
    ext_modules=[Extension("pyarena._native._glue",
                           [f"pyarena/_native/{f}.c" for f in
                            ("glue_module", "glue_handle", "glue_shape",
                             "glue_empty", "glue_numpy", "glue_trace")],
                           include_dirs=[_NumpyInclude(), "csrc"],
                           depends=["csrc/pyarena.h", "pyarena/_native/glue.h"],
                           extra_compile_args=["-O2", "-Wall", "-Wextra",
                                               "-Wno-unused-parameter",
                                               "-Wno-missing-field-initializers"])],
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
)
