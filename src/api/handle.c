/*
 * handle.c -- the handle plumbing every kind shares (handle.h): the name
 * check, a static initializer's first use, and a hold's lease watched and
 * given back.
 */
#include "nm.h"

#include "handle.h"

#include <errno.h>
#include <string.h>

#include "clock.h"
#include "registry.h"

int nm_name_ok(const char *name, size_t *len)
{
    if (!name)
        return 0;
    *len = strnlen(name, NETMUTEX_NAME_MAX + 1);
    return *len > 0 && *len <= NETMUTEX_NAME_MAX;
}

int nm_handle_object(void **slot, int is_static, const char *name, const nm_maker_t *mk,
                     void **out)
{
    size_t len;
    void *obj = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!obj) {
        if (!is_static || !nm_name_ok(name, &len))
            return EINVAL;
        void *expected = NULL;
        if (mk->setup)
            mk->setup();
        void *fresh = mk->make(name, len, mk->family);
        if (!fresh)
            return ENOMEM;
        if (__atomic_compare_exchange_n(slot, &expected, fresh, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            obj = fresh;
        } else {
            mk->drop(fresh);
            obj = expected;
        }
    }
    *out = obj;
    return 0;
}

void *nm_handle_entry_make(const char *name, size_t len, int family)
{
    return nm_registry_get((nm_entry_family_t)family, name, len);
}

void nm_handle_entry_drop(void *e)
{
    nm_registry_put(e);
}

int nm_handle_entry(void **slot, int is_static, const char *name, const nm_maker_t *mk,
                    nm_entry_t **out)
{
    void *obj;
    int err = nm_handle_object(slot, is_static, name, mk, &obj);
    if (!err)
        *out = obj;
    return err;
}

nm_watch_opts_t nm_watch_opts(const nm_lease_t *l, const nm_entry_t *e, int autorenew,
                              netmutex_lost_fn lost, void *lost_arg)
{
    nm_watch_opts_t opts = {
        .autorenew = autorenew,
        .lost = lost ? lost : l->cfg->on_lost,
        .lost_arg = lost ? lost_arg : l->cfg->on_lost_arg,
        .stat = nm_entry_stat(e),
    };
    return opts;
}

static int give_back(nm_lease_t *l, const nm_give_back_t *how)
{
    if (how->share)
        return nm_shares_release(l, how->kind, how->e->name, how->e->name_len, how->permits);
    return nm_lease_release_riding(l, how->unrecoverable, NM_FOREVER, how->rider, how->trailer);
}

int nm_handle_watch(nm_lease_t *l, const nm_watch_opts_t *opts, const nm_give_back_t *how)
{
    int err = nm_renew_track(l, how->e->name, opts);
    if (err)
        give_back(l, how);
    return err;
}

int nm_handle_release(nm_lease_t *l, const nm_give_back_t *how)
{
    int lost = nm_renew_lost(l);
    nm_renew_untrack(l);
    int err = give_back(l, how);
    /* A loss already reported wins over a give-back that failed (EIO):
     * the caller must learn that its hold was not protected, and the key,
     * renewed no more, expires by itself either way. */
    return lost ? ENOLCK : err;
}
