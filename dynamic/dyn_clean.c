/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * What a killed dyn leaves in a process, taken out (dyn clean PID). A dyn that dies
 * (SIGKILL) leaves the process consistent but instrumented: jumps at entries, exits and
 * call sites into trampolines that count. Its trampoline memory is anonymous r-x memory
 * that starts with a header (dyn_tramp_hdr_t); the jumps are found by comparing the
 * code in memory with the file, the only bytes a session changes: the executable's, and
 * every shared library's (sessions over MODULE:GLOB patterns patch those). Removal
 * follows dyn_session_remove: jumps back first, threads out of the trampolines, memory
 * unmapped only when no pc or stack word points into it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dynamic/dyn.h"

/* Bytes of stack scanned above each thread's stack pointer (as dyn_patch.c). */
#define STACK_SCAN (32u << 10)
#define LEAVE_TRIES 100
#define JMP_LEN 5
/* Bytes of an anonymous executable mapping looked through for trampoline headers. */
#define SCAN_MAX (64ull << 20)
/* Code is compared with the file this many bytes at a time. */
#define CHUNK 65536

typedef struct region {
    uint64_t lo, hi;     /* the trampoline memory */
    dyn_tramp_hdr_t hdr; /* its header */
} region_t;

typedef struct regions {
    region_t *v;
    size_t n, cap;
} regions_t;

static int
add_region(regions_t *r, uint64_t lo, uint64_t hi, const dyn_tramp_hdr_t *h)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 8;
        region_t *n = realloc(r->v, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        r->v = n;
        r->cap = cap;
    }
    r->v[r->n].lo = lo;
    r->v[r->n].hi = hi;
    r->v[r->n++].hdr = *h;
    return 0;
}

/*
 * Is [ADDR, ADDR + SIZE) one whole read-write mapping of dyn's counters (anonymous
 * memory, or the memfd "qpt-dyn-counters" of a dyn before 2026-12)? Checked before
 * unmapping: never unmap what is not ours.
 */
static int
is_counters(dyn_proc_t *p, uint64_t addr, uint64_t size)
{
    char path[64], line[512];
    FILE *f;
    int yes = 0;

    snprintf(path, sizeof(path), "/proc/%d/maps", dyn_proc_pid(p));
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (!yes && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long lo, hi;
        char perms[8];
        int name = 0;
        if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &name) < 3
            || lo != addr)
            continue;
        line[strcspn(line, "\n")] = '\0';
        yes = hi == addr + size && perms[0] == 'r' && perms[1] == 'w'
            && (line[name] == '\0' || strstr(line + name, "qpt-dyn-counters") != NULL);
    }
    fclose(f);
    return yes;
}

/* Is PID's name dyn's (comm "dyn", or "lt-dyn" in the build tree)? */
static int
named_dyn(uint32_t pid)
{
    char path[64], comm[32] = "";
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%u/comm", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fgets(comm, sizeof(comm), f) == NULL)
        comm[0] = '\0';
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    return strcmp(comm, "dyn") == 0 || strcmp(comm, "lt-dyn") == 0;
}

/*
 * Is the dyn that made a region still running (its session is live: not ours)? A
 * zombie is not: a dyn killed with -9 whose parent has not reaped it yet (a shell that
 * runs `kill -9 $DYN; dyn clean $PID`) still has its name, but no longer traces.
 */
static int
dyn_alive(uint32_t pid)
{
    char path[64], stat[512] = "";
    const char *st;
    FILE *f;

    if (pid == 0 || (int)pid == getpid() || !named_dyn(pid))
        return 0;
    /* The state follows the name in parentheses (the last ')': a name may hold one). */
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fgets(stat, sizeof(stat), f) == NULL)
        stat[0] = '\0';
    fclose(f);
    st = strrchr(stat, ')');
    return st == NULL || (st[1] == ' ' && st[2] != 'Z' && st[2] != 'X');
}

/* Anonymous executable mappings whose first bytes are a trampoline header. */
static int
find_regions(dyn_proc_t *p, regions_t *r, unsigned *busy)
{
    char path[64], line[512];
    FILE *f;
    int rc = 0;

    snprintf(path, sizeof(path), "/proc/%d/maps", dyn_proc_pid(p));
    if ((f = fopen(path, "r")) == NULL)
        return QP_EIO;
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long lo, hi, inode;
        char perms[8];
        int name = 0;
        dyn_tramp_hdr_t h;
        if (sscanf(line, "%llx-%llx %7s %*s %*s %llu %n", &lo, &hi, perms, &inode, &name)
            < 4)
            continue;
        if (perms[2] != 'x' || inode != 0
            || (name > 0 && line[name] != '\0' && line[name] != '\n'))
            continue;
        /*
         * Adjacent anonymous mappings with the same permissions are one line of maps (the
         * kernel merges them): a region kept by an earlier session (call sites) and a
         * later one next to it. Each starts with its header, at a page boundary.
         */
        for (uint64_t a = lo; rc == 0 && a < hi && a - lo < SCAN_MAX;) {
            if (dyn_proc_read(p, a, &h, sizeof(h)) < 0
                || memcmp(h.magic, DYN_TRAMP_MAGIC, sizeof(h.magic)) != 0 || h.size == 0
                || (h.size & 4095) != 0 || h.size > hi - a) {
                a += 4096;
                continue;
            }
            if (dyn_alive(h.dyn_pid))
                (*busy)++;
            else
                rc = add_region(r, a, a + h.size, &h);
            a += h.size;
        }
    }
    fclose(f);
    return rc;
}

static const region_t *
region_at(const regions_t *r, uint64_t a)
{
    for (size_t i = 0; i < r->n; i++)
        if (a >= r->v[i].lo && a < r->v[i].hi)
            return &r->v[i];
    return NULL;
}

/*
 * A patch found in the code: a jump into a region, or the 2-byte jmp rel8 of a short
 * entry to such a jump (in padding or a borrowed slot). LEN bytes at AT, FILE the file's.
 */
typedef struct site {
    uint64_t at;
    uint64_t to; /* where the patch leads (in a region) */
    uint8_t len;
    uint8_t file[JMP_LEN];
} site_t;

typedef struct sites {
    site_t *v;
    size_t n, cap;
} sites_t;

static int
add_site(sites_t *s, uint64_t at, uint64_t to, const uint8_t *file, size_t len)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        site_t *n = realloc(s->v, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->v = n;
        s->cap = cap;
    }
    s->v[s->n].at = at;
    s->v[s->n].to = to;
    s->v[s->n].len = (uint8_t)len;
    memcpy(s->v[s->n++].file, file, len);
    return 0;
}

/*
 * Every byte sequence that starts in [ADDR, ADDR + N) and reads as one of our patches,
 * into S (in address order): FILE and MEM hold the file's and the memory's bytes from
 * ADDR, N + 4 of them. Found on one snapshot, put back later (restore_sites).
 *
 * Candidates may overlap, and all are kept: bytes of the code read as a jump or a short
 * jump by chance (a call's displacement ending in 0xe9 just before a patched return
 * site; a jump's displacement holding 0xeb and a byte that leads to another jump) then
 * overlap a real patch. Skipping past the first candidate, or taking two bytes of a
 * jump for a short jump, once left the real patch half put back: a jump leading nowhere
 * that no later pass recognised. Putting every candidate back is safe, as each one is
 * put back to the file's bytes.
 */
static int
find_sites(dyn_proc_t *p, const regions_t *r, uint64_t addr, const uint8_t *file,
    const uint8_t *mem, size_t n, sites_t *s)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t pad[JMP_LEN];
        int32_t rel;
        uint64_t at;
        /* (The file may have a jmp there too: the original code can start with one.) */
        if (mem[i] == 0xe9 && memcmp(mem + i, file + i, JMP_LEN) != 0) {
            memcpy(&rel, mem + i + 1, 4);
            uint64_t to = addr + i + JMP_LEN + (uint64_t)(int64_t)rel;
            if (region_at(r, to) != NULL)
                QP_CHECK(add_site(s, addr + i, to, file + i, JMP_LEN));
        }
        if (mem[i] != 0xeb || memcmp(mem + i, file + i, 2) == 0)
            continue;
        at = addr + i + 2 + (uint64_t)(int64_t)(int8_t)mem[i + 1];
        if (dyn_proc_read(p, at, pad, JMP_LEN) < 0 || pad[0] != 0xe9)
            continue;
        memcpy(&rel, pad + 1, 4);
        uint64_t to = at + JMP_LEN + (uint64_t)(int64_t)rel;
        if (region_at(r, to) != NULL)
            QP_CHECK(add_site(s, addr + i, to, file + i, 2));
    }
    return 0;
}

/*
 * Every thread parked at a patch of S moved to where the patch leads, as though it had
 * taken it (move_threads then lets it out of the region): a thread stopped on the jump
 * in padding that a short entry leads to would otherwise run the padding's own bytes
 * once they are back (nops into another procedure, whose code then returns to the
 * caller with a wrong result). A false candidate too: its bytes are in memory, what the
 * thread would run next. 0, or QP_ENOMEM, QP_EIO.
 */
static int
move_off_sites(dyn_proc_t *p, const sites_t *s)
{
    dyn_pc_map_t *v = s->n ? malloc(s->n * sizeof(*v)) : NULL;
    int rc;

    if (v == NULL)
        return s->n ? QP_ENOMEM : 0;
    for (size_t i = 0; i < s->n; i++)
        v[i] = (dyn_pc_map_t) { s->v[i].at, s->v[i].to };
    dyn_pc_map_sort(v, s->n);
    rc = dyn_proc_move_pcs(p, v, s->n, NULL);
    free(v);
    return rc;
}

/*
 * Put the patches of S back to the file's bytes (threads on them first moved to where
 * they lead), and empty S (the process is stopped: the order does not matter). *JUMPS
 * counts the jumps, those inside another not.
 */
static int
restore_sites(dyn_proc_t *p, sites_t *s, unsigned *jumps)
{
    uint64_t end = 0; /* of the last jump counted */
    int rc = move_off_sites(p, s);

    for (size_t i = 0; i < s->n && rc == 0; i++) {
        const site_t *x = &s->v[i];
        rc = dyn_proc_write(p, x->at, x->file, x->len);
        if (x->len == JMP_LEN && x->at >= end) {
            (*jumps)++;
            end = x->at + JMP_LEN;
        }
    }
    s->n = 0;
    return rc;
}

/* Every jump into a region in the executable sections of IMG. */
static int
restore_jumps(dyn_proc_t *p, const cfg_image_t *img, uint64_t bias, const regions_t *r,
    unsigned *jumps)
{
    uint8_t *mem = malloc(CHUNK + JMP_LEN);
    sites_t ss = { 0 };
    int rc = 0;

    if (mem == NULL)
        return QP_ENOMEM;
    for (size_t k = 0; k < img->nsections && rc == 0; k++) {
        const cfg_section_t *sec = &img->sections[k];
        if (!(sec->flags & CFG_SEC_CODE) || !(sec->flags & CFG_SEC_LOAD)
            || sec->bytes == NULL)
            continue;
        /* A jump is 5 bytes: only one that starts inside the section is ours. */
        for (uint64_t off = 0; off + JMP_LEN <= sec->size && rc == 0; off += CHUNK) {
            size_t n = sec->size - off - JMP_LEN + 1;
            n = n > CHUNK ? CHUNK : n;
            if (dyn_proc_read(p, sec->vma + bias + off, mem, n + JMP_LEN - 1) < 0)
                break; /* not mapped as the file says: leave it */
            rc = find_sites(p, r, sec->vma + bias + off, sec->bytes + off, mem, n, &ss);
        }
    }
    /* (Once all are found: a short jump's slot may be in another section.) */
    if (rc == 0)
        rc = restore_sites(p, &ss, jumps);
    free(mem);
    free(ss.v);
    return rc;
}

/*
 * A line of /proc/PID/maps (LINE, its newline dropped here) that maps a file: its range,
 * device, inode and path into *M (the path points into LINE), the file offset into *OFF,
 * *EXEC whether it is executable. -1 for anything else (anonymous, special).
 */
static int
maps_file_line(char *line, dyn_module_t *m, uint64_t *off, int *exec)
{
    unsigned long long lo, hi, o, ino;
    unsigned maj, min;
    char perms[8];
    int name = 0;
    line[strcspn(line, "\n")] = '\0';
    if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &lo, &hi, perms, &o, &maj, &min,
            &ino, &name)
            < 7
        || ino == 0 || name == 0 || line[name] != '/')
        return -1;
    memset(m, 0, sizeof(*m));
    m->path = line + name;
    m->dev = (uint64_t)maj << 32 | min;
    m->ino = ino;
    m->one[0] = lo;
    m->one[1] = hi;
    *off = o;
    *exec = perms[2] == 'x';
    return 0;
}

/*
 * Every jump into a region in the code of the shared libraries: each executable mapping
 * of a file other than the executable is compared with the file's bytes at its offset
 * (read through dyn_module_path: the very file mapped). *UNSURE is set when a library's
 * code could not be compared (its file replaced since it was loaded): its jumps may still
 * lead into a region, which must then stay mapped.
 */
static int
restore_lib_jumps(dyn_proc_t *p, const regions_t *r, unsigned *jumps, int *unsure)
{
    sites_t ss = { 0 };
    char path[64], line[4096 + 128];
    uint8_t *mem = malloc(CHUNK + JMP_LEN), *file = malloc(CHUNK + JMP_LEN);
    struct stat est;
    FILE *f;
    int rc = 0, have_exe;

    snprintf(path, sizeof(path), "/proc/%d/exe", dyn_proc_pid(p));
    have_exe = stat(path, &est) == 0;
    snprintf(path, sizeof(path), "/proc/%d/maps", dyn_proc_pid(p));
    if (mem == NULL || file == NULL || (f = fopen(path, "r")) == NULL) {
        free(mem);
        free(file);
        *unsure = 1;
        return mem == NULL || file == NULL ? QP_ENOMEM : 0;
    }
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        char fpath[4200];
        const char *why;
        int fd, x;
        uint64_t off;
        dyn_module_t m;
        if (maps_file_line(line, &m, &off, &x) < 0 || !x)
            continue;
        if (have_exe && m.ino == est.st_ino && m.dev == ((uint64_t)major(est.st_dev) << 32 | minor(est.st_dev)))
            continue; /* the executable: restore_jumps did it from its image */
        uint64_t lo = m.one[0], hi = m.one[1];
        if (dyn_module_path(dyn_proc_pid(p), &m, fpath, sizeof(fpath), &why) < 0
            || (fd = open(fpath, O_RDONLY | O_CLOEXEC)) < 0) {
            *unsure = 1;
            continue;
        }
        for (uint64_t a = lo; a + JMP_LEN <= hi && rc == 0; a += CHUNK) {
            size_t n = hi - a - JMP_LEN + 1;
            n = n > CHUNK ? CHUNK : n;
            /* The last jump of a chunk may end in the next page (or past the file). */
            memset(file, 0, n + JMP_LEN - 1);
            memset(mem, 0, n + JMP_LEN - 1);
            if (pread(fd, file, n + JMP_LEN - 1, (off_t)(off + (a - lo))) < (ssize_t)n
                || dyn_proc_read(p, a, mem, n) < 0) {
                *unsure = 1;
                break;
            }
            dyn_proc_read(p, a + n, mem + n, JMP_LEN - 1); /* (may be unmapped) */
            rc = find_sites(p, r, a, file, mem, n, &ss);
        }
        close(fd);
    }
    fclose(f);
    if (rc == 0)
        rc = restore_sites(p, &ss, jumps);
    free(mem);
    free(file);
    free(ss.v);
    return rc;
}

/* Let every thread whose pc is in a region run out of it (one that stays keeps its
 * region mapped: free_region sees its pc). */
static int
move_threads(dyn_proc_t *p, const regions_t *r, unsigned *moved)
{
    for (size_t i = 0; i < r->n; i++) {
        int rc = dyn_proc_leave_range(p, r->v[i].lo, r->v[i].hi, LEAVE_TRIES, moved);
        if (rc < 0 && rc != QP_ERANGE)
            return rc == QP_ENOMEM ? rc : 0;
    }
    return 0;
}

/* Unmap what region G owns that no word of W (sorted, N) can still need. */
static void
free_region(dyn_proc_t *p, const region_t *g, const uint64_t *w, size_t n, int unsure,
    dyn_clean_report_t *out)
{
    size_t i = cfg_u64_lower_bound(w, n, g->lo);
    int used = unsure || (i < n && w[i] < g->hi);

    if (!used && g->hdr.ctr != 0 && is_counters(p, g->hdr.ctr, g->hdr.ctr_size)
        && dyn_space_free(p, g->hdr.ctr, g->hdr.ctr_size) == 0)
        out->unmapped++;
    /* The code may stay: its header no longer names the counters (their address may
       be reused by the program). */
    if (!used)
        dyn_tramp_forget_counters(p, g->lo);
    if (used || (g->hdr.flags & DYN_HDR_CALLS)) {
        out->kept++;
        return;
    }
    if (dyn_space_free(p, g->lo, g->hi - g->lo) == 0)
        out->unmapped++;
}

/*
 * The breakpoint a following dyn (libraries loaded later) put on the loader's r_brk, put
 * back to the file's bytes (read through dyn_module_path: the very file mapped): the jump
 * to its guard's trampoline (5 bytes; the trampoline's pages stay, its code made all rets
 * for a later following to reuse: dyn_proc_guard_retire), or the int3
 * of an older dyn or of a process that could not take the guard (1 byte); OUT->breaks
 * counts it. A jump elsewhere than to a trampoline of dyn's (dyn_proc_is_guard) is not
 * ours: left alone, its target in OUT->foreign_brk.
 */
static void
restore_break(dyn_proc_t *p, dyn_clean_report_t *out)
{
    char path[64], line[4096 + 128], fpath[4200];
    uint64_t rd, brk;
    uint8_t mem[5], file[5];
    size_t len;
    FILE *f;

    if (dyn_proc_r_debug(p, &rd, &brk) < 0 || dyn_proc_read(p, brk, mem, 1) < 0
        || (mem[0] != 0xcc && mem[0] != 0xe9))
        return;
    len = mem[0] == 0xe9 ? 5 : 1;
    uint64_t to = 0;
    if (len == 5) {
        int32_t rel;
        if (dyn_proc_read(p, brk, mem, 5) < 0)
            return;
        memcpy(&rel, mem + 1, 4);
        to = brk + 5 + (uint64_t)(int64_t)rel;
        if (dyn_proc_is_guard(p, to) != 1) {
            out->foreign_brk = to;
            return;
        }
    }
    snprintf(path, sizeof(path), "/proc/%d/maps", dyn_proc_pid(p));
    if ((f = fopen(path, "r")) == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *why;
        int fd, x;
        uint64_t off;
        dyn_module_t m;
        if (maps_file_line(line, &m, &off, &x) < 0 || brk < m.one[0] || brk >= m.one[1])
            continue;
        uint64_t lo = m.one[0];
        if (dyn_module_path(dyn_proc_pid(p), &m, fpath, sizeof(fpath), &why) == 0
            && (fd = open(fpath, O_RDONLY | O_CLOEXEC)) >= 0) {
            /* (the file's routine is a bare return: never the byte found in memory) */
            if (pread(fd, file, len, (off_t)(off + (brk - lo))) == (ssize_t)len
                && (file[0] == 0xc3 || file[0] == 0xf3)
                && dyn_proc_write(p, brk, file, len) == 0) {
                out->breaks++;
                if (to != 0) /* no way in left: the trampoline retired, to be reused */
                    dyn_proc_guard_retire(p, to);
            }
            close(fd);
        }
        break;
    }
    fclose(f);
}

/*****************************************************************************
 * Descriptors a killed dyn left open
 */

/* The thread ids of process PID into *TIDS (malloc'ed), *N of them; 0, or -1. */
static int
thread_ids(uint32_t pid, long **tids, size_t *n)
{
    char path[64];
    struct dirent *e;
    DIR *d;
    size_t cap = 0;

    *tids = NULL;
    *n = 0;
    snprintf(path, sizeof(path), "/proc/%u/task", pid);
    if ((d = opendir(path)) == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || tid <= 0)
            continue;
        if (*n == cap) {
            long *v = realloc(*tids, (cap = cap ? 2 * cap : 16) * sizeof(*v));
            if (v == NULL) {
                closedir(d);
                return -1;
            }
            *tids = v;
        }
        (*tids)[(*n)++] = tid;
    }
    closedir(d);
    return 0;
}

/* The first line of /proc/OTHER/FILE that MATCH(line, ARG) answers 1 for: 1, else 0
 * (also when the file cannot be read). */
static int
proc_line(long other, const char *file, int (*match)(const char *line, const void *arg),
          const void *arg)
{
    char path[64], line[512];
    FILE *f;
    int yes = 0;

    snprintf(path, sizeof(path), "/proc/%ld/%s", other, file);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (!yes && fgets(line, sizeof(line), f) != NULL)
        yes = match(line, arg);
    fclose(f);
    return yes;
}

/* The thread ids of a process, for traced_by. */
typedef struct {
    const long *v;
    size_t n;
} tids_t;

/* A status line "TracerPid: T" with T one of the thread ids ARG (a tids_t). */
static int
traced_by(const char *line, const void *arg)
{
    const tids_t *t = arg;
    unsigned long long n;
    if (sscanf(line, "TracerPid: %llu", &n) != 1 || n == 0)
        return 0;
    for (size_t i = 0; i < t->n; i++)
        if (n == (unsigned long long)t->v[i])
            return 1;
    return 0;
}

/* A maps line of a mapping of the memfd whose inode is *ARG (a uint64_t). */
static int
maps_memfd(const char *line, const void *arg)
{
    unsigned long long n;
    int name = 0;
    return sscanf(line, "%*s %*s %*s %*s %llu %n", &n, &name) == 1
        && n == *(const uint64_t *)arg && name > 0 && strncmp(line + name, "/memfd:", 7) == 0;
}

/* Has a descriptor of process OTHER the file of WHAT (a struct stat) open? */
static int
fd_open_in(long other, const struct stat *what)
{
    char path[64], fdpath[320];
    struct dirent *e;
    struct stat st;
    DIR *d;
    int yes = 0;

    snprintf(path, sizeof(path), "/proc/%ld/fd", other);
    if ((d = opendir(path)) == NULL)
        return 0;
    while (!yes && (e = readdir(d)) != NULL) {
        snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
        yes = e->d_name[0] != '.' && stat(fdpath, &st) == 0 && st.st_dev == what->st_dev
            && st.st_ino == what->st_ino;
    }
    closedir(d);
    return yes;
}

/*
 * Is there a live process, other than PID and ourselves, that a thread of PID traces
 * (WHAT NULL: PID is a tracer; TracerPid is the tracing thread's id, any of PID's), or
 * that has the memfd WHAT open or mapped? Processes we may not read are not seen
 * (another user's holds none of PID's memfds unless PID passed it one). 1 when unsure.
 */
static int
others_hold(uint32_t pid, const struct stat *what)
{
    struct dirent *e;
    DIR *d;
    long *tids = NULL;
    size_t nt = 0;
    int yes = 0;

    if (what == NULL && thread_ids(pid, &tids, &nt) < 0) {
        free(tids);
        return 1;
    }
    if ((d = opendir("/proc")) == NULL) {
        free(tids);
        return 1;
    }
    while (!yes && (e = readdir(d)) != NULL) {
        char *end;
        long other = strtol(e->d_name, &end, 10);
        if (*end != '\0' || other <= 0 || other == (long)pid || other == (long)getpid())
            continue;
        uint64_t ino = what != NULL ? (uint64_t)what->st_ino : 0;
        if (what == NULL)
            yes = proc_line(other, "status", traced_by, &(tids_t) { tids, nt });
        else
            yes = fd_open_in(other, what) || proc_line(other, "maps", maps_memfd, &ino);
    }
    closedir(d);
    free(tids);
    return yes;
}

/*
 * Descriptors a killed dyn left open in the stopped process P: the memfd of its guard
 * (made by P between memfd_create and close, dyn_ptrace_guard.c) or of its variables
 * (opened by P between openat and close, libqpt's qpt_live.c), when dyn died in that
 * window. No dyn can be in that window now: P is traced by us, and a process has one
 * tracer. Closed only when the name is a dyn memfd's, P is neither a dyn nor a tracer
 * itself (a running dyn, or a libqpt program, holds its own memfds so), and no other
 * live process has the same memfd open or mapped (a live dyn's target maps them: the
 * killed dyn's are held by P alone), nor P itself maps it (a mutator's own memfd, its
 * target gone: closing it would harm the mutator; a killed dyn's, past the mapping, is
 * only a descriptor too many). OUT->fds counts them; OUT->tracer_fds those left open
 * because P is a dyn or a tracer, OUT->mapped_fds because P maps them.
 */
static void
close_memfds(dyn_proc_t *p, dyn_clean_report_t *out)
{
    static const char *const names[] = { "/memfd:qpt-brk ", "/memfd:qpt-vars " };
    uint32_t pid = (uint32_t)dyn_proc_pid(p);
    char path[64], link[128];
    struct dirent *e;
    DIR *d;
    int tracer = -1; /* (asked at the first such descriptor) */

    snprintf(path, sizeof(path), "/proc/%u/fd", pid);
    if ((d = opendir(path)) == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char fdpath[96], *end;
        struct stat st;
        long fd = strtol(e->d_name, &end, 10);
        if (*end != '\0' || e->d_name[0] == '\0')
            continue;
        snprintf(fdpath, sizeof(fdpath), "%s/%ld", path, fd);
        ssize_t k = readlink(fdpath, link, sizeof(link) - 1);
        if (k <= 0 || stat(fdpath, &st) != 0)
            continue;
        link[k] = '\0';
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            uint64_t a[6] = { (uint64_t)fd, 0, 0, 0, 0, 0 };
            int64_t r;
            if (strncmp(link, names[i], strlen(names[i])) != 0)
                continue;
            if (tracer < 0)
                tracer = named_dyn(pid) || others_hold(pid, NULL);
            if (tracer)
                out->tracer_fds++;
            else if (proc_line(pid, "maps", maps_memfd, &(uint64_t) { (uint64_t)st.st_ino }))
                out->mapped_fds++;
            else if (!others_hold(pid, &st) && dyn_proc_syscall(p, SYS_close, a, &r) == 0
                     && r == 0)
                out->fds++;
        }
    }
    closedir(d);
}

int
dyn_clean(
    dyn_proc_t *p, const cfg_image_t *img, uint64_t bias, dyn_clean_report_t *out /*OUT*/)
{
    regions_t r = { 0 };
    uint64_t *w = NULL;
    size_t nw = 0;
    int rc, unsure = 0;

    if (p == NULL || img == NULL || out == NULL || !dyn_proc_is_stopped(p))
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    restore_break(p, out);
    close_memfds(p, out);
    if (dyn_proc_stub_reset(p) == 1)
        out->stub++;
    if ((rc = find_regions(p, &r, &out->busy)) < 0 || r.n == 0)
        goto out;
    out->regions = (unsigned)r.n;
    /* The order of dyn_session_remove: jumps, threads, then memory. */
    if ((rc = restore_jumps(p, img, bias, &r, &out->jumps)) < 0
        || (rc = restore_lib_jumps(p, &r, &out->jumps, &unsure)) < 0
        || (rc = move_threads(p, &r, &out->moved)) < 0
        || (rc = dyn_proc_words(p, STACK_SCAN, &w, &nw)) < 0)
        goto out;
    for (size_t i = 0; i < r.n; i++)
        free_region(p, &r.v[i], w, nw, unsure, out);
out:
    free(w);
    free(r.v);
    return rc;
}

/*****************************************************************************
 * dyn clean PID: attach, read the executable, clean, let go
 */

/* Write one line (printf FMT) into WHY (WHYLEN bytes); nothing when WHY is NULL. */
static void __attribute__((format(printf, 3, 4)))
say_why(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    if (why == NULL || whylen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* The line for a failure RC to trace PID into WHY: "PID: [WHAT: ]REASON" (errno says
 * why for QP_EIO: call right after the failure). */
static void
trace_why(int pid, const char *what, int rc, char *why, size_t whylen)
{
    int err = errno;
    char buf[256];
    const char *reason
        = rc == QP_EIO ? dyn_proc_why(pid, err, buf, sizeof(buf)) : qp_strerror(rc);

    if (what == NULL)
        say_why(why, whylen, "%d: %s", pid, reason);
    else
        say_why(why, whylen, "%d: %s: %s", pid, what, reason);
}

/* The reason of a failure RC that is not about tracing: errno's for QP_EIO. */
static const char *
reason(int rc)
{
    return rc == QP_EIO ? strerror(errno) : qp_strerror(rc);
}

int
dyn_clean_pid(int pid, dyn_clean_report_t *out, char *why, size_t whylen)
{
    char exe[64];
    cfg_image_t *img = NULL;
    dyn_proc_t *p = NULL;
    uint64_t bias = 0;
    int rc;

    if (why != NULL && whylen > 0)
        why[0] = '\0';
    if (pid <= 0 || out == NULL) {
        say_why(why, whylen, "%s", qp_strerror(QP_EINVAL));
        return QP_EINVAL;
    }
    snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
    /* Attach first: the reason it fails (no such process, ...) is the one to give. */
    if ((rc = dyn_proc_attach(pid, &p)) < 0) {
        trace_why(pid, NULL, rc, why, whylen);
        return rc;
    }
    dyn_proc_resume(p);
    if ((rc = cfg_image_open_bfd(exe, &img)) < 0
        || (rc = dyn_proc_load_bias(p, img->entry, &bias)) < 0) {
        say_why(
            why, whylen, "%d: cannot read its executable %s: %s", pid, exe, reason(rc));
        cfg_image_destroy(img);
        dyn_proc_destroy(p);
        return rc;
    }
    if ((rc = dyn_proc_stop(p)) < 0)
        trace_why(pid, "cannot stop it", rc, why, whylen);
    else if ((rc = dyn_clean(p, img, bias, out)) < 0)
        say_why(why, whylen, "%d: cleaning: %s", pid, reason(rc));
    dyn_proc_destroy(p);
    cfg_image_destroy(img);
    return rc;
}
