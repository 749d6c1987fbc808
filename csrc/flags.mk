# flags.mk -- the ONE set of compiler flags for the C core.
#
# Read by csrc/Makefile (include) and by setup.py through pyarena/_native/build.py
# (which parses the PA_* lines below), so `make -C csrc` and the wheel
# (pyarena/lib/libpyarena.{a,so} and the cffi extension linked against
# libpyarena.a) compile every source of PA_SRC_DIRS with the same command,
# run in csrc/:
#   $(CC) $(CFLAGS) $(PA_CFLAGS_STD) $(PA_CFLAGS_WARN) $(PA_CFLAGS_PIC) -c dir/f.c
# where CC defaults to cc and CFLAGS to PA_CFLAGS_OPT (both take the
# environment's value when set, in make and in setup.py alike).
# .ci/check_flags.py fails CI if the two builds ever diverge.
#
# Keep this file to plain `NAME = value` lines: no make functions, no
# references to other variables (setup.py does not expand them).
# The folders (relative to csrc/) whose *.c files make the library, for
# make and setup.py alike; each source's name is unique across them.
PA_SRC_DIRS = . alloc plan kernels
PA_CFLAGS_OPT = -O2 -g
# The language and floating-point model: ISO C11; no FP traps are ever
# enabled, so comparisons and selects need not be kept in program order
# (-fno-trapping-math: GCC then if-converts `x < 0 ? x * s : x` and the
# clamps of the kernels into vector selects; clang assumes it already).
PA_CFLAGS_STD = -std=c11 -fno-trapping-math
PA_CFLAGS_WARN = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror=implicit-function-declaration
PA_CFLAGS_PIC = -fPIC
PA_LDLIBS = -lpthread -lm
