/* kernels/cpu.c -- what the processor can do, asked once: the kernels with a
 * tile of their own for a wider instruction set pick their variant on it
 * (isa.h). */
#include "isa.h"
#include "qconv.h"

#include <stdlib.h>

#if PA_AVX512_BUILT

int _pa_avx512_usable(void) {
    static int usable = -1;     /* a race writes the same value */
    if (usable < 0) {
        const char *off = getenv("PA_DISABLE_AVX512");
        __builtin_cpu_init();
        usable = __builtin_cpu_supports("avx512f") && !(off && *off && *off != '0') ? 1 : 0;
    }
    return usable;
}

int _pa_avx512vnni_usable(void) {
    static int usable = -1;
    if (usable < 0) {
        __builtin_cpu_init();
        usable = _pa_avx512_usable() && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")
                     ? 1 : 0;
    }
    return usable;
}

int _pa_avx512vbmi_usable(void) {
    static int usable = -1;
    if (usable < 0) {
        __builtin_cpu_init();
        usable = _pa_avx512_usable() && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vbmi") ? 1 : 0;
    }
    return usable;
}

#else

int _pa_avx512_usable(void) { return 0; }

int _pa_avx512vbmi_usable(void) { return 0; }

int _pa_avx512vnni_usable(void) { return 0; }

#endif

unsigned pa_kernels_isa(void) {
    return (_pa_avx512_usable() ? (unsigned)PA_ISA_AVX512 : 0u) |
           (_pa_avx512vnni_usable() ? (unsigned)PA_ISA_AVX512_VNNI : 0u);
}
