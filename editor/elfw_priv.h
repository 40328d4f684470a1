/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_ELFW_PRIV_H
#define QP_ELFW_PRIV_H
/*
 * PURPOSE: what the files of the ELF writer share (elfw.c: reading, checking, patching,
 * writing and the entry point; elfw_sections.c: sections and symbols; elfw_layout.c:
 * program headers and the file layout): the state of one elfw_write call and its small
 * helpers. Only editor/elfw*.c include this header; like them, it is libelf's only user.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "editor/ed.h"
#include "editor/elfw.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "elfw.c writes ELF structures in the host representation: little-endian hosts only"
#endif

#ifndef NT_GNU_PROPERTY_TYPE_0
#define NT_GNU_PROPERTY_TYPE_0 5
#endif
#ifndef GNU_PROPERTY_AARCH64_FEATURE_1_AND
#define GNU_PROPERTY_AARCH64_FEATURE_1_AND 0xc0000000u
#endif
#ifndef GNU_PROPERTY_AARCH64_FEATURE_1_BTI
#define GNU_PROPERTY_AARCH64_FEATURE_1_BTI (1u << 0)
#endif
#ifndef GNU_PROPERTY_X86_FEATURE_1_AND
#define GNU_PROPERTY_X86_FEATURE_1_AND 0xc0000002u
#endif
#ifndef GNU_PROPERTY_X86_FEATURE_1_IBT
#define GNU_PROPERTY_X86_FEATURE_1_IBT (1u << 0)
#endif
#ifndef GNU_PROPERTY_X86_FEATURE_1_SHSTK
#define GNU_PROPERTY_X86_FEATURE_1_SHSTK (1u << 1)
#endif

#define ELFW_PAGE 4096u
#define ELFW_PHENT ((uint64_t)sizeof(Elf64_Phdr))
#define ELFW_SHENT ((uint64_t)sizeof(Elf64_Shdr))
#define ELFW_SYMENT ((uint64_t)sizeof(Elf64_Sym))
/* The kernel reads at most one page of program headers (load_elf_phdrs). */
#define ELFW_MAX_PHNUM (ELFW_PAGE / sizeof(Elf64_Phdr))

/* The state of one elfw_write call (elfw.c). */
/* A growable byte buffer. */
typedef struct elfw_buf {
    uint8_t *p; /* the bytes (malloc) */
    size_t len; /* bytes used */
    size_t cap; /* bytes allocated */
} elfw_buf_t;

/* One section of the output. */
typedef struct elfw_scn {
    GElf_Shdr sh;         /* the output section header */
    const uint8_t *bytes; /* its file bytes (sh_size of them), NULL for none */
    elfw_buf_t buf;       /* new contents when the section changed (buf.p != NULL) */
    uint64_t in_size;     /* the input's sh_size; 0 for a new section */
    int is_new;           /* 1 when this request added the section */
} elfw_scn_t;

/* A file range written by libelf, for finding the holes to copy back. */
typedef struct elfw_range {
    uint64_t lo; /* first byte */
    uint64_t hi; /* one past the last byte */
} elfw_range_t;

typedef struct elfw_ctx {
    const elfw_request_t *req; /* the request */
    char *err;                 /* the caller's message buffer */
    size_t errlen;             /* its size */
    struct stat in_st;         /* the input's inode and mode */
    int in_fd;                 /* the input, open until the output is renamed, or -1 */
    uint8_t *img;              /* the input's bytes, then patched */
    size_t insize;             /* their number */
    Elf *in;                   /* libelf's view of img */
    GElf_Ehdr eh;              /* the input's ELF header, then the output's */
    GElf_Phdr *ph;             /* the input's program headers */
    size_t phnum;              /* their number */
    size_t in_shnum;           /* the input's section count */
    size_t shstrndx;           /* index of the section name table (0: none) */
    elfw_scn_t *scn;           /* the output's sections (index 0 included) */
    size_t nscn;               /* their number */
    size_t scn_cap;            /* entries allocated in scn */
    size_t *region_scn;        /* the section index of each region */
    uint64_t *region_off;      /* the file offset of each region */
    uint64_t load_end;         /* end of the highest original PT_LOAD (memory) */
    uint64_t load_delta;       /* the first PT_LOAD's p_vaddr - p_offset */
    int load_seen;             /* load_delta is set */
    GElf_Phdr *oph;            /* the output's program headers */
    size_t ophnum;             /* their number */
    size_t oph_new;            /* index in oph of the first new PT_LOAD */
    size_t oph_eh;             /* index in oph of PT_GNU_EH_FRAME, or SIZE_MAX */
    int ph_moved;              /* 1 when the table moves to the end of the file */
    int ph_in_first;           /* ... or into the padding after the first PT_LOAD */
    int ph_far;                /* ... or where only Linux >= 5.18 finds it (AT_PHDR) */
    uint64_t ph_off;           /* the output's e_phoff */
    uint64_t ph_vaddr;         /* the moved table's address */
    uint64_t sh_off;           /* the output's e_shoff */
    char *tmp;                 /* the temporary output path (malloc) */
    int out_fd;                /* its descriptor, or -1 */
} elfw_ctx_t;

/* elfw.c: messages, buffers, alignment, names (each commented at its definition). */
int elfw_fail(elfw_ctx_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int elfw_fail_elf(elfw_ctx_t *c, int rc, const char *path);
int elfw_buf_reserve(elfw_buf_t *b, size_t more);
int elfw_buf_append(elfw_buf_t *b, const void *data, size_t n);
uint64_t elfw_align_up(uint64_t x, uint64_t a);
uint64_t elfw_congruent(uint64_t cur, uint64_t vaddr, uint64_t m);
int elfw_is_pow2(uint64_t x);
const char *elfw_scn_name(const elfw_ctx_t *c, size_t ndx);
uint64_t elfw_mirror_off(const elfw_ctx_t *c, const elfw_region_t *g);

/* elfw_sections.c: the output's sections and symbols. */
int elfw_add_regions(elfw_ctx_t *c);
int elfw_replace_sections(elfw_ctx_t *c);
int elfw_rename_old_unwind(elfw_ctx_t *c);
void elfw_shrink_old_unwind(elfw_ctx_t *c);
int elfw_symbols(elfw_ctx_t *c);

/* elfw_layout.c: program headers and the file layout. */
int elfw_plan_phdrs(elfw_ctx_t *c);
int elfw_layout(elfw_ctx_t *c);

#endif
