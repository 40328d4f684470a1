/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * PURPOSE: names for stripped programs. A Debian program is stripped, but its symbols
 * often still exist elsewhere, and the reports should use them the way gdb and perf do:
 *  - a separate debug file, found by build-id (DIR/.build-id/xx/rest.debug, e.g. from a
 *    -dbg or -dbgsym package) or by the .gnu_debuglink section (next to the program, in
 *    its .debug/ folder, or under DIR), its CRC checked;
 *  - MiniDebugInfo: an xz-compressed ELF with a .symtab in the program's .gnu_debugdata;
 *  - a Go program's .gopclntab, the runtime's table of its functions (cfg_gopcln.c);
 *  - from the code itself: `_start` is the entry, and the address it passes to
 *    __libc_start_main in %rdi is `main`.
 * cfg_bfd.c reads the symbols of the file found here (BFD stays in that one file).
 */
#include "config.h"

#include <limits.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cfg/cfg_priv.h"

#define DEFAULT_DEBUG_DIRS "/usr/lib/debug"
#define MAX_DEBUGDATA (128u << 20) /* bytes of MiniDebugInfo decompressed, at most (a
                                    * hostile file costs no more memory than that) */

static char *debug_dirs; /* cfg_set_debug_dirs; NULL: DEFAULT_DEBUG_DIRS */

int
cfg_set_debug_dirs(const char *dirs)
{
    char *d = NULL;
    if (dirs != NULL && (d = cfg_strdup(dirs)) == NULL)
        return QP_ENOMEM;
    free(debug_dirs);
    debug_dirs = d;
    return 0;
}

/* The next directory of the colon-separated list at *P into OUT; 0 at the end. */
static int
next_dir(const char **p, char *out, size_t cap)
{
    while (**p == ':')
        (*p)++;
    if (**p == '\0')
        return 0;
    size_t n = strcspn(*p, ":");
    snprintf(out, cap, "%.*s", (int)n, *p);
    *p += n;
    return 1;
}

static int
by_build_id(cfg_image_t *img)
{
    if (img->build_id_len < 2)
        return 0;
    char hex[2 * sizeof(img->build_id) + 1];
    for (size_t i = 1; i < img->build_id_len; i++)
        snprintf(hex + 2 * (i - 1), 3, "%02x", img->build_id[i]);
    cfg_debug_want_t want = { img->build_id, img->build_id_len, 0, 0, 0 };
    const char *p = debug_dirs != NULL ? debug_dirs : DEFAULT_DEBUG_DIRS;
    char dir[PATH_MAX], path[PATH_MAX + 2 * sizeof(img->build_id) + 32];
    while (next_dir(&p, dir, sizeof(dir))) {
        snprintf(path, sizeof(path), "%s/.build-id/%02x/%s.debug", dir, img->build_id[0], hex);
        int rc = cfg_bfd_add_debug_symbols(img, path, &want);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int
by_debuglink(cfg_image_t *img, const char *path)
{
    size_t len;
    const uint8_t *s = cfg_bfd_raw_section(img, ".gnu_debuglink", &len);
    if (s == NULL)
        return 0;
    const char *name = (const char *)s;
    size_t n = strnlen(name, len);
    size_t crc_off = (n + 4) & ~(size_t)3;
    /* A plain file name only: the section is data of the input, not a path to follow. */
    if (n == 0 || n >= len || crc_off + 4 > len || strchr(name, '/') != NULL
        || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return 0;
    cfg_debug_want_t want = { NULL, 0, 1, 0, 0 };
    memcpy(&want.crc, s + crc_off, 4);
    char real[PATH_MAX];
    if (realpath(path, real) == NULL)
        return 0;
    char *slash = strrchr(real, '/');
    if (slash == NULL)
        return 0;
    *slash = '\0'; /* the program's folder ("" for "/") */
    char cand[2 * PATH_MAX + 16];
    snprintf(cand, sizeof(cand), "%s/%s", real, name);
    int rc = cfg_bfd_add_debug_symbols(img, cand, &want);
    if (rc == 0) {
        snprintf(cand, sizeof(cand), "%s/.debug/%s", real, name);
        rc = cfg_bfd_add_debug_symbols(img, cand, &want);
    }
    const char *p = debug_dirs != NULL ? debug_dirs : DEFAULT_DEBUG_DIRS;
    char dir[PATH_MAX];
    while (rc == 0 && next_dir(&p, dir, sizeof(dir))) {
        snprintf(cand, sizeof(cand), "%s%s/%s", dir, real, name);
        rc = cfg_bfd_add_debug_symbols(img, cand, &want);
    }
    return rc;
}

/* MiniDebugInfo: decompress .gnu_debugdata into an anonymous file and read it. */
static int
by_debugdata(cfg_image_t *img)
{
    size_t len;
    const uint8_t *s = cfg_bfd_raw_section(img, ".gnu_debugdata", &len);
    if (s == NULL)
        return 0;
    lzma_stream z = LZMA_STREAM_INIT;
    if (lzma_stream_decoder(&z, MAX_DEBUGDATA, 0) != LZMA_OK)
        return 0;
    size_t cap = 1u << 20, n = 0;
    uint8_t *out = malloc(cap);
    int rc = 0;
    lzma_ret lr = LZMA_OK;
    z.next_in = s;
    z.avail_in = len;
    while (out != NULL && lr == LZMA_OK) {
        if (n == cap) {
            uint8_t *o = cap < MAX_DEBUGDATA ? realloc(out, 2 * cap) : NULL;
            if (o == NULL)
                break;
            out = o;
            cap *= 2;
        }
        z.next_out = out + n;
        z.avail_out = cap - n;
        lr = lzma_code(&z, LZMA_FINISH);
        n = cap - z.avail_out;
    }
    lzma_end(&z);
    if (out == NULL) {
        rc = QP_ENOMEM;
    } else if (lr == LZMA_STREAM_END) {
        int fd = memfd_create("qpt-debugdata", MFD_CLOEXEC);
        size_t done = 0;
        while (fd >= 0 && done < n) {
            ssize_t w = write(fd, out + done, n - done);
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        if (fd >= 0 && done == n) {
            char path[64];
            snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
            cfg_debug_want_t want = { NULL, 0, 0, 0, 1 };
            rc = cfg_bfd_add_debug_symbols(img, path, &want);
            if (rc == 1)
                img->debug_file = ".gnu_debugdata (MiniDebugInfo)";
        }
        if (fd >= 0)
            close(fd);
    }
    free(out);
    return rc;
}

static int add_code_name(cfg_image_t *img, uint64_t addr, const char *name);

typedef struct go_names {
    cfg_image_t *img;
    const cfg_section_t *text; /* where the functions must be */
    size_t n;                  /* names added */
} go_names_t;

static int
add_go_name(void *arg, uint64_t entry, uint64_t end, const char *name)
{
    go_names_t *g = arg;
    const cfg_section_t *t = g->text;
    if (entry - t->vma >= t->size || end - t->vma > t->size)
        return 0; /* (not in .text: not named) */
    /* Its size, padding to the next included (Go's symbol table leaves that out): the
     * code at its end (a prologue's call to runtime.morestack) is then its own, not
     * taken for another procedure. */
    QP_CHECK(add_code_name(g->img, entry, name));
    g->img->symbols[g->img->nsymbols - 1].size = end - entry;
    g->n++;
    return 0;
}

/* The names of the function table at OFF in section S (cfg_gopcln.c), if it is one. */
static int
go_names_at(go_names_t *g, const cfg_section_t *s, size_t off)
{
    return cfg_gopcln_funcs(s->bytes + off, s->size - off,
                            cfg_gopcln_text_loaded(g->img, s->vma + off), add_go_name, g);
}

/*
 * A Go program without function symbols: the names of its .gopclntab (cfg_gopcln.c), or
 * of the first table found inside .data.rel.ro (a PIE linked externally, with cgo).
 */
static int
by_gopclntab(cfg_image_t *img)
{
    const cfg_section_t *tab = cfg_image_section_named(img, ".gopclntab");
    const cfg_section_t *text = cfg_image_section_named(img, ".text");
    if (tab == NULL)
        tab = cfg_image_section_named(img, ".data.rel.ro.gopclntab"); /* a PIE's */
    /* Named already? (Not by .dynsym and the PLT: a cgo program exports C functions.) */
    for (size_t i = 0; i < img->nsymbols; i++)
        if (img->symbols[i].kind == CFG_SYM_FUNC && img->symbols[i].addr != 0
            && img->symbols[i].src != CFG_SYMSRC_DYNSYM && img->symbols[i].src != CFG_SYMSRC_PLT)
            return 0;
    if (text == NULL || !(text->flags & CFG_SEC_CODE))
        return 0;
    go_names_t g = { img, text, 0 };
    if (tab != NULL)
        return tab->bytes != NULL ? go_names_at(&g, tab, 0) : 0;
    const cfg_section_t *ro = cfg_image_section_named(img, ".data.rel.ro");
    if (ro == NULL || ro->bytes == NULL || cfg_image_runtime(img) != CFG_RUNTIME_GO)
        return 0;
    for (size_t off = cfg_gopcln_find(ro->bytes, ro->size, 0); off < ro->size && g.n == 0;
         off = cfg_gopcln_find(ro->bytes, ro->size, off + 8))
        QP_CHECK(go_names_at(&g, ro, off));
    return 0;
}

int
cfg_debug_find_symbols(cfg_image_t *img, const char *path)
{
    int rc = by_build_id(img);
    if (rc == 0)
        rc = by_debuglink(img, path);
    if (rc == 0)
        rc = by_debugdata(img);
    if (rc == 0)
        rc = by_gopclntab(img);
    return rc < 0 ? rc : 0;
}

/*****************************************************************************
 * Names from the code
 */

/* The address _start loads into %rdi before its first call (__libc_start_main's main
 * argument), or 0. */
static uint64_t
main_from_start(const cfg_image_t *img)
{
    uint64_t a = img->entry, main_addr = 0;
    if (cfg_image_isa(img)->decode_ops == NULL)
        return 0; /* x86-64's pattern only */
    for (int i = 0; i < 32; i++) {
        const cfg_section_t *sec = cfg_image_section_at(img, a);
        if (sec == NULL || !(sec->flags & CFG_SEC_CODE))
            return 0;
        size_t off = a - sec->vma;
        arch_insn_t in;
        arch_ops_t ops;
        if (arch_decode(sec->bytes + off, sec->size - off, a, &in) < 0
            || arch_decode_ops(sec->bytes + off, sec->size - off, a, &ops) < 0)
            return 0;
        if (in.kind == ARCH_KIND_CALL || in.kind == ARCH_KIND_CALL_IND)
            return main_addr;
        if (in.kind != ARCH_KIND_SEQ && in.kind != ARCH_KIND_ENDBR && in.kind != ARCH_KIND_NOP)
            return 0;
        if (ops.dst.kind == ARCH_OPND_REG && ops.dst.reg == ARCH_REG_SYSARG0) {
            main_addr = 0;
            if (ops.op == ARCH_OP_LEA && ops.src.kind == ARCH_OPND_MEM
                && ops.src.base == ARCH_REG_PC && ops.src.index == ARCH_REG_NONE)
                main_addr = (uint64_t)ops.src.disp;
            else if (ops.op == ARCH_OP_MOV && ops.src.kind == ARCH_OPND_IMM && ops.src.imm > 0)
                main_addr = (uint64_t)ops.src.imm;
        }
        a += in.len;
    }
    return 0;
}

static int
has_symbol_named(const cfg_image_t *img, const char *name)
{
    for (size_t i = 0; i < img->nsymbols; i++)
        if (strcmp(img->symbols[i].name, name) == 0)
            return 1;
    return 0;
}

static int
add_code_name(cfg_image_t *img, uint64_t addr, const char *name)
{
    cfg_symbol_t *v = realloc(img->symbols, (img->nsymbols + 1) * sizeof(*v));
    if (v == NULL)
        return QP_ENOMEM;
    img->symbols = v;
    cfg_symbol_t s = { 0 };
    s.addr = addr;
    s.kind = CFG_SYM_FUNC;
    s.src = CFG_SYMSRC_CODE;
    s.global = 1;
    if ((s.name = cfg_image_intern(img, name)) == NULL)
        return QP_ENOMEM;
    img->symbols[img->nsymbols++] = s;
    return 0;
}

int
cfg_name_entry(cfg_image_t *img)
{
    const cfg_section_t *sec = cfg_image_section_at(img, img->entry);
    if (img->entry == 0 || sec == NULL || !(sec->flags & CFG_SEC_CODE))
        return 0;
    /* Decide both before adding either: the symbols are sorted until then. */
    int name_start = cfg_image_symbol_at(img, img->entry) == NULL && !has_symbol_named(img, "_start");
    uint64_t m = main_from_start(img);
    const cfg_section_t *ms = m != 0 ? cfg_image_section_at(img, m) : NULL;
    int name_main = ms != NULL && (ms->flags & CFG_SEC_CODE) && m != img->entry
        && cfg_image_symbol_at(img, m) == NULL && !has_symbol_named(img, "main");
    int rc = 0;
    if (name_start)
        rc = add_code_name(img, img->entry, "_start");
    if (rc >= 0 && name_main)
        rc = add_code_name(img, m, "main");
    if (rc < 0)
        return rc;
    return name_start || name_main ? cfg_image_finish(img) : 0;
}
