/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The profile (a.inst.qp): reading with validation, the check against a description,
 * merging several runs' files, and writing a merged file. The file is written by the
 * instrumented program's runtime (counters mapped MAP_SHARED, dumps at exit), so it may
 * be cut short by a crash: a missing counter region is an error, a missing or
 * incomplete dump is only counted as dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/qp_huge.h"
#include "report/qp_profile.h"

void
qp_profile_free(qp_profile_t *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->ndumps; i++)
        free(p->dumps[i].stack);
    free(p->dumps);
    free(p->counters);
    memset(p, 0, sizeof(*p));
}

/* The layout of a profile with NCOUNTERS counters (qp_format.h). */
typedef struct prof_layout {
    uint64_t cbytes, dumps_off, slots_off, slotc_off;
} prof_layout_t;

static prof_layout_t
layout_of(uint64_t ncounters)
{
    prof_layout_t l;
    l.cbytes = QP_PROF_CBYTES(ncounters);
    l.dumps_off = QP_PROF_HDR_SIZE + l.cbytes;
    l.slots_off = l.dumps_off + (uint64_t)QP_PROF_MAX_DUMPS * QP_PROF_DUMP_SIZE;
    l.slotc_off = l.slots_off + QP_PROF_TABLE_SIZE;
    return l;
}

/*****************************************************************************
 * Reading
 */

/* Read exactly N bytes at OFF; 0, or QP_EIO (errno) / QP_EFORMAT (file too short). */
static int
read_at(int fd, void *buf, size_t n, uint64_t off)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return QP_EIO;
        if (r == 0)
            return QP_EFORMAT;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int
check_prof_header(const qp_prof_hdr_t *h, uint64_t size, char *why, size_t whylen)
{
    if (memcmp(h->magic, QP_PROF_MAGIC, sizeof(h->magic)) != 0) {
        qp_why(why, whylen, "not a qp profile (bad magic)");
        return QP_EFORMAT;
    }
    if (h->version != QP_PROF_VERSION) {
        qp_why(why, whylen, "profile format version %u, this qp reads version %u",
            h->version, QP_PROF_VERSION);
        return QP_EFORMAT;
    }
    /* 2^40 counters is far beyond any program; the bound keeps the sums below exact. */
    prof_layout_t l = layout_of(h->ncounters <= (1ull << 40) ? h->ncounters : 0);
    if (h->ncounters > (1ull << 40) || size < l.slotc_off) {
        qp_why(why, whylen, "profile truncated (%llu bytes, %llu counters need %llu)",
            (unsigned long long)size, (unsigned long long)h->ncounters,
            (unsigned long long)l.slotc_off);
        return QP_EFORMAT;
    }
    if (h->dumps_off != l.dumps_off || h->slots_off != l.slots_off
        || h->nslots != QP_PROF_MAX_SLOTS || h->slotc_off != l.slotc_off) {
        qp_why(why, whylen,
            "malformed profile (layout: dumps at %llu, slots at %llu and "
            "%llu, %llu slots; expected %llu, %llu, %llu, %u)",
            (unsigned long long)h->dumps_off, (unsigned long long)h->slots_off,
            (unsigned long long)h->slotc_off, (unsigned long long)h->nslots,
            (unsigned long long)l.dumps_off, (unsigned long long)l.slots_off,
            (unsigned long long)l.slotc_off, QP_PROF_MAX_SLOTS);
        return QP_EFORMAT;
    }
    if (memchr(h->exe, 0, sizeof(h->exe)) == NULL) {
        qp_why(why, whylen, "malformed profile (executable name not terminated)");
        return QP_EFORMAT;
    }
    return 0;
}

/*
 * Read dump I if it is complete; *KEPT tells whether it was. Only I/O errors and
 * memory fail: an incomplete dump is a fact about the run, not a broken file.
 */
static int
read_dump(
    int fd, uint64_t size, const qp_prof_hdr_t *h, uint64_t i, qp_dump_t *d, int *kept)
{
    *kept = 0;
    uint64_t off = h->dumps_off + i * (uint64_t)QP_PROF_DUMP_SIZE;
    if (off > size || size - off < 4096)
        return 0;
    int rc = read_at(fd, &d->hdr, sizeof(d->hdr), off);
    if (rc < 0)
        return rc == QP_EFORMAT ? 0 : rc;
    if (d->hdr.valid != 1 || d->hdr.stack_len > QP_PROF_DUMP_STACK
        || size - off - 4096 < d->hdr.stack_len)
        return 0;
    d->stack = malloc(d->hdr.stack_len ? d->hdr.stack_len : 1);
    if (d->stack == NULL)
        return QP_ENOMEM;
    rc = read_at(fd, d->stack, d->hdr.stack_len, off + 4096);
    if (rc < 0) {
        free(d->stack);
        d->stack = NULL;
        return rc == QP_EFORMAT ? 0 : rc;
    }
    *kept = 1;
    return 0;
}

static int
read_dumps(int fd, uint64_t size, qp_profile_t *p)
{
    uint64_t n = p->hdr.ndumps < QP_PROF_MAX_DUMPS ? p->hdr.ndumps : QP_PROF_MAX_DUMPS;
    if (n > 0) {
        p->dumps = calloc(n, sizeof(qp_dump_t));
        if (p->dumps == NULL)
            return QP_ENOMEM;
    }
    for (uint64_t i = 0; i < n; i++) {
        int kept;
        QP_CHECK(read_dump(fd, size, &p->hdr, i, &p->dumps[p->ndumps], &kept));
        p->ndumps += kept != 0;
    }
    /* Dumps cancelled by a failed exec are no exits: neither used nor dropped. */
    uint64_t gone = p->hdr.ndumps - p->ndumps;
    p->ndropped = gone > p->hdr.cancelled ? gone - p->hdr.cancelled : 0;
    return 0;
}

static uint64_t
sat_add(uint64_t a, uint64_t b, int *saturated)
{
    uint64_t s;
    if (__builtin_add_overflow(a, b, &s)) {
        *saturated = 1;
        return UINT64_MAX;
    }
    return s;
}

/* Two counters at a time (GCC's and Clang's vector extension: SSE2 on x86-64). */
typedef uint64_t counter_pair_t __attribute__((vector_size(16)));

/* INTO[i] += FROM[i] for N counters, saturating at UINT64_MAX (without a branch: a
 * slot of chromium's holds 4 million); 1 when one saturated. The carry out of each sum
 * is its top bit's (a & b | (a | b) & ~sum), which needs no 64-bit comparison: two
 * counters added at once (chromium's 58 million: 0.7 G instructions one at a time). */
static int
add_counters(uint64_t *restrict into, const uint64_t *restrict from, uint64_t n)
{
    counter_pair_t over2 = { 0, 0 };
    uint64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        counter_pair_t a, b;
        memcpy(&a, &into[i], sizeof(a));
        memcpy(&b, &from[i], sizeof(b));
        counter_pair_t sum = a + b;
        counter_pair_t o = ((a & b) | ((a | b) & ~sum)) >> 63;
        over2 |= o;
        sum |= 0 - o;
        memcpy(&into[i], &sum, sizeof(sum));
    }
    uint64_t over = over2[0] | over2[1];
    for (; i < n; i++) {
        uint64_t sum = into[i] + from[i];
        uint64_t o = sum < from[i];
        over |= o;
        into[i] = sum | (0 - o);
    }
    return over != 0;
}

/* Counters read at a time (1 MiB): a slot of chromium's holds 4 million, read through
 * one small buffer rather than copied or mapped (a mapped file truncated meanwhile would
 * raise SIGBUS; a read says "truncated"). */
#define SLOT_CHUNK ((uint64_t)1 << 17)

/* INTO[i] += the I-th of the N counters at OFF of FD, all but the one at SKIP (a
 * journal's, already in its base counter; N or more: none), through BUF (SLOT_CHUNK
 * counters). 1 when one saturated, 0, or a QP_E* error. */
static int
add_slot(int fd, uint64_t off, uint64_t *into, uint64_t n, uint64_t skip, uint64_t *buf)
{
    int over = 0;
    for (uint64_t i = 0; i < n; i += SLOT_CHUNK) {
        uint64_t k = n - i < SLOT_CHUNK ? n - i : SLOT_CHUNK;
        QP_CHECK(read_at(fd, buf, k * sizeof(uint64_t), off + i * sizeof(uint64_t)));
        if (skip >= i && skip < i + k)
            buf[skip - i] = 0;
        over |= add_counters(into + i, buf, k);
    }
    return over;
}

/*
 * Add the counters of every slot in use to OUT->counters (the base counters). A slot
 * left half-folded by a killed process has its journal completed here, in memory, as
 * the next process to start would complete it in the file.
 */
/*
 * Is the owner of slot S still running: a process with its pid, started when the slot
 * says (field 22 of /proc/PID/stat, clock ticks after boot), in our pid namespace?
 */
static int
owner_runs(const qp_prof_slot_t *s)
{
    char path[64], buf[1024];
    struct stat ns;
    if (s->pid == 0 || s->pid > INT32_MAX)
        return 0;
    if (s->pidns != 0 && (stat("/proc/self/ns/pid", &ns) != 0 || (uint64_t)ns.st_ino != s->pidns))
        return 0;
    snprintf(path, sizeof(path), "/proc/%llu/stat", (unsigned long long)s->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (s->start == 0)
        return 1;
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    for (int field = 2; p != NULL && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p != NULL && strtoull(p + 1, NULL, 10) == s->start;
}

/* The slot table TAB of profile OUT (SIZE bytes) checked: every slot in use in a known
 * state, its counters within the file, its journal's counter among the counters. */
static int
check_slots(const qp_prof_slot_t *tab, uint64_t size, const qp_profile_t *out, char *why,
            size_t whylen)
{
    prof_layout_t l = layout_of(out->hdr.ncounters);
    for (uint64_t k = 0; k < QP_PROF_MAX_SLOTS; k++) {
        const qp_prof_slot_t *s = &tab[k];
        uint64_t off = l.slotc_off + k * l.cbytes;
        if (s->state == QP_SLOT_FREE)
            continue;
        if (s->state != QP_SLOT_OWNED && s->state != QP_SLOT_FOLDING) {
            qp_why(why, whylen, "malformed profile (slot %llu in state %u)",
                (unsigned long long)k, s->state);
            return QP_EFORMAT;
        }
        if (off > size || size - off < l.cbytes) {
            qp_why(why, whylen, "profile truncated (the counters of slot %llu)",
                (unsigned long long)k);
            return QP_EFORMAT;
        }
        if (s->state == QP_SLOT_FOLDING && s->jour_valid
            && s->jour_index >= out->hdr.ncounters) {
            qp_why(why, whylen, "malformed profile (slot %llu's journal)",
                (unsigned long long)k);
            return QP_EFORMAT;
        }
    }
    return 0;
}

/* Add the counters of every slot in use of the checked table TAB to OUT->counters (the
 * base counters). */
static int
add_slots(int fd, const qp_prof_slot_t *tab, qp_profile_t *out, char *why, size_t whylen)
{
    prof_layout_t l = layout_of(out->hdr.ncounters);
    uint64_t *buf = malloc(SLOT_CHUNK * sizeof(uint64_t));
    if (buf == NULL)
        return QP_ENOMEM;
    /* A journal names a base counter (the runtime completes journals before any other
     * fold changes the base). */
    for (uint64_t k = 0; k < QP_PROF_MAX_SLOTS; k++)
        if (tab[k].state == QP_SLOT_FOLDING && tab[k].jour_valid)
            out->counters[tab[k].jour_index]
                = sat_add(tab[k].jour_base, tab[k].jour_value, &out->saturated);
    int rc = 0;
    for (uint64_t k = 0; k < QP_PROF_MAX_SLOTS; k++) {
        const qp_prof_slot_t *s = &tab[k];
        if (s->state == QP_SLOT_FREE)
            continue;
        /* A journal's counter is already in the base counter. */
        uint64_t j = s->state == QP_SLOT_FOLDING && s->jour_valid ? s->jour_index
                                                                 : out->hdr.ncounters;
        int over = add_slot(fd, l.slotc_off + k * l.cbytes, out->counters,
                            out->hdr.ncounters, j, buf);
        if (over < 0) {
            rc = over;
            if (rc == QP_EFORMAT)
                qp_why(why, whylen, "profile truncated (the counters of slot %llu)",
                (unsigned long long)k);
            break;
        }
        out->saturated |= over;
        out->nslots_used++;
        if (s->state == QP_SLOT_OWNED && owner_runs(s)) {
            out->nrunning++;
            out->running_pid = s->pid;
        }
    }
    free(buf);
    return rc;
}

/* Wait up to about two seconds for a shared lock: runtimes hold the exclusive one only
 * while they claim or fold a slot. Without it the file is read anyway. */
static void
lock_shared(int fd)
{
    for (int i = 0; i < 200; i++) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0 || (errno != EWOULDBLOCK && errno != EINTR))
            return;
        usleep(10000);
    }
}

/* What qp_profile_open checked and qp_profile_fill reads from. */
struct qp_profile_pending {
    int fd;              /* the file, under a shared lock when one was granted */
    uint64_t size;       /* its size */
    qp_prof_slot_t *tab; /* its slot table */
};

/* The header and slot table of the profile FD (PD->size bytes) read into OUT and PD,
 * and checked. */
static int
check_profile_fd(int fd, qp_profile_pending_t *pd, qp_profile_t *out, char *why,
                 size_t whylen)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return QP_EIO;
    if (S_ISDIR(st.st_mode)) {
        qp_why(why, whylen, "is a directory");
        return QP_EDIR;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (!S_ISREG(st.st_mode) || size < QP_PROF_HDR_SIZE) {
        qp_why(why, whylen, "not a qp profile (%s)",
            S_ISREG(st.st_mode) ? "shorter than a profile header" : "not a regular file");
        return QP_EFORMAT;
    }
    lock_shared(fd);
    pd->size = size;
    QP_CHECK(read_at(fd, &out->hdr, sizeof(out->hdr), 0));
    QP_CHECK(check_prof_header(&out->hdr, size, why, whylen));
    if ((pd->tab = malloc(QP_PROF_MAX_SLOTS * sizeof(qp_prof_slot_t))) == NULL)
        return QP_ENOMEM;
    QP_CHECK(read_at(fd, pd->tab, QP_PROF_MAX_SLOTS * sizeof(qp_prof_slot_t),
                     layout_of(out->hdr.ncounters).slots_off));
    return check_slots(pd->tab, size, out, why, whylen);
}

/* The counters (base and slots) and dumps of the checked profile PD into OUT. */
static int
fill_profile_fd(const qp_profile_pending_t *pd, qp_profile_t *out, char *why, size_t whylen)
{
    out->counters = malloc(out->hdr.ncounters ? out->hdr.ncounters * 8 : 1);
    if (out->counters == NULL)
        return QP_ENOMEM;
    qp_huge_advise(out->counters, out->hdr.ncounters * 8);
    int rc = read_at(pd->fd, out->counters, out->hdr.ncounters * 8, QP_PROF_HDR_SIZE);
    if (rc == QP_EFORMAT)
        qp_why(why, whylen, "profile truncated while reading its counters");
    if (rc < 0)
        return rc;
    QP_CHECK(add_slots(pd->fd, pd->tab, out, why, whylen));
    if (out->hdr.flags & QP_PROF_SATURATED)
        out->saturated = 1;
    out->nfiles = 1;
    return read_dumps(pd->fd, pd->size, out);
}

/* A failure RC of reading a profile: WHY said for an I/O error or memory, OUT freed,
 * errno kept. */
static int
read_failed(int rc, qp_profile_t *out, char *why, size_t whylen)
{
    int saved = errno;
    if (rc == QP_EIO || rc == QP_ENOMEM)
        qp_why(why, whylen, "%s", rc == QP_EIO ? strerror(saved) : qp_strerror(rc));
    qp_profile_free(out);
    errno = saved;
    return rc;
}

int
qp_file_open_read(const char *path, char *why, size_t whylen)
{
    if (path == NULL)
        return QP_EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        int saved = errno;
        qp_why(why, whylen, "%s", strerror(saved));
        errno = saved;
        return saved == EISDIR ? QP_EDIR : QP_EIO;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        qp_why(why, whylen, "%s", strerror(errno));
        rc = QP_EIO;
    } else if (S_ISDIR(st.st_mode)) {
        qp_why(why, whylen, "is a directory");
        rc = QP_EDIR;
    } else if (!S_ISREG(st.st_mode)) {
        qp_why(why, whylen, "not a regular file (a FIFO, device or socket): not read");
        rc = QP_ENOTREG;
    } else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        qp_why(why, whylen, "%s", strerror(errno));
        rc = QP_EIO;
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

void
qp_profile_close(qp_profile_pending_t *pd)
{
    if (pd == NULL)
        return;
    if (pd->fd >= 0)
        close(pd->fd);
    free(pd->tab);
    free(pd);
}

int
qp_profile_open(const char *path, qp_profile_t *out, qp_profile_pending_t **pdp, char *why,
                size_t whylen)
{
    if (path == NULL || out == NULL || pdp == NULL)
        return QP_EINVAL;
    *pdp = NULL;
    memset(out, 0, sizeof(*out));
    qp_why(why, whylen, "%s", "");
    int fd = qp_file_open_read(path, why, whylen);
    if (fd == QP_ENOTREG)
        qp_why(why, whylen, "not a qp profile (not a regular file)");
    if (fd < 0)
        return fd;
    qp_profile_pending_t *pd = calloc(1, sizeof(*pd));
    if (pd == NULL) {
        close(fd);
        return read_failed(QP_ENOMEM, out, why, whylen);
    }
    pd->fd = fd;
    int rc = check_profile_fd(fd, pd, out, why, whylen);
    if (rc < 0) {
        rc = read_failed(rc, out, why, whylen);
        int saved = errno;
        qp_profile_close(pd);
        errno = saved;
        return rc;
    }
    *pdp = pd;
    return 0;
}

int
qp_profile_fill(qp_profile_pending_t *pd, qp_profile_t *out, char *why, size_t whylen)
{
    if (pd == NULL || out == NULL)
        return QP_EINVAL;
    int rc = fill_profile_fd(pd, out, why, whylen);
    rc = rc < 0 ? read_failed(rc, out, why, whylen) : 0;
    int saved = errno;
    qp_profile_close(pd);
    errno = saved;
    return rc;
}

int
qp_profile_read(const char *path, qp_profile_t *out, char *why, size_t whylen)
{
    qp_profile_pending_t *pd;
    int rc = qp_profile_open(path, out, &pd, why, whylen);
    return rc < 0 ? rc : qp_profile_fill(pd, out, why, whylen);
}

/*****************************************************************************
 * Checking and merging
 */

int
qp_profile_check(const qp_profile_t *p, const qp_desc_t *d, char *why, size_t whylen)
{
    if (p == NULL || d == NULL)
        return QP_EINVAL;
    if (p->hdr.id != d->hdr.id) {
        qp_why(why, whylen,
            "profile belongs to another executable or another rewrite (profile id "
            "%016llx, executable's description id %016llx)",
            (unsigned long long)p->hdr.id, (unsigned long long)d->hdr.id);
        return QP_EFORMAT;
    }
    if (p->hdr.ncounters != d->hdr.ncounters) {
        qp_why(why, whylen, "profile has %llu counters, the executable's description %u",
            (unsigned long long)p->hdr.ncounters, d->hdr.ncounters);
        return QP_EFORMAT;
    }
    return 0;
}

/* Copies of FROM's dumps appended to the array *DUMPS of *N entries. */
static int
append_dumps(qp_dump_t **dumps, size_t *n, const qp_profile_t *from)
{
    if (from->ndumps == 0)
        return 0;
    qp_dump_t *v = realloc(*dumps, (*n + from->ndumps) * sizeof(qp_dump_t));
    if (v == NULL)
        return QP_ENOMEM;
    *dumps = v;
    for (size_t i = 0; i < from->ndumps; i++) {
        qp_dump_t *d = &v[*n];
        d->hdr = from->dumps[i].hdr;
        d->stack = malloc(d->hdr.stack_len ? d->hdr.stack_len : 1);
        if (d->stack == NULL)
            return QP_ENOMEM;
        memcpy(d->stack, from->dumps[i].stack, d->hdr.stack_len);
        (*n)++;
    }
    return 0;
}

/* qp_profile_merge; TAKE (FROM not const): an empty INTO takes FROM's counters instead
 * of a copy of them. */
static int
merge(qp_profile_t *into, qp_profile_t *take, const qp_profile_t *from, char *why,
      size_t whylen)
{
    if (into == NULL || from == NULL)
        return QP_EINVAL;
    int empty = into->nfiles == 0;
    if (!empty
        && (into->hdr.id != from->hdr.id || into->hdr.ncounters != from->hdr.ncounters)) {
        qp_why(why, whylen,
            "profile belongs to another executable or another rewrite "
            "(id %016llx, the first profile's %016llx)",
            (unsigned long long)from->hdr.id, (unsigned long long)into->hdr.id);
        return QP_EFORMAT;
    }
    /* Build the result aside so that INTO is unchanged on failure. */
    qp_profile_t r = *into;
    size_t nc = from->hdr.ncounters;
    int moved = empty && take != NULL && (nc == 0 || take->counters != NULL);
    r.counters = moved ? NULL : malloc(nc ? nc * 8 : 1);
    r.dumps = NULL;
    r.ndumps = 0;
    int rc = r.counters == NULL && !moved ? QP_ENOMEM : append_dumps(&r.dumps, &r.ndumps, into);
    if (rc == 0)
        rc = append_dumps(&r.dumps, &r.ndumps, from);
    if (rc < 0) {
        for (size_t i = 0; i < r.ndumps; i++)
            free(r.dumps[i].stack);
        free(r.dumps);
        free(r.counters);
        qp_why(why, whylen, "%s", qp_strerror(rc));
        return rc;
    }
    if (empty) {
        r.hdr = from->hdr;
        if (moved) {
            r.counters = take->counters; /* chromium's: 33 MB not copied */
            take->counters = NULL;
        } else
            memcpy(r.counters, from->counters, nc * 8);
        r.ndropped = from->ndropped;
        r.saturated = from->saturated;
    } else {
        for (size_t i = 0; i < nc; i++)
            r.counters[i] = sat_add(into->counters[i], from->counters[i], &r.saturated);
        r.hdr.runs = sat_add(into->hdr.runs, from->hdr.runs, &r.saturated);
        r.hdr.ndumps = sat_add(into->hdr.ndumps, from->hdr.ndumps, &r.saturated);
        r.hdr.forks = sat_add(into->hdr.forks, from->hdr.forks, &r.saturated);
        r.hdr.unsaved = sat_add(into->hdr.unsaved, from->hdr.unsaved, &r.saturated);
        r.ndropped = sat_add(into->ndropped, from->ndropped, &r.saturated);
        r.saturated |= from->saturated;
    }
    r.nslots_used = into->nslots_used + from->nslots_used;
    r.nrunning = into->nrunning + from->nrunning;
    if (from->nrunning)
        r.running_pid = from->running_pid;
    r.nfiles = into->nfiles + (from->nfiles ? from->nfiles : 1);
    qp_profile_free(into);
    *into = r;
    return 0;
}

int
qp_profile_merge(qp_profile_t *into, const qp_profile_t *from, char *why, size_t whylen)
{
    return merge(into, NULL, from, why, whylen);
}

int
qp_profile_merge_take(qp_profile_t *into, qp_profile_t *from, char *why, size_t whylen)
{
    return merge(into, from, from, why, whylen);
}

/*****************************************************************************
 * Writing
 */

static int
write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return QP_EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Write N zero bytes. */
static int
write_zeros(int fd, uint64_t n)
{
    static const uint8_t zeros[4096];
    while (n > 0) {
        size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
        QP_CHECK(write_all(fd, zeros, k));
        n -= k;
    }
    return 0;
}

static int
write_profile_fd(int fd, const qp_profile_t *p)
{
    qp_prof_hdr_t h = p->hdr;
    prof_layout_t l = layout_of(h.ncounters);
    memcpy(h.magic, QP_PROF_MAGIC, sizeof(h.magic));
    h.version = QP_PROF_VERSION;
    h.dumps_off = l.dumps_off;
    h.slots_off = l.slots_off;
    h.nslots = QP_PROF_MAX_SLOTS;
    h.slotc_off = l.slotc_off;
    if (p->saturated)
        h.flags |= QP_PROF_SATURATED;
    /* Every exit without a written dump must stay visible as dropped. */
    if (h.ndumps < p->ndumps + p->ndropped)
        h.ndumps = p->ndumps + p->ndropped;
    uint64_t cbytes = h.ncounters * 8;
    QP_CHECK(write_all(fd, &h, sizeof(h)));
    QP_CHECK(write_zeros(fd, QP_PROF_HDR_SIZE - sizeof(h)));
    QP_CHECK(write_all(fd, p->counters, cbytes));
    QP_CHECK(write_zeros(fd, h.dumps_off - QP_PROF_HDR_SIZE - cbytes));
    for (uint64_t i = 0; i < QP_PROF_MAX_DUMPS; i++) {
        if (i >= p->ndumps) {
            QP_CHECK(
                write_zeros(fd, QP_PROF_DUMP_SIZE)); /* valid = 0: dropped, or unused */
            continue;
        }
        const qp_dump_t *d = &p->dumps[i];
        QP_CHECK(write_all(fd, &d->hdr, sizeof(d->hdr)));
        QP_CHECK(write_zeros(fd, 4096 - sizeof(d->hdr)));
        QP_CHECK(write_all(fd, d->stack, d->hdr.stack_len));
        QP_CHECK(write_zeros(fd, QP_PROF_DUMP_STACK - d->hdr.stack_len));
    }
    /* An empty slot table: every count is in the base counters. */
    return write_zeros(fd, l.slotc_off - l.slots_off);
}

int
qp_out_open(qp_out_t *o, const char *path, char *why, size_t whylen)
{
    o->fd = -1;
    o->tmp = NULL;
    o->path = path;
    if (path == NULL)
        return QP_EINVAL;
    /* The result is renamed over PATH: that must never replace a device or FIFO. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        qp_why(why, whylen, "%s",
            S_ISDIR(st.st_mode) ? "is a directory"
                                : "exists and is not a regular file: not replaced");
        return S_ISDIR(st.st_mode) ? QP_EDIR : QP_ENOTREG;
    }
    size_t n = strlen(path);
    if ((o->tmp = malloc(n + 16)) == NULL)
        return QP_ENOMEM;
    /* Not mkstemp: its file is 0600, and giving it the mode a new file would have needs the
     * umask, which only umask(2) reads by changing it: a moment in which another thread of
     * a libqpt user would create its files with no mask. open(2) applies the umask itself. */
    for (int tries = 0; tries < 100; tries++) {
        uint64_t r;
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
            r = (uint64_t)getpid() * 0x9e3779b97f4a7c15u ^ (uint64_t)tries << 32 ^ (uintptr_t)o;
        snprintf(o->tmp, n + 16, "%s.tmp%06llx", path, (unsigned long long)(r & 0xffffff));
        o->fd = open(o->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (o->fd >= 0 || errno != EEXIST)
            break;
    }
    if (o->fd < 0) {
        int saved = errno;
        qp_why(why, whylen, "%s", strerror(saved));
        free(o->tmp);
        o->tmp = NULL;
        errno = saved;
        return QP_EIO;
    }
    return 0;
}

int
qp_out_commit(qp_out_t *o, char *why, size_t whylen)
{
    int rc = 0, saved = 0;
    if (o->fd >= 0) {
        if (fsync(o->fd) < 0)
            rc = QP_EIO, saved = errno;
        if (close(o->fd) < 0 && rc == 0)
            rc = QP_EIO, saved = errno;
        o->fd = -1;
    }
    if (rc == 0 && rename(o->tmp, o->path) < 0)
        rc = QP_EIO, saved = errno;
    if (rc < 0) {
        qp_why(why, whylen, "%s", strerror(saved));
        qp_out_abort(o);
        errno = saved;
        return rc;
    }
    free(o->tmp);
    o->tmp = NULL;
    return 0;
}

void
qp_out_abort(qp_out_t *o)
{
    int saved = errno;
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp != NULL)
        unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    errno = saved;
}

int
qp_profile_write(const char *path, const qp_profile_t *p, char *why, size_t whylen)
{
    if (path == NULL || p == NULL || (p->hdr.ncounters && p->counters == NULL))
        return QP_EINVAL;
    qp_out_t o;
    int rc = qp_out_open(&o, path, why, whylen);
    if (rc < 0)
        return rc;
    if ((rc = write_profile_fd(o.fd, p)) < 0) {
        qp_why(why, whylen, "%s", strerror(errno));
        qp_out_abort(&o);
        return rc;
    }
    return qp_out_commit(&o, why, whylen);
}
