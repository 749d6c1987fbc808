"""Build glue: the cffi extension plus the stand-alone C library.

``pip install .`` compiles csrc/ twice over the same sources: once into the
cffi extension ``pyarena._native._cffi`` (cffi_modules) and once into
``pyarena/lib/libpyarena.{a,so}`` with the public header copied to
``pyarena/include/``, so C programs can link the very same core
(``pyarena.get_include()``, ``pyarena.get_library()``).
"""
import glob
import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(ROOT, "csrc")


class BuildPy(build_py):
    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "pyarena", "include")
        os.makedirs(dest, exist_ok=True)
        shutil.copy(os.path.join(CSRC, "pyarena.h"), dest)


class BuildExt(build_ext):
    """Also build libpyarena.a / libpyarena.so next to the extension."""

    def run(self):
        super().run()
        if self.inplace:
            pkg = os.path.join(ROOT, "pyarena")
            os.makedirs(os.path.join(pkg, "include"), exist_ok=True)
            shutil.copy(os.path.join(CSRC, "pyarena.h"), os.path.join(pkg, "include"))
        else:
            pkg = os.path.join(self.build_lib, "pyarena")
        libdir = os.path.join(pkg, "lib")
        os.makedirs(libdir, exist_ok=True)
        sources = sorted(glob.glob(os.path.join(CSRC, "*.c")))
        objdir = os.path.join(self.build_temp, "libpyarena")
        objects = self.compiler.compile(
            sources,
            output_dir=objdir,
            include_dirs=[CSRC],
            extra_postargs=["-O2", "-fPIC", "-std=gnu11"],
        )
        self.compiler.create_static_lib(objects, "pyarena", output_dir=libdir)
        self.compiler.link_shared_object(
            objects,
            os.path.join(libdir, "libpyarena.so"),
            libraries=["pthread"],
        )


class _NumpyInclude(os.PathLike):
    """numpy's include dir, resolved only when the compiler needs it."""

    def __fspath__(self):
        import numpy
        return numpy.get_include()

    def __str__(self):
        return self.__fspath__()


setup(
    cffi_modules=["pyarena/_native/build.py:ffibuilder"],
    # The CPython/NumPy glue (glue.c): handles that own the C arena and
    # pool, the native Arena.empty / Pool.empty, NumPy's allocator (NEP 49).
    ext_modules=[Extension("pyarena._native._glue",
                           [f"pyarena/_native/{f}.c" for f in
                            ("glue", "glue_shape", "glue_empty", "glue_numpy")],
                           include_dirs=[_NumpyInclude(), "csrc"],
                           depends=["csrc/pyarena.h", "pyarena/_native/glue.h"],
                           extra_compile_args=["-O2", "-Wall", "-Wextra",
                                               "-Wno-unused-parameter",
                                               "-Wno-missing-field-initializers"])],
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
)
