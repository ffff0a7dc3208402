/*
 * unit_waitfor.c -- the wait-for graph's records (src/server/waitfor.c),
 * without a server: a record's text round-trips with every kind of wait
 * and hold, malformed texts are refused, and which holds keep which waits
 * out (a mutex wait: the mutex; a write wait: a share or the write lock;
 * a read wait: the write lock only), names compared by bytes and length.
 */
#include "ac_config.h"

#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "nm.h"
#include "waitfor.h"

static void test_round_trip(void)
{
    nm_waitrec_t r = { .seq = 42, .wait_kind = NM_WAIT_WRITE, .wait = "db", .wait_len = 2 };
    nm_waitrec_t back;
    size_t len;
    r.held[0] = "jobs";
    r.held_len[0] = 4;
    r.held_kind[0] = NM_WAIT_MUTEX;
    r.held[1] = "a b";
    r.held_len[1] = 3;
    r.held_kind[1] = NM_WAIT_READ;
    r.nheld = 2;
    char *t = nm_waitrec_format(&r, &len);
    g_assert_nonnull(t);
    g_assert_cmpmem(t, len, "42 w2:db m4:jobs r3:a b", 23);
    g_assert_cmpint(nm_waitrec_parse(t, len, &back), ==, 0);
    g_assert_cmpint(back.seq, ==, 42);
    g_assert_cmpint(back.wait_kind, ==, NM_WAIT_WRITE);
    g_assert_cmpmem(back.wait, back.wait_len, "db", 2);
    g_assert_cmpuint(back.nheld, ==, 2);
    g_assert_cmpint(back.held_kind[1], ==, NM_WAIT_READ);
    g_assert_cmpmem(back.held[1], back.held_len[1], "a b", 3);
    free(t);
}

static void test_malformed(void)
{
    static const char *const bad[] = { "", "x m1:a", "1 m9:a", "1 M1:a", "1 m1:a x", "1 m1a" };
    nm_waitrec_t r;
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        g_assert_cmpint(nm_waitrec_parse(bad[i], strlen(bad[i]), &r), ==, EPROTO);
}

/* Whether a record holding NAME as HELD keeps a wait of KIND for NAME
 * out. */
static int blocks(char held, char kind)
{
    nm_waitrec_t r = { .seq = 1, .wait_kind = NM_WAIT_MUTEX, .wait = "x", .wait_len = 1 };
    r.held[0] = "name";
    r.held_len[0] = 4;
    r.held_kind[0] = held;
    r.nheld = 1;
    return nm_waitrec_blocks(&r, kind, "name", 4);
}

static void test_blocks(void)
{
    g_assert_true(blocks(NM_WAIT_MUTEX, NM_WAIT_MUTEX));
    g_assert_false(blocks(NM_WAIT_MUTEX, NM_WAIT_READ));
    g_assert_false(blocks(NM_WAIT_MUTEX, NM_WAIT_WRITE));
    g_assert_true(blocks(NM_WAIT_READ, NM_WAIT_WRITE));
    g_assert_true(blocks(NM_WAIT_WRITE, NM_WAIT_WRITE));
    g_assert_true(blocks(NM_WAIT_WRITE, NM_WAIT_READ));
    g_assert_false(blocks(NM_WAIT_READ, NM_WAIT_READ));
    g_assert_false(blocks(NM_WAIT_READ, NM_WAIT_MUTEX));

    nm_waitrec_t r = { .seq = 1, .wait_kind = NM_WAIT_MUTEX, .wait = "x", .wait_len = 1 };
    r.held[0] = "name";
    r.held_len[0] = 4;
    r.held_kind[0] = NM_WAIT_MUTEX;
    r.nheld = 1;
    g_assert_false(nm_waitrec_blocks(&r, NM_WAIT_MUTEX, "nam", 3));
    g_assert_false(nm_waitrec_blocks(&r, NM_WAIT_MUTEX, "names", 5));
    g_assert_true(nm_waitrec_holds(&r, "name", 4));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/waitfor/round-trip", test_round_trip);
    g_test_add_func("/unit/waitfor/malformed", test_malformed);
    g_test_add_func("/unit/waitfor/blocks", test_blocks);
    return g_test_run();
}
