/*
 * unit_token.c -- acquisition tokens (src/base/token.c), without a server:
 * 32 lowercase hex characters and a NUL, fresh every time.
 */
#include "ac_config.h"

#include <glib.h>
#include <string.h>

#include "nm.h"
#include "token.h"

#define DRAWS 2000

static void test_token_shape(void)
{
    char t[NM_TOKEN_LEN + 2];
    memset(t, 'Z', sizeof t);
    g_assert_cmpint(nm_token_new(t), ==, 0);
    g_assert_cmpint(t[NM_TOKEN_LEN], ==, '\0');
    g_assert_cmpint(t[NM_TOKEN_LEN + 1], ==, 'Z'); /* nothing written past the NUL */
    g_assert_cmpuint(strspn(t, "0123456789abcdef"), ==, NM_TOKEN_LEN);
}

/* No two tokens alike, and every hex digit shows up at every position
 * (missing one in DRAWS uniform draws has odds below 1e-50). */
static void test_token_fresh(void)
{
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    unsigned int digits[NM_TOKEN_LEN] = { 0 };

    for (int i = 0; i < DRAWS; i++) {
        char t[NM_TOKEN_LEN + 1];
        g_assert_cmpint(nm_token_new(t), ==, 0);
        g_assert_true(g_hash_table_add(seen, g_strdup(t)));
        for (int k = 0; k < NM_TOKEN_LEN; k++)
            digits[k] |= 1u << g_ascii_xdigit_value(t[k]);
    }
    for (int k = 0; k < NM_TOKEN_LEN; k++)
        g_assert_cmphex(digits[k], ==, 0xffff);
    g_hash_table_destroy(seen);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/token/shape", test_token_shape);
    g_test_add_func("/unit/token/fresh", test_token_fresh);
    return g_test_run();
}
