/* registry.c -- the per-name hash table of process-local entries. */
#include "nm.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "registry.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static nm_entry_t **buckets;   /* registry lock */
static size_t nbuckets;        /* a power of two, or 0 */
static size_t nentries;

/* FNV-1a: short, decent on the short ASCII names mutexes tend to have. */
static size_t hash_name(const char *name, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ULL;
    }
    return (size_t)h;
}

/* Keeps chains short as the table fills; on failure the table stays as it
 * is, only slower. */
static void grow(void)
{
    size_t n = nbuckets ? nbuckets * 2 : 64;
    nm_entry_t **fresh = calloc(n, sizeof *fresh);
    if (!fresh)
        return;
    for (size_t i = 0; i < nbuckets; i++) {
        nm_entry_t *e = buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            size_t b = hash_name(e->name, e->name_len) & (n - 1);
            e->next = fresh[b];
            fresh[b] = e;
        }
    }
    free(buckets);
    buckets = fresh;
    nbuckets = n;
}

static nm_entry_t *entry_new(nm_entry_family_t family, const char *name, size_t len)
{
    /* One allocation for the entry and its name: a held lock costs one
     * malloc chunk here, not two. */
    nm_entry_t *e = calloc(1, sizeof *e + len + 1);
    if (!e)
        return NULL;
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    e->name_len = (unsigned int)len;
    e->family = (unsigned char)family;
    pthread_mutex_init(&e->mu, NULL);
    nm_cond_init_monotonic(&e->cv);
    return e;
}

static void entry_free(nm_entry_t *e)
{
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

static nm_entry_t **find_slot(nm_entry_family_t family, const char *name, size_t len)
{
    nm_entry_t **p = &buckets[hash_name(name, len) & (nbuckets - 1)];
    for (; *p; p = &(*p)->next)
        if ((*p)->family == family && (*p)->name_len == len &&
            memcmp((*p)->name, name, len) == 0)
            break;
    return p;
}

nm_entry_t *nm_registry_get(nm_entry_family_t family, const char *name, size_t len)
{
    nm_entry_t *e = NULL;
    pthread_mutex_lock(&registry_lock);
    if (nentries >= nbuckets)
        grow();
    if (nbuckets) {
        nm_entry_t **slot = find_slot(family, name, len);
        e = *slot;
        if (!e && (e = entry_new(family, name, len)) != NULL) {
            *slot = e;
            nentries++;
        }
        if (e)
            e->refs++;
    }
    pthread_mutex_unlock(&registry_lock);
    return e;
}

void nm_registry_with(const char *name, size_t len, void (*fn)(nm_entry_t *))
{
    nm_entry_t *e = NULL;
    pthread_mutex_lock(&registry_lock);
    if (nbuckets && (e = *find_slot(NM_FAMILY_MUTEX, name, len)) != NULL)
        e->refs++;
    pthread_mutex_unlock(&registry_lock);
    if (e) {
        fn(e);
        nm_registry_put(e);
    }
}

void nm_registry_ref(nm_entry_t *e)
{
    pthread_mutex_lock(&registry_lock);
    e->refs++;
    pthread_mutex_unlock(&registry_lock);
}

void nm_registry_put(nm_entry_t *e)
{
    pthread_mutex_lock(&registry_lock);
    if (--e->refs == 0) {
        nm_entry_t **slot = find_slot((nm_entry_family_t)e->family, e->name, e->name_len);
        *slot = e->next;
        nentries--;
    } else {
        e = NULL;
    }
    pthread_mutex_unlock(&registry_lock);
    if (e)
        entry_free(e);
}

/* ---- fork ------------------------------------------------------------- */

static void for_each_entry(void (*fn)(nm_entry_t *))
{
    for (size_t i = 0; i < nbuckets; i++)
        for (nm_entry_t *e = buckets[i]; e; e = e->next)
            fn(e);
}

static void entry_lock(nm_entry_t *e) { pthread_mutex_lock(&e->mu); }
static void entry_unlock(nm_entry_t *e) { pthread_mutex_unlock(&e->mu); }

/* In the child: the parent's locks are the parent's. */
static void entry_reset_in_child(nm_entry_t *e)
{
    nm_entry_reset_in_child(e);
    pthread_mutex_unlock(&e->mu);
    /* Not pthread_cond_destroy: glibc's waits for the condition's waiters,
     * and those were threads of the parent, which never come back. */
    memset(&e->cv, 0, sizeof e->cv);
    nm_cond_init_monotonic(&e->cv);
}

void nm_registry_before_fork(void)
{
    pthread_mutex_lock(&registry_lock);
    for_each_entry(entry_lock);
}

void nm_registry_after_fork_parent(void)
{
    for_each_entry(entry_unlock);
    pthread_mutex_unlock(&registry_lock);
}

void nm_registry_after_fork_child(void)
{
    for_each_entry(entry_reset_in_child);
    nm_entry_after_fork_child();
    pthread_mutex_unlock(&registry_lock);
}
