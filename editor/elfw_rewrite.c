/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The static rewrite, end to end: the plan writes relocated code and redirects into an
 * in-memory image of the file (ed_image.c), the unwind tables for the moved code go into
 * a second, read-only region, and elfw_write turns regions and patches into the output.
 * No libelf here: this file only assembles the request.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/qp_bytes.h"
#include "base/qp_pool.h"
#include "editor/ed.h"
#include "editor/elfw.h"
#include "runtime/qprt.h"

#define PAGE 4096u

/* The regions of a measured rewrite, by address (0 when absent). */
typedef struct rt_regions {
    uint64_t state;  /* runtime state page, then the counters (zero-filled, RW) */
    uint64_t rt;     /* the runtime blob (RX) */
    uint8_t *desc;   /* the description: a non-alloc section, never loaded (malloc'd) */
    size_t desc_len; /* its bytes */
    uint64_t locks;  /* the lock-site table (R), or 0 */
    uint64_t nlocks; /* its entries */
    uint64_t unwind; /* new unwind tables (R) */
    uint64_t dynstr; /* a copy of .dynstr with $ORIGIN in the search path (R), or 0 */
    uint64_t got_fix; /* a library's start that points its PLT at new code (RX), or 0 */
    uint64_t desc_id; /* the description's id (the runtime's parameters name it) */
} rt_regions_t;

/* Where the counters of the runtime reserved in R start (after its state page). */
static uint64_t
runtime_counters(const rt_regions_t *r)
{
    return r->state + QPRT_STATE_SIZE;
}

/* Write LEN bytes of DATA at ADDR of the image, then zeros up to SPAN bytes. */
static int
write_padded(ed_image_t *im, uint64_t addr, const uint8_t *data, size_t len, uint64_t span)
{
    uint8_t *buf = calloc(1, span ? span : 1);
    if (buf == NULL)
        return QP_ENOMEM;
    memcpy(buf, data, len);
    int rc = ed_image_ops.write(im, addr, buf, span);
    free(buf);
    return rc;
}

/* Is there no dynamic relocation in [LO, HI) of IMG? */
static int
no_reloc_in(const cfg_image_t *img, uint64_t lo, uint64_t hi)
{
    size_t a = 0, b = img->nrelocs;
    while (a < b) { /* the first relocation at or after LO */
        size_t m = a + (b - a) / 2;
        if (img->relocs[m].where < lo)
            a = m + 1;
        else
            b = m;
    }
    return a == img->nrelocs || img->relocs[a].where >= hi;
}

/* Does NAME register unwind tables with libgcc by address (crtbeginT.o's way)? */
static int
registers_frames(const char *name)
{
    return strncmp(name, "__register_frame", 16) == 0;
}

/*
 * May the unwind tables U (sized at address 0) go over the input's: its .eh_frame takes
 * the CIEs, FDEs and LSDAs, its .eh_frame_hdr (PT_GNU_EH_FRAME's) the search table? Both
 * must be loaded file bytes that no dynamic relocation writes, aligned as the build
 * needs. U is complete (ED_UNWIND_ALL), so nothing needs the old tables afterwards, but
 * for one reader: a static program's crtbeginT.o registers its .eh_frame from
 * __EH_FRAME_BEGIN__, which is not the section's start (crt1.o's records come first),
 * and libgcc walks the records from there. So only programs with an interpreter and
 * libraries, which find their tables through PT_GNU_EH_FRAME, and none that defines or
 * imports __register_frame* (libgcc's registry of tables by address).
 */
static int
unwind_fits_over(const cfg_image_t *img, const ed_unwind_out_t *u, const cfg_section_t **eh,
                 const cfg_section_t **hdr)
{
    if (!(img->flags & (CFG_IMG_DYNAMIC | CFG_IMG_SHLIB)))
        return 0;
    for (size_t i = 0; i < img->nsymbols; i++)
        if (img->symbols[i].name != NULL && registers_frames(img->symbols[i].name))
            return 0;
    for (size_t i = 0; i < img->nrelocs; i++) /* imported from libgcc_s */
        if (img->relocs[i].sym != NULL && registers_frames(img->relocs[i].sym))
            return 0;
    *eh = cfg_image_section_named(img, ".eh_frame");
    *hdr = cfg_image_section_named(img, ".eh_frame_hdr");
    const cfg_section_t *e = *eh, *h = *hdr;
    if (e == NULL || h == NULL || e->bytes == NULL || h->bytes == NULL
        || !(e->flags & CFG_SEC_ALLOC) || !(h->flags & CFG_SEC_ALLOC) || e->vma % 8 != 0
        || h->vma % 4 != 0 || u->hdr_off > e->size || u->hdr_size > h->size
        || (e->vma < h->vma + h->size && h->vma < e->vma + e->size))
        return 0;
    /* No other section's bytes under them (a hostile file could name anything so), and
     * no second section of either name (elfw shrinks the first of each). */
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *o = &img->sections[i];
        if (o != e && o != h && o->name != NULL
            && (strcmp(o->name, ".eh_frame") == 0 || strcmp(o->name, ".eh_frame_hdr") == 0))
            return 0;
        if (o == e || o == h || !(o->flags & CFG_SEC_ALLOC) || o->size == 0)
            continue;
        if ((o->vma < e->vma + e->size && e->vma < o->vma + o->size)
            || (o->vma < h->vma + h->size && h->vma < o->vma + o->size))
            return 0;
    }
    int ph = 0;
    for (size_t i = 0; i < img->nsegments; i++)
        ph |= img->segments[i].type == 0x6474e550 /* PT_GNU_EH_FRAME */
            && img->segments[i].vaddr == h->vma;
    size_t avail;
    return ph && no_reloc_in(img, e->vma, e->vma + e->size)
        && no_reloc_in(img, h->vma, h->vma + h->size)
        && cfg_image_ptr(img, e->vma, &avail) != NULL && avail >= e->size
        && cfg_image_ptr(img, h->vma, &avail) != NULL && avail >= h->size;
}

/* The image's loaded extent, for rel32 reach. */
static void
image_extent(const cfg_image_t *img, uint64_t *lo, uint64_t *hi)
{
    *lo = UINT64_MAX;
    *hi = 0;
    for (size_t i = 0; i < img->nsections; i++)
        if (img->sections[i].flags & CFG_SEC_ALLOC) {
            const cfg_section_t *s = &img->sections[i];
            *lo = s->vma < *lo ? s->vma : *lo;
            *hi = s->vma + s->size > *hi ? s->vma + s->size : *hi;
        }
}

/* Reserve the counters and the runtime before the code is laid out (snippets refer to
 * both with rip-relative operands). */
/* The runtime INSTR needs: with tracing, or the smaller one without. */
const unsigned char *
elfw_runtime_blob(unsigned machine, int trace, size_t *size, char *why, size_t whylen)
{
    const char *no = NULL;
    *size = 0;
    if (machine == ARCH_EM_X86_64) {
        *size = trace ? qprt_blob_size : qprt_blob_plain_size;
        return trace ? qprt_blob : qprt_blob_plain;
    }
    if (machine != ARCH_EM_AARCH64)
        no = "no runtime for this machine";
    else if (trace)
        no = "control-flow tracing is x86-64 only (the AArch64 runtime has none)";
    else if (qprt_blob_a64_size == 0)
        no = "the AArch64 runtime was not built (configure found no aarch64-linux-gnu-gcc)";
    if (no != NULL) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "%s", no);
        return NULL;
    }
    *size = qprt_blob_a64_size;
    return qprt_blob_a64;
}

/* The runtime INSTR needs in a program of IMG's machine, or NULL (WHY says why). */
static const unsigned char *
rt_blob(const cfg_image_t *img, const elfw_instr_t *instr, size_t *size, char *why,
        size_t whylen)
{
    return elfw_runtime_blob(cfg_image_isa(img)->elf_machine, instr->trace, size, why, whylen);
}

static int
reserve_runtime(ed_image_t *im, const cfg_image_t *img, ed_plan_t *plan,
    const elfw_instr_t *instr, rt_regions_t *r)
{
    size_t blob_size;
    if (rt_blob(img, instr, &blob_size, NULL, 0) == NULL)
        return QP_EUNSUPP; /* (refused before: elfw_runtime_blob says why) */
    uint64_t lo, hi;
    image_extent(img, &lo, &hi);
    uint64_t cbytes = ((uint64_t)instr->ncounters * 8 + PAGE - 1) / PAGE * PAGE;
    QP_CHECK(ed_image_ops.alloc_near(
        im, lo, hi, QPRT_STATE_SIZE + cbytes, ED_PROT_R | ED_PROT_W, &r->state));
    /* The AArch64 runtime finds its parameters with adrp from its own start: it must
     * start a page, as it was linked. */
    uint64_t align = cfg_image_isa(img)->elf_machine == ARCH_EM_AARCH64 ? PAGE : 16;
    QP_CHECK(ed_image_alloc_aligned(im, lo, hi, blob_size, ED_PROT_R | ED_PROT_X, align,
                                    &r->rt));
    ed_plan_set_runtime(plan, r->state + QPRT_STATE_SIZE, r->rt + QPRT_HOOK_OFF,
        r->rt + QPRT_FORK_OFF, r->rt + QPRT_THREAD_OFF, r->rt + QPRT_EXEC_OFF);
    if (instr->placed != NULL)
        QP_CHECK(instr->placed(instr->placed_arg, plan, r->state + QPRT_STATE_SIZE));
    return 0;
}

/* (Asked by the trace driver: the runtime with tracing.) */
uint64_t
elfw_runtime(const ed_plan_t *plan, uint64_t *size)
{
    uint64_t hook = ed_plan_exit_hook(plan);
    *size = hook != 0 ? qprt_blob_size : 0;
    return hook != 0 ? hook - QPRT_HOOK_OFF : 0;
}

uint64_t
elfw_trace_refill(const ed_plan_t *plan)
{
    uint64_t hook = ed_plan_exit_hook(plan);
    return hook != 0 ? hook - QPRT_HOOK_OFF + QPRT_TRACE_OFF : 0;
}

/* The sites of the switchable increments, as offsets from the new code, in a region. */
static int
write_lock_sites(
    ed_image_t *im, const cfg_image_t *img, const ed_plan_t *plan, rt_regions_t *r)
{
    size_t n;
    const uint64_t *site = ed_plan_lock_sites(plan, &n);
    uint64_t text = ed_plan_text(plan, NULL);
    if (n == 0)
        return 0;
    /* Ascending offsets as LEB128 differences (runtime/qprt.h): 1-2 bytes a site. */
    uint64_t *off = malloc(n * sizeof(uint64_t));
    uint8_t *v = malloc(n * 5 + 1);
    if (off == NULL || v == NULL) {
        free(off);
        free(v);
        return QP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (site[i] < text || site[i] - text > UINT32_MAX) {
            free(off);
            free(v);
            return QP_ERANGE;
        }
        off[i] = site[i] - text;
    }
    qsort(off, n, sizeof(uint64_t), cfg_u64_cmp);
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += uleb_encode(v + len, off[i] - (i > 0 ? off[i - 1] : 0), 0);
    free(off);
    uint64_t lo, hi;
    image_extent(img, &lo, &hi);
    int rc = ed_image_alloc_bytes(im, lo, hi, v, len, ED_PROT_R, &r->locks);
    if (rc < 0)
        free(v); /* else the image has it */
    r->nlocks = n;
    return rc;
}

/*
 * A shared library has no entry of its own: the dynamic linker calls its DT_INIT when it
 * is loaded, before its init array. The runtime's library start takes DT_INIT's place
 * (or that of a spare DT_NULL entry, when there was no DT_INIT: elfw_set_init) and goes
 * on to the original one.
 */
/*
 * After the code is placed and described (R->desc, R->desc_id: describe_item): the
 * runtime's parameters. The runtime needs only the description's id (in its
 * parameters): the description itself becomes a non-alloc section that qp reads from
 * the file (R->desc, owned by the caller).
 */
static int
write_runtime(ed_image_t *im, const cfg_image_t *img, ed_plan_t *plan,
    const elfw_instr_t *instr, rt_regions_t *r, uint64_t *desc_size)
{
    uint64_t counters = runtime_counters(r);
    if (r->desc == NULL)
        return QP_EINVAL; /* a description is what qp reads */
    *desc_size = r->desc_len;
    QP_CHECK(write_lock_sites(im, img, plan, r));
    int rc;
    size_t blob_size;
    const unsigned char *rt = rt_blob(img, instr, &blob_size, NULL, 0);
    uint8_t *blob = rt != NULL ? malloc(blob_size) : NULL;
    if (blob == NULL)
        return QP_ENOMEM;
    memcpy(blob, rt, blob_size);
    qprt_params_t par;
    memcpy(&par, blob, sizeof(par));
    if (memcmp(par.magic, QPRT_MAGIC, 8) != 0) {
        free(blob);
        return QP_EFORMAT; /* a blob built from another qprt.h */
    }
    uint64_t entry = ed_plan_map(plan, img->entry);
    par.self = r->rt;
    if (r->nlocks > 0) {
        par.flags |= QPRT_F_SWITCH
            | (instr->lock_at_start == 1 ? QPRT_F_LOCK_AT_START : 0)
            | (instr->lock_at_start == 2 ? QPRT_F_LOCK_UNWATCHED : 0)
            | (instr->watcher ? QPRT_F_WATCHER : 0);
        par.text = ed_plan_text(plan, &par.text_size);
        par.locks = r->locks;
        par.nlocks = r->nlocks;
        par.plain_byte = ARCH_INC_PLAIN_BYTE;
        par.lock_byte = ARCH_INC_LOCK_BYTE;
    }
    if (instr->trace)
        par.flags |= QPRT_F_TRACE | (instr->trace == 2 ? QPRT_F_TRACE16 : 0);
    par.entry = entry != 0 ? entry : img->entry;
    if (img->flags & CFG_IMG_SHLIB) {
        par.flags |= QPRT_F_LIBRARY;
        par.init = img->dyninit.init;
        rc = elfw_set_init(im, img, r->rt + QPRT_LIBINIT_OFF);
        if (rc < 0) {
            free(blob);
            return rc;
        }
    }
    par.state = r->state;
    par.counters = counters;
    par.counters_size = ((uint64_t)instr->ncounters * 8 + PAGE - 1) / PAGE * PAGE;
    par.ncounters = instr->ncounters;
    par.id = r->desc_id;
    memcpy(blob, &par, sizeof(par));
    rc = ed_image_ops.write(im, r->rt, blob, blob_size);
    free(blob);
    return rc;
}

static const cfg_section_t *
section_named(const cfg_image_t *img, const char *name)
{
    for (size_t i = 0; i < img->nsections; i++)
        if (strcmp(img->sections[i].name, name) == 0)
            return &img->sections[i];
    return NULL;
}

/*
 * The output looks for its libraries in its own folder first (elfw_rewrite_opts_t):
 * .dynstr is copied with "$ORIGIN[:old path]" at its end into a new region (origin_path), DT_STRTAB
 * and DT_STRSZ name the copy, and the search path entry its new string. DT_RPATH when
 * the file has no DT_RUNPATH: it is searched before LD_LIBRARY_PATH, so that the
 * rewritten libraries beside the output are the ones loaded.
 */
/*
 * The search path OLD of the file INPUT with $ORIGIN (or ${ORIGIN}) replaced by INPUT's
 * folder, after "$ORIGIN:" (the output's folder): the output finds what the input found.
 * Malloc'ed, or NULL.
 */
static char *
origin_path(const char *old, const char *input)
{
    char *real = realpath(input, NULL);
    if (real == NULL)
        return NULL;
    *strrchr(real, '/') = '\0';
    size_t cap = sizeof("$ORIGIN:") + strlen(old) * (strlen(real) + 2) + 1, n = 0;
    char *out = malloc(cap);
    if (out != NULL) {
        n = (size_t)snprintf(out, cap, "$ORIGIN%s", old[0] ? ":" : "");
        for (const char *p = old; *p;) {
            size_t skip = strncmp(p, "$ORIGIN", 7) == 0 ? 7 : strncmp(p, "${ORIGIN}", 9) == 0 ? 9 : 0;
            if (skip > 0) {
                n += (size_t)snprintf(out + n, cap - n, "%s", real[0] ? real : "/");
                p += skip;
            } else
                out[n++] = *p++;
        }
        out[n] = '\0';
    }
    free(real);
    return out;
}

static int
search_origin_first(ed_image_t *im, const cfg_image_t *img, const char *input, uint64_t *at)
{
    enum { DT_NULL_ = 0, DT_STRTAB_ = 5, DT_STRSZ_ = 10, DT_RPATH_ = 15, DT_RUNPATH_ = 29 };
    const cfg_section_t *dyn = section_named(img, ".dynamic");
    const cfg_section_t *str = section_named(img, ".dynstr");
    if (dyn == NULL)
        return 0; /* a static program loads no library */
    if (str == NULL || str->bytes == NULL || str->size == 0 || dyn->size < 16)
        return QP_EFORMAT;
    size_t n = dyn->size / 16;
    uint64_t(*d)[2] = malloc(n * 16);
    if (d == NULL)
        return QP_ENOMEM;
    int rc = ed_image_ops.read(im, dyn->vma, d, n * 16); /* with DT_INIT made, if it was */
    long strtab = -1, strsz = -1, rpath = -1, runpath = -1, spare = -1;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        switch (d[k][0]) {
        case DT_STRTAB_: strtab = (long)k; break;
        case DT_STRSZ_: strsz = (long)k; break;
        case DT_RPATH_: rpath = (long)k; break;
        case DT_RUNPATH_: runpath = (long)k; break;
        default: break;
        }
        if (d[k][0] == DT_NULL_) {
            if (k + 1 < n && d[k + 1][0] == DT_NULL_)
                spare = (long)k;
            break;
        }
    }
    long path = runpath >= 0 ? runpath : rpath;
    if (rc == 0 && (strtab < 0 || strsz < 0 || d[strtab][1] != str->vma))
        rc = QP_EFORMAT;
    if (rc == 0 && path < 0 && spare < 0)
        rc = QP_EUNSUPP;
    const char *old = "";
    if (rc == 0 && path >= 0) {
        uint64_t o = d[path][1];
        if (o >= str->size || memchr(str->bytes + o, 0, str->size - o) == NULL)
            rc = QP_EFORMAT;
        else
            old = (const char *)str->bytes + o;
    }
    char *path_str = rc == 0 ? origin_path(old, input) : NULL;
    if (rc == 0 && path_str == NULL)
        rc = errno == ENOMEM ? QP_ENOMEM : QP_EIO;
    size_t add = path_str != NULL ? strlen(path_str) + 1 : 0;
    uint8_t *bytes = rc == 0 ? malloc(str->size + add) : NULL;
    if (rc == 0 && bytes == NULL)
        rc = QP_ENOMEM;
    if (rc == 0) {
        memcpy(bytes, str->bytes, str->size);
        memcpy(bytes + str->size, path_str, add);
        uint64_t lo, hi;
        image_extent(img, &lo, &hi);
        rc = ed_image_alloc_bytes(im, lo, hi, bytes, str->size + add, ED_PROT_R, at);
        if (rc < 0)
            free(bytes); /* else the image has it */
    }
    if (rc == 0) {
        d[strtab][1] = *at;
        d[strsz][1] = str->size + add;
        if (path < 0) {
            path = spare;
            d[path][0] = DT_RPATH_;
        }
        d[path][1] = str->size;
        rc = ed_image_ops.write(im, dyn->vma, d, n * 16);
    }
    free(path_str);
    free(d);
    return rc;
}

static uint64_t
fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/*
 * The output's code is not the input's, so it gets a build-id of its own: the same
 * length, derived from the old id and every new region's bytes (the same rewrite gives
 * the same id). Else a debugger would take the input's separate debug file (found by
 * build-id under /usr/lib/debug/.build-id), whose addresses name the old code.
 */
static int
renew_build_id(ed_image_t *im, const cfg_image_t *img)
{
    const cfg_section_t *s = NULL;
    for (size_t i = 0; i < img->nsections && s == NULL; i++)
        if (strcmp(img->sections[i].name, ".note.gnu.build-id") == 0)
            s = &img->sections[i];
    size_t n = img->build_id_len;
    /* Note header (namesz, descsz, type) and "GNU\0", then the id. */
    if (n == 0 || n > sizeof(img->build_id) || s == NULL || s->bytes == NULL
        || s->size < 16 + n || memcmp(s->bytes + 16, img->build_id, n) != 0)
        return 0;
    uint64_t h = fnv1a(0xcbf29ce484222325ull, img->build_id, n);
    size_t nreg, npat;
    const ed_region_t *r = ed_image_regions(im, &nreg);
    for (size_t i = 0; i < nreg; i++)
        if (r[i].bytes != NULL)
            h = fnv1a(h, r[i].bytes, r[i].size);
    /* New code in the old text (a mirror) is in patches; so are the redirects. */
    const ed_patch_t *p = ed_image_patches(im, &npat);
    for (size_t i = 0; i < npat; i++)
        h = fnv1a(h, p[i].bytes, p[i].len);
    uint8_t id[sizeof(img->build_id)];
    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0)
            h = fnv1a(h, (const uint8_t *)"qpt", 3);
        id[i] = (uint8_t)(h >> (8 * (i % 8)));
    }
    return ed_image_ops.write(im, s->vma + 16, id, n);
}

/* The section name of region R. */
static const char *
region_name(const ed_region_t *reg, const rt_regions_t *r, uint64_t text, uint64_t text_end)
{
    if (reg->vaddr >= text && reg->vaddr < text_end)
        return ".qpt.text"; /* the new code: in a mirror of the old text and after it */
    if (reg->vaddr == r->state)
        return ".qpt.counters";
    if (reg->vaddr == r->rt)
        return ".qpt.rt";
    if (reg->vaddr == r->locks)
        return ".qpt.locks";
    if (reg->vaddr == r->dynstr)
        return ".qpt.dynstr";
    if (reg->vaddr == r->got_fix)
        return ".qpt.pltfix";
    return ".eh_frame";
}

static int
fail(char *err, size_t errlen, int rc, const char *what)
{
    snprintf(err, errlen, "%s: %s", what, qp_strerror(rc));
    return rc;
}

/*
 * New code and data must lie within rel32 reach (2 GiB) of everything the program loads:
 * say so, with the extent of its PT_LOAD segments, when they do not leave room (a
 * corrupt p_memsz, say), rather than blame the output.
 */
static int
fail_reach(char *err, size_t errlen, int rc, const cfg_image_t *img, const char *what)
{
    if (rc != QP_ERANGE)
        return fail(err, errlen, rc, what);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < img->nsegments; i++)
        if (img->segments[i].type == 1 /* PT_LOAD */) {
            const cfg_segment_t *g = &img->segments[i];
            lo = g->vaddr < lo ? g->vaddr : lo;
            hi = g->vaddr + g->memsz > hi ? g->vaddr + g->memsz : hi;
        }
    snprintf(err, errlen,
        "%s: no room within 2 GiB (rel32 reach) of the loaded image, whose PT_LOAD "
        "segments span 0x%llx-0x%llx",
        what, (unsigned long long)lo, (unsigned long long)hi);
    return rc;
}

/* The message for a failed unwind build: which FDE, when one is to blame (*F then
 * names it too). */
static void
unwind_fail(char *err, size_t errlen, int rc, const ed_unwind_out_t *u, ed_fde_fail_t *f)
{
    if (u->fail_lo != 0)
        *f = (ed_fde_fail_t) { u->fail_lo, u->fail_hi, rc };
    if (u->fail_lo != 0)
        snprintf(err, errlen,
            "unwind tables: the FDE of 0x%llx-0x%llx covers moved code but "
            "cannot be rewritten: %s",
            (unsigned long long)u->fail_lo, (unsigned long long)u->fail_hi,
            qp_strerror(rc));
    else
        fail(err, errlen, rc,
            rc == QP_EFORMAT ? "unwind tables: its .eh_frame (or an LSDA it names)"
                             : "unwind tables");
}

/* The end of a phase, for OPTS' on_phase (development timing). */
static void
phase(const elfw_rewrite_opts_t *opts, const char *what)
{
    if (opts->on_phase != NULL)
        opts->on_phase(opts->phase_arg, what);
}

/* The unwind tables of the moved code, built and written into the image. */
typedef struct unwind_job {
    const cfg_image_t *img;  /* the input */
    ed_plan_t *plan;         /* the applied plan */
    ed_image_t *im;          /* the output's image: the tables are written there */
    ed_unwind_out_t *out;    /* the tables */
    ed_fde_fail_t *fail;     /* which FDE failed them, when one did */
    char *err;               /* the message of a failure (ERRLEN bytes) */
    size_t errlen;
    int rc;                  /* 0, or the QP_E* code of a failure */
    atomic_int failed;       /* set once rc is a failure (read by the description) */
    uint64_t at;             /* where the new tables went (0: over the input's) */
    uint64_t in_place;       /* the bytes of .eh_frame written over the input's */
} unwind_job_t;

/* Build J's tables from its image's OLD ones: 0, or the QP_E* code of a failure with
 * J's message. */
static int
unwind_build_from(unwind_job_t *j, ed_unwind_old_t *old)
{
    ed_unwind_out_t *u = j->out;
    /* Unwind tables: their size does not depend on where they go; build once to size
     * them, then again at their address. All FDEs go into the new table, so that it can
     * be the .eh_frame that gdb reads; moved code without its FDE fails the rewrite. */
    /* A stub falling into a block (ED_PROBE_FALL_IN) runs in that block's state. */
    ed_unwind_map_t um
        = { ed_plan_map_state, ed_plan_map_end, ed_plan_map_insn, ed_plan_pieces, j->plan };
    const uint32_t uflags = ED_UNWIND_ALL | ED_UNWIND_STRICT;
    int rc = ed_unwind_build_old(old, &um, 0, 0, uflags, u);
    if (rc < 0) {
        unwind_fail(j->err, j->errlen, rc, u, j->fail);
        return rc;
    }
    const cfg_section_t *old_eh = NULL, *old_hdr = NULL;
    /* Not when the new search table still points into the old .eh_frame (FDEs of code
     * that stays whose tables could not be copied, or disagree with .eh_frame_hdr). */
    if (u->size > 0 && u->nold_refs == 0
        && unwind_fits_over(j->img, u, &old_eh, &old_hdr)) {
        /* Over the input's tables: .eh_frame stays where crtbeginT's frame registry of a
         * static program reads it, and the file grows by nothing. */
        size_t size = u->size, hdr_off = u->hdr_off;
        free(u->data);
        memset(u, 0, sizeof(*u));
        rc = ed_unwind_build_old(old, &um, old_eh->vma, old_hdr->vma, uflags, u);
        if (rc == 0 && (u->size != size || u->hdr_off != hdr_off))
            rc = QP_EFORMAT; /* the size must not depend on the address */
        if (rc == 0)
            rc = write_padded(j->im, old_eh->vma, u->data, u->hdr_off, old_eh->size);
        if (rc == 0)
            rc = write_padded(j->im, old_hdr->vma, u->data + u->hdr_off, u->hdr_size,
                              old_hdr->size);
        if (rc < 0) {
            unwind_fail(j->err, j->errlen, rc, u, j->fail);
            return rc;
        }
        j->in_place = u->eh_frame_size;
    } else if (u->size > 0) {
        size_t size = u->size;
        free(u->data);
        memset(u, 0, sizeof(*u));
        uint64_t lo, hi;
        image_extent(j->img, &lo, &hi);
        rc = ed_image_ops.alloc_near(j->im, lo, hi, size, ED_PROT_R, &j->at);
        if (rc == 0)
            rc = ed_unwind_build_old(old, &um, j->at, 0, uflags, u);
        if (rc == 0 && u->size != size)
            rc = QP_EFORMAT; /* the size must not depend on the address */
        if (rc == 0)
            rc = ed_image_ops.write(j->im, j->at, u->data, u->size);
        if (rc < 0) {
            unwind_fail(j->err, j->errlen, rc, u, j->fail);
            return rc;
        }
    }
    return 0;
}

/* Build J's tables (unwind_build_from), the old ones read once for its two builds. */
static int
unwind_build(unwind_job_t *j)
{
    ed_unwind_old_t *old = NULL;
    memset(j->out, 0, sizeof(*j->out));
    int rc = ed_unwind_old_read(j->img, &old);
    if (rc == 0)
        rc = unwind_build_from(j, old);
    else
        unwind_fail(j->err, j->errlen, rc, j->out, j->fail);
    ed_unwind_old_free(old);
    return rc;
}

/* Build the unwind_job_t ARG's tables (qp_parallel_for_beside's serial step). */
static void
unwind_beside(void *arg)
{
    unwind_job_t *j = arg;
    j->rc = unwind_build(j);
    if (j->rc < 0)
        atomic_store(&j->failed, 1);
}

/* The measurement description of a rewrite (elfw_instr_t.describe). */
typedef struct describe_job {
    const elfw_instr_t *instr; /* its describe */
    ed_plan_t *plan;           /* the applied plan */
    uint64_t counters;         /* where the counters are */
    uint8_t *desc;             /* the description (malloc'd), or NULL */
    size_t len;                /* its bytes */
    uint64_t id;               /* its id */
    int rc;                    /* 0, or the QP_E* code of a failure */
    const atomic_int *unwind_failed; /* the unwind tables failed: the rewrite does */
} describe_job_t;

/* qp_task_fn: make the description of the describe_job_t ARG (its one item), unless the
 * unwind tables have failed already (always seen on one thread, which builds them
 * first: the description's work would be thrown away). */
static int
describe_item(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    (void)k;
    describe_job_t *j = arg;
    if (atomic_load(j->unwind_failed))
        return 0;
    j->rc = j->instr->describe(j->instr->arg, j->plan, j->counters, &j->desc, &j->len, &j->id);
    return j->rc;
}

int
elfw_rewrite(const cfg_prog_t *prog, ed_plan_t *plan, const elfw_instr_t *instr,
    const char *input, const char *output, const elfw_rewrite_opts_t *opts,
    elfw_rewrite_stats_t *stats, char *err, size_t errlen)
{
    static const elfw_rewrite_opts_t defaults = { 0 };
    if (opts == NULL)
        opts = &defaults;
    if (prog == NULL || plan == NULL || input == NULL || output == NULL || stats == NULL)
        return QP_EINVAL;
    memset(stats, 0, sizeof(*stats));
    ed_image_t *im = NULL;
    ed_unwind_out_t unw;
    memset(&unw, 0, sizeof(unw));
    elfw_region_t *regs = NULL;
    elfw_symbol_t *syms = NULL;
    elfw_patch_t *pats = NULL;
    rt_regions_t rr = { 0 };
    ed_dwarf_out_t dw;
    elfw_section_t dsecs[ED_DWARF_MAXSEC + 2]; /* + the description, the tracer's section */
    uint8_t *extra = NULL;
    memset(&dw, 0, sizeof(dw));
    const int shlib = (prog->img->flags & CFG_IMG_SHLIB) != 0;
    if (instr != NULL && shlib && prog->img->dyninit.init_at == 0) {
        snprintf(err, errlen,
            "runtime: the shared library has no DT_INIT and no spare entry in its dynamic "
            "section to start the runtime from");
        return QP_EUNSUPP;
    }
    int rc = ed_image_create(prog->img, &im);
    if (rc < 0)
        return fail(err, errlen, rc, "image");
    uint64_t tail;
    if (elfw_new_bytes_at(input, &tail) == 0)
        ed_image_set_file_end(im, tail); /* else the input's end: padding at worst */
    if (instr != NULL && (rc = reserve_runtime(im, prog->img, plan, instr, &rr)) < 0) {
        fail_reach(err, errlen, rc, prog->img, "runtime");
        goto out;
    }
    rc = ed_plan_apply(plan, &ed_image_ops, im);
    if (rc < 0) {
        fail_reach(err, errlen, rc, prog->img, "relocating code");
        goto out;
    }
    /* The code is written: what follows reuses the memory of the decoded instructions,
     * and of the input's pages read so far (what is read again comes back from the page
     * cache: unwind and debug sections; chromium: its 236 MB of code not held twice
     * while the writer holds its copy of the file). */
    cfg_image_decode_done(prog->img);
    cfg_image_release_pages(prog->img);
    phase(opts, "relocated (plan applied)");
    /* The description (on another thread when there are two) beside the unwind
     * tables: each reads the plan and the input, neither writes what the other reads,
     * and the unwind tables alone write into the image. Both are done when the pool
     * returns (its threads joined); when the unwind tables fail, their error is the
     * rewrite's (the description's, if it failed too, is not), its description freed. */
    unwind_job_t uj
        = { prog->img, plan, im, &unw, &stats->unwind_fail, err, errlen, 0, 0, 0, 0 };
    describe_job_t dj = { instr, plan, runtime_counters(&rr), NULL, 0, 0, 0, &uj.failed };
    if (instr != NULL)
        qp_parallel_for_beside(opts->threads > 1 ? 2 : 1, 1, 1, describe_item, &dj,
                               unwind_beside, &uj); /* (describe_item's error is in dj) */
    else
        unwind_beside(&uj);
    rr.desc = dj.desc;
    rr.desc_len = dj.len;
    rr.desc_id = dj.id;
    if ((rc = uj.rc) < 0)
        goto out; /* (rr.desc freed there) */
    if ((rc = dj.rc) < 0) {
        fail(err, errlen, rc, "measurement description");
        goto out;
    }
    const uint64_t unw_at = uj.at, in_place = uj.in_place;
    rr.unwind = unw_at;
    phase(opts, "unwind tables, description");
    if (instr != NULL
        && (rc = write_runtime(im, prog->img, plan, instr, &rr, &stats->desc_size)) < 0) {
        fail(err, errlen, rc, "measurement description");
        goto out;
    }
    if (opts->origin_first && (rc = search_origin_first(im, prog->img, input, &rr.dynstr)) < 0) {
        if (rc == QP_EUNSUPP)
            snprintf(err, errlen,
                "search path: the dynamic section has no search path and no spare entry "
                "for one");
        else
            fail(err, errlen, rc, "search path");
        goto out;
    }
    /* After the runtime's start (this one goes first, and on to it) and the search
     * path (which may take the spare dynamic entry a library without DT_INIT has). */
    uint64_t ext_lo, ext_hi;
    image_extent(prog->img, &ext_lo, &ext_hi);
    rc = elfw_got_fix(im, prog->img, plan, ext_lo, ext_hi, &rr.got_fix, &stats->nplt_direct,
        &stats->plt_why);
    if (rc < 0) {
        fail(err, errlen, rc, "the library's own PLT");
        goto out;
    }
    if ((rc = renew_build_id(im, prog->img)) < 0) {
        fail(err, errlen, rc, "build-id");
        goto out;
    }
    phase(opts, "runtime, build-id");
    size_t nreg, npat;
    const ed_region_t *r = ed_image_regions(im, &nreg);
    const ed_patch_t *p = ed_image_patches(im, &npat);
    regs = calloc(nreg + 1, sizeof(*regs));
    pats = calloc(npat + 1, sizeof(*pats));
    syms = calloc(prog->nprocs + 1, sizeof(*syms));
    if (regs == NULL || pats == NULL || syms == NULL) {
        rc = fail(err, errlen, QP_ENOMEM, "request");
        goto out;
    }
    uint64_t text_size = 0;
    uint64_t text = ed_plan_text(plan, &text_size);
    for (size_t i = 0; i < nreg; i++) {
        regs[i] = (elfw_region_t) {
            .name = r[i].vaddr != 0 && r[i].vaddr == ed_plan_stats(plan)->inplace_text
                ? ".qpt.tramp" /* trampolines of code patched in place */
                : region_name(&r[i], &rr, text, text + text_size),
            .vaddr = r[i].vaddr,
            .bytes = r[i].bytes,
            .size = r[i].size,
            .prot = r[i].prot,
            .align = r[i].mirror != 0 ? 4096 : 16,
            .mirror = r[i].mirror,
        };
        if (r[i].vaddr == rr.state && instr != NULL)
            regs[i].bytes = NULL; /* zero-filled: counters cost no file space */
    }
    for (size_t i = 0; i < npat; i++)
        pats[i] = (elfw_patch_t) { p[i].vaddr, p[i].bytes, p[i].len };
    /* Moved procedures keep their names at the new address (gdb `break foo`, perf). */
    size_t nsym = 0;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *pr = &prog->procs[i];
        if (ed_plan_left_reason(plan, i) != NULL || (pr->flags & CFG_PROC_FRAGMENT)
            || !(pr->sources & CFG_SRC_SYMBOL))
            continue;
        uint64_t na = ed_plan_map(plan, pr->entry);
        if (na == 0)
            continue;
        /* The new end of the main part: past its last instruction, or - when padding
         * ends the extent - where the map puts its last byte (already an end then). */
        uint64_t ne = ed_plan_map_end(plan, pr->end);
        if (ne == 0 && pr->end > pr->entry) {
            uint64_t last = pr->end - 1;
            ne = ed_plan_map(plan, last);
            if (ne != 0 && ed_plan_insn_new(plan, last, NULL) != 0)
                ne++; /* a one-byte instruction ends the extent */
        }
        uint32_t in_region = 0; /* the new code's region that holds it */
        for (size_t k = 0; k < nreg; k++)
            if (na >= r[k].vaddr && na - r[k].vaddr < r[k].size)
                in_region = (uint32_t)k;
        syms[nsym++]
            = (elfw_symbol_t) { pr->name, na, ne > na ? ne - na : 1, in_region };
    }
    /* Debug information: line tables, DIEs and CU ranges name the new code. */
    phase(opts, "symbols");
    ed_dwarf_map_t dmap = { ed_plan_map, ed_plan_map_return, ed_plan_pieces, plan };
    rc = ed_dwarf_build(prog->img, &dmap, &dw);
    if (rc < 0) {
        fail(err, errlen, rc, "debug information");
        goto out;
    }
    size_t nsecs = 0;
    for (size_t i = 0; i < dw.nsecs; i++)
        dsecs[nsecs++] = (elfw_section_t) { dw.secs[i].name, dw.secs[i].data, dw.secs[i].size };
    if (rr.desc != NULL)
        dsecs[nsecs++] = (elfw_section_t) { ".qpt.desc", rr.desc, rr.desc_len };
    if (instr != NULL && instr->section != NULL) {
        const char *name = NULL;
        size_t len = 0;
        rc = instr->section(instr->section_arg, &name, &extra, &len);
        if (rc < 0) {
            fail(err, errlen, rc, "trace description");
            goto out;
        }
        dsecs[nsecs++] = (elfw_section_t) { name, extra, len };
    }
    elfw_request_t req = {
        .input = input,
        .output = output,
        .regions = regs,
        .nregions = nreg,
        .patches = pats,
        .npatches = npat,
        .symbols = syms,
        .nsymbols = nsym,
        .sections = dsecs,
        .nsections = nsecs,
        .eh_frame_hdr = unw.size ? unw.hdr : 0,
        .eh_frame_hdr_size = unw.hdr_size,
        .unwind_in_place = in_place,
        .clear_cet = 1,
        .rename_old_unwind = unw.size != 0 && in_place == 0,
        .entry = instr != NULL && !shlib ? rr.rt + QPRT_START_OFF : 0,
        .tmp_hook = opts->tmp_hook,
        .analysed = prog->img,
        .phdr_far = &stats->phdr_far,
    };
    phase(opts, "debug information");
    rc = elfw_write(&req, err, errlen);
    phase(opts, "written");
    if (rc == 0) {
        struct stat st;
        stats->input_size = prog->img->file_size;
        stats->output_size = stat(output, &st) == 0 ? (uint64_t)st.st_size : 0;
        stats->setid_dropped
            = stat(input, &st) == 0 ? st.st_mode & (S_ISUID | S_ISGID) : 0;
        stats->text_size = text_size;
        stats->unwind_size = unw.size;
        stats->nfde_moved = unw.nfde_moved;
        stats->dwarf = dw;
        stats->dwarf.nsecs = 0;
    }
out:
    free(rr.desc);
    free(extra);
    ed_dwarf_out_free(&dw);
    free(unw.data);
    free(regs);
    free(pats);
    free(syms);
    ed_image_destroy(im);
    return rc;
}
