/* test_arena.c -- C tests for the bump arena (no Python needed). */
#include "pyarena.h"
#include "counting_backend.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_defaults(void) {
    pa_status_t st2 = PA_ERR_STATE;
    pa_arena_t *a = pa_arena_create(NULL, &st2);
    CHECK(a != NULL);
    CHECK_EQ(st2, PA_OK);
    pa_arena_stats_t st;
    CHECK_EQ(pa_arena_stats(a, &st), PA_OK);
    CHECK_EQ(st.alignment, 64u);
    CHECK(st.reserved >= 64 * 1024);
    CHECK_EQ(st.used, 0u);
    char *p = pa_arena_alloc(a, 10, 0, NULL);
    char *q = pa_arena_alloc(a, 100, 0, NULL);
    CHECK(p && q);
    CHECK(((uintptr_t)p & 63) == 0 && ((uintptr_t)q & 63) == 0);
    CHECK(q >= p + 64); /* tail padded to the granularity */
    memset(p, 1, 10);
    memset(q, 2, 100);
    CHECK_EQ(pa_arena_stats(a, &st), PA_OK);
    CHECK_EQ(st.requested, 110u);
    CHECK_EQ(st.used, 64u + 128u);
    CHECK_EQ(st.padding, st.used - st.requested);
    CHECK_EQ(st.count, 2u);
    CHECK_EQ(pa_arena_check(a), 0u);
    /* size 0 gives a unique pointer */
    char *z1 = pa_arena_alloc(a, 0, 0, NULL), *z2 = pa_arena_alloc(a, 0, 0, NULL);
    CHECK(z1 && z2 && z1 != z2);
    CHECK_EQ(pa_arena_alloc(NULL, 8, 0, &st2), NULL);
    CHECK_EQ(st2, PA_ERR_INVALID);
    CHECK_EQ(pa_arena_destroy(a), PA_OK);
    CHECK_EQ(pa_arena_destroy(NULL), PA_ERR_INVALID);
    size_t released = 1;
    CHECK_EQ(pa_arena_trim(NULL, &released), PA_ERR_INVALID);
    CHECK_EQ(released, 0u);
    CHECK_EQ(pa_arena_config_default(NULL), PA_ERR_INVALID);
}

static void test_alignment(void) {
    pa_arena_config_t cfg;
    pa_arena_config_default(&cfg);
    pa_status_t why = PA_OK;
    cfg.alignment = 3;
    CHECK(pa_arena_create(&cfg, &why) == NULL);
    CHECK_EQ(why, PA_ERR_ALIGN);
    cfg.alignment = 4;
    CHECK(pa_arena_create(&cfg, NULL) == NULL);
    cfg.alignment = 64;
    cfg.growth = (pa_growth_t)7;
    CHECK(pa_arena_create(&cfg, &why) == NULL);
    CHECK_EQ(why, PA_ERR_INVALID);
    cfg.growth = PA_GROW_POW2;
    size_t grans[] = {8, 16, 64, 4096, 1 << 16};
    for (size_t g = 0; g < sizeof grans / sizeof grans[0]; g++) {
        cfg.alignment = grans[g];
        pa_arena_t *a = pa_arena_create(&cfg, NULL);
        CHECK(a != NULL);
        for (int i = 0; i < 50; i++) {
            void *p = pa_arena_alloc(a, (size_t)(i * 37 + 1), 0, NULL);
            CHECK(p && ((uintptr_t)p % grans[g]) == 0);
        }
        size_t aligns[] = {128, 4096, 1 << 20};
        for (size_t k = 0; k < 3; k++) {
            void *p = pa_arena_alloc(a, 5, aligns[k], NULL);
            CHECK(p && ((uintptr_t)p % aligns[k]) == 0);
        }
        pa_status_t st = PA_OK;
        CHECK(pa_arena_alloc(a, 5, 48, &st) == NULL);
        CHECK_EQ(st, PA_ERR_ALIGN);
        CHECK(pa_arena_alloc(a, 5, 0, &st) != NULL);
        CHECK_EQ(st, PA_OK);
        CHECK_EQ(pa_arena_check(a), 0u);
        pa_arena_destroy(a);
    }
}

static void test_overflow_and_capacity(void) {
    pa_arena_t *a = pa_arena_create(NULL, NULL);
    pa_status_t why = PA_OK;
    CHECK(pa_arena_alloc(a, SIZE_MAX, 0, &why) == NULL);
    CHECK_EQ(why, PA_ERR_OVERFLOW);
    CHECK(pa_arena_alloc(a, SIZE_MAX - 4096, 0, &why) == NULL);
    CHECK(why == PA_ERR_OVERFLOW || why == PA_ERR_NOMEM);
    CHECK(pa_arena_alloc(a, SIZE_MAX / 2, 1 << 20, NULL) == NULL);
    CHECK_EQ(pa_arena_check(a), 0u);
    pa_arena_destroy(a);

    pa_arena_config_t cfg;
    pa_arena_config_default(&cfg);
    cfg.growth = PA_GROW_NONE;
    cfg.capacity = 1 << 20;
    a = pa_arena_create(&cfg, NULL);
    CHECK(a != NULL);
    size_t got = 0;
    while (pa_arena_alloc(a, 1000, 0, &why)) got += 1000;
    CHECK_EQ(why, PA_ERR_NOMEM);
    CHECK(got > (1 << 20) * 9 / 10 * 1000 / 1024);
    pa_arena_stats_t st;
    pa_arena_stats(a, &st);
    CHECK(st.reserved <= (1u << 20));
    CHECK_EQ(st.chunks, 1u);
    pa_arena_destroy(a);

    /* growing arena under a capacity */
    cfg.growth = PA_GROW_POW2;
    cfg.capacity = 1 << 20;
    cfg.chunk_size = 64 << 10;
    a = pa_arena_create(&cfg, NULL);
    got = 0;
    while (pa_arena_alloc(a, 10000, 0, &why)) got++;
    CHECK_EQ(why, PA_ERR_NOMEM);
    pa_arena_stats(a, &st);
    CHECK(st.reserved <= (1u << 20));
    CHECK(got >= 80);
    CHECK_EQ(pa_arena_check(a), 0u);
    pa_arena_destroy(a);
}

static void test_growth(void) {
    counting_t cnt;
    pa_backend_t be = counting_backend(&cnt);
    int policies[] = {PA_GROW_POW2, PA_GROW_REQUESTED};
    for (int k = 0; k < 2; k++) {
        pa_arena_config_t cfg;
        pa_arena_config_default(&cfg);
        cfg.backend = &be;
        cfg.growth = policies[k];
        pa_arena_t *a = pa_arena_create(&cfg, NULL);
        CHECK(a != NULL);
        char *big = pa_arena_alloc(a, 1 << 20, 0, NULL);
        CHECK(big != NULL);
        memset(big, 7, 1 << 20);
        for (int i = 0; i < 1000; i++) CHECK(pa_arena_alloc(a, 3000, 0, NULL) != NULL);
        CHECK(pa_arena_num_chunks(a) >= 2);
        pa_arena_stats_t st;
        pa_arena_stats(a, &st);
        CHECK_EQ(st.reserved, cnt.live_bytes);
        size_t idx;
        void *base;
        size_t sz;
        CHECK_EQ(pa_arena_find(a, big + 100, &idx, &base, &sz), PA_OK);
        CHECK((char *)base <= big && big + (1 << 20) <= (char *)base + sz);
        int local;
        CHECK_EQ(pa_arena_find(a, &local, &idx, &base, &sz), PA_ERR_FOREIGN);
        CHECK_EQ(pa_arena_check(a), 0u);
        CHECK_EQ(pa_arena_reset(a), PA_OK);
        CHECK_EQ(pa_arena_num_chunks(a), 1u);
        pa_arena_stats(a, &st);
        CHECK(st.spare > 0);
        CHECK_EQ(st.reserved, cnt.live_bytes);
        int maps_before = cnt.maps;
        /* the same work again reuses the spares: no new mapping */
        CHECK(pa_arena_alloc(a, 1 << 20, 0, NULL) != NULL);
        CHECK_EQ(cnt.maps, maps_before);
        CHECK_EQ(pa_arena_check(a), 0u);
        CHECK_EQ(pa_arena_reset(a), PA_OK);
        size_t spare = st.spare;
        size_t released = 0;
        CHECK_EQ(pa_arena_trim(a, &released), PA_OK);
        CHECK_EQ(released, spare);
        CHECK_EQ(pa_arena_trim(a, NULL), PA_OK);
        pa_arena_stats(a, &st);
        CHECK_EQ(st.spare, 0u);
        CHECK_EQ(st.reserved, cnt.live_bytes);
        CHECK_EQ(pa_arena_check(a), 0u);
        pa_arena_destroy(a);
        CHECK_EQ(cnt.maps, cnt.unmaps);
        CHECK_EQ(cnt.live_bytes, 0u);
    }
    /* injected failures: no first chunk, then no growth */
    counting_backend(&cnt);
    cnt.fail_after = 0;
    pa_arena_config_t cfg;
    pa_arena_config_default(&cfg);
    cfg.backend = &be;
    pa_status_t why = PA_OK;
    CHECK(pa_arena_create(&cfg, &why) == NULL);
    CHECK_EQ(why, PA_ERR_NOMEM);
    counting_backend(&cnt);
    cnt.fail_after = 1;
    pa_arena_t *a = pa_arena_create(&cfg, &why);
    CHECK(a != NULL);
    CHECK_EQ(why, PA_OK);
    CHECK(pa_arena_alloc(a, 1 << 20, 0, &why) == NULL);
    CHECK_EQ(why, PA_ERR_NOMEM);
    CHECK(pa_arena_alloc(a, 100, 0, &why) != NULL);
    CHECK_EQ(why, PA_OK);
    CHECK_EQ(pa_arena_check(a), 0u);
    pa_arena_destroy(a);
    CHECK_EQ(cnt.maps, cnt.unmaps);
}

static void test_static(void) {
    static _Alignas(64) unsigned char meta[1024];
    static unsigned char buf[10000];
    CHECK(pa_arena_metadata_size() <= sizeof meta);
    pa_status_t why = PA_OK;
    CHECK(pa_arena_init_static(meta, 1, buf, sizeof buf, 64, &why) == NULL);
    CHECK_EQ(why, PA_ERR_INVALID);
    CHECK(pa_arena_init_static(meta, sizeof meta, buf, sizeof buf, 24, &why) == NULL);
    CHECK_EQ(why, PA_ERR_ALIGN);
    CHECK(pa_arena_init_static(meta, sizeof meta, buf, 32, 64, &why) == NULL);
    CHECK_EQ(why, PA_ERR_INVALID); /* cannot hold one aligned block */
    pa_arena_t *a = pa_arena_init_static(meta, sizeof meta, buf + 1, sizeof buf - 1, 64,
                                         &why);
    CHECK(a != NULL);
    CHECK_EQ(why, PA_OK);
    int n = 0;
    unsigned char *p;
    while ((p = pa_arena_alloc(a, 100, 0, &why)) != NULL) {
        CHECK(((uintptr_t)p & 63) == 0);
        CHECK(p >= buf && p + 100 <= buf + sizeof buf);
        n++;
    }
    CHECK_EQ(why, PA_ERR_NOMEM);
    CHECK(n >= 70);
    pa_arena_stats_t st;
    pa_arena_stats(a, &st);
    CHECK_EQ(st.reserved, sizeof buf - 1);
    CHECK_EQ(pa_arena_reset(a), PA_OK);
    CHECK(pa_arena_alloc(a, 100, 0, NULL) != NULL);
    CHECK_EQ(pa_arena_check(a), 0u);
    pa_arena_destroy(a);
}

static void test_mark_rewind(void) {
    pa_arena_config_t cfg;
    pa_arena_config_default(&cfg);
    cfg.chunk_size = 8192;
    pa_arena_t *a = pa_arena_create(&cfg, NULL);
    CHECK(pa_arena_alloc(a, 100, 0, NULL) != NULL);
    pa_arena_mark_t m1, m2;
    CHECK_EQ(pa_arena_mark(a, &m1), PA_OK);
    pa_arena_stats_t before, after;
    pa_arena_stats(a, &before);
    for (int i = 0; i < 100; i++) CHECK(pa_arena_alloc(a, 1000, 0, NULL) != NULL);
    CHECK_EQ(pa_arena_mark(a, &m2), PA_OK);
    CHECK(pa_arena_num_chunks(a) > 1);
    CHECK_EQ(pa_arena_rewind(a, &m1), PA_OK);
    pa_arena_stats(a, &after);
    CHECK_EQ(after.used, before.used);
    CHECK_EQ(after.requested, before.requested);
    CHECK_EQ(after.count, before.count);
    CHECK_EQ(after.chunks, 1u);
    CHECK(after.peak > after.used);
    /* m2 now lies beyond the position */
    CHECK_EQ(pa_arena_rewind(a, &m2), PA_ERR_STATE);
    CHECK_EQ(pa_arena_rewind(a, &m1), PA_OK); /* rewinding twice is fine */
    CHECK_EQ(pa_arena_reset(a), PA_OK);
    CHECK_EQ(pa_arena_rewind(a, &m1), PA_ERR_STATE); /* stale after reset */
    CHECK_EQ(pa_arena_rewind(NULL, &m1), PA_ERR_INVALID);
    CHECK_EQ(pa_arena_mark(a, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_arena_check(a), 0u);
    pa_arena_destroy(a);
}

/* Marks taken in the second and third chunks (not only in the first): a
 * rewind keeps the mark's chunk and position, `used` is the sum of the
 * blocks handed out (each 1024 bytes here: a multiple of the alignment)
 * across every chunk, and the next block lands where it did after the
 * mark. */
static void test_marks_in_later_chunks(void) {
    pa_arena_config_t cfg;
    pa_arena_config_default(&cfg);
    cfg.chunk_size = 8192;
    cfg.growth = PA_GROW_REQUESTED; /* small chunks: many of them */
    pa_arena_t *a = pa_arena_create(&cfg, NULL);
    pa_arena_stats_t st;
    size_t n = 0;
    while (pa_arena_num_chunks(a) < 2) {
        CHECK(pa_arena_alloc(a, 1024, 0, NULL) != NULL);
        n++;
    }
    pa_arena_mark_t m1, m2;
    CHECK_EQ(pa_arena_mark(a, &m1), PA_OK); /* in chunk 1 */
    CHECK(m1.chunk == 1);
    size_t n1 = n;
    char *after1 = pa_arena_alloc(a, 1024, 0, NULL);
    n++;
    while (pa_arena_num_chunks(a) < 3) {
        CHECK(pa_arena_alloc(a, 1024, 0, NULL) != NULL);
        n++;
    }
    CHECK_EQ(pa_arena_mark(a, &m2), PA_OK); /* in chunk 2 */
    CHECK(m2.chunk == 2);
    size_t n2 = n;
    char *after2 = pa_arena_alloc(a, 1024, 0, NULL);
    n++;
    while (pa_arena_num_chunks(a) < 5) {
        CHECK(pa_arena_alloc(a, 1024, 0, NULL) != NULL);
        n++;
    }
    CHECK_EQ(pa_arena_stats(a, &st), PA_OK);
    CHECK_EQ(st.used, n * 1024);
    CHECK_EQ(st.peak, n * 1024);
    CHECK_EQ(st.count, n);
    /* back to the mark in chunk 2: chunks 0-2 stay */
    CHECK_EQ(pa_arena_rewind(a, &m2), PA_OK);
    CHECK_EQ(pa_arena_num_chunks(a), 3u);
    CHECK_EQ(pa_arena_stats(a, &st), PA_OK);
    CHECK_EQ(st.used, n2 * 1024);
    CHECK_EQ(st.count, n2);
    CHECK_EQ(st.peak, n * 1024);
    CHECK(pa_arena_alloc(a, 1024, 0, NULL) == after2);
    CHECK_EQ(pa_arena_check(a), 0u);
    /* back to the mark in chunk 1, twice */
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(pa_arena_rewind(a, &m1), PA_OK);
        CHECK_EQ(pa_arena_num_chunks(a), 2u);
        CHECK_EQ(pa_arena_stats(a, &st), PA_OK);
        CHECK_EQ(st.used, n1 * 1024);
        CHECK_EQ(st.count, n1);
        CHECK(pa_arena_alloc(a, 1024, 0, NULL) == after1);
        CHECK_EQ(pa_arena_check(a), 0u);
    }
    /* growing again from there reuses the spare chunks and counts right */
    size_t m = n1 + 1;
    while (pa_arena_num_chunks(a) < 4) {
        CHECK(pa_arena_alloc(a, 1024, 0, NULL) != NULL);
        m++;
    }
    CHECK_EQ(pa_arena_stats(a, &st), PA_OK);
    CHECK_EQ(st.used, m * 1024);
    CHECK_EQ(pa_arena_check(a), 0u);
    pa_arena_destroy(a);
}

/* Random allocations, marks and rewinds; a pattern in every live block
 * must survive until its region is released. */
static void test_fuzz(void) {
    enum { MAXB = 2000 };
    static struct { unsigned char *p; size_t n; unsigned char v; } blk[MAXB];
    pa_arena_mark_t marks[16];
    size_t mark_nblk[16];
    unsigned long long s = 0x9E3779B97F4A7C15ULL;
    pa_arena_config_t cfg;
    pa_arena_config_default(&cfg);
    cfg.chunk_size = 16384;
    pa_arena_t *a = pa_arena_create(&cfg, NULL);
    size_t nb = 0, nm = 0;
    for (int step = 0; step < 20000; step++) {
        unsigned r = (unsigned)(pa_rand(&s) % 100);
        if (r < 80 && nb < MAXB) {
            size_t n = (size_t)(pa_rand(&s) % (r < 5 ? 200000 : 700));
            size_t al = (size_t)1 << (pa_rand(&s) % 13);
            unsigned char *p = pa_arena_alloc(a, n, al, NULL);
            CHECK(p != NULL);
            if (!p) break;
            CHECK(((uintptr_t)p % (al > 64 ? al : 64)) == 0);
            unsigned char v = (unsigned char)pa_rand(&s);
            memset(p, v, n);
            blk[nb].p = p;
            blk[nb].n = n;
            blk[nb].v = v;
            nb++;
        } else if (r < 90 && nm < 16) {
            pa_arena_mark(a, &marks[nm]);
            mark_nblk[nm++] = nb;
        } else if (nm > 0) {
            nm--;
            CHECK_EQ(pa_arena_rewind(a, &marks[nm]), PA_OK);
            nb = mark_nblk[nm];
        }
        CHECK_EQ(pa_arena_check(a), 0u);
        if (step % 500 == 0 || nb < 50) {
            for (size_t i = 0; i < nb; i++)
                for (size_t j = 0; j < blk[i].n; j += 97)
                    if (blk[i].p[j] != blk[i].v) {
                        CHECK(!"pattern lost");
                        i = nb;
                        break;
                    }
        }
    }
    pa_arena_destroy(a);
}

static void test_status_strings(void) {
    for (int s = PA_ERR_TIMEOUT; s <= PA_OK; s++)
        CHECK(strcmp(pa_status_string((pa_status_t)s), "unknown status") != 0);
    CHECK(strcmp(pa_status_string((pa_status_t)42), "unknown status") == 0);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* pa_heap_trim: freed malloc memory in the middle of the heap goes back
 * (glibc; the sanitizers' allocators are not glibc's heap: 0 or 1). */
static void test_heap_trim(void) {
    enum { N = 16384 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(2000);
        CHECK(blocks[i] != NULL);
        if (blocks[i]) memset(blocks[i], 1, 2000);
    }
    for (int i = 0; i < N - 1; i++) free(blocks[i]);   /* the last keeps the top */
    int r = pa_heap_trim();
    CHECK(r == 0 || r == 1);
#if defined(__GLIBC__) && !SANITIZED
    CHECK_EQ(r, 1);                 /* ~32 MiB of free pages were held */
#endif
    free(blocks[N - 1]);
}

int main(void) {
    RUN(test_defaults);
    RUN(test_alignment);
    RUN(test_overflow_and_capacity);
    RUN(test_growth);
    RUN(test_static);
    RUN(test_mark_rewind);
    RUN(test_marks_in_later_chunks);
    RUN(test_fuzz);
    RUN(test_status_strings);
    RUN(test_heap_trim);
    return pa_test_report();
}
