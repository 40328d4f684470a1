/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The ELF writer: the only file that includes libelf.h and gelf.h.
 *
 * How the output is made. The input is read whole into memory (the "image"), libelf
 * parses it (elf_memory), patches and the CET bits are applied to the image, and the
 * output is written through a fresh libelf descriptor in ELF_F_LAYOUT mode: every
 * original section keeps its index, offset and bytes (its data points into the image);
 * sections that grow (.shstrtab, .strtab, .symtab) are placed after the end of the input,
 * followed by the new regions, the moved program header table if any and, when the
 * number of sections changed, the section header table. libelf fills the holes between
 * what it writes with zeros, so afterwards every byte of the input that no output
 * structure covers (padding between sections, the old program header table, the old
 * section headers) is copied back from the image: the original file range of the output
 * differs from the input only where a header, a patch or a CET bit says so.
 *
 * Program headers: each region needs one new PT_LOAD (and a missing PT_GNU_EH_FRAME one
 * more entry). Entries are reused when there are enough of them: PT_NULL entries and a
 * PT_NOTE whose range PT_GNU_PROPERTY repeats exactly. Otherwise the whole table moves to
 * the end of the file into a read-only PT_LOAD of its own, at the highest address, and
 * PT_PHDR follows it. Its address is the first PT_LOAD's less that one's offset, plus
 * its own offset, as Linux before 5.18 and valgrind compute AT_PHDR (later kernels derive
 * it from the PT_LOAD that contains e_phoff, which is right either way). Either way the new PT_LOADs come right after the last
 * original one, so PT_PHDR stays first, PT_INTERP before the loads and the loads sorted.
 *
 * Symbols: a request that names a defined STT_FUNC of .symtab moves it (value, size,
 * section); any other name is added as a local STT_FUNC, inserted before the first
 * global: sh_info grows and relocation sections against .symtab are renumbered. A
 * stripped input gets a new .symtab and .strtab when there are symbols to add.
 *
 * The file structures are read and written in the host representation: configure
 * accepts only x86-64 hosts and elfw accepts only ELFCLASS64 little-endian x86-64 input.
 */
#include "config.h"

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

/*****************************************************************************
 * State of one elfw_write call
 */

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

static int
elfw_fail(elfw_ctx_t *c, int rc, const char *fmt, ...)
{
    va_list ap;

    if (c->err != NULL && c->errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* A failed system call: "WHAT PATH: strerror(errno)"; errno is kept. */
static int
elfw_fail_errno(elfw_ctx_t *c, const char *what, const char *path)
{
    int e = errno;

    elfw_fail(c, QP_EIO, "%s %s: %s", what, path, strerror(e));
    errno = e;
    return QP_EIO;
}

static int
elfw_fail_elf(elfw_ctx_t *c, int rc, const char *path)
{
    (void)path; /* the caller names the input */
    return elfw_fail(c, rc, "%s", elf_errmsg(-1));
}

static int
elfw_buf_reserve(elfw_buf_t *b, size_t more)
{
    size_t want;
    uint8_t *p;

    if (more > SIZE_MAX - b->len)
        return QP_ENOMEM;
    want = b->len + more;
    if (want <= b->cap)
        return 0;
    if (want < 64)
        want = 64;
    if (want < b->cap * 2 && b->cap * 2 > b->cap)
        want = b->cap * 2;
    p = realloc(b->p, want);
    if (p == NULL)
        return QP_ENOMEM;
    memset(p + b->len, 0, want - b->len);
    b->p = p;
    b->cap = want;
    return 0;
}

static int
elfw_buf_append(elfw_buf_t *b, const void *data, size_t n)
{
    QP_CHECK(elfw_buf_reserve(b, n));
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

static uint64_t
elfw_align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) & ~(a - 1);
}

/* The smallest offset >= CUR that is congruent to VADDR modulo M (a power of two). */
static uint64_t
elfw_congruent(uint64_t cur, uint64_t vaddr, uint64_t m)
{
    return cur + ((vaddr - cur) & (m - 1));
}

static int
elfw_is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

static const char *
elfw_scn_name(const elfw_ctx_t *c, size_t ndx)
{
    const char *s;

    if (c->shstrndx == 0 || ndx >= c->in_shnum)
        return "";
    s = elf_strptr(c->in, c->shstrndx, c->scn[ndx].sh.sh_name);
    return s != NULL ? s : "";
}

/*****************************************************************************
 * Reading the input
 */

static int
elfw_read_input(elfw_ctx_t *c)
{
    const char *path = c->req->input;
    size_t done = 0;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return elfw_fail_errno(c, "cannot open", path);
    if (fstat(fd, &c->in_st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return elfw_fail_errno(c, "cannot read", path);
    }
    if (S_ISDIR(c->in_st.st_mode)) {
        close(fd);
        return elfw_fail(c, QP_EDIR, "is a directory");
    }
    if (!S_ISREG(c->in_st.st_mode)) {
        close(fd);
        return elfw_fail(c, QP_EINVAL, "not a regular file");
    }
    if ((uint64_t)c->in_st.st_size > SIZE_MAX / 2) {
        close(fd);
        return elfw_fail(c, QP_ENOMEM, "file too large");
    }
    c->insize = (size_t)c->in_st.st_size;
    c->img = malloc(c->insize > 0 ? c->insize : 1);
    if (c->img == NULL) {
        close(fd);
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    }
    while (done < c->insize) {
        ssize_t n = pread(fd, c->img + done, c->insize - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            errno = e;
            if (n == 0)
                return elfw_fail(
                    c, QP_EIO, "cannot read %s: file shrank while reading", path);
            return elfw_fail_errno(c, "cannot read", path);
        }
        done += (size_t)n;
    }
    close(fd);
    return 0;
}

/* Parse the image: ELF header, program headers, section headers. */
static int
elfw_parse_input(elfw_ctx_t *c)
{
    const char *path = c->req->input;
    size_t i;

    if (elf_version(EV_CURRENT) == EV_NONE)
        return elfw_fail(c, QP_EUNSUPP, "libelf: %s", elf_errmsg(-1));
    c->in = elf_memory((char *)c->img, c->insize);
    if (c->in == NULL || elf_kind(c->in) != ELF_K_ELF)
        return elfw_fail(c, QP_ENOTELF, "not an ELF file");
    if (gelf_getclass(c->in) != ELFCLASS64 || gelf_getehdr(c->in, &c->eh) == NULL)
        return elfw_fail(c, QP_EARCH, "not a 64-bit ELF file");
    if (c->eh.e_ident[EI_DATA] != ELFDATA2LSB
        || (c->eh.e_machine != EM_X86_64 && c->eh.e_machine != EM_AARCH64))
        return elfw_fail(c, QP_EARCH, "not an x86-64 or AArch64 ELF file");
    if (c->eh.e_type != ET_EXEC && c->eh.e_type != ET_DYN)
        return elfw_fail(c, QP_ENOTEXEC, "not an executable (ELF type %u)",
            (unsigned)c->eh.e_type);
    /* The loader ignores them, libelf cannot write a file without them. */
    if (c->eh.e_version != EV_CURRENT || c->eh.e_ident[EI_VERSION] != EV_CURRENT)
        return elfw_fail(c, QP_EFORMAT,
            "its ELF header gives version %#x (ident %u), not 1 (EV_CURRENT)",
            (unsigned)c->eh.e_version, (unsigned)c->eh.e_ident[EI_VERSION]);

    if (elf_getphdrnum(c->in, &c->phnum) != 0)
        return elfw_fail_elf(c, QP_EFORMAT, path);
    if (c->phnum == 0)
        return elfw_fail(c, QP_EFORMAT, "no program headers");
    if (c->eh.e_phentsize != ELFW_PHENT || c->phnum >= PN_XNUM
        || c->eh.e_phoff > c->insize || c->phnum * ELFW_PHENT > c->insize - c->eh.e_phoff)
        return elfw_fail(c, QP_EFORMAT, "bad program header table");
    c->ph = calloc(c->phnum, sizeof(*c->ph));
    if (c->ph == NULL)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    for (i = 0; i < c->phnum; i++) {
        GElf_Phdr *p = &c->ph[i];
        if (gelf_getphdr(c->in, (int)i, p) == NULL)
            return elfw_fail_elf(c, QP_EFORMAT, path);
        if (p->p_type != PT_LOAD)
            continue;
        if (p->p_offset > c->insize || p->p_filesz > c->insize - p->p_offset
            || p->p_filesz > p->p_memsz || p->p_vaddr + p->p_memsz < p->p_vaddr)
            return elfw_fail(
                c, QP_EFORMAT, "PT_LOAD %zu is outside the file", i);
        if (p->p_vaddr + p->p_memsz > c->load_end)
            c->load_end = p->p_vaddr + p->p_memsz;
        if (!c->load_seen) {
            c->load_seen = 1;
            c->load_delta = p->p_vaddr - p->p_offset;
        }
    }
    if (c->load_end == 0)
        return elfw_fail(c, QP_EFORMAT, "no PT_LOAD segment");

    /* libelf reports no sections when their table lies past the end of the file. */
    if (c->eh.e_shoff != 0
        && (c->eh.e_shoff > c->insize
            || (c->eh.e_shnum ? c->eh.e_shnum : 1) * ELFW_SHENT
                > c->insize - c->eh.e_shoff))
        return elfw_fail(
            c, QP_EFORMAT, "the section header table is outside the file");
    if (elf_getshdrnum(c->in, &c->in_shnum) != 0)
        return elfw_fail_elf(c, QP_EFORMAT, path);
    if (c->in_shnum == 0)
        return elfw_fail(c, QP_EUNSUPP, "no section headers");
    if (c->eh.e_shentsize != ELFW_SHENT)
        return elfw_fail(c, QP_EFORMAT, "bad section header size");
    if (elf_getshdrstrndx(c->in, &c->shstrndx) != 0)
        return elfw_fail_elf(c, QP_EFORMAT, path);
    if (c->shstrndx >= c->in_shnum)
        return elfw_fail(c, QP_EFORMAT, "bad section name table index");

    /* Room for the regions and a new .symtab and .strtab. */
    c->scn_cap = c->in_shnum + c->req->nregions + c->req->nsections + 2;
    c->scn = calloc(c->scn_cap, sizeof(*c->scn));
    if (c->scn == NULL)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    for (i = 0; i < c->in_shnum; i++) {
        elfw_scn_t *s = &c->scn[i];
        Elf_Scn *scn = elf_getscn(c->in, i);
        if (scn == NULL || gelf_getshdr(scn, &s->sh) == NULL)
            return elfw_fail_elf(c, QP_EFORMAT, path);
        s->in_size = s->sh.sh_size;
        if (i == 0 || s->sh.sh_type == SHT_NOBITS || s->sh.sh_size == 0)
            continue;
        if (s->sh.sh_offset > c->insize || s->sh.sh_size > c->insize - s->sh.sh_offset)
            return elfw_fail(
                c, QP_EFORMAT, "section %zu is outside the file", i);
        s->bytes = c->img + s->sh.sh_offset;
    }
    c->nscn = c->in_shnum;
    if (c->shstrndx != 0 && c->scn[c->shstrndx].sh.sh_type != SHT_STRTAB)
        return elfw_fail(
            c, QP_EFORMAT, "the section name table is not a string table");
    for (i = 1; i < c->in_shnum; i++) {
        uint64_t al = c->scn[i].sh.sh_addralign;
        if (al > 1 && !elfw_is_pow2(al))
            return elfw_fail(c, QP_EFORMAT,
                "section %zu (%s) has an alignment of %#llx, not a power of two", i,
                elfw_scn_name(c, i), (unsigned long long)al);
    }
    return 0;
}

/*****************************************************************************
 * Checking the request
 */

/* The file offset of the input's bytes that mirror region G shows, or UINT64_MAX when
 * they are not all a PT_LOAD's file bytes. A mirror never shows the file's first page
 * (the ELF header and program headers, which the output changes: the mirror's section
 * writes the input's bytes). */
static uint64_t
elfw_mirror_off(const elfw_ctx_t *c, const elfw_region_t *g)
{
    for (size_t j = 0; j < c->phnum; j++) {
        const GElf_Phdr *ph = &c->ph[j];
        uint64_t first = ph->p_vaddr & ~(uint64_t)(ELFW_PAGE - 1); /* its first page */
        if (ph->p_type != PT_LOAD || g->mirror < first || ph->p_offset < ph->p_vaddr - first
            || g->mirror + g->size > ph->p_vaddr + ph->p_filesz)
            continue;
        uint64_t off = ph->p_offset + g->mirror - ph->p_vaddr; /* mirror >= first: >= 0 */
        return off >= ELFW_PAGE && off + g->size <= c->insize ? off : UINT64_MAX;
    }
    return UINT64_MAX;
}

static int
elfw_check_request(elfw_ctx_t *c)
{
    const elfw_request_t *r = c->req;
    uint64_t prev_end = c->load_end;
    size_t i;

    for (i = 0; i < r->nregions; i++) {
        const elfw_region_t *g = &r->regions[i];
        uint64_t align = g->align ? g->align : 1;

        if (g->name == NULL || g->name[0] == '\0')
            return elfw_fail(c, QP_EINVAL, "region %zu has no name", i);
        if (g->size == 0 || g->vaddr + g->size < g->vaddr)
            return elfw_fail(c, QP_EINVAL, "region %s has a bad size", g->name);
        if ((g->prot & ~(uint32_t)(ED_PROT_R | ED_PROT_W | ED_PROT_X)) != 0)
            return elfw_fail(
                c, QP_EINVAL, "region %s has unknown protection bits", g->name);
        if ((g->prot & ED_PROT_W) && (g->prot & ED_PROT_X))
            return elfw_fail(
                c, QP_EINVAL, "region %s is both writable and executable", g->name);
        if (!elfw_is_pow2(align) || g->vaddr % align != 0)
            return elfw_fail(c, QP_EINVAL, "region %s: bad alignment %#llx", g->name,
                (unsigned long long)g->align);
        if ((g->vaddr & ~(uint64_t)(ELFW_PAGE - 1)) < elfw_align_up(prev_end, ELFW_PAGE))
            return elfw_fail(c, QP_EINVAL,
                "region %s at %#llx overlaps the page of the segment or region before it",
                g->name, (unsigned long long)g->vaddr);
        if (g->mirror != 0
            && (g->bytes != NULL || g->mirror % ELFW_PAGE != g->vaddr % ELFW_PAGE
                || elfw_mirror_off(c, g) == UINT64_MAX))
            return elfw_fail(c, QP_EINVAL,
                "region %s: %#llx is not a loaded segment's file bytes to map again", g->name,
                (unsigned long long)g->mirror);
        prev_end = g->vaddr + g->size;
        if (prev_end > UINT64_MAX - 2 * (uint64_t)ELFW_PAGE)
            return elfw_fail(c, QP_EINVAL, "region %s: address out of range", g->name);
    }
    for (i = 0; i < r->npatches; i++) {
        const elfw_patch_t *p = &r->patches[i];
        if (p->len > 0 && (p->bytes == NULL || p->vaddr + p->len < p->vaddr))
            return elfw_fail(c, QP_EINVAL, "patch %zu at %#llx is malformed", i,
                (unsigned long long)p->vaddr);
    }
    for (i = 0; i < r->nsymbols; i++) {
        const elfw_symbol_t *s = &r->symbols[i];
        const elfw_region_t *g;

        if (s->name == NULL || s->name[0] == '\0')
            return elfw_fail(c, QP_EINVAL, "symbol %zu has no name", i);
        if (s->region >= r->nregions)
            return elfw_fail(
                c, QP_EINVAL, "symbol %s: no region %u", s->name, (unsigned)s->region);
        g = &r->regions[s->region];
        if (s->value < g->vaddr || s->size > g->size
            || s->value - g->vaddr > g->size - s->size)
            return elfw_fail(c, QP_EINVAL, "symbol %s at %#llx is not inside region %s",
                s->name, (unsigned long long)s->value, g->name);
    }
    if (r->unwind_in_place != 0) {
        const GElf_Shdr *eh = NULL, *hdr = NULL;
        int has_ph = 0;
        for (i = 1; i < c->in_shnum; i++) {
            const char *nm = elfw_scn_name(c, i);
            if (strcmp(nm, ".eh_frame") == 0 && eh == NULL)
                eh = &c->scn[i].sh;
            else if (strcmp(nm, ".eh_frame_hdr") == 0 && hdr == NULL)
                hdr = &c->scn[i].sh;
        }
        for (i = 0; i < c->phnum; i++)
            has_ph |= c->ph[i].p_type == PT_GNU_EH_FRAME && hdr != NULL
                && c->ph[i].p_vaddr == hdr->sh_addr;
        if (eh == NULL || hdr == NULL || !has_ph || r->rename_old_unwind
            || r->unwind_in_place > eh->sh_size || r->eh_frame_hdr != hdr->sh_addr
            || r->eh_frame_hdr_size > hdr->sh_size)
            return elfw_fail(c, QP_EINVAL,
                "the unwind tables do not fit over the input's .eh_frame and .eh_frame_hdr");
    } else if (r->eh_frame_hdr != 0) {
        for (i = 0; i < r->nregions; i++) {
            const elfw_region_t *g = &r->regions[i];
            if (g->bytes != NULL && r->eh_frame_hdr >= g->vaddr
                && r->eh_frame_hdr - g->vaddr <= g->size
                && r->eh_frame_hdr_size <= g->size - (r->eh_frame_hdr - g->vaddr))
                break;
        }
        if (i == r->nregions || r->eh_frame_hdr_size == 0)
            return elfw_fail(c, QP_EINVAL,
                "the new .eh_frame_hdr at %#llx is not inside a region with contents",
                (unsigned long long)r->eh_frame_hdr);
    }
    return 0;
}

/*****************************************************************************
 * Patches and the CET property bits (applied to the image)
 */

static int
elfw_apply_patches(elfw_ctx_t *c)
{
    size_t i, k, j;

    for (i = 0; i < c->req->npatches; i++) {
        const elfw_patch_t *p = &c->req->patches[i];
        uint64_t off = 0;
        int found = 0;

        if (p->len == 0)
            continue;
        for (k = 1; k < c->in_shnum && !found; k++) {
            const GElf_Shdr *sh = &c->scn[k].sh;
            if ((sh->sh_flags & SHF_ALLOC) == 0 || sh->sh_type == SHT_NOBITS
                || p->vaddr < sh->sh_addr || p->len > sh->sh_size
                || p->vaddr - sh->sh_addr > sh->sh_size - p->len)
                continue;
            off = sh->sh_offset + (p->vaddr - sh->sh_addr);
            found = 1;
        }
        if (!found)
            return elfw_fail(c, QP_EINVAL,
                "patch at %#llx (%llu bytes) is not inside a loaded section's bytes",
                (unsigned long long)p->vaddr, (unsigned long long)p->len);
        /* The segment that loads those bytes must agree with the section. */
        found = 0;
        for (j = 0; j < c->phnum && !found; j++) {
            const GElf_Phdr *ph = &c->ph[j];
            if (ph->p_type != PT_LOAD || p->vaddr < ph->p_vaddr || p->len > ph->p_filesz
                || p->vaddr - ph->p_vaddr > ph->p_filesz - p->len)
                continue;
            if (ph->p_offset + (p->vaddr - ph->p_vaddr) != off)
                return elfw_fail(c, QP_EFORMAT,
                    "section and segment disagree on the file offset of %#llx",
                    (unsigned long long)p->vaddr);
            found = 1;
        }
        if (!found)
            return elfw_fail(c, QP_EINVAL,
                "patch at %#llx is not inside a PT_LOAD's bytes",
                (unsigned long long)p->vaddr);
        memcpy(c->img + off, p->bytes, p->len);
    }
    return 0;
}

static uint32_t
elfw_get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Clear IBT and SHSTK (x86-64) or BTI (AArch64: the redirects in the old text are `b`
 * instructions, no landing pads; PAC stays, a procedure's sign and authenticate move
 * together) in every NT_GNU_PROPERTY_TYPE_0 note of the LEN bytes at P. MACHINE: the
 * file's e_machine. */
static void
elfw_note_clear_cet(uint8_t *p, uint64_t len, uint64_t align, unsigned machine)
{
    uint64_t off = 0;

    while (len - off >= 12) {
        uint64_t namesz = elfw_get32(p + off);
        uint64_t descsz = elfw_get32(p + off + 4);
        uint32_t type = elfw_get32(p + off + 8);
        uint64_t name = off + 12;
        uint64_t desc = off + elfw_align_up(12 + namesz, align);
        uint64_t next = elfw_align_up(desc + descsz, align);
        uint64_t q;

        if (namesz > len || desc > len || descsz > len - desc)
            return;
        if (type == NT_GNU_PROPERTY_TYPE_0 && namesz == 4
            && memcmp(p + name, "GNU", 4) == 0) {
            q = desc;
            while (desc + descsz - q >= 8) {
                uint32_t pr_type = elfw_get32(p + q);
                uint64_t pr_datasz = elfw_get32(p + q + 4);
                if (pr_datasz > desc + descsz - (q + 8))
                    break;
                if (machine == EM_X86_64 && pr_type == GNU_PROPERTY_X86_FEATURE_1_AND
                    && pr_datasz >= 4) {
                    uint32_t v = elfw_get32(p + q + 8);
                    v &= ~(uint32_t)(GNU_PROPERTY_X86_FEATURE_1_IBT
                        | GNU_PROPERTY_X86_FEATURE_1_SHSTK);
                    memcpy(p + q + 8, &v, sizeof(v));
                }
                if (machine == EM_AARCH64 && pr_type == GNU_PROPERTY_AARCH64_FEATURE_1_AND
                    && pr_datasz >= 4) {
                    uint32_t v = elfw_get32(p + q + 8);
                    v &= ~(uint32_t)GNU_PROPERTY_AARCH64_FEATURE_1_BTI;
                    memcpy(p + q + 8, &v, sizeof(v));
                }
                q += 8 + elfw_align_up(pr_datasz, 8);
            }
        }
        if (next >= len)
            return;
        off = next;
    }
}

static void
elfw_clear_cet(elfw_ctx_t *c)
{
    size_t i;

    for (i = 1; i < c->in_shnum; i++) {
        const GElf_Shdr *sh = &c->scn[i].sh;
        if (sh->sh_type == SHT_NOTE && c->scn[i].bytes != NULL
            && strcmp(elfw_scn_name(c, i), ".note.gnu.property") == 0)
            elfw_note_clear_cet(c->img + sh->sh_offset, sh->sh_size,
                sh->sh_addralign == 8 ? 8 : 4, c->eh.e_machine);
    }
    for (i = 0; i < c->phnum; i++) {
        const GElf_Phdr *ph = &c->ph[i];
        if (ph->p_type == PT_GNU_PROPERTY && ph->p_offset <= c->insize
            && ph->p_filesz <= c->insize - ph->p_offset)
            elfw_note_clear_cet(c->img + ph->p_offset, ph->p_filesz,
                ph->p_align == 8 ? 8 : 4, c->eh.e_machine);
    }
}

/*****************************************************************************
 * Sections: new regions, string tables, symbols
 */

/* The rewritable contents of section NDX: a copy of its bytes on first use. */
static int
elfw_scn_buf(elfw_ctx_t *c, size_t ndx, elfw_buf_t **out /*OUT*/)
{
    elfw_scn_t *s = &c->scn[ndx];

    if (s->buf.p == NULL) {
        QP_CHECK(elfw_buf_reserve(&s->buf, s->sh.sh_size + 1));
        if (s->bytes != NULL)
            memcpy(s->buf.p, s->bytes, s->sh.sh_size);
        s->buf.len = s->sh.sh_size;
    }
    *out = &s->buf;
    return 0;
}

/* Add NAME to the string table NDX; *OFF gets its offset. Reuses an equal string. */
static int
elfw_str_add(elfw_ctx_t *c, size_t ndx, const char *name, int reuse, uint32_t *off)
{
    elfw_buf_t *b;
    size_t n = strlen(name) + 1;
    size_t i;

    QP_CHECK(elfw_scn_buf(c, ndx, &b));
    if (reuse && b->len >= n) {
        for (i = 0; i + n <= b->len; i++) {
            if (b->p[i + n - 1] == '\0' && memcmp(b->p + i, name, n) == 0) {
                *off = (uint32_t)i;
                return 0;
            }
        }
    }
    /* A table must start with a NUL byte; one that does not end with one gets one. */
    if (b->len == 0 || b->p[b->len - 1] != '\0')
        QP_CHECK(elfw_buf_append(b, "", 1));
    if (b->len > UINT32_MAX - n)
        return QP_ERANGE;
    *off = (uint32_t)b->len;
    return elfw_buf_append(b, name, n);
}

static int
elfw_add_section_name(elfw_ctx_t *c, const char *name, uint32_t *off)
{
    int rc;

    if (c->shstrndx == 0)
        return elfw_fail(c, QP_EUNSUPP, "no section name table to name new sections");
    rc = elfw_str_add(c, c->shstrndx, name, 1, off);
    if (rc < 0)
        return elfw_fail(c, rc, "cannot add section name %s", name);
    return 0;
}

/* The new unwind tables over the input's: its sections shrink to them. */
static void
elfw_shrink_old_unwind(elfw_ctx_t *c)
{
    int eh = 0, hdr = 0; /* the first of each name, as elfw_check_request checked */
    for (size_t i = 1; i < c->in_shnum; i++) {
        const char *nm = elfw_scn_name(c, i);
        if (!eh && strcmp(nm, ".eh_frame") == 0) {
            c->scn[i].sh.sh_size = c->req->unwind_in_place;
            eh = 1;
        } else if (!hdr && strcmp(nm, ".eh_frame_hdr") == 0) {
            c->scn[i].sh.sh_size = c->req->eh_frame_hdr_size;
            hdr = 1;
        }
    }
}

/* The input's unwind sections get other names: a new region takes over ".eh_frame". */
static int
elfw_rename_old_unwind(elfw_ctx_t *c)
{
    size_t i;

    for (i = 1; i < c->in_shnum; i++) {
        const char *nm = elfw_scn_name(c, i);
        const char *to = NULL;

        if (strcmp(nm, ".eh_frame") == 0)
            to = ".qpt.old.eh_frame";
        else if (strcmp(nm, ".eh_frame_hdr") == 0)
            to = ".qpt.old.eh_frame_hdr";
        if (to != NULL)
            QP_CHECK(elfw_add_section_name(c, to, &c->scn[i].sh.sh_name));
    }
    return 0;
}

static int
elfw_add_regions(elfw_ctx_t *c)
{
    const elfw_request_t *r = c->req;
    size_t i;

    if (r->nregions == 0)
        return 0;
    c->region_scn = calloc(r->nregions, sizeof(*c->region_scn));
    c->region_off = calloc(r->nregions, sizeof(*c->region_off));
    if (c->region_scn == NULL || c->region_off == NULL)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    for (i = 0; i < r->nregions; i++) {
        const elfw_region_t *g = &r->regions[i];
        elfw_scn_t *s = &c->scn[c->nscn];
        uint32_t name;

        QP_CHECK(elfw_add_section_name(c, g->name, &name));
        s->is_new = 1;
        s->sh.sh_name = name;
        s->sh.sh_type = g->bytes != NULL || g->mirror != 0 ? SHT_PROGBITS : SHT_NOBITS;
        s->sh.sh_flags = SHF_ALLOC;
        if (g->prot & ED_PROT_X)
            s->sh.sh_flags |= SHF_EXECINSTR;
        if (g->prot & ED_PROT_W)
            s->sh.sh_flags |= SHF_WRITE;
        s->sh.sh_addr = g->vaddr;
        s->sh.sh_size = g->size;
        s->sh.sh_addralign = g->align ? g->align : 1;
        /* A mirror's section shows the input's (patched) bytes: the same file bytes
         * as the old text's sections, written twice with the same contents. */
        s->bytes = g->mirror != 0 ? c->img + elfw_mirror_off(c, g) : g->bytes;
        c->region_scn[i] = c->nscn++;
    }
    if (c->nscn - 1 >= SHN_LORESERVE && r->nsymbols > 0)
        return elfw_fail(
            c, QP_EUNSUPP, "%s: too many sections for symbol indices", c->req->input);
    return 0;
}

/*
 * New contents for non-alloc sections (debug information): a section of that name gets
 * them (it moves after the end of the input when its size changes), a missing one is
 * added. Loaded sections and compressed ones are refused: nothing maps the former, and
 * the latter would need compressing.
 */
static int
elfw_replace_sections(elfw_ctx_t *c)
{
    const elfw_request_t *r = c->req;
    size_t i, k;

    for (k = 0; k < r->nsections; k++) {
        const elfw_section_t *q = &r->sections[k];
        elfw_scn_t *s = NULL;

        if (q->name == NULL || (q->size > 0 && q->bytes == NULL))
            return elfw_fail(c, QP_EINVAL, "bad section contents in the request");
        for (i = 1; i < c->in_shnum && s == NULL; i++)
            if (strcmp(elfw_scn_name(c, i), q->name) == 0)
                s = &c->scn[i];
        if (s != NULL
            && ((s->sh.sh_flags & (SHF_ALLOC | SHF_COMPRESSED))
                || s->sh.sh_type != SHT_PROGBITS))
            return elfw_fail(c, QP_EINVAL, "cannot replace section %s", q->name);
        if (s == NULL) {
            uint32_t name;

            QP_CHECK(elfw_add_section_name(c, q->name, &name));
            s = &c->scn[c->nscn++];
            s->is_new = 1;
            s->sh.sh_name = name;
            s->sh.sh_type = SHT_PROGBITS;
            s->sh.sh_addralign = 1;
        }
        free(s->buf.p);
        memset(&s->buf, 0, sizeof(s->buf));
        if (elfw_buf_reserve(&s->buf, q->size + 1) < 0)
            return elfw_fail(c, QP_ENOMEM, "out of memory");
        if (q->size > 0)
            memcpy(s->buf.p, q->bytes, q->size);
        s->buf.len = q->size;
        s->sh.sh_size = q->size;
    }
    return 0;
}

static Elf64_Sym
elfw_sym_get(const elfw_buf_t *b, size_t i)
{
    Elf64_Sym s;
    memcpy(&s, b->p + i * ELFW_SYMENT, sizeof(s));
    return s;
}

static void
elfw_sym_put(elfw_buf_t *b, size_t i, const Elf64_Sym *s)
{
    memcpy(b->p + i * ELFW_SYMENT, s, sizeof(*s));
}

/* A new local function symbol for request symbol K. */
static Elf64_Sym
elfw_sym_new(const elfw_ctx_t *c, size_t k, uint32_t name)
{
    const elfw_symbol_t *q = &c->req->symbols[k];
    Elf64_Sym s;

    memset(&s, 0, sizeof(s));
    s.st_name = name;
    s.st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC);
    s.st_other = STV_DEFAULT;
    s.st_shndx = (Elf64_Section)c->region_scn[q->region];
    s.st_value = q->value;
    s.st_size = q->size;
    return s;
}

/* For qsort_r over offsets into a string table (ARG): by the strings. */
static int
elfw_cmp_stroff(const void *a, const void *b, void *arg)
{
    const char *str = arg;
    return strcmp(str + *(const uint32_t *)a, str + *(const uint32_t *)b);
}

/*
 * The names of the request's symbols as offsets into .dynstr (malloc'd into *OFF), when
 * every one of them is the name of a .dynsym symbol (a stripped program whose symbols
 * all come from its dynamic symbol table: .symtab can then use .dynstr, instead of a
 * second copy of the same strings). Sets *NDX to .dynstr's index; 0 when not so.
 */
static int
elfw_names_in_dynstr(elfw_ctx_t *c, uint32_t **off, size_t *ndx)
{
    const elfw_request_t *r = c->req;
    size_t dsym = 0, i, k, n;
    *off = NULL;
    *ndx = 0;
    for (i = 1; i < c->in_shnum && dsym == 0; i++)
        if (c->scn[i].sh.sh_type == SHT_DYNSYM)
            dsym = i;
    if (dsym == 0 || c->scn[dsym].bytes == NULL || c->scn[dsym].sh.sh_entsize != ELFW_SYMENT)
        return 0;
    size_t dstr = c->scn[dsym].sh.sh_link;
    if (dstr == 0 || dstr >= c->in_shnum || c->scn[dstr].sh.sh_type != SHT_STRTAB
        || c->scn[dstr].bytes == NULL || c->scn[dstr].sh.sh_size == 0
        || c->scn[dstr].bytes[c->scn[dstr].sh.sh_size - 1] != '\0')
        return 0;
    const char *str = (const char *)c->scn[dstr].bytes;
    uint64_t strsz = c->scn[dstr].sh.sh_size;
    n = c->scn[dsym].sh.sh_size / ELFW_SYMENT;
    uint32_t *names = malloc((n + 1) * sizeof(uint32_t));
    uint32_t *v = malloc((r->nsymbols + 1) * sizeof(uint32_t));
    if (names == NULL || v == NULL) {
        free(names);
        free(v);
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    }
    for (i = k = 0; i < n; i++) {
        Elf64_Sym sy;
        memcpy(&sy, c->scn[dsym].bytes + i * ELFW_SYMENT, sizeof(sy));
        if (sy.st_name != 0 && sy.st_name < strsz)
            names[k++] = sy.st_name;
    }
    qsort_r(names, k, sizeof(uint32_t), elfw_cmp_stroff, (void *)str);
    for (i = 0; i < r->nsymbols; i++) {
        size_t lo = 0, hi = k;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (strcmp(str + names[mid], r->symbols[i].name) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == k || strcmp(str + names[lo], r->symbols[i].name) != 0)
            break;
        v[i] = names[lo];
    }
    free(names);
    if (i < r->nsymbols) {
        free(v);
        return 0;
    }
    *off = v;
    *ndx = dstr;
    return 0;
}

/* No .symtab: make one, and its .strtab (or .dynstr, see elfw_names_in_dynstr),
 * holding only the new symbols. */
static int
elfw_symtab_create(elfw_ctx_t *c)
{
    const elfw_request_t *r = c->req;
    uint32_t *dynoff;
    size_t dynstr;
    QP_CHECK(elfw_names_in_dynstr(c, &dynoff, &dynstr));
    size_t symndx = c->nscn, strndx = dynoff != NULL ? dynstr : c->nscn + 1;
    elfw_scn_t *sym = &c->scn[symndx], *str = &c->scn[c->nscn + 1];
    Elf64_Sym s;
    uint32_t name;
    size_t k;

    if (elfw_add_section_name(c, ".symtab", &sym->sh.sh_name) < 0
        || (dynoff == NULL && elfw_add_section_name(c, ".strtab", &str->sh.sh_name) < 0)) {
        free(dynoff);
        return QP_ENOMEM;
    }
    c->nscn += dynoff != NULL ? 1 : 2;
    sym->is_new = str->is_new = 1;
    sym->sh.sh_type = SHT_SYMTAB;
    sym->sh.sh_link = (Elf64_Word)strndx;
    sym->sh.sh_info = (Elf64_Word)(r->nsymbols + 1); /* all local */
    sym->sh.sh_addralign = 8;
    sym->sh.sh_entsize = ELFW_SYMENT;
    if (dynoff == NULL) {
        str->sh.sh_type = SHT_STRTAB;
        str->sh.sh_addralign = 1;
    } else
        str->is_new = 0; /* not used */
    memset(&s, 0, sizeof(s));
    if ((dynoff == NULL && elfw_buf_append(&str->buf, "", 1) < 0)
        || elfw_buf_append(&sym->buf, &s, sizeof(s)) < 0) {
        free(dynoff);
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    }
    for (k = 0; k < r->nsymbols; k++) {
        if (dynoff != NULL)
            name = dynoff[k];
        else if (elfw_str_add(c, strndx, r->symbols[k].name, 0, &name) < 0) {
            free(dynoff);
            return elfw_fail(c, QP_ENOMEM, "out of memory");
        }
        s = elfw_sym_new(c, k, name);
        if (elfw_buf_append(&sym->buf, &s, sizeof(s)) < 0) {
            free(dynoff);
            return elfw_fail(c, QP_ENOMEM, "out of memory");
        }
    }
    free(dynoff);
    return 0;
}

/* Request indices sorted by name, ties by index: for the one pass over .symtab. */
static int
elfw_cmp_req(const void *a, const void *b, void *arg)
{
    const elfw_symbol_t *syms = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int d = strcmp(syms[i].name, syms[j].name);

    if (d != 0)
        return d;
    return i < j ? -1 : i > j;
}

/* Renumber symbol references >= FIRST by ADD in the relocation section NDX. */
static int
elfw_rel_renumber(elfw_ctx_t *c, size_t ndx, uint64_t first, uint64_t add)
{
    uint64_t ent
        = c->scn[ndx].sh.sh_type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
    elfw_buf_t *b;
    uint64_t i;

    if (c->scn[ndx].sh.sh_entsize != ent || c->scn[ndx].bytes == NULL)
        return elfw_fail(c, QP_EFORMAT, "bad relocation section %zu", ndx);
    if (elfw_scn_buf(c, ndx, &b) < 0)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    for (i = 0; i + ent <= b->len; i += ent) {
        uint64_t info, sym;
        memcpy(&info, b->p + i + 8, sizeof(info)); /* r_info follows r_offset */
        sym = ELF64_R_SYM(info);
        if (sym < first)
            continue;
        if (sym + add > UINT32_MAX)
            return elfw_fail(c, QP_EUNSUPP, "%s: too many symbols", c->req->input);
        info = ELF64_R_INFO(sym + add, ELF64_R_TYPE(info));
        memcpy(b->p + i + 8, &info, sizeof(info));
    }
    return 0;
}

static int
elfw_symbols(elfw_ctx_t *c)
{
    const elfw_request_t *r = c->req;
    const char *path = r->input;
    size_t symndx = 0, strndx, nsyms, first_global, nadd = 0, i, k;
    size_t *order = NULL, *match = NULL;
    elfw_buf_t *sb;
    Elf_Data *d;
    int rc = 0;

    if (r->nsymbols == 0)
        return 0;
    for (i = 1; i < c->in_shnum && symndx == 0; i++)
        if (c->scn[i].sh.sh_type == SHT_SYMTAB)
            symndx = i;
    if (symndx == 0)
        return elfw_symtab_create(c);

    strndx = c->scn[symndx].sh.sh_link;
    if (strndx == 0 || strndx >= c->in_shnum || c->scn[strndx].sh.sh_type != SHT_STRTAB
        || c->scn[symndx].sh.sh_entsize != ELFW_SYMENT || c->scn[symndx].bytes == NULL)
        return elfw_fail(c, QP_EFORMAT, "%s: bad .symtab", path);
    nsyms = c->scn[symndx].sh.sh_size / ELFW_SYMENT;
    first_global = c->scn[symndx].sh.sh_info;
    if (first_global > nsyms)
        return elfw_fail(c, QP_EFORMAT, "%s: bad .symtab sh_info", path);

    order = calloc(r->nsymbols, sizeof(*order));
    match = calloc(r->nsymbols, sizeof(*match));
    if (order == NULL || match == NULL) {
        rc = elfw_fail(c, QP_ENOMEM, "out of memory");
        goto out;
    }
    for (k = 0; k < r->nsymbols; k++)
        order[k] = k;
    qsort_r(order, r->nsymbols, sizeof(*order), elfw_cmp_req, (void *)r->symbols);

    /* One pass: the first defined STT_FUNC of each requested name. */
    d = elf_getdata(elf_getscn(c->in, symndx), NULL);
    if (d == NULL) {
        rc = elfw_fail_elf(c, QP_EFORMAT, path);
        goto out;
    }
    for (i = 1; i < nsyms; i++) {
        GElf_Sym s;
        const char *name;
        size_t lo = 0, hi = r->nsymbols;

        if (gelf_getsym(d, (int)i, &s) == NULL) {
            rc = elfw_fail_elf(c, QP_EFORMAT, path);
            goto out;
        }
        if (GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF)
            continue;
        name = elf_strptr(c->in, strndx, s.st_name);
        if (name == NULL || name[0] == '\0')
            continue;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(r->symbols[order[mid]].name, name) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < r->nsymbols && strcmp(r->symbols[order[lo]].name, name) == 0; lo++)
            if (match[order[lo]] == 0)
                match[order[lo]] = i;
    }

    /* Move the symbols found, in request order. */
    if (elfw_scn_buf(c, symndx, &sb) < 0) {
        rc = elfw_fail(c, QP_ENOMEM, "out of memory");
        goto out;
    }
    for (k = 0; k < r->nsymbols; k++) {
        Elf64_Sym s;
        if (match[k] == 0) {
            nadd++;
            continue;
        }
        s = elfw_sym_get(sb, match[k]);
        s.st_value = r->symbols[k].value;
        s.st_size = r->symbols[k].size;
        s.st_shndx = (Elf64_Section)c->region_scn[r->symbols[k].region];
        elfw_sym_put(sb, match[k], &s);
    }
    if (nadd == 0)
        goto out;

    /* Add the others as locals, before the first global. */
    for (i = 1; i < c->in_shnum; i++) {
        const GElf_Shdr *sh = &c->scn[i].sh;
        if (sh->sh_link != symndx || i == symndx)
            continue;
        if (sh->sh_type == SHT_SYMTAB_SHNDX || sh->sh_type == SHT_GROUP) {
            rc = elfw_fail(c, QP_EUNSUPP,
                "%s: cannot add symbols to a .symtab with extended indices or groups",
                path);
            goto out;
        }
    }
    if (nsyms + nadd > UINT32_MAX) {
        rc = elfw_fail(c, QP_EUNSUPP, "%s: too many symbols", path);
        goto out;
    }
    if (elfw_buf_reserve(sb, nadd * ELFW_SYMENT) < 0) {
        rc = elfw_fail(c, QP_ENOMEM, "out of memory");
        goto out;
    }
    memmove(sb->p + (first_global + nadd) * ELFW_SYMENT,
        sb->p + first_global * ELFW_SYMENT, (nsyms - first_global) * ELFW_SYMENT);
    sb->len = (nsyms + nadd) * ELFW_SYMENT;
    for (k = 0, i = first_global; k < r->nsymbols; k++) {
        uint32_t name;
        Elf64_Sym s;
        if (match[k] != 0)
            continue;
        rc = elfw_str_add(c, strndx, r->symbols[k].name, 0, &name);
        if (rc < 0) {
            rc = elfw_fail(
                c, rc, "%s: cannot add symbol name %s", path, r->symbols[k].name);
            goto out;
        }
        s = elfw_sym_new(c, k, name);
        elfw_sym_put(sb, i++, &s);
    }
    c->scn[symndx].sh.sh_info = (Elf64_Word)(first_global + nadd);
    if (first_global < nsyms) {
        for (i = 1; i < c->in_shnum; i++) {
            const GElf_Shdr *sh = &c->scn[i].sh;
            if (sh->sh_link == symndx
                && (sh->sh_type == SHT_REL || sh->sh_type == SHT_RELA)) {
                rc = elfw_rel_renumber(c, i, first_global, nadd);
                if (rc < 0)
                    goto out;
            }
        }
    }
out:
    free(order);
    free(match);
    return rc;
}

/*****************************************************************************
 * Program headers
 */

/*
 * May entry I be given to a new segment? Pass 0: a PT_NULL entry. Pass 1: a PT_NOTE
 * that PT_GNU_PROPERTY repeats exactly (readers of the property use PT_GNU_PROPERTY and
 * .note.gnu.property, which stay).
 */
static int
elfw_ph_reusable(const elfw_ctx_t *c, size_t i, int pass)
{
    const GElf_Phdr *p = &c->ph[i];
    size_t j;

    if (pass == 0)
        return p->p_type == PT_NULL;
    if (p->p_type != PT_NOTE)
        return 0;
    for (j = 0; j < c->phnum; j++) {
        const GElf_Phdr *q = &c->ph[j];
        if (q->p_type == PT_GNU_PROPERTY && q->p_offset == p->p_offset
            && q->p_vaddr == p->p_vaddr && q->p_filesz == p->p_filesz
            && q->p_memsz == p->p_memsz)
            return 1;
    }
    return 0;
}

/*
 * Decide the output's program header table: reuse entries when enough are free, else
 * move the table. The old entries keep their order (minus reused ones); the new PT_LOADs
 * (regions, then the moved table's) come right after the last old PT_LOAD; a new
 * PT_GNU_EH_FRAME goes last. Offsets are filled in by elfw_finish_phdrs.
 */
static int
elfw_plan_phdrs(elfw_ctx_t *c)
{
    const elfw_request_t *r = c->req;
    size_t need = r->nregions, nreuse = 0, i, j, n, last_load = 0;
    unsigned char *drop;
    int has_eh = 0, pass;

    for (i = 0; i < c->phnum; i++) {
        if (c->ph[i].p_type == PT_GNU_EH_FRAME)
            has_eh = 1;
        if (c->ph[i].p_type == PT_LOAD)
            last_load = i;
    }
    if (r->eh_frame_hdr != 0 && !has_eh && r->unwind_in_place == 0)
        need++;

    drop = calloc(c->phnum, 1);
    if (drop == NULL)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    for (pass = 0; pass < 2; pass++)
        for (i = 0; i < c->phnum && nreuse < need; i++)
            if (!drop[i] && elfw_ph_reusable(c, i, pass)) {
                drop[i] = 1;
                nreuse++;
            }
    c->ph_moved = nreuse < need;
    if (c->ph_moved) {
        memset(drop, 0, c->phnum);
        c->ophnum = c->phnum + need + 1;
    } else {
        c->ophnum = c->phnum;
    }
    if (c->ophnum > ELFW_MAX_PHNUM && c->ophnum != c->phnum) {
        free(drop);
        return elfw_fail(c, QP_EUNSUPP, "too many program headers (%zu)", c->ophnum);
    }
    c->oph = calloc(c->ophnum, sizeof(*c->oph));
    if (c->oph == NULL) {
        free(drop);
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    }

    n = 0;
    c->oph_eh = SIZE_MAX;
    for (i = 0; i < c->phnum; i++) {
        if (!drop[i]) {
            if (c->ph[i].p_type == PT_GNU_EH_FRAME && c->oph_eh == SIZE_MAX)
                c->oph_eh = n;
            c->oph[n++] = c->ph[i];
        }
        if (i != last_load)
            continue;
        c->oph_new = n;
        for (j = 0; j < r->nregions; j++) {
            const elfw_region_t *g = &r->regions[j];
            GElf_Phdr *p = &c->oph[n++];
            p->p_type = PT_LOAD;
            p->p_flags = ((g->prot & ED_PROT_R) ? PF_R : 0)
                | ((g->prot & ED_PROT_W) ? PF_W : 0) | ((g->prot & ED_PROT_X) ? PF_X : 0);
            p->p_vaddr = p->p_paddr = g->vaddr;
            p->p_filesz = g->bytes != NULL || g->mirror != 0 ? g->size : 0;
            p->p_memsz = g->size;
            p->p_align = ELFW_PAGE;
        }
        if (c->ph_moved) {
            GElf_Phdr *p = &c->oph[n++];
            p->p_type = PT_LOAD;
            p->p_flags = PF_R;
            p->p_align = ELFW_PAGE;
        }
    }
    if (r->eh_frame_hdr != 0 && !has_eh && r->unwind_in_place == 0) {
        GElf_Phdr *p = &c->oph[n];
        p->p_type = PT_GNU_EH_FRAME;
        p->p_flags = PF_R;
        p->p_align = 4;
        c->oph_eh = n++;
    }
    free(drop);
    if (n != c->ophnum)
        return elfw_fail(c, QP_EFORMAT, "%s: program header count mismatch", r->input);
    return 0;
}

/* Once the layout is known: the offsets of the new segments, PT_PHDR, PT_GNU_EH_FRAME. */
static void
elfw_finish_phdrs(elfw_ctx_t *c)
{
    const elfw_request_t *r = c->req;
    uint64_t phsize = c->ophnum * ELFW_PHENT;
    size_t i;

    for (i = 0; i < r->nregions; i++)
        c->oph[c->oph_new + i].p_offset = c->region_off[i];
    if (c->ph_moved && c->ph_in_first) {
        memset(&c->oph[c->oph_new + r->nregions], 0, sizeof(GElf_Phdr)); /* PT_NULL */
        for (i = 0; i < c->ophnum; i++) {
            GElf_Phdr *f = &c->oph[i];
            if (f->p_type != PT_LOAD)
                continue;
            f->p_filesz = f->p_memsz = c->ph_off + phsize - f->p_offset;
            break;
        }
    }
    if (c->ph_moved) {
        GElf_Phdr *p = &c->oph[c->oph_new + r->nregions];
        if (!c->ph_in_first) {
            p->p_offset = c->ph_off;
            p->p_vaddr = p->p_paddr = c->ph_vaddr;
            p->p_filesz = p->p_memsz = phsize;
        }
        for (i = 0; i < c->ophnum; i++) {
            p = &c->oph[i];
            if (p->p_type != PT_PHDR)
                continue;
            p->p_offset = c->ph_off;
            p->p_vaddr = p->p_paddr = c->ph_vaddr;
            p->p_filesz = p->p_memsz = phsize;
        }
    }
    if (r->unwind_in_place != 0 && c->oph_eh != SIZE_MAX) {
        GElf_Phdr *p = &c->oph[c->oph_eh];
        p->p_filesz = p->p_memsz = r->eh_frame_hdr_size; /* where it was */
    } else if (r->eh_frame_hdr != 0 && c->oph_eh != SIZE_MAX) {
        GElf_Phdr *p = &c->oph[c->oph_eh];
        for (i = 0; i < r->nregions; i++) {
            const elfw_region_t *g = &r->regions[i];
            if (g->bytes != NULL && r->eh_frame_hdr >= g->vaddr
                && r->eh_frame_hdr - g->vaddr <= g->size
                && r->eh_frame_hdr_size <= g->size - (r->eh_frame_hdr - g->vaddr))
                break;
        }
        p->p_offset = c->region_off[i] + (r->eh_frame_hdr - r->regions[i].vaddr);
        p->p_vaddr = p->p_paddr = r->eh_frame_hdr;
        p->p_filesz = p->p_memsz = r->eh_frame_hdr_size;
    }
}

/*****************************************************************************
 * File layout
 */

/*
 * Everything new goes after the end of the input: the regions (each at an offset
 * congruent to its address modulo the page size, or its alignment when larger), the
 * moved program header table, the sections that grew, and the section header table when
 * the number of sections changed (otherwise it stays where it was).
 */
/*
 * The moved table in the padding after the first PT_LOAD, in the rest of its last page,
 * when no segment and no section has bytes there: that segment then grows over it, and
 * AT_PHDR is right however it is computed, with no byte added. Sets ph_off and ph_vaddr.
 */
static int
elfw_ph_fits_first(elfw_ctx_t *c)
{
    const GElf_Phdr *f = NULL;
    size_t i;
    for (i = 0; i < c->phnum && f == NULL; i++)
        if (c->ph[i].p_type == PT_LOAD)
            f = &c->ph[i];
    if (f == NULL || f->p_filesz != f->p_memsz || f->p_vaddr - f->p_offset != c->load_delta)
        return 0;
    uint64_t end_off = f->p_offset + f->p_filesz;
    uint64_t off = elfw_align_up(end_off, 8), end = off + c->ophnum * ELFW_PHENT;
    if (end > c->insize
        || elfw_align_up(c->load_delta + end, ELFW_PAGE)
            != elfw_align_up(c->load_delta + end_off, ELFW_PAGE))
        return 0;
    for (i = 0; i < c->phnum; i++) {
        const GElf_Phdr *p = &c->ph[i];
        if (p == f || p->p_type != PT_LOAD)
            continue;
        if (p->p_offset < end && p->p_offset + p->p_filesz > off)
            return 0;
        if (p->p_vaddr < elfw_align_up(c->load_delta + end, ELFW_PAGE)
            && p->p_vaddr + p->p_memsz > f->p_vaddr)
            return 0;
    }
    for (i = 1; i < c->nscn; i++) {
        const GElf_Shdr *sh = &c->scn[i].sh;
        if (c->scn[i].is_new)
            continue; /* placed after the input's end */
        if (sh->sh_type != SHT_NOBITS && sh->sh_size != 0 && sh->sh_offset < end
            && sh->sh_offset + sh->sh_size > off)
            return 0;
    }
    c->ph_off = off;
    c->ph_vaddr = c->load_delta + off;
    return 1;
}

/*
 * Where a rewrite that adds sections may put new bytes: the input's end, or before it
 * the input's section header table when that ends the file, and the section name table
 * when it comes right before (8-byte alignment apart) and no segment holds it: such a
 * rewrite writes both anew after the rest (elfw_layout), so their old bytes are dead.
 * EH, SH (SHNUM headers, SHSTRNDX the names' index) and PH (PHNUM) are the input's.
 */
static uint64_t
elfw_tail_from(const GElf_Ehdr *eh, const GElf_Shdr *sh, size_t shnum, size_t shstrndx,
               const GElf_Phdr *ph, size_t phnum, uint64_t insize)
{
    /* Every sum below checked against the file's size first: the headers may be hostile. */
    if (shnum == 0 || eh->e_shoff > insize || shnum > (insize - eh->e_shoff) / ELFW_SHENT
        || eh->e_shoff + (uint64_t)shnum * ELFW_SHENT != insize)
        return insize;
    uint64_t tail = eh->e_shoff;
    if (shstrndx != 0 && shstrndx < shnum) {
        const GElf_Shdr *n = &sh[shstrndx];
        int alone = n->sh_type == SHT_STRTAB && !(n->sh_flags & SHF_ALLOC) && n->sh_size > 0
            && n->sh_offset <= tail && n->sh_size <= tail - n->sh_offset
            && tail - (n->sh_offset + n->sh_size) < 8;
        for (size_t i = 1; i < shnum && alone; i++)
            alone = i == shstrndx || sh[i].sh_type == SHT_NOBITS || sh[i].sh_size == 0
                || (sh[i].sh_offset <= n->sh_offset
                    && sh[i].sh_size <= n->sh_offset - sh[i].sh_offset);
        for (size_t i = 0; i < phnum && alone; i++)
            alone = ph[i].p_filesz == 0 || (ph[i].p_offset <= n->sh_offset
                && ph[i].p_filesz <= n->sh_offset - ph[i].p_offset);
        if (alone)
            tail = n->sh_offset;
    }
    for (size_t i = 0; i < phnum; i++)
        if (ph[i].p_filesz != 0
            && (ph[i].p_offset > tail || ph[i].p_filesz > tail - ph[i].p_offset))
            return insize; /* a segment holds them after all */
    return tail;
}

/* elfw_tail_from for the input of C; insize when the rewrite does not write the section
 * header table and the section names anew. */
static uint64_t
elfw_tail(const elfw_ctx_t *c)
{
    if (c->nscn == c->in_shnum || c->shstrndx == 0)
        return c->insize;
    const elfw_scn_t *n = &c->scn[c->shstrndx];
    if (n->buf.p == NULL || n->buf.len == n->in_size)
        return c->insize; /* the names stay where they are */
    GElf_Shdr *sh = malloc((c->in_shnum + 1) * sizeof(GElf_Shdr));
    if (sh == NULL)
        return c->insize;
    for (size_t i = 0; i < c->in_shnum; i++) {
        sh[i] = c->scn[i].sh;
        sh[i].sh_size = c->scn[i].in_size; /* as in the input */
    }
    uint64_t t = elfw_tail_from(&c->eh, sh, c->in_shnum, c->shstrndx, c->ph, c->phnum,
                                c->insize);
    free(sh);
    return t;
}

int
elfw_new_bytes_at(const char *input, uint64_t *off)
{
    if (input == NULL || off == NULL)
        return QP_EINVAL;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return QP_EFORMAT;
    int fd = open(input, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return QP_EIO;
    struct stat st;
    Elf *e = fstat(fd, &st) == 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    GElf_Ehdr eh;
    size_t shnum = 0, shstrndx = 0, phnum = 0;
    GElf_Shdr *sh = NULL;
    GElf_Phdr *ph = NULL;
    int rc = QP_EFORMAT;
    if (e != NULL && gelf_getehdr(e, &eh) != NULL && elf_getshdrnum(e, &shnum) == 0
        && elf_getshdrstrndx(e, &shstrndx) == 0 && elf_getphdrnum(e, &phnum) == 0
        && (sh = calloc(shnum + 1, sizeof(*sh))) != NULL
        && (ph = calloc(phnum + 1, sizeof(*ph))) != NULL) {
        rc = 0;
        for (size_t i = 0; i < shnum && rc == 0; i++)
            if (gelf_getshdr(elf_getscn(e, i), &sh[i]) == NULL)
                rc = QP_EFORMAT;
        for (size_t i = 0; i < phnum && rc == 0; i++)
            if (gelf_getphdr(e, (int)i, &ph[i]) == NULL)
                rc = QP_EFORMAT;
        if (rc == 0)
            *off = elfw_tail_from(&eh, sh, shnum, shstrndx, ph, phnum, (uint64_t)st.st_size);
    }
    free(sh);
    free(ph);
    if (e != NULL)
        elf_end(e);
    close(fd);
    return rc;
}

/* The most zero bytes added so that old kernels find the moved program headers. */
#define ELFW_PH_PAD_MAX (16u << 20)

static int
elfw_layout(elfw_ctx_t *c)
{
    const elfw_request_t *r = c->req;
    uint64_t cur = elfw_tail(c), vend = c->load_end;
    size_t i;

    for (i = 0; i < r->nregions; i++) {
        const elfw_region_t *g = &r->regions[i];
        uint64_t m = g->align > ELFW_PAGE ? g->align : ELFW_PAGE;
        uint64_t off = elfw_congruent(cur, g->vaddr, m);

        if (g->mirror != 0) {
            off = elfw_mirror_off(c, g); /* the input's bytes: nothing added */
            c->region_off[i] = off;
            c->scn[c->region_scn[i]].sh.sh_offset = off;
            if (g->vaddr + g->size > vend)
                vend = g->vaddr + g->size;
            continue;
        }

        /* A region with no bytes (memory only) never sets the file's end: its offset,
         * congruent to its address, stays below what is written. */
        if (g->bytes == NULL && off > cur && off >= m)
            off -= m;
        c->region_off[i] = off;
        c->scn[c->region_scn[i]].sh.sh_offset = off;
        if (g->bytes != NULL)
            cur = off + g->size;
        if (g->vaddr + g->size > vend)
            vend = g->vaddr + g->size;
    }
    if (c->ph_moved && elfw_ph_fits_first(c)) {
        c->ph_in_first = 1; /* ph_off, ph_vaddr set */
    } else if (c->ph_moved) {
        c->ph_vaddr = elfw_align_up(vend, ELFW_PAGE);
        c->ph_off = elfw_congruent(cur, c->ph_vaddr, ELFW_PAGE);
        /*
         * Linux before 5.18 and valgrind take AT_PHDR to be the first PT_LOAD's address
         * less its offset, plus e_phoff: put the table there too (after some padding,
         * when the memory image runs past the file's end; a static program's libc reads
         * its TLS segment through AT_PHDR). Beyond ELFW_PH_PAD_MAX of padding (a huge
         * .bss) the table stays at the first free address: right on Linux >= 5.18.
         */
        if ((c->load_delta & (ELFW_PAGE - 1)) == 0 && c->ph_vaddr >= c->load_delta) {
            uint64_t off = c->ph_vaddr - c->load_delta;
            if (off < cur)
                off = elfw_align_up(cur, 8); /* the table's entries are 8-byte aligned */
            if (off - cur <= ELFW_PH_PAD_MAX && c->load_delta + off >= c->ph_vaddr) {
                c->ph_off = off;
                c->ph_vaddr = c->load_delta + off;
            }
        }
        c->ph_far = c->ph_vaddr != c->load_delta + c->ph_off;
        cur = c->ph_off + c->ophnum * ELFW_PHENT;
    } else {
        c->ph_off = c->eh.e_phoff;
    }
    for (i = 1; i < c->nscn; i++) {
        elfw_scn_t *s = &c->scn[i];
        uint64_t align = s->sh.sh_addralign ? s->sh.sh_addralign : 1;

        if (s->buf.p == NULL)
            continue;
        s->bytes = s->buf.p;
        s->sh.sh_size = s->buf.len;
        if (!s->is_new && s->buf.len == s->in_size)
            continue; /* rewritten in place */
        if (!elfw_is_pow2(align))
            return elfw_fail(c, QP_EFORMAT, "section %zu has a bad alignment", i);
        s->sh.sh_offset = elfw_align_up(cur, align);
        cur = s->sh.sh_offset + s->buf.len;
    }
    if (c->nscn != c->in_shnum)
        c->sh_off = elfw_align_up(cur, 8);
    else
        c->sh_off = c->eh.e_shoff;
    elfw_finish_phdrs(c);
    return 0;
}

/*****************************************************************************
 * Writing
 */

static int
elfw_pwrite_all(int fd, const uint8_t *p, uint64_t len, uint64_t off)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return QP_EIO;
        }
        p += n;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

static int
elfw_cmp_range(const void *a, const void *b)
{
    const elfw_range_t *x = a, *y = b;

    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/*
 * Write the program header table. libelf writes it too, but then fills every hole
 * between sections with zeros, including a table placed between them.
 */
static int
elfw_write_phdrs(elfw_ctx_t *c)
{
    Elf_Data src, dst;
    uint8_t *buf;
    int rc;

    buf = calloc(c->ophnum, ELFW_PHENT);
    if (buf == NULL)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    memset(&src, 0, sizeof(src));
    memset(&dst, 0, sizeof(dst));
    src.d_buf = c->oph;
    src.d_type = ELF_T_PHDR;
    src.d_size = c->ophnum * ELFW_PHENT;
    src.d_version = EV_CURRENT;
    dst.d_buf = buf;
    dst.d_size = c->ophnum * ELFW_PHENT;
    dst.d_version = EV_CURRENT;
    if (elf64_xlatetof(&dst, &src, ELFDATA2LSB) == NULL) {
        free(buf);
        return elfw_fail(
            c, QP_EIO, "cannot write %s: %s", c->req->output, elf_errmsg(-1));
    }
    rc = elfw_pwrite_all(c->out_fd, buf, dst.d_size, c->ph_off);
    free(buf);
    if (rc < 0)
        return elfw_fail_errno(c, "cannot write", c->req->output);
    return 0;
}

/*
 * Copy back every byte of the input range [0, insize) that libelf did not write from a
 * header or a section (it filled those holes with zeros).
 */
static int
elfw_restore_holes(elfw_ctx_t *c)
{
    elfw_range_t *rg;
    size_t n = 0, i;
    uint64_t pos = 0;
    int rc = 0;

    rg = calloc(c->nscn + 3, sizeof(*rg));
    if (rg == NULL)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    rg[n].lo = 0;
    rg[n++].hi = sizeof(Elf64_Ehdr);
    rg[n].lo = c->ph_off;
    rg[n++].hi = c->ph_off + c->ophnum * ELFW_PHENT;
    rg[n].lo = c->sh_off;
    rg[n++].hi = c->sh_off + c->nscn * ELFW_SHENT;
    for (i = 1; i < c->nscn; i++) {
        const GElf_Shdr *sh = &c->scn[i].sh;
        if (sh->sh_type == SHT_NOBITS || sh->sh_size == 0)
            continue;
        rg[n].lo = sh->sh_offset;
        rg[n++].hi = sh->sh_offset + sh->sh_size;
    }
    qsort(rg, n, sizeof(*rg), elfw_cmp_range);
    for (i = 0; i <= n && pos < c->insize && rc == 0; i++) {
        uint64_t lo = i < n ? rg[i].lo : c->insize;
        if (lo > pos) {
            uint64_t hi = lo < c->insize ? lo : c->insize;
            rc = elfw_pwrite_all(c->out_fd, c->img + pos, hi - pos, pos);
        }
        if (i < n && rg[i].hi > pos)
            pos = rg[i].hi;
    }
    free(rg);
    if (rc < 0)
        return elfw_fail_errno(c, "cannot write", c->req->output);
    return 0;
}

static int
elfw_libelf_write(elfw_ctx_t *c)
{
    Elf *e;
    GElf_Ehdr eh = c->eh;
    size_t i;
    int rc = 0;

    e = elf_begin(c->out_fd, ELF_C_WRITE, NULL);
    if (e == NULL)
        return elfw_fail(
            c, QP_EIO, "cannot write %s: %s", c->req->output, elf_errmsg(-1));
    elf_flagelf(e, ELF_C_SET, ELF_F_LAYOUT | ELF_F_PERMISSIVE);
    if (gelf_newehdr(e, ELFCLASS64) == NULL || gelf_newphdr(e, c->ophnum) == NULL)
        goto libelf_error;
    for (i = 0; i < c->ophnum; i++)
        if (gelf_update_phdr(e, (int)i, &c->oph[i]) == 0)
            goto libelf_error;
    for (i = 1; i < c->nscn; i++) {
        const elfw_scn_t *s = &c->scn[i];
        Elf_Scn *scn = elf_newscn(e);
        Elf_Data *d;

        if (scn == NULL || elf_ndxscn(scn) != i
            || gelf_update_shdr(scn, (GElf_Shdr *)&s->sh) == 0)
            goto libelf_error;
        if (s->sh.sh_type == SHT_NOBITS || s->sh.sh_size == 0)
            continue;
        d = elf_newdata(scn);
        if (d == NULL)
            goto libelf_error;
        d->d_buf = (void *)s->bytes;
        d->d_type = ELF_T_BYTE;
        d->d_size = s->sh.sh_size;
        d->d_off = 0;
        d->d_align = 1;
        d->d_version = EV_CURRENT;
    }
    if (c->nscn > 1) {
        Elf_Scn *scn0 = elf_getscn(e, 0);
        if (scn0 == NULL || gelf_update_shdr(scn0, &c->scn[0].sh) == 0)
            goto libelf_error;
    }
    if (c->req->entry != 0)
        eh.e_entry = c->req->entry;
    eh.e_phoff = c->ph_off;
    eh.e_phnum = (Elf64_Half)c->ophnum;
    eh.e_shoff = c->sh_off;
    eh.e_shnum = (Elf64_Half)(c->nscn < SHN_LORESERVE ? c->nscn : 0);
    if (gelf_update_ehdr(e, &eh) == 0)
        goto libelf_error;
    if (elf_update(e, ELF_C_WRITE) < 0)
        goto libelf_error;
    elf_end(e);
    return 0;

libelf_error:
    rc = elfw_fail(c, QP_EIO, "cannot write %s: %s", c->req->output, elf_errmsg(-1));
    elf_end(e);
    return rc;
}

static void
elfw_tell_tmp(elfw_ctx_t *c, const char *tmp)
{
    if (c->req->tmp_hook != NULL && c->req->tmp_hook->fn != NULL)
        c->req->tmp_hook->fn(c->req->tmp_hook->arg, tmp);
}

static int
elfw_write_output(elfw_ctx_t *c)
{
    const char *out = c->req->output;
    size_t n = strlen(out);

    c->tmp = malloc(n + sizeof(".tmpXXXXXX"));
    if (c->tmp == NULL)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    memcpy(c->tmp, out, n);
    memcpy(c->tmp + n, ".tmpXXXXXX", sizeof(".tmpXXXXXX"));
    c->out_fd = mkstemp(c->tmp);
    if (c->out_fd < 0) {
        int e = errno;
        free(c->tmp);
        c->tmp = NULL;
        errno = e;
        return elfw_fail_errno(c, "cannot write", out);
    }
    elfw_tell_tmp(c, c->tmp);
    /* Never set-user-ID or set-group-ID: see elfw_write in elfw.h. */
    if (fchmod(c->out_fd, c->in_st.st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID)) != 0)
        return elfw_fail_errno(c, "cannot write", out);
    QP_CHECK(elfw_libelf_write(c));
    QP_CHECK(elfw_write_phdrs(c));
    QP_CHECK(elfw_restore_holes(c));
    if (fsync(c->out_fd) != 0)
        return elfw_fail_errno(c, "cannot write", out);
    if (close(c->out_fd) != 0) {
        c->out_fd = -1;
        return elfw_fail_errno(c, "cannot write", out);
    }
    c->out_fd = -1;
    if (rename(c->tmp, out) != 0)
        return elfw_fail_errno(c, "cannot write", out);
    elfw_tell_tmp(c, NULL);
    free(c->tmp);
    c->tmp = NULL;
    return 0;
}

/*****************************************************************************
 * The entry point
 */

/* Refuse to write over the input (the same path, a hard link, a symbolic link). */
static int
elfw_check_output(elfw_ctx_t *c)
{
    struct stat st;

    if (stat(c->req->output, &st) != 0)
        return 0;
    if (st.st_dev == c->in_st.st_dev && st.st_ino == c->in_st.st_ino)
        return elfw_fail(c, QP_EINVAL, "output %s is the input file %s", c->req->output,
            c->req->input);
    if (S_ISDIR(st.st_mode))
        return elfw_fail(c, QP_EDIR, "cannot write %s: Is a directory", c->req->output);
    /* Renaming over it would replace a device node or FIFO (say /dev/null) with a file.
     */
    if (!S_ISREG(st.st_mode))
        return elfw_fail(c, QP_EINVAL,
            "cannot write %s: it exists and is not a regular file", c->req->output);
    return 0;
}

static int
elfw_run(elfw_ctx_t *c)
{
    QP_CHECK(elfw_read_input(c));
    QP_CHECK(elfw_check_output(c));
    QP_CHECK(elfw_parse_input(c));
    QP_CHECK(elfw_check_request(c));
    QP_CHECK(elfw_add_regions(c));
    QP_CHECK(elfw_replace_sections(c));
    if (c->req->rename_old_unwind)
        QP_CHECK(elfw_rename_old_unwind(c));
    QP_CHECK(elfw_symbols(c));
    QP_CHECK(elfw_plan_phdrs(c));
    /* The image is modified only after everything libelf reads from it has been read. */
    QP_CHECK(elfw_apply_patches(c));
    if (c->req->unwind_in_place) /* after the patches that wrote over the old bytes */
        elfw_shrink_old_unwind(c);
    if (c->req->clear_cet)
        elfw_clear_cet(c);
    QP_CHECK(elfw_layout(c));
    return elfw_write_output(c);
}

static void
elfw_ctx_free(elfw_ctx_t *c)
{
    size_t i;

    if (c->out_fd >= 0)
        close(c->out_fd);
    if (c->tmp != NULL) {
        unlink(c->tmp);
        elfw_tell_tmp(c, NULL);
    }
    free(c->tmp);
    if (c->in != NULL)
        elf_end(c->in);
    free(c->img);
    free(c->ph);
    free(c->oph);
    free(c->region_scn);
    free(c->region_off);
    for (i = 0; i < c->scn_cap; i++)
        free(c->scn[i].buf.p);
    free(c->scn);
}

int
elfw_write(const elfw_request_t *req, char *err, size_t errlen)
{
    elfw_ctx_t c;
    int rc, e;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (req == NULL || req->input == NULL || req->output == NULL || req->output[0] == '\0'
        || (req->nregions > 0 && req->regions == NULL)
        || (req->npatches > 0 && req->patches == NULL)
        || (req->nsymbols > 0 && req->symbols == NULL)) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "invalid elfw request");
        return QP_EINVAL;
    }
    memset(&c, 0, sizeof(c));
    c.req = req;
    c.err = err;
    c.errlen = errlen;
    c.out_fd = -1;
    if (strcmp(req->input, req->output) == 0) {
        rc = elfw_fail(&c, QP_EINVAL, "output %s is the input file", req->output);
        return rc;
    }
    rc = elfw_run(&c);
    if (req->phdr_far != NULL)
        *req->phdr_far = rc == 0 && c.ph_far;
    e = errno;
    elfw_ctx_free(&c);
    errno = e;
    return rc;
}
