/*
 * cluster_renew.c -- the watchdog's renewal round in cluster mode
 * (cluster.h): the leases are grouped per slot, because one script call's
 * keys must share a slot, and the groups per node, each node's groups
 * going out in one pipeline on the watchdog thread's own connection to it;
 * every node is asked at once and poll() collects the answers, so a round
 * costs one round trip whatever the number of nodes.  A group answered by
 * a redirection (ASK: its slot is being migrated and the key has moved;
 * MOVED: the map is behind), or TRYAGAIN (a group's keys are split between
 * the two nodes of a migration), is renewed again in the same round, lease by
 * lease, each request following the redirection as any other does
 * (cluster_route.c): a migration that takes longer than a lease must not
 * let the leases on its slot run out.
 */
#include "nm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster_route.h"
#include "cluster_state.h"
#include "conn.h"
#include "quorum.h"
#include "reply.h"
#include "token.h"

/* One script call: ITEMS[order[from .. from + n)], all of one slot. */
typedef struct group {
    size_t from, n;
} group_t;

typedef struct node_job {
    nm_node_addr_t addr;
    group_t *groups;
    size_t ngroups;
} node_job_t;

typedef struct plan {
    nm_renewal_t *items;
    size_t *order;      /* item indices, by slot */
    unsigned int *slot; /* per item */
    node_job_t *jobs;
    size_t njobs;
} plan_t;

static const plan_t *sorting; /* qsort has no argument; one round at a time */

static int by_slot(const void *a, const void *b)
{
    unsigned int x = sorting->slot[*(const size_t *)a], y = sorting->slot[*(const size_t *)b];
    return x < y ? -1 : x > y;
}

/* The job of node ADDR, added if new (NULL: no memory). */
static node_job_t *job_of(plan_t *p, const nm_node_addr_t *addr)
{
    for (size_t i = 0; i < p->njobs; i++)
        if (p->jobs[i].addr.port == addr->port && strcmp(p->jobs[i].addr.host, addr->host) == 0)
            return &p->jobs[i];
    node_job_t *grown = realloc(p->jobs, (p->njobs + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    p->jobs = grown;
    grown[p->njobs] = (node_job_t){ *addr, NULL, 0 };
    return &grown[p->njobs++];
}

static int add_group(nm_config_t *cfg, plan_t *p, size_t from, size_t n, int64_t until)
{
    nm_node_addr_t addr;
    const nm_renewal_t *first = &p->items[p->order[from]];
    if (nm_cluster_node_of(cfg, first->key, first->key_len, until, &addr) != 0)
        return 0; /* nobody serves the slot now: not known this round */
    node_job_t *job = job_of(p, &addr);
    group_t *g = job ? realloc(job->groups, (job->ngroups + 1) * sizeof *g) : NULL;
    if (!g)
        return ENOMEM;
    job->groups = g;
    g[job->ngroups++] = (group_t){ from, n };
    return 0;
}

/* Sorts the items by slot and cuts them into groups, per node. */
static int make_plan(nm_config_t *cfg, plan_t *p, size_t n, int64_t until)
{
    p->order = malloc(n * sizeof *p->order);
    p->slot = malloc(n * sizeof *p->slot);
    if (!p->order || !p->slot)
        return ENOMEM;
    for (size_t i = 0; i < n; i++) {
        p->order[i] = i;
        p->slot[i] = nm_slot_of(p->items[i].key, p->items[i].key_len);
    }
    sorting = p;
    qsort(p->order, n, sizeof *p->order, by_slot);
    int err = 0;
    for (size_t from = 0, to; !err && from < n; from = to) {
        for (to = from + 1; to < n && to - from < NM_RENEW_BATCH &&
                            p->slot[p->order[to]] == p->slot[p->order[from]]; to++)
            ;
        err = add_group(cfg, p, from, to - from, until);
    }
    return err;
}

static void plan_clear(plan_t *p)
{
    for (size_t i = 0; i < p->njobs; i++)
        free(p->jobs[i].groups);
    free(p->jobs);
    free(p->order);
    free(p->slot);
}

static int append_group(redisContext *c, const plan_t *p, const group_t *g)
{
    const char *argv[3 * NM_RENEW_BATCH];
    size_t lens[3 * NM_RENEW_BATCH];
    for (size_t i = 0; i < g->n; i++) {
        const nm_renewal_t *it = &p->items[p->order[g->from + i]];
        argv[i] = it->key;
        lens[i] = it->key_len;
        argv[g->n + 2 * i] = it->token;
        lens[g->n + 2 * i] = NM_TOKEN_LEN;
        argv[g->n + 2 * i + 1] = it->lease;
        lens[g->n + 2 * i + 1] = strlen(it->lease);
    }
    return nm_script_append(c, NM_SCRIPT_RENEW, (int)g->n, (int)(3 * g->n), argv, lens);
}

/* Node JOB's pipeline: its connection with every group appended, or NULL. */
static redisContext *queue_job(nm_config_t *cfg, const plan_t *p, const node_job_t *job,
                               int64_t until)
{
    redisContext *c;
    if (nm_conn_get_node(cfg, job->addr.host, job->addr.port, until, &c) != 0) {
        nm_cluster_mark_stale(cfg);
        return NULL;
    }
    for (size_t g = 0; g < job->ngroups; g++) {
        if (append_group(c, p, &job->groups[g]) != 0) {
            nm_conn_drop_node(job->addr.host, job->addr.port);
            return NULL;
        }
    }
    return c;
}

static void take_answers(const plan_t *p, const node_job_t *job, redisReply **out, size_t got)
{
    for (size_t g = 0; g < got; g++) {
        const group_t *grp = &job->groups[g];
        long long v;
        size_t n;
        if (out[g] && nm_reply_array(out[g], &n) == 0 && n == grp->n)
            for (size_t i = 0; i < grp->n; i++)
                if (nm_reply_integer_at(out[g], i, &v) == 0)
                    p->items[p->order[grp->from + i]].result = v == 1 || v == 2 ? (int)v : 0;
        if (out[g])
            freeReplyObject(out[g]);
    }
}

/* GRP, answered by a redirection: its leases one by one, by UNTIL. */
static void renew_redirected(nm_config_t *cfg, const plan_t *p, const group_t *grp,
                             int64_t until)
{
    for (size_t i = 0; i < grp->n; i++) {
        nm_renewal_t *it = &p->items[p->order[grp->from + i]];
        const char *argv[3] = { it->key, it->token, it->lease };
        size_t lens[3] = { it->key_len, NM_TOKEN_LEN, strlen(it->lease) };
        redisReply *r;
        long long v;
        size_t n;
        int sent;
        if (nm_cluster_script(cfg, it->key, it->key_len, NM_SCRIPT_RENEW, 1, 3, argv, lens,
                              until, &r, &sent) != 0)
            continue; /* not known this round */
        if (nm_reply_array(r, &n) == 0 && n == 1 && nm_reply_integer_at(r, 0, &v) == 0)
            it->result = v == 1 || v == 2 ? (int)v : 0;
        freeReplyObject(r);
    }
}

/* A node that answered some groups with a redirection (its error is
 * NM_EREDIRECT, those groups' answers NULL): they are sent again. */
static void follow_redirects(nm_config_t *cfg, const plan_t *p, const node_job_t *job,
                             redisReply **out, size_t got, int64_t until)
{
    for (size_t g = 0; g < got; g++)
        if (!out[g])
            renew_redirected(cfg, p, &job->groups[g], until);
}

/* After a node's answers: what its failure, if any, asks for. */
static void settle(nm_config_t *cfg, const node_job_t *job, redisContext *c, int err,
                   int64_t until)
{
    if (err == ENOENT)
        nm_script_load(c, NM_SCRIPT_RENEW, until); /* flushed: retried soon */
    else if (err == NM_EREDIRECT || err == NM_ETRYAGAIN)
        nm_cluster_mark_stale(cfg); /* slots moved: the retry goes to the new node */
    else if (err) {
        nm_conn_drop_node(job->addr.host, job->addr.port);
        nm_cluster_mark_stale(cfg);
    }
}

/* Up to NM_SERVERS_MAX nodes' pipelines at once. */
static void run_jobs(nm_config_t *cfg, const plan_t *p, size_t from, size_t n, int64_t until)
{
    nm_fan_t f = { .n = n };
    for (size_t i = 0; i < n; i++) {
        const node_job_t *job = &p->jobs[from + i];
        f.out[i] = calloc(job->ngroups, sizeof *f.out[i]);
        f.want[i] = job->ngroups;
        f.ctx[i] = f.out[i] ? queue_job(cfg, p, job, until) : NULL;
    }
    nm_fan_run(&f, until);
    for (size_t i = 0; i < n; i++) {
        const node_job_t *job = &p->jobs[from + i];
        if (f.ctx[i])
            settle(cfg, job, f.ctx[i], f.err[i], until);
        if (f.out[i] && (f.err[i] == NM_EREDIRECT || f.err[i] == NM_ETRYAGAIN))
            follow_redirects(cfg, p, job, f.out[i], f.got[i], until);
        if (f.out[i])
            take_answers(p, job, f.out[i], f.got[i]);
        free(f.out[i]);
    }
}

void nm_cluster_renew(nm_config_t *cfg, nm_renewal_t *items, size_t n, int64_t until,
                      int64_t *sent_at)
{
    plan_t p = { .items = items };
    for (size_t i = 0; i < n; i++)
        items[i].result = -1;
    *sent_at = nm_now_ms();
    if (make_plan(cfg, &p, n, until) == 0)
        for (size_t j = 0; j < p.njobs; j += NM_SERVERS_MAX)
            run_jobs(cfg, &p, j, NM_MIN(NM_SERVERS_MAX, p.njobs - j), until);
    plan_clear(&p);
}
