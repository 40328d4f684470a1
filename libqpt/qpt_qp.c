/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * include/qpt/qpt_qp.h, first half: the profiles read and sorted into modules, a module
 * loaded (its executable, description, profiles summed and checked, report), its names
 * as printed, and its rows and procedures by index. Over report/ (qp_report.h).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_search.h"
#include "libqpt/qpt_qp_priv.h"

/* One line "PATH: MSG" into WHY; returns RC. */
static int
fail_path(int rc, char *why, size_t whylen, const char *path, const char *msg)
{
    if (why != NULL && whylen > 0)
        snprintf(why, whylen, "%s: %s", path, msg);
    return rc;
}

/*****************************************************************************
 * Reading the profiles into modules
 */

/* The module profile P belongs to: the one whose file it names or whose description id
 * it has; all of them with EXE (or ONE), and the first when P names no file. */
static int
module_of(const qpt_qp_set_t *s, const char *exe, int one, const qp_profile_t *p)
{
    if (exe != NULL || one || p->hdr.exe[0] == '\0')
        return s->nmods > 0 ? 0 : -1;
    for (uint32_t k = 0; k < s->nmods; k++)
        if (s->mods[k].id == p->hdr.id || strcmp(s->mods[k].exe, p->hdr.exe) == 0)
            return (int)k;
    return -1;
}

/* The counters and dumps of S's profiles read (those qp_profile_open checked): 0, or
 * the first failure with S->read_why. */
static int
fill_profiles(qpt_qp_set_t *s)
{
    char w[512];
    int rc = 0;
    for (int i = 0; i < s->nfiles; i++) {
        qp_profile_pending_t *pd = s->pending[i];
        s->pending[i] = NULL;
        if (rc == 0 && (rc = qp_profile_fill(pd, &s->ps[i], w, sizeof(w))) < 0)
            fail_path(rc, s->read_why, sizeof(s->read_why), s->files[i], w);
        else if (rc < 0)
            qp_profile_close(pd);
    }
    return rc;
}

static void *
reader_main(void *arg)
{
    qpt_qp_set_t *s = arg;
    s->read_rc = fill_profiles(s);
    return NULL;
}

int
qpt_qp_set_wait(qpt_qp_set_t *s, char *why, size_t whylen)
{
    if (s == NULL)
        return QPT_EINVAL;
    if (s->reading) {
        pthread_join(s->reader, NULL);
        s->reading = 0;
    }
    if (s->read_rc < 0 && why != NULL && whylen > 0)
        snprintf(why, whylen, "%s", s->read_why);
    return s->read_rc;
}

/* RC, or the failure of S's counters' read (another thread's: it came first when the
 * counters were read at once), with WHY. */
static int
read_first(qpt_qp_set_t *s, int rc, char *why, size_t whylen)
{
    return qpt_qp_set_wait(s, NULL, 0) < 0 ? qpt_qp_set_wait(s, why, whylen) : rc;
}

/* The profiles' headers read and checked, each into S->pending. */
static int
open_profiles(qpt_qp_set_t *s, char *why, size_t whylen)
{
    char w[512];
    s->pending = calloc((size_t)s->nfiles, sizeof(*s->pending));
    if (s->pending == NULL)
        return fail_path(QPT_ENOMEM, why, whylen, s->files[0], qpt_strerror(QPT_ENOMEM));
    for (int i = 0; i < s->nfiles; i++) {
        int rc = qp_profile_open(s->files[i], &s->ps[i], &s->pending[i], w, sizeof(w));
        if (rc < 0)
            return fail_path(rc, why, whylen, s->files[i], w);
    }
    return 0;
}

/* The profiles of S read: at once, or their counters on another thread (BACKGROUND;
 * at once when no thread starts). */
static int
read_profiles(qpt_qp_set_t *s, int background, char *why, size_t whylen)
{
    int rc = open_profiles(s, why, whylen);
    if (rc == 0 && background && pthread_create(&s->reader, NULL, reader_main, s) == 0) {
        s->reading = 1;
        return 0;
    }
    if (rc == 0)
        s->read_rc = fill_profiles(s);
    return rc < 0 ? rc : qpt_qp_set_wait(s, why, whylen);
}

int
qpt_qp_set_read(const char *const *files, int nfiles, const char *exe, unsigned flags,
                qpt_qp_set_t **out, char *why, size_t whylen)
{
    if (out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    if (files == NULL || nfiles <= 0)
        return QPT_EINVAL;
    for (int i = 0; i < nfiles; i++)
        if (files[i] == NULL)
            return QPT_EINVAL;
    int one = (flags & QPT_QP_ONE) != 0;
    qpt_qp_set_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return fail_path(QPT_ENOMEM, why, whylen, files[0], qpt_strerror(QPT_ENOMEM));
    s->ps = calloc((size_t)nfiles, sizeof(qp_profile_t));
    s->nfiles = nfiles;
    s->files = files;
    s->mods = calloc((size_t)nfiles, sizeof(qpt_qp_t));
    int rc = s->ps && s->mods ? 0 : QPT_ENOMEM;
    if (rc < 0)
        fail_path(rc, why, whylen, files[0], qpt_strerror(rc));
    if (rc == 0)
        rc = read_profiles(s, (flags & QPT_QP_BACKGROUND) != 0, why, whylen);
    if (rc == 0 && exe == NULL && !one && s->ps[0].hdr.exe[0] == '\0')
        rc = fail_path(QPT_EINVAL, why, whylen, files[0],
                       "the profile does not name its executable: use --exe");
    for (int i = 0; rc == 0 && i < nfiles; i++) {
        const qp_profile_t *p = &s->ps[i];
        int k = module_of(s, exe, one, p);
        if (k < 0) {
            k = (int)s->nmods++;
            qpt_qp_t *m = &s->mods[k];
            m->set = s;
            m->exe = exe != NULL ? exe : p->hdr.exe;
            m->id = p->hdr.id;
            m->files = calloc((size_t)nfiles, sizeof(*m->files));
            m->ps = calloc((size_t)nfiles, sizeof(*m->ps));
            if (m->files == NULL || m->ps == NULL) {
                rc = fail_path(QPT_ENOMEM, why, whylen, files[0], qpt_strerror(QPT_ENOMEM));
                break;
            }
        }
        qpt_qp_t *m = &s->mods[k];
        m->files[m->nfiles] = files[i];
        m->ps[m->nfiles++] = &s->ps[i];
    }
    if (rc < 0) {
        /* The read's failure first (it came first when read at once). */
        rc = read_first(s, rc, why, whylen);
        qpt_qp_set_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void
free_names(char **v, uint32_t n)
{
    for (uint32_t i = 0; v != NULL && i < n; i++)
        free(v[i]);
    free(v);
}

void
qpt_qp_set_free(qpt_qp_set_t *s)
{
    if (s == NULL)
        return;
    qpt_qp_set_wait(s, NULL, 0);
    for (int i = 0; s->pending != NULL && i < s->nfiles; i++)
        qp_profile_close(s->pending[i]);
    free(s->pending);
    for (uint32_t k = 0; s->mods != NULL && k < s->nmods; k++) {
        qpt_qp_t *m = &s->mods[k];
        free_names(m->plt_names, m->rep.nplt);
        qp_report_free(&m->rep);
        qp_unwinder_destroy(m->unw);
        free_names(m->names, m->desc.hdr.nprocs);
        qp_desc_free(&m->desc);
        cfg_image_destroy(m->img);
        qp_profile_free(&m->prof);
        free(m->files);
        free(m->ps);
    }
    free(s->mods);
    for (int i = 0; s->ps != NULL && i < s->nfiles; i++)
        qp_profile_free(&s->ps[i]);
    free(s->ps);
    cfg_image_destroy(s->original);
    free(s);
}

uint32_t
qpt_qp_set_count(const qpt_qp_set_t *s)
{
    return s != NULL ? s->nmods : 0;
}

qpt_qp_t *
qpt_qp_set_module(const qpt_qp_set_t *s, uint32_t k)
{
    return s != NULL && k < s->nmods ? &s->mods[k] : NULL;
}

const char *
qpt_qp_exe(const qpt_qp_t *m)
{
    return m != NULL ? m->exe : NULL;
}

const char *const *
qpt_qp_files(const qpt_qp_t *m, uint32_t *n)
{
    if (n != NULL)
        *n = m != NULL ? m->nfiles : 0;
    return m != NULL ? m->files : NULL;
}

/* PATH's image into *IMG; SYMBOL_RELOCS: without its relative relocations (a lazy
 * report's image: the stubs' GOT slots have symbols). */
static int
open_image(const char *path, int symbol_relocs, cfg_image_t **img, char *why, size_t whylen)
{
    errno = 0;
    /* Any ISA the analysis reads (AArch64 too): the report reads, never rewrites. Huge
     * pages for the relocations, as for the report's own big arrays (base/qp_huge.h). */
    int rc = cfg_image_open_bfd_flags(path, img, NULL, 0,
                                      CFG_OPEN_ANY_ISA | CFG_OPEN_HUGE_PAGES
                                          | (symbol_relocs ? CFG_OPEN_SYMBOL_RELOCS : 0u));
    if (rc < 0)
        return fail_path(rc, why, whylen, path,
                         rc == QP_EIO && errno ? strerror(errno) : qp_strerror(rc));
    return 0;
}

static void set_build_id(qpt_qp_t *m);

int
qpt_qp_set_original(qpt_qp_set_t *s, const char *path, char *why, size_t whylen)
{
    if (s == NULL || path == NULL || s->original != NULL)
        return QPT_EINVAL;
    int rc = open_image(path, 0, &s->original, why, whylen);
    for (uint32_t k = 0; rc == 0 && k < s->nmods; k++)
        if (s->mods[k].loaded)
            set_build_id(&s->mods[k]);
    return rc;
}

/* Sum M's profiles into M->prof; with D, every profile must belong to it first. */
static int
merge_profiles(qpt_qp_t *m, const qp_desc_t *d, char *why, size_t whylen)
{
    char w[512];
    int rc;
    for (uint32_t i = 0; i < m->nfiles; i++) {
        if (d != NULL && (rc = qp_profile_check(m->ps[i], d, w, sizeof(w))) < 0)
            return fail_path(rc, why, whylen, m->files[i], w);
        if ((rc = qp_profile_merge_take(&m->prof, m->ps[i], w, sizeof(w))) < 0)
            return fail_path(rc, why, whylen, m->files[i], w);
        /* Only the sum is used from here (chromium's counters: 33 MB a copy). */
        free(m->ps[i]->counters);
        m->ps[i]->counters = NULL;
    }
    return 0;
}

int
qpt_qp_set_merge(qpt_qp_set_t *s, const char *output, char *why, size_t whylen)
{
    if (s == NULL || output == NULL || s->nmods == 0)
        return QPT_EINVAL;
    int rc = qpt_qp_set_wait(s, why, whylen);
    if (rc == 0)
        rc = merge_profiles(&s->mods[0], NULL, why, whylen);
    char w[512];
    if (rc == 0 && (rc = qp_profile_write(output, &s->mods[0].prof, w, sizeof(w))) < 0)
        fail_path(rc, why, whylen, output, w);
    return rc;
}

/*****************************************************************************
 * Loading a module
 */

/* M's build_id: the hex of its code file's build-id (the original's once given). */
static void
set_build_id(qpt_qp_t *m)
{
    const cfg_image_t *code = qpt_qp_code_image(m);
    m->build_id[0] = '\0';
    for (size_t i = 0; i < code->build_id_len && i < sizeof(code->build_id); i++)
        snprintf(m->build_id + 2 * i, 3, "%02x", code->build_id[i]);
}

/* The pages of image IMG read so far dropped: qp_desc_set_release's. */
static void
release_image(void *img)
{
    cfg_image_release_pages(img);
}

/* M's profiles against the id and counters in its description's header (the first one
 * refused as merge_profiles refuses it); 0 when the header is not there (load_desc then
 * says why). */
static int
check_ids(qpt_qp_t *m, char *why, size_t whylen)
{
    const cfg_section_t *s = cfg_image_section_named(m->img, QP_DESC_SECTION);
    qp_desc_t head = { 0 };
    if (s == NULL || qp_desc_peek(s->bytes, s->size, &head.hdr) < 0)
        return 0;
    char w[512];
    for (uint32_t i = 0; i < m->nfiles; i++) {
        int rc = qp_profile_check(m->ps[i], &head, w, sizeof(w));
        if (rc < 0)
            return fail_path(rc, why, whylen, m->files[i], w);
    }
    return 0;
}

/* The description in the executable's .qpt.desc section. LAZY: its procedures' blocks
 * and edges decoded only when a report solves them (the image keeps the bytes). */
static int
load_desc(qpt_qp_t *m, int lazy, char *why, size_t whylen)
{
    char w[512];
    const cfg_section_t *s = cfg_image_section_named(m->img, QP_DESC_SECTION);
    if (s == NULL)
        return fail_path(QPT_EFORMAT, why, whylen, m->exe,
                         "no .qpt.desc section: not rewritten by qpt-rewrite --driver=qp "
                         "or --driver=naive");
    int rc = (lazy ? qp_desc_parse_lazy : qp_desc_parse)(s->bytes, s->size, &m->desc, w,
                                                          sizeof(w));
    return rc < 0 ? fail_path(rc, why, whylen, m->exe, w) : 0;
}

static void
phase(void (*progress)(void *, const char *), void *arg, const char *what)
{
    if (progress != NULL)
        progress(arg, what);
}

/* A report's failure: the description's own words for a part that did not decode. */
static int
report_failed(qpt_qp_t *m, int rc, char *why, size_t whylen)
{
    return fail_path(rc, why, whylen, m->exe,
                     rc == QP_EFORMAT && *qp_desc_error(&m->desc) ? qp_desc_error(&m->desc)
                                                                  : qp_strerror(rc));
}

int
qpt_qp_load(qpt_qp_t *m, unsigned flags, void (*progress)(void *, const char *), void *arg,
            char *why, size_t whylen)
{
    if (m == NULL || m->loaded || m->img != NULL)
        return QPT_EINVAL;
    int lazy = (flags & QPT_QP_LAZY) != 0;
    phase(progress, arg, "opening the executable");
    /* A lazy report (the flat profile) reads no relative relocation (the stubs' GOT
     * slots have symbols), nor again what opening the file and checking the
     * description read once. */
    int rc = open_image(m->exe, lazy, &m->img, why, whylen);
    phase(progress, arg, "reading the description");
    /* A profile of another executable is refused before the description is read (its
     * id is in the header): chromium's took 900 MB to refuse. */
    if (rc == 0)
        rc = check_ids(m, why, whylen);
    if (rc == 0)
        rc = load_desc(m, lazy, why, whylen);
    if (rc == 0 && lazy) {
        cfg_image_release_pages(m->img);
        qp_desc_set_release(&m->desc, release_image, m->img);
    }
    phase(progress, arg, "summing the profiles");
    /* The counters may still be read (QPT_QP_BACKGROUND). */
    if (m->set != NULL)
        rc = read_first(m->set, rc, why, whylen);
    if (rc == 0)
        rc = merge_profiles(m, &m->desc, why, whylen);
    /* Without unwind tables the dumps stay unused; the report says so. */
    if (rc == 0 && m->prof.ndumps > 0 && qp_unwinder_create(m->exe, &m->unw, NULL, 0) < 0)
        m->unw = NULL;
    phase(progress, arg, "solving the counts");
    int r;
    if (rc == 0
        && (r = qp_report_build_phased(&m->desc, &m->prof, m->unw, progress, arg, &m->rep))
            < 0)
        rc = report_failed(m, r, why, whylen);
    phase(progress, arg, "counting PLT stubs");
    /* PLT stubs, counted from the calls of measured code (the file keeps them). */
    if (rc == 0 && (r = qp_report_count_plt(&m->rep, m->img)) < 0)
        rc = report_failed(m, r, why, whylen);
    m->loaded = rc == 0;
    if (m->loaded)
        set_build_id(m);
    return rc;
}

/*****************************************************************************
 * Names as printed
 */

static const char *
proc_name(const qpt_qp_t *m, uint32_t proc)
{
    if (m->names != NULL && m->names[proc] != NULL)
        return m->names[proc];
    return qp_desc_str(&m->desc, m->desc.procs[proc].name);
}

/* The source file (DWARF) of procedure PROC's entry, or NULL. */
static const char *
proc_file(const qpt_qp_t *m, uint32_t proc)
{
    const char *file;
    unsigned line;
    return cfg_image_line(m->img, m->desc.procs[proc].entry, &file, &line) == 0 ? file : NULL;
}

/* The demangled name of every procedure that has one (NULL entries: the stored name);
 * NULL when out of memory (the stored names are printed then). */
static char **
demangled_names(const qp_desc_t *desc)
{
    char **v = calloc(desc->hdr.nprocs + 1, sizeof(char *));
    for (uint32_t i = 0; v != NULL && i < desc->hdr.nprocs; i++)
        v[i] = cfg_demangle(qp_desc_str(desc, desc->procs[i].name));
    return v;
}

/* The PLT stubs' names demangled ("std::ostream::put(char)@plt"), NULL where they are
 * not mangled (or on ENOMEM). */
static char **
demangled_plt_names(const qp_report_t *r)
{
    char **v = calloc(r->nplt + 1, sizeof(char *));
    for (uint32_t i = 0; v != NULL && i < r->nplt; i++) {
        const char *name = r->stubs[i].name, *at = strrchr(name, '@');
        char *base = strndup(name, at != NULL ? (size_t)(at - name) : strlen(name));
        char *dm = base != NULL ? cfg_demangle(base) : NULL;
        if (dm != NULL) {
            size_t len = strlen(dm) + (at != NULL ? strlen(at) : 0) + 1;
            if ((v[i] = malloc(len)) != NULL)
                snprintf(v[i], len, "%s%s", dm, at != NULL ? at : "");
        }
        free(dm);
        free(base);
    }
    return v;
}

/* DUP[i] set for each procedure of M whose name another one has too: by a hash table of
 * the first procedure of each name (open addressing; a sort of chromium's 667,000
 * names was 5% of a flat report's instructions). 0, or QP_ENOMEM. */
static int
mark_duplicates(const qpt_qp_t *m, uint8_t *dup)
{
    uint32_t n = m->desc.hdr.nprocs;
    size_t size = 64;
    while (size < (size_t)n + n / 2)
        size *= 2;
    uint32_t *first = malloc(size * sizeof(uint32_t)); /* QP_VIRT: empty */
    if (first == NULL)
        return QP_ENOMEM;
    memset(first, 0xff, size * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++) {
        const char *name = proc_name(m, i);
        size_t at = qp_str_hash(name) & (size - 1);
        while (first[at] != QP_VIRT && strcmp(proc_name(m, first[at]), name) != 0)
            at = (at + 1) & (size - 1);
        if (first[at] == QP_VIRT)
            first[at] = i;
        else
            dup[first[at]] = dup[i] = 1;
    }
    free(first);
    return 0;
}

/* Procedures that share a name (static functions of several files) are printed as
 * "name [file.c]" (their source file, DWARF), so that rows can be told apart. */
static void
qualify_duplicates(qpt_qp_t *m)
{
    uint32_t n = m->desc.hdr.nprocs;
    if (m->names == NULL && (m->names = calloc(n + 1, sizeof(char *))) == NULL)
        return;
    uint8_t *dup = calloc(n + 1, 1);
    if (dup == NULL || mark_duplicates(m, dup) < 0) {
        free(dup);
        return;
    }
    /* (Which share a name is known before any name changes.) */
    for (uint32_t proc = 0; proc < n; proc++) {
        const char *file = dup[proc] ? proc_file(m, proc) : NULL;
        const char *base = file ? strrchr(file, '/') : NULL;
        if (file == NULL)
            continue;
        const char *name = proc_name(m, proc);
        size_t len = strlen(name) + strlen(base ? base + 1 : file) + 4;
        char *q = malloc(len);
        if (q == NULL)
            continue;
        snprintf(q, len, "%s [%s]", name, base ? base + 1 : file);
        free(m->names[proc]);
        m->names[proc] = q;
    }
    free(dup);
}

void
qpt_qp_name(qpt_qp_t *m, unsigned flags)
{
    if (m == NULL || !m->loaded || m->names != NULL || m->plt_names != NULL)
        return;
    if (flags & QPT_QP_DEMANGLE) {
        m->names = demangled_names(&m->desc);
        m->plt_names = demangled_plt_names(&m->rep);
    }
    if (flags & QPT_QP_QUALIFY)
        qualify_duplicates(m);
}

int
qpt_qp_path_matches(const char *pattern, size_t n, const char *file)
{
    return pattern != NULL && n <= strlen(pattern) && cfg_module_match(pattern, n, file);
}

int
qpt_qp_name_matches(const char *stored, const char *name)
{
    return stored != NULL && name != NULL && qp_name_matches(stored, name);
}

size_t
qpt_qp_csv_field(const char *s, char *out, size_t outlen)
{
    return qp_csv_field(s != NULL ? s : "", out, outlen);
}

/*****************************************************************************
 * The module, its rows
 */

const cfg_image_t *
qpt_qp_code_image(const qpt_qp_t *m)
{
    return m->set != NULL && m->set->original != NULL ? m->set->original : m->img;
}

int
qpt_qp_info(const qpt_qp_t *m, qpt_qp_info_t *out)
{
    if (m == NULL || out == NULL || !m->loaded)
        return QPT_EINVAL;
    const qp_report_t *r = &m->rep;
    const qp_profile_t *p = &m->prof;
    uint32_t df = m->desc.hdr.flags, drv = m->desc.hdr.driver;
    const cfg_image_t *code = qpt_qp_code_image(m);
    *out = (qpt_qp_info_t) {
        .exe = m->exe,
        .code_path = code->path,
        .code_build_id = m->build_id,
        .is_library = (m->img->flags & CFG_IMG_SHLIB) != 0,
        .driver = drv == QP_DRIVER_QP      ? QPT_QP_DRIVER_EDGES
            : drv == QP_DRIVER_NAIVE ? QPT_QP_DRIVER_BLOCKS
                                     : QPT_QP_DRIVER_OTHER,
        .atomic = (df & QP_DESC_ATOMIC) != 0,
        .threads = (df & QP_DESC_THREADS) != 0,
        .fork_unseen = (df & QP_DESC_FORK_UNSEEN) != 0,
        .nprocs = m->desc.hdr.nprocs,
        .nblocks = m->desc.hdr.nblocks,
        .runs = p->hdr.runs,
        .forks = p->hdr.forks,
        .unsaved = p->hdr.unsaved,
        .nrunning = p->nrunning,
        .running_pid = p->running_pid,
        .ndropped = p->ndropped,
        .saturated = p->saturated,
        .incomplete = r->bt.incomplete,
        .nmeasured = r->nprocs,
        .nplt = r->nplt,
        .nunmeasured = r->nunmeasured,
        .calls_unmeasured = r->calls_unmeasured,
        .total_insns = qp_report_insns(r),
        .nviolating = r->nviolating,
        .napprox = r->napprox,
        .napprox_resume = r->napprox_resume,
        .napprox_other = r->napprox_other,
        .nunknown = r->nunknown,
        .nsaturated = r->nsaturated,
    };
    return 0;
}

uint32_t
qpt_qp_unseen_leaving(const qpt_qp_t *m)
{
    return m != NULL && m->loaded ? qp_report_unseen_leaving(&m->rep) : 0;
}

void
qpt_qp_mark_leaving_all(qpt_qp_t *const *mods, uint32_t n)
{
    qp_report_t **reps = mods != NULL ? malloc((n + 1) * sizeof(*reps)) : NULL;
    if (reps == NULL)
        return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (mods[i] != NULL && mods[i]->loaded)
            reps[k++] = &mods[i]->rep;
    qp_report_mark_leaving_all(reps, k);
    free(reps);
}

static uint32_t
row_flags(uint32_t f)
{
    return ((f & QP_RES_PLT) ? QPT_QP_PLT : 0) | ((f & QP_RES_VIOLATION) ? QPT_QP_VIOLATION : 0)
        | ((f & QP_RES_APPROX_ANY) ? QPT_QP_APPROX : 0)
        | ((f & QP_RES_UNKNOWN) ? QPT_QP_UNKNOWN : 0)
        | ((f & QP_RES_SATURATED) ? QPT_QP_SATURATED : 0)
        | ((f & QP_RES_APPROX_LAZY) ? QPT_QP_APPROX_LAZY : 0)
        | ((f & QP_RES_APPROX_CALLER) ? QPT_QP_APPROX_CALLER : 0)
        | ((f & QP_RES_APPROX_RESUME) ? QPT_QP_APPROX_RESUME : 0);
}

void
qpt_qp_fill_row(const qpt_qp_t *m, const qp_proc_result_t *res, qpt_qp_row_t *out)
{
    const qp_report_t *r = &m->rep;
    const qp_plt_stub_t *st = qp_report_stub(r, res);
    uint32_t stub = st != NULL ? res->stub : QPT_QP_NONE;
    const char *name = st == NULL ? proc_name(m, res->proc)
        : m->plt_names != NULL && stub < r->nplt && m->plt_names[stub] != NULL
        ? m->plt_names[stub]
        : st->name;
    *out = (qpt_qp_row_t) {
        .proc = res->proc,
        .stub = stub,
        .flags = row_flags(res->flags),
        .calls = res->calls,
        .insns = res->insns,
        .calls_known = res->calls_known,
        .insns_exact = res->insns_exact,
        .entry = st != NULL ? st->entry : 0,
        .name = name,
        .stored_name = qp_report_name(r, res),
    };
}

int
qpt_qp_row(const qpt_qp_t *m, int kind, uint32_t i, qpt_qp_row_t *out)
{
    if (m == NULL || out == NULL || !m->loaded)
        return QPT_EINVAL;
    const qp_report_t *r = &m->rep;
    const qp_proc_result_t *res;
    switch (kind) {
    case QPT_QP_FLAT:
        if (i >= r->nprocs + (r->flat != NULL ? r->nplt : 0))
            return QPT_EINVAL;
        res = qp_report_row(r, i);
        break;
    case QPT_QP_PROCS:
        if (i >= r->nprocs)
            return QPT_EINVAL;
        res = &r->procs[i];
        break;
    case QPT_QP_STUBS:
        if (i >= r->nplt)
            return QPT_EINVAL;
        res = &r->plt[i];
        break;
    default:
        return QPT_EINVAL;
    }
    qpt_qp_fill_row(m, res, out);
    return 0;
}

int
qpt_qp_unmeasured(const qpt_qp_t *m, uint32_t i, uint32_t *proc, uint64_t *calls)
{
    if (m == NULL || proc == NULL || calls == NULL || !m->loaded || i >= m->rep.nunmeasured)
        return QPT_EINVAL;
    *proc = m->rep.unmeasured[i];
    *calls = m->rep.unmeasured_calls != NULL ? m->rep.unmeasured_calls[i] : 0;
    return 0;
}

/*****************************************************************************
 * Procedures by index and by name
 */

int
qpt_qp_proc(const qpt_qp_t *m, uint32_t proc, qpt_qp_proc_t *out)
{
    if (m == NULL || out == NULL || !m->loaded || proc >= m->desc.hdr.nprocs)
        return QPT_EINVAL;
    const qp_desc_proc_t *p = &m->desc.procs[proc];
    *out = (qpt_qp_proc_t) {
        .name = proc_name(m, proc),
        .stored_name = qp_desc_str(&m->desc, p->name),
        .entry = p->entry,
        .new_entry = p->new_entry,
        .measured = (p->flags & QP_PROC_MEASURED) != 0,
        .reason = qp_desc_str(&m->desc, p->reason),
        .nblocks = p->nblocks,
        .nedges = p->nedges,
        .block_base = p->block,
    };
    return 0;
}

/* The procedure FUNC names as FILE:NAME (FILE a shell pattern for the source file, by
 * path or last component), the measured one first, or QP_VIRT. */
static uint32_t
find_in_file(const qpt_qp_t *m, const char *func)
{
    const char *sep = cfg_module_sep(func);
    if (sep == NULL)
        return QP_VIRT;
    uint32_t found = QP_VIRT;
    for (uint32_t i = 0; i < m->desc.hdr.nprocs; i++) {
        if (!qp_name_matches(qp_desc_str(&m->desc, m->desc.procs[i].name), sep + 1)
            || !cfg_module_match(func, (size_t)(sep - func), proc_file(m, i)))
            continue;
        if (m->desc.procs[i].flags & QP_PROC_MEASURED)
            return i;
        if (found == QP_VIRT)
            found = i;
    }
    return found;
}

uint32_t
qpt_qp_find(const qpt_qp_t *m, const char *func)
{
    if (m == NULL || func == NULL || !m->loaded)
        return QPT_QP_NONE;
    uint32_t p = qp_desc_find_proc(&m->desc, func);
    return p != QP_VIRT ? p : find_in_file(m, func);
}

int
qpt_qp_find_measured(const qpt_qp_t *m, const char *func, uint32_t *proc, char *why,
                     size_t whylen)
{
    if (m == NULL || func == NULL || proc == NULL || !m->loaded)
        return QPT_EINVAL;
    const qp_desc_t *d = &m->desc;
    *proc = qp_desc_find_proc(d, func);
    if (*proc == QP_VIRT) {
        /* FILE:NAME names one procedure already. */
        *proc = find_in_file(m, func);
        if (*proc != QP_VIRT)
            return 0;
        qp_why(why, whylen, "no procedure named '%s'", func);
        return QPT_ENOTFOUND;
    }
    const qp_desc_proc_t *p = &d->procs[*proc];
    /* Static functions of several files may share a name: the file must say which. */
    for (uint32_t i = 0; i < d->hdr.nprocs; i++)
        if (i != *proc && (d->procs[i].flags & QP_PROC_MEASURED) && (p->flags & QP_PROC_MEASURED)
            && strcmp(qp_desc_str(d, d->procs[i].name), qp_desc_str(d, p->name)) == 0) {
            qp_why(why, whylen, "'%s' names several procedures (%s, %s, ...): give the "
                   "source file as FILE:NAME", func, proc_name(m, *proc), proc_name(m, i));
            return QPT_ERANGE;
        }
    if (strcmp(qp_desc_str(d, p->name), func) != 0) {
        /* Matched without the parameters: overloads make that ambiguous. */
        uint32_t other = QP_VIRT;
        for (uint32_t i = 0; i < d->hdr.nprocs && other == QP_VIRT; i++)
            if (i != *proc && (d->procs[i].flags & QP_PROC_MEASURED)
                && qp_name_matches(qp_desc_str(d, d->procs[i].name), func))
                other = i;
        if (other != QP_VIRT) {
            char *a = cfg_demangle(qp_desc_str(d, p->name));
            char *b = cfg_demangle(qp_desc_str(d, d->procs[other].name));
            qp_why(why, whylen, "'%s' names several procedures (%s, %s, ...): give the "
                   "parameters, or the source file as FILE:NAME", func, a ? a : "?",
                   b ? b : "?");
            free(a);
            free(b);
            return QPT_ERANGE;
        }
    }
    if (!(p->flags & QP_PROC_MEASURED)) {
        qp_why(why, whylen, "procedure '%s' was not measured: %s", func,
               qp_desc_str(d, p->reason));
        return QPT_EUNSUPP;
    }
    return 0;
}
