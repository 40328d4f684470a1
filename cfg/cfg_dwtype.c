/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Fields of a procedure's arguments by their DWARF types: `arg1->len` in the metric
 * language becomes "read 8 bytes at arg1 + 16". The procedure's DIE is found by its entry
 * address (so a static function of the same name elsewhere is never taken for it); its
 * formal parameters give the argument's type; the path walks pointers (`->`) and members
 * (`.`) down to a scalar.
 *
 * Refused, with a reason, rather than guessed: compiler clones (`f.isra.0`: their
 * arguments may not be the source's), arguments that are not in the Nth integer register
 * (a floating-point or by-value struct parameter before them), bit-fields, arrays and
 * structs as values, members whose offset is not a constant.
 *
 * The debug information is read from the program, or from its separate debug file
 * (the one cfg_bfd.c found for the symbols, or /usr/lib/debug/.build-id/), opened once
 * per image and kept until the image is destroyed.
 */
#include "config.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg/cfg_priv.h"

typedef struct dwtypes {
    Dwarf *dbg; /* NULL: no DWARF found (tried once) */
    int fd;
    int tried;
    const void *map; /* libdw's mapping of the file, known to cfg_mapped_at, or NULL */
} dwtypes_t;

static int
fail(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int
fail(char *why, size_t whylen, const char *fmt, ...)
{
    if (why != NULL && whylen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return QP_ENOTFOUND;
}

/* DWARF of PATH, or NULL (FD gets the open descriptor to close). libdw reads the file
 * through a mapping of its own: made known to cfg_mapped_at (*MAP), so that a file
 * truncated meanwhile ends a tool in one line (its SIGBUS handler), not in a crash. */
static Dwarf *
open_dwarf(const char *path, int *fd, const void **map)
{
    *fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (*fd < 0)
        return NULL;
    Dwarf *d = dwarf_begin(*fd, DWARF_C_READ);
    if (d == NULL) {
        close(*fd);
        *fd = -1;
        return NULL;
    }
    size_t len = 0;
    Elf *e = dwarf_getelf(d);
    const char *raw = e != NULL ? elf_rawfile(e, &len) : NULL; /* (sets LEN first) */
    *map = cfg_mapped_add_file(raw, len, path);
    return d;
}

void
cfg_dwtypes_free(void *p)
{
    dwtypes_t *t = p;
    if (t == NULL)
        return;
    cfg_mapped_remove(t->map); /* (first: the mapping goes with dwarf_end) */
    if (t->dbg != NULL)
        dwarf_end(t->dbg);
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}

static Dwarf *
image_dwarf(const cfg_image_t *img)
{
    cfg_image_priv_t *priv = img->priv;
    if (priv == NULL || priv->file_released) /* (the path may name another file now) */
        return NULL;
    if (priv->dwtypes == NULL) {
        dwtypes_t *t = calloc(1, sizeof(*t));
        if (t == NULL)
            return NULL;
        t->fd = -1;
        priv->dwtypes = t;
    }
    dwtypes_t *t = priv->dwtypes;
    if (t->tried)
        return t->dbg;
    t->tried = 1;
    if ((t->dbg = open_dwarf(img->path, &t->fd, &t->map)) == NULL && img->debug_file != NULL)
        t->dbg = open_dwarf(img->debug_file, &t->fd, &t->map);
    if (t->dbg == NULL && img->build_id_len > 1) {
        char p[256];
        int n = snprintf(p, sizeof(p), "/usr/lib/debug/.build-id/%02x/", img->build_id[0]);
        for (size_t i = 1; i < img->build_id_len && n > 0 && (size_t)n < sizeof(p) - 8; i++)
            n += snprintf(p + n, sizeof(p) - (size_t)n, "%02x", img->build_id[i]);
        snprintf(p + n, sizeof(p) - (size_t)n, ".debug");
        t->dbg = open_dwarf(p, &t->fd, &t->map);
    }
    return t->dbg;
}

/* T's type, through typedefs and qualifiers; 0, or -1 when there is none (void). */
static int
type_of(Dwarf_Die *die, Dwarf_Die *t)
{
    Dwarf_Attribute a;
    if (dwarf_attr_integrate(die, DW_AT_type, &a) == NULL || dwarf_formref_die(&a, t) == NULL)
        return -1;
    for (int hops = 0; hops < 64; hops++) {
        switch (dwarf_tag(t)) {
        case DW_TAG_typedef:
        case DW_TAG_const_type:
        case DW_TAG_volatile_type:
        case DW_TAG_restrict_type:
        case DW_TAG_atomic_type:
            if (dwarf_attr_integrate(t, DW_AT_type, &a) == NULL || dwarf_formref_die(&a, t) == NULL)
                return -1;
            continue;
        default:
            return 0;
        }
    }
    return -1;
}

static int
is_aggregate(int tag)
{
    return tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_class_type;
}

/* Is T passed in an integer register, as a whole (pointer, integer, enum)? */
static int
in_int_register(Dwarf_Die *t)
{
    Dwarf_Word size;
    switch (dwarf_tag(t)) {
    case DW_TAG_pointer_type:
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type:
    case DW_TAG_enumeration_type:
        return 1;
    case DW_TAG_base_type: {
        Dwarf_Attribute a;
        Dwarf_Word enc;
        if (dwarf_attr(t, DW_AT_encoding, &a) == NULL || dwarf_formudata(&a, &enc) != 0)
            return 0;
        if (enc == DW_ATE_float || enc == DW_ATE_complex_float || enc == DW_ATE_decimal_float)
            return 0;
        return dwarf_aggregate_size(t, &size) == 0 && size <= 8;
    }
    default:
        return 0;
    }
}

typedef struct find_fn {
    uint64_t entry;
    Dwarf_Die die;
    int found;
} find_fn_t;

static int
find_fn_cb(Dwarf_Die *die, void *arg)
{
    find_fn_t *f = arg;
    Dwarf_Addr lo;
    if (dwarf_lowpc(die, &lo) == 0 && lo == f->entry) {
        f->die = *die;
        f->found = 1;
        return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
}

/* The complete definition of aggregate T when T is only declared here (an incomplete
 * type in this compilation unit): the first of its name elsewhere. */
static int
complete_type(Dwarf *dbg, Dwarf_Die *t)
{
    if (!dwarf_hasattr(t, DW_AT_declaration))
        return 0;
    const char *name = dwarf_diename(t);
    int tag = dwarf_tag(t);
    if (name == NULL)
        return -1;
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (dwarf_nextcu(dbg, off, &next, &hsize, NULL, NULL, NULL) == 0) {
        Dwarf_Die cu, c;
        if (dwarf_offdie(dbg, off + hsize, &cu) != NULL && dwarf_child(&cu, &c) == 0) {
            do {
                if (dwarf_tag(&c) == tag && !dwarf_hasattr(&c, DW_AT_declaration)) {
                    const char *n = dwarf_diename(&c);
                    if (n != NULL && strcmp(n, name) == 0) {
                        *t = c;
                        return 0;
                    }
                }
            } while (dwarf_siblingof(&c, &c) == 0);
        }
        off = next;
    }
    return -1;
}

/* A member's offset: a constant, or DWARF 2's DW_OP_plus_uconst. */
static int
member_offset(Dwarf_Die *m, int64_t *off)
{
    Dwarf_Attribute a;
    Dwarf_Word w;
    *off = 0;
    if (dwarf_attr(m, DW_AT_data_member_location, &a) == NULL)
        return 0; /* a union's members, and C++'s first base */
    if (dwarf_formudata(&a, &w) == 0) {
        *off = (int64_t)w;
        return 0;
    }
    Dwarf_Op *ops;
    size_t n;
    if (dwarf_getlocation(&a, &ops, &n) == 0 && n == 1 && ops[0].atom == DW_OP_plus_uconst) {
        *off = (int64_t)ops[0].number;
        return 0;
    }
    return -1;
}

/* Member NAME of aggregate T (searched into anonymous members and C++ base classes):
 * its DIE and offset. */
static int
find_member(Dwarf_Die *t, const char *name, size_t len, Dwarf_Die *out, int64_t *off, int depth)
{
    Dwarf_Die c;
    if (depth > 8 || dwarf_child(t, &c) != 0)
        return -1;
    do {
        int inherit = dwarf_tag(&c) == DW_TAG_inheritance; /* C++ base: searched as an
                                                             * anonymous member */
        if (dwarf_tag(&c) != DW_TAG_member && !inherit)
            continue;
        const char *n = inherit ? NULL : dwarf_diename(&c);
        int64_t o;
        if (member_offset(&c, &o) < 0)
            continue;
        if (n != NULL && strlen(n) == len && memcmp(n, name, len) == 0) {
            *out = c;
            *off = o;
            return 0;
        }
        Dwarf_Die sub;
        if (n == NULL && type_of(&c, &sub) == 0 && is_aggregate(dwarf_tag(&sub))
            && find_member(&sub, name, len, out, off, depth + 1) == 0) {
            *off += o;
            return 0;
        }
    } while (dwarf_siblingof(&c, &c) == 0);
    return -1;
}

static const char *
type_name(Dwarf_Die *t)
{
    const char *n = dwarf_diename(t);
    return n != NULL ? n : "(anonymous)";
}

int
cfg_arg_field(const cfg_image_t *img, uint64_t entry, const char *proc, int arg,
              const char *path, cfg_field_t *out, char *why, size_t whylen)
{
    if (img == NULL || path == NULL || out == NULL || arg < 0 || arg > 5)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    if (proc != NULL && strchr(proc, '.') != NULL)
        return fail(why, whylen, "%s is a compiler's copy of a procedure: its arguments "
                    "may not be the source's", proc);
    Dwarf *dbg = image_dwarf(img);
    if (dbg == NULL)
        return fail(why, whylen, "no DWARF debug information (build with -g, or install "
                    "the -dbgsym package)");
    Dwarf_Die cu;
    find_fn_t f = { .entry = entry };
    if (dwarf_addrdie(dbg, entry, &cu) != NULL)
        dwarf_getfuncs(&cu, find_fn_cb, &f, 0);
    if (!f.found)
        return fail(why, whylen, "no DWARF description of the procedure at 0x%llx",
                    (unsigned long long)entry);
    /* The parameters: the concrete instance's, or its abstract origin's. */
    Dwarf_Die fn = f.die, c, t;
    Dwarf_Attribute ao;
    int n = 0, have = 0;
    for (int pass = 0; pass < 2 && !have; pass++) {
        if (dwarf_child(&fn, &c) == 0) {
            do {
                if (dwarf_tag(&c) != DW_TAG_formal_parameter)
                    continue;
                if (type_of(&c, &t) < 0 || !in_int_register(&t))
                    return fail(why, whylen, "arg%d is not in an integer register: parameter %d "
                                "of %s is not an integer or pointer", arg + 1, n + 1,
                                dwarf_diename(&fn) ? dwarf_diename(&fn) : "it");
                if (n++ == arg) {
                    have = 1;
                    break;
                }
            } while (dwarf_siblingof(&c, &c) == 0);
        }
        if (!have && n == 0 && dwarf_attr(&fn, DW_AT_abstract_origin, &ao) != NULL
            && dwarf_formref_die(&ao, &fn) != NULL)
            continue;
        break;
    }
    if (!have)
        return fail(why, whylen, "%s has %d parameter%s in its DWARF description, not %d",
                    dwarf_diename(&f.die) ? dwarf_diename(&f.die) : "the procedure", n,
                    n == 1 ? "" : "s", arg + 1);
    /* t: the argument's type. Walk the path. */
    const char *p = path;
    int64_t off = 0;
    int deref = 0; /* the current value is an address to read at (after a ->) */
    char shown[128];
    snprintf(shown, sizeof(shown), "arg%d", arg + 1);
    while (*p != 0) {
        int arrow = strncmp(p, "->", 2) == 0;
        if (!arrow && *p != '.')
            return fail(why, whylen, "malformed field path '%s'", path);
        p += arrow ? 2 : 1;
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
        if (len == 0)
            return fail(why, whylen, "malformed field path '%s'", path);
        if (arrow) {
            int tag = dwarf_tag(&t);
            if (tag != DW_TAG_pointer_type && tag != DW_TAG_reference_type
                && tag != DW_TAG_rvalue_reference_type)
                return fail(why, whylen, "%s is not a pointer: '->%.*s'", shown, (int)len, p);
            if (deref) {
                /* the pointer itself is a field: read it */
                if (out->nloads == CFG_FIELD_MAX)
                    return fail(why, whylen, "more than %d '->' in one path", CFG_FIELD_MAX);
                out->offset[out->nloads] = off;
                out->size[out->nloads++] = 8;
            }
            if (type_of(&t, &t) < 0)
                return fail(why, whylen, "%s points to void: '->%.*s'", shown, (int)len, p);
            off = 0;
            deref = 1;
        } else if (!deref) {
            return fail(why, whylen, "%s is a register, not a struct: use '->'", shown);
        }
        if (!is_aggregate(dwarf_tag(&t)))
            return fail(why, whylen, "%s%s is not a struct or union", arrow ? "*" : "", shown);
        if (complete_type(dbg, &t) < 0)
            return fail(why, whylen, "struct %s is only declared in the DWARF information",
                        type_name(&t));
        Dwarf_Die m;
        int64_t moff;
        if (find_member(&t, p, len, &m, &moff, 0) < 0)
            return fail(why, whylen, "%s %s has no member '%.*s'",
                        dwarf_tag(&t) == DW_TAG_union_type ? "union" : "struct", type_name(&t),
                        (int)len, p);
        if (dwarf_hasattr(&m, DW_AT_bit_size) || dwarf_hasattr(&m, DW_AT_data_bit_offset))
            return fail(why, whylen, "'%.*s' is a bit-field", (int)len, p);
        off += moff;
        size_t sl = strlen(shown);
        snprintf(shown + sl, sizeof(shown) - sl, "%s%.*s", arrow ? "->" : ".", (int)len, p);
        if (type_of(&m, &t) < 0)
            return fail(why, whylen, "%s has no type", shown);
        p += len;
    }
    if (!deref)
        return fail(why, whylen, "'%s': no field named", path);
    Dwarf_Word size;
    int tag = dwarf_tag(&t);
    if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type)
        size = 8;
    else if (!in_int_register(&t) || dwarf_aggregate_size(&t, &size) != 0)
        return fail(why, whylen, "%s is %s, not a number or pointer", shown,
                    tag == DW_TAG_array_type ? "an array" : is_aggregate(tag) ? "a struct"
                                                                                : "not a scalar");
    if (size != 1 && size != 2 && size != 4 && size != 8)
        return fail(why, whylen, "%s has %llu bytes", shown, (unsigned long long)size);
    if (out->nloads == CFG_FIELD_MAX)
        return fail(why, whylen, "more than %d '->' in one path", CFG_FIELD_MAX);
    out->offset[out->nloads] = off;
    out->size[out->nloads++] = (int)size;
    if (tag == DW_TAG_base_type) {
        Dwarf_Attribute a;
        Dwarf_Word enc;
        out->is_signed = dwarf_attr(&t, DW_AT_encoding, &a) != NULL && dwarf_formudata(&a, &enc) == 0
                         && (enc == DW_ATE_signed || enc == DW_ATE_signed_char);
    } else if (tag == DW_TAG_enumeration_type) {
        out->is_signed = 0;
    }
    return 0;
}
