/* checksum.h -- the variants of pa_crc32c (checksum.c), for its C test;
 * not installed.  Names start with _pa_. */
#ifndef PYARENA_CHECKSUM_H
#define PYARENA_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* The byte-wise table: every machine. */
uint32_t _pa_crc32c_portable(const void *data, size_t n, uint32_t crc);
/* SSE4.2's crc32 instruction where built (x86-64) and the processor has
 * it (_pa_crc32c_sse42_usable(), asked once); elsewhere the table. */
int _pa_crc32c_sse42_usable(void);
uint32_t _pa_crc32c_sse42(const void *data, size_t n, uint32_t crc);

#endif /* PYARENA_CHECKSUM_H */
