/*
 * unit_journal.c -- the journal of recent releases (src/server/journal.c), without
 * a server: what is due for which master, the time (a lease and the slack)
 * and count bounds, and
 * that clearing and a fork leave nothing (valgrind and LeakSanitizer check
 * the frees).  Times are passed in, so age is tested without sleeping.
 */
#include "ac_config.h"

#include <glib.h>
#include <string.h>

#include "nm.h"
#include "clock.h"
#include "journal.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static nm_config_t cfg = { .generation = 7 };
static int hook_calls;

static void count_hook(void)
{
    hook_calls++;
}

#define LEASE_MS 30000

/* Notes a release of key "k<I>", a lease of LEASE, under master GEN. */
static void note_lease(int i, uint64_t gen, unsigned int lease)
{
    char key[32];
    g_snprintf(key, sizeof key, "k%d", i);
    nm_journal_note(&cfg, gen, key, strlen(key), strlen(key) + 1, lease, TOKEN, i % 2, 0);
}

static void note(int i, uint64_t gen)
{
    note_lease(i, gen, LEASE_MS);
}

static size_t due_count(uint64_t master_gen, int64_t now, nm_journal_entry_t **out)
{
    size_t n;
    g_assert_cmpint(nm_journal_due(cfg.generation, master_gen, now, out, &n), ==, 0);
    return n;
}

static void test_due_and_sent(void)
{
    nm_journal_entry_t *e;
    nm_journal_set_hook(count_hook);
    hook_calls = 0;
    note(1, 1);
    g_assert_cmpint(hook_calls, ==, 1);
    nm_journal_set_hook(NULL);
    g_assert_true(nm_journal_pending(cfg.generation, nm_now_ms()));
    g_assert_false(nm_journal_pending(cfg.generation + 1, nm_now_ms()));

    /* Sent while master 1 was named: nothing due for master 1 itself. */
    g_assert_cmpuint(due_count(1, nm_now_ms(), &e), ==, 0);
    nm_journal_free(e, 0);
    g_assert_cmpuint(due_count(2, nm_now_ms(), &e), ==, 1);
    g_assert_cmpmem(e[0].key, e[0].key_len, "k1", 2);
    g_assert_cmpstr(e[0].token, ==, TOKEN);
    g_assert_cmpint(e[0].robust, ==, 1);
    g_assert_cmpint(e[0].unrecoverable, ==, 0);
    nm_journal_sent(e[0].seq, 2);
    nm_journal_free(e, 1);
    /* Sent to master 2: due again only for a later one. */
    g_assert_cmpuint(due_count(2, nm_now_ms(), &e), ==, 0);
    nm_journal_free(e, 0);
    g_assert_cmpuint(due_count(3, nm_now_ms(), &e), ==, 1);
    nm_journal_free(e, 1);
    nm_journal_clear();
    g_assert_false(nm_journal_pending(cfg.generation, nm_now_ms()));
}

static void test_bounds(void)
{
    nm_journal_entry_t *e;
    for (int i = 0; i < NM_JOURNAL_MAX + 10; i++)
        note(i, 1);
    /* The oldest went first. */
    g_assert_cmpuint(due_count(2, nm_now_ms(), &e), ==, NM_JOURNAL_MAX);
    g_assert_cmpmem(e[0].key, e[0].key_len, "k10", 3);
    nm_journal_sent(e[0].seq, 2);
    nm_journal_free(e, NM_JOURNAL_MAX);
    g_assert_cmpuint(due_count(2, nm_now_ms(), &e), ==, NM_JOURNAL_MAX - 1);
    nm_journal_free(e, NM_JOURNAL_MAX - 1);
    /* Kept for the lease and the slack after the note, not less. */
    int64_t kept = nm_now_ms() + LEASE_MS + NM_JOURNAL_SLACK_MS - 1000;
    g_assert_true(nm_journal_pending(cfg.generation, kept));
    g_assert_cmpuint(due_count(2, kept, &e), ==, NM_JOURNAL_MAX - 1);
    nm_journal_free(e, NM_JOURNAL_MAX - 1);
    /* Past that: gone. */
    int64_t later = nm_now_ms() + LEASE_MS + NM_JOURNAL_SLACK_MS + 1;
    g_assert_false(nm_journal_pending(cfg.generation, later));
    g_assert_cmpuint(due_count(2, later, &e), ==, 0);
    nm_journal_free(e, 0);
    nm_journal_clear();
}

/* Each entry keeps to its own lease, even behind a longer one. */
static void test_lease_bounds(void)
{
    nm_journal_entry_t *e;
    note_lease(1, 1, 60000);
    note_lease(2, 1, 1000);
    int64_t mid = nm_now_ms() + 1000 + NM_JOURNAL_SLACK_MS + 1000;
    g_assert_cmpuint(due_count(2, mid, &e), ==, 1);
    g_assert_cmpmem(e[0].key, e[0].key_len, "k1", 2);
    nm_journal_free(e, 1);
    g_assert_true(nm_journal_pending(cfg.generation, mid));
    int64_t later = nm_now_ms() + 60000 + NM_JOURNAL_SLACK_MS + 1;
    g_assert_false(nm_journal_pending(cfg.generation, later));
    nm_journal_clear();
}

static void test_fork_child_forgets(void)
{
    note(1, 1);
    note(2, 1);
    nm_journal_before_fork();
    nm_journal_after_fork_child();
    g_assert_false(nm_journal_pending(cfg.generation, nm_now_ms()));
    note(3, 1); /* a journal of its own */
    g_assert_true(nm_journal_pending(cfg.generation, nm_now_ms()));
    nm_journal_clear();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/journal/due-and-sent", test_due_and_sent);
    g_test_add_func("/unit/journal/bounds", test_bounds);
    g_test_add_func("/unit/journal/lease-bounds", test_lease_bounds);
    g_test_add_func("/unit/journal/fork-child-forgets", test_fork_child_forgets);
    return g_test_run();
}
