/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The automated bottleneck search, after Paradyn's Performance Consultant (seed 001 §1,
 * §4): hypotheses (why) tested at foci (where) over time (when). It drives a live
 * metrics session (qm_live_run) through its steering commands: each test is an `add` of
 * one metric, a refuted one is `remove`d; the commands go down a pipe that the session
 * reads between its samples, so the session's budget (--max-overhead, the cost model)
 * judges every metric the search asks for. The program's structure (which procedures a
 * procedure calls, and which call sites) comes from file-mode spaces of its executable
 * and of the shared libraries mapped in it (opened when the search first goes there).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metrics/qm_priv.h"

/* What each hypothesis is tested with: wall time in these procedures (extendable).
 * OBJECTS: refine by the object in arg1 (a lock). */
static const struct hyp_proc {
    int hyp;
    const char *proc;
    int objects;
} hyp_procs[] = {
    /* glibc's pthread_mutex_lock ends in a tail call (no live timer): its contended
     * path, entered only to wait, is timed instead; arg1 is the lock word, the mutex. */
    { QM_HYP_SYNC, "__lll_lock_wait", 1 },
    { QM_HYP_SYNC, "pthread_rwlock_rdlock", 1 },
    { QM_HYP_SYNC, "pthread_rwlock_wrlock", 1 },
    { QM_HYP_IO, "read", 0 },
    { QM_HYP_IO, "write", 0 },
    { QM_HYP_IO, "poll", 0 },
    { QM_HYP_IO, "select", 0 },
    { QM_HYP_IO, "epoll_wait", 0 },
    { QM_HYP_IO, "recv", 0 },
    { QM_HYP_SYSCALL, "nanosleep", 0 },
    { QM_HYP_SYSCALL, "wait4", 0 },
};
#define LIBC "libc.so.6"
/* MAX_PASSED: procedures not measured (a timer reads 0 for one active all along, as
 * main is: it has no start; and for one never called alike) refined into anyway, per
 * round. */
enum { MAX_CHILDREN = 16, MAX_OBJECTS = 4, MAX_PASSED = 4, MAX_MODULES = 64 };

/* A module of the process: the executable (0) or a shared library mapped in it, read as
 * a file (its call graph) when the search first needs it. */
typedef struct module {
    char path[512];          /* as /proc/PID/maps names it */
    char mapped[96];         /* /proc/PID/map_files/RANGE: the file mapped, even if the
                              * path names another one since (root only) */
    unsigned long long dev_major, dev_minor, inode; /* ... else the path, if it is still
                              * the file mapped */
    char base[256];          /* the library's base name, as the metric language takes it */
    qpt_space_t *sp;
    int tried;               /* opened, or failed to */
} module_t;

/* A node's bookkeeping beside the public part. */
typedef struct node_ext {
    long metric;             /* the metric's index in the session, or -1 */
    int discover;            /* a per-arg1 count that finds the lock objects (hidden) */
    int refined;             /* its children were made */
    char row[200];           /* its metric's row (a call site's), "" for all rows */
    int others_pending;      /* it calls into other modules: tested once its own
                              * module's callees leave its time unexplained */
    int removed;
    uint64_t key;            /* QM_FOCUS_OBJECT: the object's address */
    char proc[160];          /* the procedure the node names (for refinement) */
    int more_callees;        /* refine_callees stopped at MAX_CHILDREN: the next batch
                              * once these are all refuted */
    int mod;                 /* ... in this module (0: the executable) */
    const struct hyp_proc *hp;
    double t_added;          /* absolute, when its metric went in */
    double base;             /* the metric's total (CPU seconds from /proc) when its
                              * window began */
    int from_proc;           /* measured from /proc, not by a metric */
    double run_base;         /* CPU: the program's CPU seconds when its window began */
    double want_base;        /* ... and its CPU seconds with the run-queue waits */
    int tid;
} node_ext_t;

typedef struct search {
    const qm_search_opts_t *o;
    qm_search_report_t *rep;
    node_ext_t *ext;
    size_t cap;
    int cmd_fd;              /* the write end of the session's command pipe */
    long *adding;            /* nodes whose `add` awaits its answer, in order */
    size_t nadding, hadding;
    char last_reply[256];
    qpt_space_t *exe;        /* the executable, for its call graph */
    module_t mods[MAX_MODULES]; /* [0] the executable (exe); libraries from /proc/PID/maps */
    size_t nmods;
    double t0, next_tick;
    int pid, done;
    int round;               /* the round being searched (o->repeat) */
    int passed;              /* procedures not measured refined into, this round */
    long cpu_root;           /* its CPU-bound root */
    /* The executable's procedures on the threads' stacks (the session's `stacks`), taken
     * before callees are chosen: STACKS_ASKED, then STACKS_READ until the choice. */
    enum { STACKS_NONE, STACKS_ASKED, STACKS_READ } stacks;
    char **on_stack;
    size_t non_stack;
} search_t;

const char *
qm_search_hyp_name(int hyp)
{
    switch (hyp) {
    case QM_HYP_CPU: return "CPU-bound";
    case QM_HYP_SYNC: return "sync-waiting";
    case QM_HYP_IO: return "IO-waiting";
    case QM_HYP_SYSCALL: return "syscall-blocked";
    default: return "?";
    }
}

const char *
qm_search_state_name(int state)
{
    switch (state) {
    case QM_NODE_TRUE: return "true";
    case QM_NODE_FALSE: return "false";
    case QM_NODE_TESTING: return "testing";
    case QM_NODE_UNMEASURED: return "not measured";
    default: return "untested";
    }
}

static long
node_new(search_t *S, int hyp, int fk, long parent, const char *focus, const char *metric)
{
    qm_search_report_t *r = S->rep;
    if (r->n == S->cap) {
        size_t cap = S->cap ? 2 * S->cap : 64;
        qm_search_node_t *v = realloc(r->nodes, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        r->nodes = v;
        node_ext_t *e = realloc(S->ext, cap * sizeof(*e));
        if (e == NULL)
            return -1;
        S->ext = e;
        S->cap = cap;
    }
    qm_search_node_t *nd = &r->nodes[r->n];
    memset(nd, 0, sizeof(*nd));
    memset(&S->ext[r->n], 0, sizeof(S->ext[0]));
    nd->hyp = hyp;
    nd->focus_kind = fk;
    nd->parent = parent;
    nd->depth = parent < 0 ? 0 : r->nodes[parent].depth + 1;
    nd->threshold = S->o->threshold > 0 ? S->o->threshold : 0.2;
    snprintf(nd->focus, sizeof(nd->focus), "%s", focus);
    snprintf(nd->metric, sizeof(nd->metric), "%s", metric ? metric : "");
    S->ext[r->n].metric = -1;
    nd->round = S->round;
    return (long)r->n++;
}

static void
command(search_t *S, const char *fmt, const char *arg, long num)
{
    char line[512];
    int len = arg ? snprintf(line, sizeof(line), fmt, arg) : snprintf(line, sizeof(line), fmt, num);
    if (len > 0 && (size_t)len < sizeof(line) && write(S->cmd_fd, line, (size_t)len) != len)
        S->done = 1; /* the session is gone */
}

/* Ask the session to put node I's metric in. */
static void
start(search_t *S, long i)
{
    qm_search_node_t *nd = &S->rep->nodes[i];
    if (S->nadding == S->hadding) {
        size_t h = S->hadding ? 2 * S->hadding : 32;
        long *v = realloc(S->adding, h * sizeof(*v));
        if (v == NULL) {
            nd->state = QM_NODE_UNMEASURED;
            snprintf(nd->why, sizeof(nd->why), "out of memory");
            return;
        }
        S->adding = v;
        S->hadding = h;
    }
    S->adding[S->nadding++] = i;
    nd->state = QM_NODE_TESTING;
    nd->t_start = qm_now() - S->t0;
    command(S, "add %s\n", nd->metric, 0);
}

static void
conclude(search_t *S, long i, int state)
{
    qm_search_node_t *nd = &S->rep->nodes[i];
    nd->state = state;
    nd->t_end = qm_now() - S->t0;
    node_ext_t *e = &S->ext[i];
    /* Refuted (or done with): its snippets leave the process. */
    if (e->metric >= 0 && !e->removed && (state != QM_NODE_TRUE || e->discover)) {
        command(S, "remove #%ld\n", NULL, e->metric + 1);
        e->removed = 1;
        S->rep->removed++;
    }
    if (!e->discover && S->o->on_node != NULL)
        S->o->on_node(S->o->arg, nd, nd->t_end, 0, 0, 0);
}

/* The session's answers: which metric each `add` became. */
/* The names of a `stacks` line ("stack TID: NAME NAME ..."), into S's set. */
static void
stack_names(search_t *S, const char *line)
{
    const char *p = strchr(line, ':');
    while (p != NULL && *p != '\0') {
        p += strspn(p, ": ");
        size_t len = strcspn(p, " ");
        if (len == 0)
            break;
        int dup = len == 1 && p[0] == '?';
        for (size_t i = 0; !dup && i < S->non_stack; i++)
            dup = strlen(S->on_stack[i]) == len && strncmp(S->on_stack[i], p, len) == 0;
        char **v = dup ? NULL : realloc(S->on_stack, (S->non_stack + 1) * sizeof(char *));
        if (v != NULL) {
            S->on_stack = v;
            if ((v[S->non_stack] = strndup(p, len)) != NULL)
                S->non_stack++;
        }
        p += len;
    }
}

static int
is_on_stack(const search_t *S, const char *name)
{
    for (size_t i = 0; i < S->non_stack; i++)
        if (strcmp(S->on_stack[i], name) == 0)
            return 1;
    return 0;
}

static void
stacks_forget(search_t *S)
{
    for (size_t i = 0; i < S->non_stack; i++)
        free(S->on_stack[i]);
    free(S->on_stack);
    S->on_stack = NULL;
    S->non_stack = 0;
    S->stacks = STACKS_NONE;
}

static void
on_reply(void *arg, const char *line)
{
    search_t *S = arg;
    if (line == NULL)
        return;
    if (strncmp(line, "stack ", 6) == 0 && S->stacks == STACKS_ASKED) {
        stack_names(S, line);
        return;
    }
    if (strncmp(line, "stacks", 6) == 0 && S->stacks == STACKS_ASKED) {
        const char *st = strstr(line, "(stopped ");
        if (st != NULL)
            S->rep->stopped_ms += strtod(st + 9, NULL);
        S->stacks = strncmp(line, "stacks end", 10) == 0 ? STACKS_READ : STACKS_ASKED;
        return;
    }
    size_t k;
    const char *st = strstr(line, "(stopped ");
    if (st != NULL && (strncmp(line, "added #", 7) == 0 || strncmp(line, "removed #", 9) == 0))
        S->rep->stopped_ms += strtod(st + 9, NULL);
    if (sscanf(line, "added #%zu", &k) == 1 && S->nadding > 0) {
        long i = S->adding[0];
        memmove(S->adding, S->adding + 1, --S->nadding * sizeof(long));
        S->ext[i].metric = (long)k - 1;
        S->rep->added++;
    } else if (strcmp(line, "nothing added") == 0 && S->nadding > 0) {
        long i = S->adding[0];
        memmove(S->adding, S->adding + 1, --S->nadding * sizeof(long));
        snprintf(S->rep->nodes[i].why, sizeof(S->rep->nodes[i].why), "%s", S->last_reply);
        conclude(S, i, QM_NODE_UNMEASURED);
    } else if (sscanf(line, "removed #%zu", &k) == 1 && strstr(line, "--max-overhead")) {
        /* The session took a metric out over the budget. */
        for (size_t i = 0; i < S->rep->n; i++)
            if (S->ext[i].metric == (long)k - 1 && !S->ext[i].removed) {
                S->ext[i].removed = 1;
                if (S->rep->nodes[i].state == QM_NODE_TESTING) {
                    snprintf(S->rep->nodes[i].why, sizeof(S->rep->nodes[i].why),
                             "taken out: over --max-overhead");
                    conclude(S, (long)i, QM_NODE_UNMEASURED);
                }
            }
        if (S->o->note)
            S->o->note(S->o->note_arg, line);
    } else if (strncmp(line, "removed #", 9) != 0 && S->last_reply[0] == '\0') {
        snprintf(S->last_reply, sizeof(S->last_reply), "%s", line); /* why, first line */
        return;
    }
    if (strncmp(line, "added #", 7) == 0 || strcmp(line, "nothing added") == 0)
        S->last_reply[0] = '\0';
}

/*****************************************************************************
 * CPU time from /proc (the whole program and its threads: no snippets needed)
 */

/* Seconds task TID of PID (TID 0: all its tasks) ran or waited to run: CPU time and
 * run-queue delay (/proc/.../schedstat), so that a busy machine does not hide a
 * CPU-bound program. -1 when unknown. */
static double sched_secs(int pid, int tid, int with_wait);

static double
cpu_secs(int pid, int tid)
{
    return sched_secs(pid, tid, 1);
}

static double
sched_secs(int pid, int tid, int with_wait)
{
    char path[128];
    if (tid == 0) {
        snprintf(path, sizeof(path), "/proc/%d/task", pid);
        DIR *d = opendir(path);
        if (d == NULL)
            return -1;
        double sum = 0;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            int t = atoi(de->d_name);
            double v = t > 0 ? sched_secs(pid, t, with_wait) : -1;
            if (v > 0)
                sum += v;
        }
        closedir(d);
        return sum;
    }
    snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    unsigned long long run, wait;
    int ok = fscanf(f, "%llu %llu", &run, &wait) == 2;
    fclose(f);
    return ok ? (double)(run + (with_wait ? wait : 0)) / 1e9 : -1;
}

static void
add_threads(search_t *S, long parent)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", S->pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int tid = atoi(de->d_name);
        if (tid <= 0)
            continue;
        char focus[64];
        snprintf(focus, sizeof(focus), "thread %d", tid);
        long i = node_new(S, QM_HYP_CPU, QM_FOCUS_THREAD, parent, focus, NULL);
        if (i < 0)
            break;
        S->ext[i].tid = tid;
        S->ext[i].from_proc = 1;
        S->rep->nodes[i].state = QM_NODE_TESTING;
        S->rep->nodes[i].t_start = qm_now() - S->t0;
    }
    closedir(d);
}

/*****************************************************************************
 * The program's structure: callees and callers from the modules' call sites
 */

/* The space of module M (a library's opened on first use), or NULL. */
static qpt_space_t *
module_space(search_t *S, size_t m)
{
    if (m == 0)
        return S->exe;
    module_t *mo = &S->mods[m];
    if (!mo->tried) {
        char why[256];
        mo->tried = 1;
        struct stat st;
        /* The file mapped: through map_files (root), else its path while that is still
         * the same file (a library replaced since it was loaded would give another
         * program's call graph). */
        int rc = qpt_open(mo->mapped, &mo->sp, why, sizeof(why));
        if (rc < 0 && stat(mo->path, &st) == 0 && st.st_ino == mo->inode
            && major(st.st_dev) == mo->dev_major && minor(st.st_dev) == mo->dev_minor)
            rc = qpt_open(mo->path, &mo->sp, why, sizeof(why));
        else if (rc < 0)
            snprintf(why, sizeof(why), "%s is not the file mapped any more", mo->path);
        if (rc < 0 && S->o->note) {
            char msg[900];
            snprintf(msg, sizeof(msg), "%s: no call graph, not refined into: %s", mo->base, why);
            S->o->note(S->o->note_arg, msg);
        }
    }
    return mo->sp;
}

/* The shared libraries mapped in the process now (code mappings of files other than
 * the executable) join the module table; those already there stay. */
static void
scan_modules(search_t *S)
{
    char path[64], exe[512] = "", line[1024];
    snprintf(path, sizeof(path), "/proc/%d/exe", S->pid);
    ssize_t k = readlink(path, exe, sizeof(exe) - 1);
    exe[k > 0 ? k : 0] = '\0';
    if (S->nmods == 0)
        S->nmods = 1; /* [0]: the executable */
    snprintf(path, sizeof(path), "/proc/%d/maps", S->pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL && S->nmods < MAX_MODULES) {
        char range[64], perms[8], *file = strchr(line, '/');
        unsigned long long major, minor, inode;
        if (sscanf(line, "%63s %7s %*s %llx:%llx %llu", range, perms, &major, &minor, &inode) != 5
            || perms[2] != 'x' || file == NULL)
            continue;
        file[strcspn(file, "\n")] = '\0';
        if (strcmp(file, exe) == 0 || strstr(file, " (deleted)") != NULL || strstr(file, ".so") == NULL)
            continue;
        int have = 0;
        for (size_t m = 1; m < S->nmods && !have; m++)
            have = strcmp(S->mods[m].path, file) == 0;
        if (have)
            continue;
        module_t *mo = &S->mods[S->nmods++];
        memset(mo, 0, sizeof(*mo));
        snprintf(mo->path, sizeof(mo->path), "%s", file);
        snprintf(mo->mapped, sizeof(mo->mapped), "/proc/%d/map_files/%s", S->pid, range);
        mo->dev_major = major, mo->dev_minor = minor, mo->inode = inode;
        const char *slash = strrchr(file, '/');
        snprintf(mo->base, sizeof(mo->base), "%s", slash + 1);
    }
    fclose(f);
}

/* The procedure NAME (or a symbol of that name at a procedure's entry: an alias such as
 * malloc for __libc_malloc) of space SP into *P. */
static int
find_proc(qpt_space_t *sp, const char *name, uint32_t *p)
{
    if (qpt_proc_find(sp, name, p) == 0)
        return strstr(qpt_proc_name(sp, *p), "@plt") == NULL ? 0 : -1;
    uint64_t a;
    if (qpt_symbol(sp, name, &a, NULL) < 0)
        return -1;
    uint32_t np = qpt_nprocs(sp);
    for (*p = 0; *p < np; (*p)++)
        if (qpt_proc_entry(sp, *p) == a)
            return 0;
    return -1;
}

/* The library that defines NAME, a procedure called through a PLT stub: its module, or
 * -1 when none or several do (the dynamic linker's search order is not known here:
 * refining into a guess could name the wrong code). */
static long
defining_library(search_t *S, const char *name)
{
    long found = -1;
    for (int pass = 0; pass < 2 && found < 0; pass++) {
        if (pass == 1)
            scan_modules(S); /* a library loaded since (dlopen) */
        else if (S->nmods == 0)
            scan_modules(S);
        int several = 0;
        uint32_t p;
        for (size_t m = 1; m < S->nmods; m++) {
            qpt_space_t *sp = module_space(S, m);
            if (sp == NULL || find_proc(sp, name, &p) < 0)
                continue;
            several |= found >= 0;
            found = (long)m;
        }
        if (several) {
            if (S->o->note) {
                char msg[400];
                snprintf(msg, sizeof(msg), "%s: defined in several libraries, not refined into", name);
                S->o->note(S->o->note_arg, msg);
            }
            return -1;
        }
    }
    return found;
}

/* The name a call point of SP calls directly, a PLT stub's without "@plt": 1, or 0 when
 * unknown. */
static int
plt_callee(qpt_space_t *sp, const qpt_point_t *pt, char *out, size_t len)
{
    uint64_t at = qpt_point_callee(sp, pt), off = 0;
    const char *name = NULL;
    uint32_t np = qpt_nprocs(sp);
    for (uint32_t p = 0; at != 0 && p < np && name == NULL; p++)
        if (qpt_proc_entry(sp, p) == at)
            name = qpt_proc_name(sp, p);
    if (name == NULL && (at == 0 || (name = qpt_symbol_at(sp, at, &off)) == NULL || off != 0))
        return 0;
    snprintf(out, len, "%s", name);
    char *plt = strstr(out, "@plt");
    if (plt != NULL)
        *plt = '\0';
    return 1;
}

/* The procedure a call point of module M calls directly: its name (the one its space
 * gives it) into OUT and its module into *TO; -1 when unknown (through a pointer, a
 * PLT stub whose library is not found). Unless RESOLVE, a PLT stub's library is not
 * looked for (opening the libraries takes seconds in a big program): *TO is then
 * SIZE_MAX, another module. */
static int
callee_of(search_t *S, size_t m, const qpt_point_t *pt, char *out, size_t len, size_t *to,
          int resolve)
{
    qpt_space_t *sp = module_space(S, m);
    uint32_t p;
    if (sp == NULL || !plt_callee(sp, pt, out, len))
        return -1;
    if (qpt_proc_find(sp, out, &p) == 0) {
        *to = m; /* in its own module */
        return 0;
    }
    /* A PLT stub's procedure (or a name that is not a procedure's: unknown). */
    char stub[200];
    snprintf(stub, sizeof(stub), "%s@plt", out);
    if (qpt_proc_find(sp, stub, &p) < 0)
        return -1;
    if (!resolve) {
        *to = SIZE_MAX;
        return 0;
    }
    long lib = defining_library(S, out);
    if (lib < 0 || find_proc(S->mods[lib].sp, out, &p) < 0)
        return -1;
    snprintf(out, len, "%s", qpt_proc_name(S->mods[lib].sp, p));
    *to = (size_t)lib;
    return 0;
}

/* NAME of module M as the metric language names it: plain in the executable,
 * LIBRARY:NAME in a library. */
static void
qualified(const search_t *S, size_t m, const char *name, char *out, size_t len)
{
    if (m == 0)
        snprintf(out, len, "%s", name);
    else
        snprintf(out, len, "%s:%s", S->mods[m].base, name);
}

/* The points of KIND in procedure P of SP (malloc'ed), *N. */
static qpt_point_t *
points(qpt_space_t *sp, uint32_t p, uint32_t kind, size_t *n)
{
    *n = 0;
    if (qpt_points(sp, p, kind, NULL, 0, n) < 0 || *n == 0)
        return NULL;
    qpt_point_t *v = calloc(*n, sizeof(*v));
    if (v != NULL && qpt_points(sp, p, kind, v, *n, n) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

static int
seen(char names[][256], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* CPU: a procedure that holds -> its callees in its own module (OTHERS 0), or those it
 * calls in other modules: through its PLT in the library that defines them (OTHERS 1).
 * Each test stops the process, and a procedure calls many library procedures that take
 * no time (exit, close, fork): those are tested only when its own module's callees
 * leave more than a threshold of its time unexplained (explain_others). */
/* Has node I a child named FOCUS? */
static int
is_child(const search_t *S, long i, const char *focus)
{
    for (size_t j = 0; j < S->rep->n; j++)
        if (S->rep->nodes[j].parent == i && strcmp(S->rep->nodes[j].focus, focus) == 0)
            return 1;
    return 0;
}

/* Were node I's children all tested, and none holds? */
static int
children_refuted(const search_t *S, long i)
{
    for (size_t j = 0; j < S->rep->n; j++)
        if (S->rep->nodes[j].parent == i && (S->rep->nodes[j].state == QM_NODE_UNTESTED
                                              || S->rep->nodes[j].state == QM_NODE_TESTING
                                              || S->rep->nodes[j].state == QM_NODE_TRUE))
            return 0;
    return 1;
}

static void
refine_callees(search_t *S, long i, int others)
{
    S->ext[i].more_callees = 0;
    const char *proc = S->ext[i].proc;
    size_t m = (size_t)S->ext[i].mod;
    qpt_space_t *sp = module_space(S, m);
    uint32_t p;
    if (sp == NULL || qpt_proc_find(sp, proc, &p) < 0)
        return;
    size_t n, to;
    qpt_point_t *v = points(sp, p, QPT_CALL, &n);
    static char names[MAX_CHILDREN][256];
    size_t k = 0;
    /* Those on a thread's stack now first (a procedure active all along calls more than
     * MAX_CHILDREN others, and the one it spends its time in may come late). */
    for (size_t j = 0, pass = 0; pass < 2 && !S->ext[i].more_callees;
         j = j + 1 < n ? j + 1 : (pass++, 0)) {
        char name[160], focus[256];
        if (j >= n || callee_of(S, m, &v[j], name, sizeof(name), &to, others) < 0
            || strchr(name, '@') != NULL || (to == m && strcmp(name, proc) == 0))
            continue;
        if ((to == 0 && is_on_stack(S, name)) != (pass == 0))
            continue;
        if ((to != m) != others) {
            S->ext[i].others_pending |= !others;
            continue;
        }
        /* A library's procedure without a symbol has no name a metric could give. */
        if (to != 0 && strncmp(name, "sub_", 4) == 0)
            continue;
        qualified(S, to, name, focus, sizeof(focus));
        if (seen(names, k, focus) || is_child(S, i, focus))
            continue;
        if (k == MAX_CHILDREN) { /* one more than fits: a next batch */
            S->ext[i].more_callees = 1;
            break;
        }
        snprintf(names[k++], sizeof(names[0]), "%s", focus);
        char metric[320];
        snprintf(metric, sizeof(metric), "time cpu(%s)", focus);
        long c = node_new(S, QM_HYP_CPU, QM_FOCUS_PROC, i, focus, metric);
        if (c < 0)
            break;
        snprintf(S->ext[c].proc, sizeof(S->ext[c].proc), "%s", name);
        S->ext[c].mod = (int)to;
    }
    free(v);
}

/* I/O, sync, syscalls: a library procedure that holds -> the executable's procedures that
 * call it, timed whole (their wall time bounds the time they wait in it). */
static void
refine_callers(search_t *S, long i)
{
    if (S->exe == NULL)
        return;
    const char *target = S->ext[i].hp->proc;
    uint32_t np = qpt_nprocs(S->exe);
    size_t k = 0;
    for (uint32_t p = 0; p < np && k < MAX_CHILDREN; p++) {
        size_t n;
        qpt_point_t *v = points(S->exe, p, QPT_CALL, &n);
        int calls = 0;
        for (size_t j = 0; j < n && !calls; j++) {
            char name[160];
            calls = plt_callee(S->exe, &v[j], name, sizeof(name)) && strcmp(name, target) == 0;
        }
        free(v);
        if (!calls)
            continue;
        const char *pn = qpt_proc_name(S->exe, p);
        char metric[320], focus[256];
        snprintf(metric, sizeof(metric), "time wall(%s)", pn);
        snprintf(focus, sizeof(focus), "%s (calls %s)", pn, target);
        long c = node_new(S, S->rep->nodes[i].hyp, QM_FOCUS_CALLER, i, focus, metric);
        if (c < 0)
            break;
        snprintf(S->ext[c].proc, sizeof(S->ext[c].proc), "%s", pn);
        k++;
    }
}

/* An executable's procedure whose wall time bounds the time it waits in a library
 * procedure (refine_callers), when it holds -> each of its calls of that procedure
 * through the PLT, timed from the call to its return (`per call site`): the time it
 * waits there, exact, and which call waits. */
static void
refine_sites(search_t *S, long i)
{
    long parent = S->rep->nodes[i].parent;
    uint32_t p;
    if (S->exe == NULL || parent < 0 || S->ext[parent].hp == NULL
        || qpt_proc_find(S->exe, S->ext[i].proc, &p) < 0)
        return;
    const char *target = S->ext[parent].hp->proc;
    size_t n, k = 0;
    qpt_point_t *v = points(S->exe, p, QPT_CALL, &n);
    for (size_t j = 0; j < n && k < MAX_CHILDREN; j++) {
        char name[160];
        uint32_t stub;
        if (!plt_callee(S->exe, &v[j], name, sizeof(name)) || strcmp(name, target) != 0)
            continue;
        /* The metric's row for this site, as qm_compile labels it. */
        char stubname[200], row[200], metric[320], focus[256];
        snprintf(stubname, sizeof(stubname), "%s@plt", target);
        if (qpt_proc_find(S->exe, stubname, &stub) < 0)
            continue; /* not through a stub of the executable */
        unsigned long long off = v[j].addr - qpt_proc_entry(S->exe, p);
        snprintf(row, sizeof(row), "%.60s+0x%llx -> %.60s", S->ext[i].proc, off, stubname);
        snprintf(metric, sizeof(metric), "time wall(%s) per call site", stubname);
        snprintf(focus, sizeof(focus), "%s+0x%llx -> %s", S->ext[i].proc, off, target);
        long c = node_new(S, S->rep->nodes[i].hyp, QM_FOCUS_SITE, i, focus, metric);
        if (c < 0)
            break;
        snprintf(S->ext[c].row, sizeof(S->ext[c].row), "%s", row);
        k++;
    }
    free(v);
}

/* A lock procedure that holds -> a count of its calls per arg1, which names the objects. */
static void
refine_objects(search_t *S, long i)
{
    char metric[320];
    snprintf(metric, sizeof(metric), "count calls(" LIBC ":%s) per arg1", S->ext[i].hp->proc);
    long c = node_new(S, S->rep->nodes[i].hyp, QM_FOCUS_OBJECT, i, "objects", metric);
    if (c >= 0) {
        S->ext[c].discover = 1;
        S->ext[c].hp = S->ext[i].hp;
    }
}

/* The objects counted by discovery node D: the MAX_OBJECTS most used, each tested by the
 * wall time its lock procedure takes for it. */
static void
objects_found(search_t *S, long d, const qm_row_t *rows, size_t n)
{
    long parent = S->rep->nodes[d].parent;
    size_t used[MAX_OBJECTS];
    size_t k = 0;
    for (; k < MAX_OBJECTS; k++) {
        long best = -1;
        for (size_t r = 0; r < n; r++) {
            if ((long)rows[r].metric != S->ext[d].metric || !rows[r].keyed)
                continue;
            int dup = 0;
            for (size_t j = 0; j < k; j++)
                dup |= used[j] == r;
            if (!dup && (best < 0 || rows[r].value > rows[best].value))
                best = (long)r;
        }
        if (best < 0 || rows[best].value == 0)
            break;
        used[k] = (size_t)best;
        const qm_row_t *row = &rows[best];
        char metric[320], focus[256];
        snprintf(metric, sizeof(metric), "time wall(" LIBC ":%s) where arg1 == 0x%llx",
                 S->ext[d].hp->proc, (unsigned long long)row->key);
        const char *name = strchr(row->focus, '(');
        snprintf(focus, sizeof(focus), "object 0x%llx%s%s", (unsigned long long)row->key,
                 name ? " " : "", name ? name : "");
        long c = node_new(S, S->rep->nodes[parent].hyp, QM_FOCUS_OBJECT, parent, focus, metric);
        if (c < 0)
            break;
        S->ext[c].key = row->key;
    }
}

/* Node I's callees in its own module are all tested: if what they hold leaves more than
 * a threshold of its time unexplained, its callees in other modules are tested. */
static void
explain_others(search_t *S, long i)
{
    const qm_search_report_t *r = S->rep;
    double explained = 0;
    for (size_t c = 0; c < r->n; c++) {
        if (r->nodes[c].parent != i)
            continue;
        if (r->nodes[c].state == QM_NODE_UNTESTED || r->nodes[c].state == QM_NODE_TESTING)
            return; /* not yet */
        explained += r->nodes[c].value;
    }
    S->ext[i].others_pending = 0;
    if (r->nodes[i].value - explained > r->nodes[i].threshold)
        refine_callees(S, i, 1);
}

static void
refine(search_t *S, long i)
{
    node_ext_t *e = &S->ext[i];
    qm_search_node_t *nd = &S->rep->nodes[i];
    e->refined = 1;
    if (nd->hyp == QM_HYP_CPU && nd->focus_kind == QM_FOCUS_PROGRAM) {
        add_threads(S, i);
        const char *roots = S->o->roots && S->o->roots[0] ? S->o->roots : "main";
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", roots);
        for (char *save = NULL, *r = strtok_r(buf, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
            char metric[320];
            snprintf(metric, sizeof(metric), "time cpu(%s)", r);
            long c = node_new(S, QM_HYP_CPU, QM_FOCUS_PROC, i, r, metric);
            if (c >= 0)
                snprintf(S->ext[c].proc, sizeof(S->ext[c].proc), "%s", r);
        }
    } else if (nd->hyp == QM_HYP_CPU && nd->focus_kind == QM_FOCUS_PROC)
        refine_callees(S, i, 0);
    else if (nd->focus_kind == QM_FOCUS_PROC && e->hp != NULL) {
        if (e->hp->objects)
            refine_objects(S, i);
        refine_callers(S, i);
    }
    else if (nd->focus_kind == QM_FOCUS_CALLER)
        refine_sites(S, i);
}

/*****************************************************************************
 * One step: conclude the tests that measured long enough, start the new ones
 */

static double
metric_total(const search_t *S, long i, const qm_row_t *rows, size_t n, int *measured)
{
    double v = 0;
    *measured = 0;
    for (size_t r = 0; r < n; r++)
        if ((long)rows[r].metric == S->ext[i].metric
            && (S->ext[i].row[0] == '\0' || strcmp(rows[r].focus, S->ext[i].row) == 0)) {
            v += (double)rows[r].value;
            *measured |= rows[r].measured;
        }
    return v;
}

static void roots(search_t *S);

/* With --max-overhead, the time the process was stopped for the search's insertions and
 * removals counts against the budget with what its metrics cost now (the observed sum):
 * no new test starts while they are over it together (each `add` stops the process; a
 * big program's call graph asks for many). */
static int
over_budget(const search_t *S, double now, const qm_cost_t *costs, size_t ncosts)
{
    double elapsed = now - S->t0, spent = 0;
    if (S->o->max_overhead <= 0 || elapsed <= 0)
        return 0;
    for (size_t i = 0; i < ncosts; i++)
        spent += costs[i].observed > 0 ? costs[i].observed : 0;
    spent += 100.0 * S->rep->stopped_ms / 1000.0 / elapsed;
    /* A fifth kept back: every test started now stops the process again to go out. */
    return spent > 0.8 * S->o->max_overhead;
}

static int
on_sample(void *arg, const qm_set_t *set, const qm_row_t *rows, size_t n,
          const qm_cost_t *costs, size_t ncosts, double t)
{
    (void)set, (void)t;
    search_t *S = arg;
    qm_search_report_t *r = S->rep;
    double now = qm_now(), step = S->o->step > 0 ? S->o->step : 0.5;
    if (S->exe == NULL && S->pid > 0) {
        char path[64], why[256];
        snprintf(path, sizeof(path), "/proc/%d/exe", S->pid);
        if (qpt_open(path, &S->exe, why, sizeof(why)) < 0 && S->o->note) {
            char msg[400];
            snprintf(msg, sizeof(msg), "no call graph, procedures not refined: %s", why);
            S->o->note(S->o->note_arg, msg);
        }
    }
    size_t tested = 0, ntrue = 0, busy = 0;
    int paced = over_budget(S, now, costs, ncosts), chose = 0;
    for (size_t i = 0; i < r->n; i++) {
        qm_search_node_t *nd = &r->nodes[i];
        if (nd->state == QM_NODE_UNTESTED && nd->metric[0] != '\0') {
            if (!paced)
                start(S, (long)i);
        }
        else if (S->ext[i].others_pending && nd->state == QM_NODE_TRUE)
            explain_others(S, (long)i);
        else if (S->ext[i].more_callees && S->ext[i].refined && nd->state == QM_NODE_TRUE
                 && children_refuted(S, (long)i)) {
            /* The first MAX_CHILDREN callees are refuted: the next ones (the one that
             * holds may come late when the threads' stacks missed it). */
            refine_callees(S, (long)i, 0);
            busy++;
        }
        else if (!S->ext[i].refined
                 && (nd->state == QM_NODE_TRUE
                     /* A procedure not measured (active all along, or no room for a
                      * snippet) does not stop the search: its callees are tested. */
                     || (nd->state == QM_NODE_UNMEASURED && nd->hyp == QM_HYP_CPU
                         && nd->focus_kind == QM_FOCUS_PROC && S->passed < MAX_PASSED))) {
            if (nd->hyp == QM_HYP_CPU && nd->focus_kind == QM_FOCUS_PROC
                && S->ext[i].mod == 0 && S->stacks != STACKS_READ) {
                /* Its callees are chosen with the stacks of now: asked for first. */
                if (S->stacks == STACKS_NONE) {
                    S->stacks = STACKS_ASKED;
                    command(S, "stacks\n", NULL, 0);
                }
                busy++;
                continue;
            }
            if (nd->state == QM_NODE_UNMEASURED)
                S->passed++;
            chose |= nd->hyp == QM_HYP_CPU && nd->focus_kind == QM_FOCUS_PROC;
            refine(S, (long)i);
        }
    }
    if (chose)
        stacks_forget(S); /* the next choice takes them again */
    /* A test's window opens once every `add` asked for is in: each stops the process,
     * which a window must not straddle (the time stopped is neither CPU nor waiting). */
    int settled = S->nadding == 0;
    for (size_t i = 0; i < r->n; i++) {
        qm_search_node_t *nd = &r->nodes[i];
        node_ext_t *e = &S->ext[i];
        if (nd->state == QM_NODE_UNTESTED || (e->others_pending && nd->state == QM_NODE_TRUE)) {
            busy++; /* ... or its callees in other modules may be tested */
            if (nd->state != QM_NODE_UNTESTED)
                tested++, ntrue++;
            continue;
        }
        if (nd->state != QM_NODE_TESTING) {
            tested++;
            ntrue += nd->state == QM_NODE_TRUE;
            continue;
        }
        busy++;
        if (!e->from_proc && e->metric < 0)
            continue; /* its `add` is not answered yet */
        int measured = 1;
        double total = nd->focus_kind == QM_FOCUS_THREAD ? cpu_secs(S->pid, e->tid)
                       : e->from_proc                    ? cpu_secs(S->pid, 0)
                           : metric_total(S, (long)i, rows, n, &measured) / 1e9;
        if (!settled) {
            e->t_added = 0;
            continue;
        }
        if (e->t_added == 0) {
            e->t_added = now;
            e->base = total;
            e->run_base = sched_secs(S->pid, 0, 0);
            e->want_base = sched_secs(S->pid, 0, 1);
            continue;
        }
        if (now - e->t_added < step)
            continue;
        if (e->discover) {
            objects_found(S, (long)i, rows, n);
            conclude(S, (long)i, QM_NODE_TRUE);
            continue;
        }
        if (!measured) {
            snprintf(nd->why, sizeof(nd->why), "its procedures could not be instrumented");
            conclude(S, (long)i, QM_NODE_UNMEASURED);
            continue;
        }
        nd->value = (total - e->base) / (now - e->t_added);
        double ran = sched_secs(S->pid, 0, 0) - e->run_base;
        double want = sched_secs(S->pid, 0, 1) - e->want_base;
        if (nd->hyp == QM_HYP_CPU && nd->focus_kind == QM_FOCUS_PROC && ran > 0)
            /* A procedure's CPU time as a share of the program's (which got less than
             * the CPU it wanted on a busy machine), scaled by the CPU the program
             * wanted in the same window. */
            nd->value = (total - e->base) / ran * want / (now - e->t_added);
        if (nd->hyp == QM_HYP_CPU && nd->focus_kind == QM_FOCUS_PROC && total == 0
            && r->n < 400) {
            /* Nothing timed: a procedure active since before its timer went in (main)
             * has no start, so it reads 0 (a call that began after the timer went in
             * is read while it runs). Not refuted: its callees are tested. */
            snprintf(nd->why, sizeof(nd->why), "no call returned: active all along?");
            conclude(S, (long)i, QM_NODE_UNMEASURED);
            continue;
        }
        conclude(S, (long)i, nd->value > nd->threshold ? QM_NODE_TRUE : QM_NODE_FALSE);
    }
    if (S->o->interval > 0 && now >= S->next_tick) {
        S->next_tick = now + S->o->interval;
        if (S->o->on_node)
            S->o->on_node(S->o->arg, NULL, now - S->t0, r->n, tested, ntrue);
    }
    if (S->o->duration > 0 && now - S->t0 >= S->o->duration)
        return 1;
    if (busy == 0 && S->o->repeat && !S->done) {
        /* The when axis: a new round from the roots, the last one's metrics out. */
        for (size_t i = 0; i < r->n; i++)
            if (S->ext[i].metric >= 0 && !S->ext[i].removed) {
                command(S, "remove #%ld\n", NULL, S->ext[i].metric + 1);
                S->ext[i].removed = 1;
                r->removed++;
            }
        S->round++;
        S->passed = 0;
        roots(S);
        return 0;
    }
    return busy == 0 || S->done;
}

static void
on_ready(void *arg, int pid, double stop_ms)
{
    (void)stop_ms;
    search_t *S = arg;
    S->pid = pid;
    S->t0 = qm_now();
    S->next_tick = S->t0 + S->o->interval;
    roots(S);
}

/* A round's roots: every hypothesis, program-wide. */
static void
roots(search_t *S)
{
    long c = node_new(S, QM_HYP_CPU, QM_FOCUS_PROGRAM, -1, "whole program", NULL);
    if (c >= 0) {
        S->ext[c].from_proc = 1;
        S->rep->nodes[c].state = QM_NODE_TESTING;
        S->rep->nodes[c].t_start = qm_now() - S->t0;
        S->cpu_root = c;
    }
    for (size_t h = 0; h < sizeof(hyp_procs) / sizeof(hyp_procs[0]); h++) {
        char metric[320], focus[256];
        snprintf(metric, sizeof(metric), "time wall(" LIBC ":%s)", hyp_procs[h].proc);
        snprintf(focus, sizeof(focus), "whole program: %s", hyp_procs[h].proc);
        long i = node_new(S, hyp_procs[h].hyp, QM_FOCUS_PROC, -1, focus, metric);
        if (i >= 0)
            S->ext[i].hp = &hyp_procs[h];
    }
}

static int
rank_cmp(const void *a, const void *b, void *arg)
{
    const qm_search_node_t *v = arg, *x = &v[*(const size_t *)a], *y = &v[*(const size_t *)b];
    if (x->round != y->round)
        return x->round - y->round;
    int rx = x->depth > 0, ry = y->depth > 0;
    if (rx != ry)
        return ry - rx;
    return x->value < y->value ? 1 : x->value > y->value ? -1 : 0;
}

/* Does node I count among the bottlenecks (a true code or object focus: threads and
 * the search's own object counts aside)? */
static int
rankable(const qm_search_report_t *r, size_t i)
{
    const qm_search_node_t *nd = &r->nodes[i];
    return nd->state == QM_NODE_TRUE && nd->focus_kind != QM_FOCUS_THREAD
           && strcmp(nd->focus, "objects") != 0;
}

/* The bottlenecks: true nodes with no true descendant, ranked. */
static void
rank(qm_search_report_t *r)
{
    r->ranked = calloc(r->n ? r->n : 1, sizeof(size_t));
    char *above = calloc(r->n ? r->n : 1, 1); /* has a true descendant */
    if (r->ranked == NULL || above == NULL) {
        free(above);
        return;
    }
    for (size_t i = 0; i < r->n; i++)
        if (rankable(r, i))
            for (long p = r->nodes[i].parent; p >= 0; p = r->nodes[p].parent)
                above[p] = 1;
    for (size_t i = 0; i < r->n; i++)
        if (rankable(r, i) && !above[i])
            r->ranked[r->nranked++] = i;
    free(above);
    /* Insertion sort (few): qsort_r is a GNU extension. */
    for (size_t i = 1; i < r->nranked; i++)
        for (size_t j = i; j > 0 && rank_cmp(&r->ranked[j - 1], &r->ranked[j], r->nodes) > 0; j--) {
            size_t t = r->ranked[j];
            r->ranked[j] = r->ranked[j - 1];
            r->ranked[j - 1] = t;
        }
}

int
qm_search_run(const qm_search_opts_t *o, qm_search_report_t *rep, char *why, size_t whylen)
{
    memset(rep, 0, sizeof(*rep));
    if (o == NULL || (o->pid <= 0 && (o->argv == NULL || o->argv[0] == NULL)))
        return QPT_EINVAL;
    int fds[2];
    if (pipe(fds) < 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return QPT_EIO;
    }
    search_t S = { 0 };
    S.o = o;
    S.rep = rep;
    S.cmd_fd = fds[1];
    qm_set_t *set = qm_new();
    if (set == NULL) {
        close(fds[0]);
        close(fds[1]);
        return QPT_ENOMEM;
    }
    qm_live_opts_t lo = { 0 };
    lo.pid = o->pid;
    lo.argv = o->argv;
    lo.interval = 0.05;
    lo.stop = o->stop;
    lo.note = o->note;
    lo.note_arg = o->note_arg;
    lo.on_sample = on_sample;
    lo.max_overhead = o->max_overhead;
    lo.sample = 0.05;
    lo.on_ready = on_ready;
    lo.arg = &S;
    lo.commands = 1;
    lo.refuse_unloaded = 1; /* a hypothesis not measurable is said so, never false */
    /* Not relocated (lo.relocate 0): a caller's wall time only bounds the time it waits
     * in a library procedure (refine_callers), and callers measured through a copy
     * would then rank above the objects they wait on (tests/search.sh (b)). */
    lo.commands_fd = fds[0];
    lo.on_reply = on_reply;
    qm_live_report_t lr;
    int rc = qm_live_run(set, &lo, &lr, why, whylen);
    rep->pid = lr.pid;
    rep->ended = lr.ended;
    rep->status = lr.status;
    rep->secs = lr.secs;
    /* Tests cut short by the end of the process (or of the search). */
    for (size_t i = 0; i < rep->n; i++)
        if (rep->nodes[i].state == QM_NODE_TESTING) {
            rep->nodes[i].state = QM_NODE_UNMEASURED;
            rep->nodes[i].t_end = rep->secs;
            snprintf(rep->nodes[i].why, sizeof(rep->nodes[i].why), "%s",
                     rep->ended ? "the process ended first" : "the search ended first");
        }
    /* The discovery nodes are the search's own: out of the tree. */
    size_t k = 0;
    long *map = calloc(rep->n ? rep->n : 1, sizeof(long));
    for (size_t i = 0; map != NULL && i < rep->n; i++) {
        map[i] = S.ext[i].discover ? -1 : (long)k;
        if (!S.ext[i].discover) {
            rep->nodes[k] = rep->nodes[i];
            if (rep->nodes[k].parent >= 0)
                rep->nodes[k].parent = map[rep->nodes[k].parent];
            k++;
        }
    }
    if (map != NULL)
        rep->n = k;
    free(map);
    rank(rep);
    qm_live_report_free(&lr);
    close(fds[1]);
    close(fds[0]);
    qm_free(set);
    if (S.exe != NULL)
        qpt_close(S.exe);
    for (size_t m = 1; m < S.nmods; m++)
        if (S.mods[m].sp != NULL)
            qpt_close(S.mods[m].sp);
    free(S.ext);
    free(S.adding);
    stacks_forget(&S);
    return rc;
}

void
qm_search_report_free(qm_search_report_t *rep)
{
    if (rep == NULL)
        return;
    free(rep->nodes);
    free(rep->ranked);
    rep->nodes = NULL;
    rep->ranked = NULL;
    rep->n = rep->nranked = 0;
}

/*****************************************************************************
 * Several processes: a search each, in a child of its own
 */

typedef struct wire {
    int rc, pid, ended, status;
    double secs, stopped_ms;
    unsigned added, removed;
    size_t n, nranked;
} wire_t;

static int
write_all(int fd, const void *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t k = write(fd, (const char *)buf + done, len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

static int
read_all(int fd, void *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t k = read(fd, (char *)buf + done, len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

int
qm_search_run_many(const qm_search_opts_t *o, const int *pids, size_t n,
                   qm_search_report_t *reps, long *ranks, int *rcs, char *why, size_t whylen)
{
    if (o == NULL || pids == NULL || n == 0 || reps == NULL || ranks == NULL || rcs == NULL)
        return QPT_EINVAL;
    memset(reps, 0, n * sizeof(*reps));
    int *fds = calloc(n, sizeof(int));
    pid_t *kids = calloc(n, sizeof(pid_t));
    if (fds == NULL || kids == NULL) {
        free(fds);
        free(kids);
        return QPT_ENOMEM;
    }
    size_t started = 0;
    for (size_t i = 0; i < n; i++) {
        ranks[i] = qm_rank_of(pids[i]);
        rcs[i] = QPT_EIO;
        int p[2];
        if (pipe(p) < 0)
            break;
        pid_t k = fork();
        if (k < 0) {
            close(p[0]);
            close(p[1]);
            break;
        }
        if (k == 0) {
            close(p[0]);
            qm_search_opts_t mine = *o;
            mine.pid = pids[i];
            mine.argv = NULL;
            mine.on_node = NULL;
            qm_search_report_t r;
            char w[1024] = "";
            wire_t h = { 0 };
            h.rc = qm_search_run(&mine, &r, w, sizeof(w));
            h.pid = r.pid, h.ended = r.ended, h.status = r.status;
            h.secs = r.secs, h.stopped_ms = r.stopped_ms;
            h.added = r.added, h.removed = r.removed;
            h.n = r.n, h.nranked = r.nranked;
            int bad = write_all(p[1], &h, sizeof(h)) < 0
                      || write_all(p[1], r.nodes, r.n * sizeof(*r.nodes)) < 0
                      || write_all(p[1], r.ranked, r.nranked * sizeof(size_t)) < 0;
            _exit(bad);
        }
        close(p[1]);
        fds[i] = p[0];
        kids[i] = k;
        started++;
    }
    for (size_t i = 0; i < started; i++) {
        wire_t h;
        if (read_all(fds[i], &h, sizeof(h)) == 0) {
            qm_search_report_t *r = &reps[i];
            r->nodes = calloc(h.n ? h.n : 1, sizeof(*r->nodes));
            r->ranked = calloc(h.nranked ? h.nranked : 1, sizeof(size_t));
            if (r->nodes != NULL && r->ranked != NULL
                && read_all(fds[i], r->nodes, h.n * sizeof(*r->nodes)) == 0
                && read_all(fds[i], r->ranked, h.nranked * sizeof(size_t)) == 0) {
                r->n = h.n, r->nranked = h.nranked;
                r->pid = h.pid, r->ended = h.ended, r->status = h.status;
                r->secs = h.secs, r->stopped_ms = h.stopped_ms;
                r->added = h.added, r->removed = h.removed;
                rcs[i] = h.rc;
            }
        }
        close(fds[i]);
        waitpid(kids[i], NULL, 0);
    }
    free(fds);
    free(kids);
    if (started < n) {
        snprintf(why, whylen, "could not start a search for each process: %s", strerror(errno));
        return QPT_EIO;
    }
    return 0;
}
