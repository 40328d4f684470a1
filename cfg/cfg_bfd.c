/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The image reader: the only file that includes bfd.h. BFD recognises the file and gives
 * sections, symbols (.symtab, .dynsym) and synthetic PLT symbols. BFD keeps the ELF-only
 * facts we need (e_type, program headers, symbol sizes, dynamic tags, notes, RELA
 * entries) behind its private elf-bfd.h, which Debian does not ship, so those are read
 * from the mapped file with glibc's <elf.h> structures, every offset bounds-checked
 * first: BFD is only handed files whose headers are sane.
 */
#include "config.h"

#include <bfd.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/qp_huge.h"
#include "cfg/cfg_priv.h"

/* Source lines (cfg_image_line): BFD's DWARF reader with a cache in front. */
#define LINE_CACHE_SIZE 4096 /* direct-mapped, by address */

typedef struct line_entry {
    uint64_t addr;         /* address looked up (+1, so that 0 means empty) */
    const char *file;      /* interned file name, NULL when there is no line */
    unsigned line;
} line_entry_t;

typedef struct line_state {
    asection *last_sec;    /* the section of the previous lookup */
    asymbol *func_sym;     /* a symbol reused for cfg_image_func_line lookups */
    char **names;          /* interned file names: open addressing, power of 2 */
    size_t nnames, cap;
    line_entry_t cache[LINE_CACHE_SIZE];
} line_state_t;

typedef struct bfd_reader {
    bfd *abfd;             /* BFD handle */
    const uint8_t *map;    /* the whole file, read-only */
    size_t size;           /* its size */
    struct stat st;        /* the file's state when it was opened (cfg_image_file_same) */
    char *debug_path;      /* the separate debug file whose symbols were taken, or NULL */
    struct stat debug_st;  /* its state when it was opened (cfg_image_debug_same) */
    line_state_t *lines;   /* created by the first cfg_image_line call */
    int plt_from;          /* who names x86-64 PLT stubs: plt_from_t */
    int no_relative;       /* relative relocations left unread (CFG_OPEN_SYMBOL_RELOCS) */
} bfd_reader_t;

/* Who names the PLT stubs of an x86-64 file (issue 31): we do (x86_plt_symbols), BFD's
 * synthetic symbols when we cannot be sure to name them as it would; for the tests, we
 * alone (a file we would leave to BFD fails) or BFD alone. */
typedef enum plt_from { PLT_OURS, PLT_OURS_ONLY, PLT_BFD } plt_from_t;

static int open_mapped(const char *path, bfd_reader_t *r, int *fd_out);
static int quiet_check_format(bfd *abfd);
static int open_elf_bfd(const char *path, int fd, bfd **out);
static void quiet_bfd_errors(const char *fmt, va_list ap);

/*
 * BFD's state is global, not per file: its list of open files and the cache of their
 * descriptors (every read goes through it: bfd_seek, bfd_bread), the numbers of the next
 * file and section, its error, and the stderr quiet_check_format swaps. Images are used
 * from different threads (qpt(3), THREAD SAFETY: qpt_wait closes the BFD of a library the
 * process unloaded while another thread looks lines up in another space), so every call
 * into BFD is made under bfd_lock (bfd_enter .. bfd_leave). A leaf lock: nothing done
 * while it is held takes another. What reads only one BFD's own structures
 * (bfd_section_*, bfd_asymbol_*, bfd_get_arch*, abfd->sections, the names and symbols it
 * gave) and libiberty's demangler (cfg_demangle) run without it.
 */
static pthread_mutex_t bfd_lock = PTHREAD_MUTEX_INITIALIZER;
static int bfd_ready; /* bfd_init done (under bfd_lock) */

static void
bfd_enter(void)
{
    pthread_mutex_lock(&bfd_lock);
    if (!bfd_ready) {
        bfd_init();
        bfd_set_error_handler(quiet_bfd_errors);
        bfd_ready = 1;
    }
}

static void
bfd_leave(void)
{
    pthread_mutex_unlock(&bfd_lock);
}

/* bfd_close(ABFD), NULL too. */
static void
close_bfd(bfd *abfd)
{
    if (abfd == NULL)
        return;
    bfd_enter();
    bfd_close(abfd);
    bfd_leave();
}

static void
lines_free(line_state_t *ls)
{
    if (ls == NULL)
        return;
    for (size_t i = 0; i < ls->cap; i++)
        free(ls->names[i]);
    free(ls->names);
    free(ls);
}

/* Unmap R's file (open_mapped), forgotten by cfg_mapped_at first. */
static void
unmap(bfd_reader_t *r)
{
    if (r->map == NULL)
        return;
    cfg_mapped_remove(r->map);
    munmap((void *)r->map, r->size);
    r->map = NULL;
}

static void
reader_close(cfg_image_priv_t *priv)
{
    bfd_reader_t *r = priv->reader;
    if (r == NULL)
        return;
    lines_free(r->lines);
    free(r->debug_path);
    close_bfd(r->abfd);
    unmap(r);
    free(r);
    priv->reader = NULL;
}

static void
quiet_bfd_errors(const char *fmt, va_list ap)
{
    (void)fmt;
    (void)ap; /* the library never prints: malformed input is reported by return code */
}

/* True when [off, off + len) lies inside the file. */
static int
in_file(const bfd_reader_t *r, uint64_t off, uint64_t len)
{
    return off <= r->size && len <= r->size - off;
}

/*****************************************************************************
 * Raw ELF facts, bounds-checked
 */

static const Elf64_Shdr *
raw_shdrs(const bfd_reader_t *r, size_t *n)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)r->map;
    *n = eh->e_shnum;
    return *n ? (const Elf64_Shdr *)(r->map + eh->e_shoff) : NULL;
}

/* One ELF note: its header's fields, where its name and descriptor start. */
typedef struct elf_note {
    uint32_t namesz, descsz, type;
    size_t name_off, desc_off;
} elf_note_t;

/*
 * The note at *OFF of the notes in [p, p + len) into *N, *OFF moved past it (its
 * descriptor's padding too): 1; 0 when fewer than 12 bytes are left; -1 when the note's
 * name or descriptor runs past the end.
 */
static int
note_next(const uint8_t *p, size_t len, size_t *off, elf_note_t *n)
{
    if (*off + 12 > len)
        return 0;
    memcpy(&n->namesz, p + *off, 4);
    memcpy(&n->descsz, p + *off + 4, 4);
    memcpy(&n->type, p + *off + 8, 4);
    n->name_off = *off + 12;
    n->desc_off = n->name_off + ((n->namesz + 3) & ~3u);
    if (n->namesz > len || n->descsz > len || n->desc_off > len
        || n->descsz > len - n->desc_off)
        return -1;
    *off = n->desc_off + ((n->descsz + 3) & ~3u);
    return 1;
}

/* Is N a note of the GNU namespace of type TYPE? */
static int
note_is_gnu(const uint8_t *p, const elf_note_t *n, uint32_t type)
{
    return n->namesz == 4 && memcmp(p + n->name_off, "GNU", 4) == 0 && n->type == type;
}

/* Are the ELF notes in [p, p + len) well formed, GNU properties included? MACHINE:
 * the file's e_machine (the processor-specific property types it may use). */
static int
notes_ok(const uint8_t *p, size_t len, unsigned machine)
{
    size_t off = 0;
    elf_note_t n;
    int more;
    while ((more = note_next(p, len, &off, &n)) > 0) {
        if (note_is_gnu(p, &n, NT_GNU_PROPERTY_TYPE_0)) {
            if (n.descsz % 8)
                return 0;
            size_t q = n.desc_off, qend = n.desc_off + n.descsz;
            while (q < qend) {
                uint32_t ptype, psz;
                if (qend - q < 8)
                    return 0;
                memcpy(&ptype, p + q, 4);
                memcpy(&psz, p + q + 4, 4);
                if (psz > qend - q - 8)
                    return 0;
                if (ptype >= GNU_PROPERTY_LOPROC && ptype <= GNU_PROPERTY_HIPROC && psz != 4)
                    return 0;
                /* Property types BFD does not know make it warn on stderr: only the
                 * generic ones and the x86 AND/OR ranges are accepted. */
                if (ptype >= GNU_PROPERTY_LOPROC
                    && !(ptype >= 0xc0000002u && ptype <= 0xc0017fffu)
                    && !(machine == EM_AARCH64
                         && ptype == GNU_PROPERTY_AARCH64_FEATURE_1_AND))
                    return 0; /* AArch64: BTI and PAC */
                q += 8 + ((psz + 7) & ~7u);
            }
        }
    }
    return more == 0 && (off == len || len - off < 4); /* trailing alignment bytes only */
}

/* Check the ELF header; WHY (may be NULL) gets a phrase for an unsupported machine.
 * *ISA gets the instruction set; one other than x86-64 only when ANY_ISA (analysis). */
static int
check_headers(const bfd_reader_t *r, int any_isa, const arch_isa_t **isa, char *why,
              size_t whylen)
{
    if (r->size < EI_NIDENT || memcmp(r->map, ELFMAG, SELFMAG) != 0)
        return QP_ENOTELF;
    if (r->map[EI_CLASS] != ELFCLASS64 || r->map[EI_DATA] != ELFDATA2LSB)
        return QP_EARCH;
    if (r->size < sizeof(Elf64_Ehdr))
        return QP_EFORMAT;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)r->map;
    /* The architecture comes from e_machine (arch_isa_select); AArch64 is known to
     * arch/, cfg/, the editor and the counting drivers (qpt-rewrite opens it with
     * cfg_image_open_bfd_analysis), not yet to libqpt's mutators, metrics and dyn. */
    *isa = arch_isa_select(eh->e_machine, why, whylen);
    if (*isa == NULL)
        return QP_EARCH;
    if (eh->e_machine != EM_X86_64 && !any_isa) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: only --dump-cfg and qpt-rewrite's drivers none, "
                     "qp and naive so far (not -e, libqpt's mutators or dyn)", (*isa)->name);
        return QP_EUNSUPP;
    }
    if (eh->e_type == ET_REL || eh->e_type == ET_CORE)
        return QP_ENOTEXEC;
    if (eh->e_type != ET_EXEC && eh->e_type != ET_DYN)
        return QP_EFORMAT;
    if (eh->e_phnum == 0 || eh->e_phentsize != sizeof(Elf64_Phdr)
        || !in_file(r, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr))
        || eh->e_phoff % 8 != 0)
        return QP_EFORMAT;
    if (eh->e_shnum != 0) {
        if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff % 8 != 0
            || !in_file(r, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr))
            || eh->e_shstrndx >= eh->e_shnum)
            return QP_EFORMAT;
        size_t n;
        const Elf64_Shdr *sh = raw_shdrs(r, &n);
        for (size_t i = 0; i < n; i++) {
            if (sh[i].sh_type != SHT_NOBITS
                && !in_file(r, sh[i].sh_offset, sh[i].sh_size))
                return QP_EFORMAT;
            if (sh[i].sh_link >= n && sh[i].sh_type != SHT_NULL)
                return QP_EFORMAT;
        }
    }
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(r->map + eh->e_phoff);
    for (size_t i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_NULL && !in_file(r, ph[i].p_offset, ph[i].p_filesz))
            return QP_EFORMAT;
        /* What BFD would only warn about on stderr is refused here. */
        uint64_t al = ph[i].p_align;
        if (ph[i].p_type == PT_LOAD && al > 1
            && ((al & (al - 1)) != 0 || ph[i].p_offset % al != ph[i].p_vaddr % al))
            return QP_EFORMAT;
        if (ph[i].p_type == PT_NOTE
            && !notes_ok(r->map + ph[i].p_offset, ph[i].p_filesz, eh->e_machine))
            return QP_EFORMAT;
    }
    if (eh->e_shnum != 0) {
        size_t n;
        const Elf64_Shdr *sh = raw_shdrs(r, &n);
        if (sh[eh->e_shstrndx].sh_type != SHT_STRTAB)
            return QP_EFORMAT;
        for (size_t i = 0; i < n; i++)
            if (sh[i].sh_type == SHT_NOTE
                && !notes_ok(r->map + sh[i].sh_offset, sh[i].sh_size, eh->e_machine))
                return QP_EFORMAT;
    }
    return 0;
}

/* The name of section header SH (from the section name table), or "?". */
static const char *
raw_name(const bfd_reader_t *r, const Elf64_Shdr *sh)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)r->map;
    size_t n;
    const Elf64_Shdr *all = raw_shdrs(r, &n);
    const Elf64_Shdr *st = &all[eh->e_shstrndx];
    if (sh->sh_name >= st->sh_size)
        return "?";
    const char *p = (const char *)r->map + st->sh_offset + sh->sh_name;
    return memchr(p, 0, st->sh_size - sh->sh_name) ? p : "?";
}

static int
layout_defect(char *why, size_t whylen, const bfd_reader_t *r, const Elf64_Shdr *sh,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Say that section SH does not match its segment, FMT saying how; QP_EFORMAT. */
static int
layout_defect(char *why, size_t whylen, const bfd_reader_t *r, const Elf64_Shdr *sh,
    const char *fmt, ...)
{
    if (why != NULL && whylen > 0) {
        char detail[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        snprintf(why, whylen, "section %.64s at 0x%llx does not match its segment (%s)",
            raw_name(r, sh), (unsigned long long)sh->sh_addr, detail);
    }
    return QP_EFORMAT;
}

/* The section header named NAME, or NULL. */
static const Elf64_Shdr *
raw_shdr_named(const bfd_reader_t *r, const char *name)
{
    size_t n;
    const Elf64_Shdr *sh = raw_shdrs(r, &n);
    for (size_t i = 1; i < n; i++)
        if (strcmp(raw_name(r, &sh[i]), name) == 0)
            return &sh[i];
    return NULL;
}

/*
 * The loader maps segments; this reader, BFD and the editor go by sections (code, FDEs,
 * LSDAs, relocations, init arrays, the GOT and PLT). A section header that disagrees
 * with the segments would make the analysis read other bytes than the program runs,
 * and the rewrite patch the wrong ones: refuse. Every allocated section with contents
 * must be bytes that one PT_LOAD segment puts at its address: inside the segment's file
 * part, at the matching file offset. .eh_frame_hdr and .dynamic must be where
 * PT_GNU_EH_FRAME and PT_DYNAMIC are (the unwinder and the dynamic linker use those).
 * Sections without contents (.bss) must lie in a segment's memory; TLS templates (.tbss)
 * and non-allocated sections are not checked.
 */
static int
check_layout(const bfd_reader_t *r, char *why, size_t whylen)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)r->map;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(r->map + eh->e_phoff);
    size_t n;
    const Elf64_Shdr *sh = raw_shdrs(r, &n);
    if (eh->e_shnum == 0)
        return 0;
    for (size_t i = 1; i < n; i++) {
        const Elf64_Shdr *s = &sh[i];
        if (!(s->sh_flags & SHF_ALLOC) || s->sh_size == 0)
            continue;
        if (s->sh_type == SHT_NOBITS) {
            /* .bss: in a segment's memory (.tbss is a TLS template, not memory). */
            int in = (s->sh_flags & SHF_TLS) != 0;
            for (size_t k = 0; k < eh->e_phnum && !in; k++)
                in = ph[k].p_type == PT_LOAD && s->sh_addr >= ph[k].p_vaddr
                    && s->sh_addr - ph[k].p_vaddr <= ph[k].p_memsz
                    && s->sh_size <= ph[k].p_memsz - (s->sh_addr - ph[k].p_vaddr);
            if (!in)
                return layout_defect(why, whylen, r, s,
                    "no PT_LOAD segment has memory for its 0x%llx bytes",
                    (unsigned long long)s->sh_size);
            continue;
        }
        const Elf64_Phdr *seg = NULL; /* the first PT_LOAD whose memory holds sh_addr */
        int ok = 0;
        for (size_t k = 0; k < eh->e_phnum && !ok; k++) {
            const Elf64_Phdr *p = &ph[k];
            if (p->p_type != PT_LOAD || s->sh_addr < p->p_vaddr
                || s->sh_addr - p->p_vaddr >= p->p_memsz)
                continue;
            if (seg == NULL)
                seg = p;
            uint64_t in = s->sh_addr - p->p_vaddr;
            ok = in <= p->p_filesz && s->sh_size <= p->p_filesz - in
                && s->sh_offset == p->p_offset + in;
        }
        if (ok)
            continue;
        if (seg == NULL)
            return layout_defect(why, whylen, r, s, "no PT_LOAD segment maps 0x%llx",
                (unsigned long long)s->sh_addr);
        uint64_t in = s->sh_addr - seg->p_vaddr;
        if (s->sh_offset != seg->p_offset + in)
            return layout_defect(why, whylen, r, s,
                "the PT_LOAD segment at 0x%llx puts file offset 0x%llx "
                "there, the section header says 0x%llx",
                (unsigned long long)seg->p_vaddr,
                (unsigned long long)(seg->p_offset + in),
                (unsigned long long)s->sh_offset);
        return layout_defect(why, whylen, r, s,
            "0x%llx bytes, but the PT_LOAD segment at 0x%llx loads only "
            "0x%llx bytes from the file there",
            (unsigned long long)s->sh_size, (unsigned long long)seg->p_vaddr,
            (unsigned long long)(in <= seg->p_filesz ? seg->p_filesz - in : 0));
    }
    static const struct {
        uint32_t type;
        const char *seg, *sec;
    } named[] = { { PT_GNU_EH_FRAME, "PT_GNU_EH_FRAME", ".eh_frame_hdr" },
        { PT_DYNAMIC, "PT_DYNAMIC", ".dynamic" } };
    for (size_t j = 0; j < sizeof(named) / sizeof(named[0]); j++) {
        const Elf64_Shdr *s = raw_shdr_named(r, named[j].sec);
        for (size_t k = 0; s != NULL && k < eh->e_phnum; k++) {
            const Elf64_Phdr *p = &ph[k];
            if (p->p_type != named[j].type)
                continue;
            if (p->p_vaddr != s->sh_addr || p->p_offset != s->sh_offset)
                return layout_defect(why, whylen, r, s,
                    "%s is at 0x%llx, file offset 0x%llx; the section "
                    "header says file offset 0x%llx",
                    named[j].seg, (unsigned long long)p->p_vaddr,
                    (unsigned long long)p->p_offset, (unsigned long long)s->sh_offset);
        }
    }
    return 0;
}

/* The dynamic section's tags of interest, from PT_DYNAMIC. */
typedef struct dyn_info {
    int has_soname;        /* DT_SONAME present */
    int pie_flag;          /* DT_FLAGS_1 has DF_1_PIE */
    int dynamic;           /* there is a dynamic section */
    int bind_now;          /* DT_BIND_NOW, DF_BIND_NOW or DF_1_NOW */
    uint64_t init, fini;   /* DT_INIT, DT_FINI or 0 */
    cfg_dyninit_t dyninit; /* DT_INIT's entry, or a spare one */
} dyn_info_t;

static void
read_dynamic(const bfd_reader_t *r, const Elf64_Phdr *ph, size_t nph, dyn_info_t *d)
{
    memset(d, 0, sizeof(*d));
    for (size_t i = 0; i < nph; i++) {
        if (ph[i].p_type != PT_DYNAMIC)
            continue;
        const Elf64_Dyn *dyn = (const Elf64_Dyn *)(r->map + ph[i].p_offset);
        size_t n = ph[i].p_filesz / sizeof(Elf64_Dyn);
        if (ph[i].p_offset % 8)
            return;
        size_t k;
        d->dynamic = 1;
        for (k = 0; k < n && dyn[k].d_tag != DT_NULL; k++) {
            switch (dyn[k].d_tag) {
            case DT_SONAME: d->has_soname = 1; break;
            case DT_FLAGS_1:
                d->pie_flag = (dyn[k].d_un.d_val & DF_1_PIE) != 0;
                d->bind_now |= (dyn[k].d_un.d_val & DF_1_NOW) != 0;
                break;
            case DT_FLAGS: d->bind_now |= (dyn[k].d_un.d_val & DF_BIND_NOW) != 0; break;
            case DT_BIND_NOW: d->bind_now = 1; break;
            case DT_INIT:
                d->init = dyn[k].d_un.d_ptr;
                d->dyninit.init = d->init;
                d->dyninit.init_at = ph[i].p_vaddr + k * sizeof(Elf64_Dyn);
                break;
            case DT_FINI: d->fini = dyn[k].d_un.d_ptr; break;
            default: break;
            }
        }
        /* No DT_INIT: the first DT_NULL can become one when another DT_NULL follows it
         * within the segment (linkers leave a few spare entries). */
        if (d->dyninit.init_at == 0 && k + 1 < n && dyn[k + 1].d_tag == DT_NULL)
            d->dyninit.init_at = ph[i].p_vaddr + k * sizeof(Elf64_Dyn);
    }
}

/* Walk ELF notes in [p, p + len) for the build-id and the x86 feature property. */
static void
read_notes(cfg_image_t *img, const uint8_t *p, size_t len)
{
    size_t off = 0;
    elf_note_t n;
    while (note_next(p, len, &off, &n) > 0) {
        if (note_is_gnu(p, &n, NT_GNU_BUILD_ID) && n.descsz <= sizeof(img->build_id)) {
            memcpy(img->build_id, p + n.desc_off, n.descsz);
            img->build_id_len = n.descsz;
        }
        if (note_is_gnu(p, &n, NT_GNU_PROPERTY_TYPE_0)) {
            /* Properties are 8-byte aligned on ELF64: type, datasz, data. */
            size_t q = n.desc_off, qend = n.desc_off + n.descsz;
            while (q + 8 <= qend) {
                uint32_t ptype, psz;
                memcpy(&ptype, p + q, 4);
                memcpy(&psz, p + q + 4, 4);
                if (psz > qend - q - 8)
                    break;
                if (ptype == GNU_PROPERTY_X86_FEATURE_1_AND && psz >= 4) {
                    uint32_t bits;
                    memcpy(&bits, p + q + 8, 4);
                    if (bits & GNU_PROPERTY_X86_FEATURE_1_IBT)
                        img->flags |= CFG_IMG_IBT;
                    if (bits & GNU_PROPERTY_X86_FEATURE_1_SHSTK)
                        img->flags |= CFG_IMG_SHSTK;
                }
                q += 8 + ((psz + 7) & ~7u);
            }
        }
    }
}

/*****************************************************************************
 * Symbol sizes and relocations from the raw tables
 */

typedef struct sym_size {
    uint64_t addr, size;
} sym_size_t;

typedef CFG_VEC(sym_size_t) sym_size_vec_t;

static int
cmp_sym_size(const void *a, const void *b)
{
    const sym_size_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->size < y->size ? -1 : x->size > y->size;
}

/* Sizes of every function symbol (OBJECTS: object symbol) in .symtab and .dynsym, sorted
 * by address. */
static int
collect_sizes(const bfd_reader_t *r, sym_size_vec_t *out, int objects)
{
    size_t n;
    const Elf64_Shdr *sh = raw_shdrs(r, &n);
    for (size_t i = 0; i < n; i++) {
        if ((sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM)
            || sh[i].sh_offset % 8)
            continue;
        const Elf64_Sym *s = (const Elf64_Sym *)(r->map + sh[i].sh_offset);
        size_t cnt = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < cnt; k++) {
            int t = ELF64_ST_TYPE(s[k].st_info);
            int want = objects ? t == STT_OBJECT : (t == STT_FUNC || t == STT_GNU_IFUNC);
            if (want && s[k].st_size && s[k].st_shndx)
                QP_CHECK(CFG_VEC_PUSH(*out, ((sym_size_t) { s[k].st_value, s[k].st_size })));
        }
    }
    if (out->n)
        qsort(out->v, out->n, sizeof(sym_size_t), cmp_sym_size);
    return 0;
}

/*
 * The thread-local variables of .symtab and .dynsym into img->variables (kind
 * CFG_SYM_TLS, addr: st_value, the offset in the TLS image), straight from the ELF
 * tables: BFD's values of TLS symbols are not addresses.
 */
static int
read_tls_symbols(cfg_image_t *img, const bfd_reader_t *r)
{
    size_t n;
    const Elf64_Shdr *sh = raw_shdrs(r, &n);
    for (size_t i = 0; i < n; i++) {
        if ((sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) || sh[i].sh_offset % 8
            || !in_file(r, sh[i].sh_offset, sh[i].sh_size) || sh[i].sh_link >= n)
            continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (str->sh_type != SHT_STRTAB || !in_file(r, str->sh_offset, str->sh_size))
            continue;
        const char *strs = (const char *)r->map + str->sh_offset;
        const Elf64_Sym *y = (const Elf64_Sym *)(r->map + sh[i].sh_offset);
        size_t cnt = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < cnt; k++) {
            if (ELF64_ST_TYPE(y[k].st_info) != STT_TLS || y[k].st_shndx == SHN_UNDEF
                || y[k].st_name >= str->sh_size
                || memchr(strs + y[k].st_name, 0, str->sh_size - y[k].st_name) == NULL
                || strs[y[k].st_name] == '\0')
                continue;
            cfg_symbol_t *v = realloc(img->variables, (img->nvariables + 1) * sizeof(*v));
            if (v == NULL)
                return QP_ENOMEM;
            img->variables = v;
            cfg_symbol_t t = { 0 };
            t.kind = CFG_SYM_TLS;
            t.addr = y[k].st_value;
            t.size = y[k].st_size;
            t.global = ELF64_ST_BIND(y[k].st_info) != STB_LOCAL;
            t.src = sh[i].sh_type == SHT_SYMTAB ? CFG_SYMSRC_SYMTAB : CFG_SYMSRC_DYNSYM;
            if ((t.name = cfg_image_intern(img, strs + y[k].st_name)) == NULL)
                return QP_ENOMEM;
            v[img->nvariables++] = t;
        }
    }
    return 0;
}

static uint64_t
lookup_size(const sym_size_t *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t best = 0;
    for (; lo < n && v[lo].addr == addr; lo++)
        if (v[lo].size > best)
            best = v[lo].size; /* the largest alias wins */
    return best;
}

/* The 8-byte word at link-time address ADDR in the file bytes of a PT_LOAD segment:
 * 1 and *OUT, or 0 (not in a segment's file bytes). */
static int
load_word(const bfd_reader_t *r, uint64_t addr, uint64_t *out)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)r->map;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(r->map + eh->e_phoff);
    for (size_t i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr && addr - ph[i].p_vaddr <= ph[i].p_filesz
            && ph[i].p_filesz - (addr - ph[i].p_vaddr) >= 8) {
            memcpy(out, r->map + ph[i].p_offset + (addr - ph[i].p_vaddr), 8);
            return 1;
        }
    return 0;
}

/*
 * The relative relocations of an SHT_RELR section (-z pack-relative-relocs: glibc's
 * static-pie programs, newer distributions' default) as RELATIVE ones: an even entry is
 * the address of a relocated word (the next one follows it), an odd one a bitmap of the
 * 63 words after that (bit i: the word at next + (i - 1) * 8), and the addend is the
 * word in place (a code address held in data: functions called through pointers).
 * WANT: count only (*N), else append to img->relocs.
 */
static void
relr_relocs(cfg_image_t *img, const bfd_reader_t *r, const Elf64_Shdr *sh, int want, size_t *n)
{
    const uint64_t *e = (const uint64_t *)(r->map + sh->sh_offset);
    size_t cnt = sh->sh_size / 8;
    uint64_t next = 0;
    for (size_t k = 0; k < cnt; k++) {
        uint64_t where[63];
        size_t m = 0;
        if ((e[k] & 1) == 0) {
            where[m++] = e[k];
            next = e[k] + 8;
        } else {
            for (unsigned b = 1; b < 64; b++)
                if (e[k] >> b & 1)
                    where[m++] = next + (b - 1) * 8;
            next += 63 * 8;
        }
        for (size_t j = 0; j < m; j++) {
            uint64_t v;
            if (!want) {
                (*n)++;
                continue;
            }
            if (!load_word(r, where[j], &v))
                continue;
            img->relocs[img->nrelocs++] = (cfg_reloc_t) { .where = where[j], .value = v,
                                                          .kind = CFG_RELOC_RELATIVE };
        }
    }
}

/* The cfg_reloc_kind_t of ELF relocation type TYPE in IMG's machine, -1 for R_*_NONE. */
static int
reloc_kind(const cfg_image_t *img, uint32_t type)
{
    if (cfg_image_isa(img)->elf_machine == ARCH_EM_AARCH64)
        switch (type) {
        case R_AARCH64_RELATIVE: return CFG_RELOC_RELATIVE;
        case R_AARCH64_IRELATIVE: return CFG_RELOC_IRELATIVE;
        case R_AARCH64_ABS64: return CFG_RELOC_ABS64;
        case R_AARCH64_GLOB_DAT: return CFG_RELOC_GLOB_DAT;
        case R_AARCH64_JUMP_SLOT: return CFG_RELOC_JUMP_SLOT;
        case R_AARCH64_NONE: return -1;
        default: return CFG_RELOC_OTHER;
        }
    switch (type) {
    case R_X86_64_RELATIVE: return CFG_RELOC_RELATIVE;
    case R_X86_64_IRELATIVE: return CFG_RELOC_IRELATIVE;
    case R_X86_64_64: return CFG_RELOC_ABS64;
    case R_X86_64_GLOB_DAT: return CFG_RELOC_GLOB_DAT;
    case R_X86_64_JUMP_SLOT: return CFG_RELOC_JUMP_SLOT;
    case R_X86_64_NONE: return -1;
    default: return CFG_RELOC_OTHER;
    }
}

/* How many relocations of the SHT_RELA section SH read_relocs keeps (at most). */
static size_t
rela_kept(const cfg_image_t *img, const bfd_reader_t *r, const Elf64_Shdr *sh)
{
    size_t cnt = sh->sh_size / sizeof(Elf64_Rela), kept = 0;
    if (!r->no_relative || sh->sh_offset % 8 != 0)
        return cnt;
    const Elf64_Rela *ra = (const Elf64_Rela *)(r->map + sh->sh_offset);
    for (size_t k = 0; k < cnt; k++)
        kept += reloc_kind(img, ELF64_R_TYPE(ra[k].r_info)) != CFG_RELOC_RELATIVE;
    return kept;
}

/* The dynamic relocations into img->relocs; with HUGE (CFG_OPEN_HUGE_PAGES) their array
 * asks for huge pages. */
static int
read_relocs(cfg_image_t *img, const bfd_reader_t *r, int huge)
{
    size_t n, total = 0;
    const Elf64_Shdr *sh = raw_shdrs(r, &n);
    for (size_t i = 0; i < n; i++) {
        if (sh[i].sh_type == SHT_RELA && (sh[i].sh_flags & SHF_ALLOC))
            total += rela_kept(img, r, &sh[i]);
        if (sh[i].sh_type == SHT_RELR && (sh[i].sh_flags & SHF_ALLOC) && sh[i].sh_offset % 8 == 0
            && !r->no_relative)
            relr_relocs(img, r, &sh[i], 0, &total);
    }
    if (total == 0)
        return 0;
    img->relocs = huge ? qp_calloc_whole(total, sizeof(cfg_reloc_t)) /* chromium's: 44 MB */
                       : calloc(total, sizeof(cfg_reloc_t));
    if (img->relocs == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (sh[i].sh_type == SHT_RELR && (sh[i].sh_flags & SHF_ALLOC) && sh[i].sh_offset % 8 == 0
            && !r->no_relative)
            relr_relocs(img, r, &sh[i], 1, NULL);
        if (sh[i].sh_type != SHT_RELA || !(sh[i].sh_flags & SHF_ALLOC) || sh[i].sh_offset % 8)
            continue;
        const Elf64_Rela *ra = (const Elf64_Rela *)(r->map + sh[i].sh_offset);
        size_t cnt = sh[i].sh_size / sizeof(Elf64_Rela);
        const Elf64_Shdr *symsh = sh[i].sh_link ? &sh[sh[i].sh_link] : NULL;
        const Elf64_Sym *syms = NULL;
        size_t nsyms = 0;
        const char *strs = NULL;
        size_t strsz = 0;
        if (symsh && (symsh->sh_type == SHT_DYNSYM || symsh->sh_type == SHT_SYMTAB)
            && symsh->sh_offset % 8 == 0 && symsh->sh_link < n) {
            syms = (const Elf64_Sym *)(r->map + symsh->sh_offset);
            nsyms = symsh->sh_size / sizeof(Elf64_Sym);
            strs = (const char *)r->map + sh[symsh->sh_link].sh_offset;
            strsz = sh[symsh->sh_link].sh_size;
        }
        for (size_t k = 0; k < cnt; k++) {
            cfg_reloc_t *o = &img->relocs[img->nrelocs];
            uint32_t type = ELF64_R_TYPE(ra[k].r_info), si = ELF64_R_SYM(ra[k].r_info);
            o->where = ra[k].r_offset;
            o->value = (uint64_t)ra[k].r_addend;
            o->addend_at = sh[i].sh_addr != 0
                ? sh[i].sh_addr + k * sizeof(Elf64_Rela) + offsetof(Elf64_Rela, r_addend) : 0;
            int kind = reloc_kind(img, type);
            if (kind < 0 || (kind == CFG_RELOC_RELATIVE && r->no_relative))
                continue; /* R_*_NONE, or a relative one left unread */
            o->kind = (uint8_t)kind;
            if (si != 0 && si < nsyms) {
                const Elf64_Sym *s = &syms[si];
                if (s->st_name < strsz && memchr(strs + s->st_name, 0, strsz - s->st_name))
                    o->sym = cfg_image_intern(img, strs + s->st_name);
                if (s->st_shndx != SHN_UNDEF)
                    o->value += s->st_value;
            }
            img->nrelocs++;
        }
    }
    return 0;
}

/* The word at ADDR in the file image, or (when relocated at load time) its relocation.
 * IMG's relocations must be sorted by address (cfg_image_finish). */
static uint64_t
init_word(const cfg_image_t *img, uint64_t addr, const uint8_t *p)
{
    size_t lo = 0, hi = img->nrelocs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (img->relocs[mid].where < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < img->nrelocs && img->relocs[lo].where == addr
        && (img->relocs[lo].kind == CFG_RELOC_RELATIVE || img->relocs[lo].kind == CFG_RELOC_ABS64))
        return img->relocs[lo].value;
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/*****************************************************************************
 * Symbols through BFD
 */

/* SYMS (N, from source SRC) into IMG. Reads only the symbols' own structures: without
 * bfd_lock. */
static int
add_bfd_symbols(cfg_image_t *img, asymbol **syms, long n, int src, const sym_size_t *sizes,
                size_t nsizes, const sym_size_vec_t *objsizes)
{
    for (long i = 0; i < n; i++) {
        asymbol *s = syms[i];
        flagword f = s->flags;
        if (f & (BSF_SECTION_SYM | BSF_FILE | BSF_DEBUGGING | BSF_WARNING | BSF_INDIRECT))
            continue;
        if (s->section == NULL || bfd_is_und_section(s->section) || bfd_is_abs_section(s->section)
            || bfd_is_com_section(s->section))
            continue;
        const char *name = bfd_asymbol_name(s);
        if (name == NULL || name[0] == '\0')
            continue;
        int code = (s->section->flags & SEC_CODE) != 0;
        cfg_symbol_t sym = { 0 };
        if (f & BSF_GNU_INDIRECT_FUNCTION)
            sym.kind = CFG_SYM_IFUNC;
        else if (f & BSF_FUNCTION)
            sym.kind = CFG_SYM_FUNC;
        else if (f & BSF_OBJECT)
            sym.kind = CFG_SYM_OBJECT;
        else
            sym.kind = CFG_SYM_NOTYPE;
        sym.global = (f & (BSF_GLOBAL | BSF_WEAK)) != 0;
        if (src == CFG_SYMSRC_PLT)
            sym.kind = CFG_SYM_FUNC;
        /* Variables by name: objects outside code (a thread-local one's value is no
         * address). */
        if (!code && objsizes != NULL && !(f & BSF_THREAD_LOCAL)
            && (sym.kind == CFG_SYM_OBJECT || (sym.kind == CFG_SYM_NOTYPE && sym.global))) {
            cfg_symbol_t v = sym;
            v.addr = bfd_asymbol_value(s);
            v.src = (uint8_t)src;
            v.size = lookup_size(objsizes->v, objsizes->n, v.addr);
            if ((v.name = cfg_image_intern(img, name)) == NULL)
                return QP_ENOMEM;
            img->variables[img->nvariables++] = v;
        }
        /* Keep what can name code: functions, and global labels or objects in code. */
        if (!code || (sym.kind == CFG_SYM_NOTYPE && !sym.global))
            continue;
        sym.addr = bfd_asymbol_value(s);
        sym.src = (uint8_t)src;
        if (sym.kind == CFG_SYM_FUNC || sym.kind == CFG_SYM_IFUNC)
            sym.size = lookup_size(sizes, nsizes, sym.addr);
        sym.name = cfg_image_intern(img, name);
        if (sym.name == NULL)
            return QP_ENOMEM;
        img->symbols[img->nsymbols++] = sym;
    }
    return 0;
}

/* Make room for N more symbols and variables in IMG. */
static int
grow_symbols(cfg_image_t *img, size_t n)
{
    cfg_symbol_t *s = realloc(img->symbols, (img->nsymbols + n + 1) * sizeof(*s));
    if (s == NULL)
        return QP_ENOMEM;
    img->symbols = s;
    cfg_symbol_t *v = realloc(img->variables, (img->nvariables + n + 1) * sizeof(*v));
    if (v == NULL)
        return QP_ENOMEM;
    img->variables = v;
    return 0;
}

/* A relocation that may name a PLT stub: its address and index in img->relocs. */
typedef struct plt_rel {
    uint64_t where;
    size_t idx;
} plt_rel_t;
typedef CFG_VEC(plt_rel_t) plt_rel_vec_t;

static int
cmp_plt_rel(const void *a, const void *b)
{
    const plt_rel_t *x = a, *y = b;
    if (x->where != y->where)
        return x->where < y->where ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* IMG's relocations that KEEP selects, sorted by address, then file order, into *OUT:
 * the few that PLT stubs are named after, looked up by slot (the relocations are not
 * sorted yet, and chromium has 1.1 million). */
static int
plt_relocs(const cfg_image_t *img, int (*keep)(const cfg_reloc_t *), plt_rel_vec_t *out)
{
    for (size_t i = 0; i < img->nrelocs; i++)
        if (keep(&img->relocs[i]))
            QP_CHECK(CFG_VEC_PUSH(*out, ((plt_rel_t) { img->relocs[i].where, i })));
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(*out->v), cmp_plt_rel);
    return 0;
}

/* The position in V of the first relocation at SLOT, or V->n. */
static size_t
plt_rel_at(const plt_rel_vec_t *v, uint64_t slot)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->v[mid].where < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n && v->v[lo].where == slot ? lo : v->n;
}

/* NAME (interned) as a PLT symbol of IMG at ADDR, SIZE bytes; IMG has room for it. */
static int
add_plt_symbol(cfg_image_t *img, const char *name, uint64_t addr, uint64_t size)
{
    const char *nm = cfg_image_intern(img, name);
    if (nm == NULL)
        return QP_ENOMEM;
    img->symbols[img->nsymbols++] = (cfg_symbol_t) {
        .name = nm, .addr = addr, .size = size, .kind = CFG_SYM_FUNC, .src = CFG_SYMSRC_PLT,
        .global = 1 };
    return 0;
}

/* "SYM" + ("+0xADDEND" when ADDEND is not 0) + "@plt", malloc'd, or NULL. */
static char *
plt_name(const char *sym, int with_addend, uint64_t addend)
{
    size_t n = strlen(sym) + 32;
    char *s = malloc(n);
    if (s != NULL && with_addend)
        snprintf(s, n, "%s+0x%llx@plt", sym, (unsigned long long)addend);
    else if (s != NULL)
        snprintf(s, n, "%s@plt", sym);
    return s;
}

static int
names_a64_stub(const cfg_reloc_t *r)
{
    return r->kind == CFG_RELOC_IRELATIVE || r->sym != NULL;
}

/*
 * PLT entries as BFD's synthetic symbols would name them ("NAME@plt", "*ABS*+0xADDR@plt"
 * for an IFUNC's), for a machine whose PLT our BFD does not know (AArch64): each stub of
 * .plt and .iplt that arch/ recognises (isa->plt_slot) is named after the first
 * relocation of the GOT slot it jumps through.
 */
static int
plt_symbols(cfg_image_t *img)
{
    const arch_isa_t *isa = cfg_image_isa(img);
    plt_rel_vec_t rels = { 0 };
    int rc = plt_relocs(img, names_a64_stub, &rels);
    for (size_t i = 0; rc == 0 && i < img->nsections; i++) {
        const cfg_section_t *sec = &img->sections[i];
        if ((strcmp(sec->name, ".plt") != 0 && strcmp(sec->name, ".iplt") != 0)
            || sec->bytes == NULL || !(sec->flags & CFG_SEC_CODE))
            continue;
        for (uint64_t off = 0; rc == 0 && off + 4 <= sec->size;) {
            uint64_t slot;
            int len = isa->plt_slot(sec->bytes + off, (size_t)(sec->size - off),
                                    sec->vma + off, &slot);
            if (len <= 0) {
                off += isa->insn_align;
                continue;
            }
            size_t k = plt_rel_at(&rels, slot);
            if (k < rels.n) {
                const cfg_reloc_t *rel = &img->relocs[rels.v[k].idx];
                int irel = rel->kind == CFG_RELOC_IRELATIVE;
                char *name = plt_name(irel ? "*ABS*" : rel->sym, irel, rel->value);
                if ((rc = name == NULL ? QP_ENOMEM : grow_symbols(img, 1)) == 0)
                    rc = add_plt_symbol(img, name, sec->vma + off, (uint64_t)len);
                free(name);
            }
            off += (uint64_t)len;
        }
    }
    CFG_VEC_FREE(rels);
    return rc;
}

/* The relocations BFD names x86-64 PLT stubs after (elf_x86_64_valid_plt_reloc_p). */
static int
names_x86_stub(const cfg_reloc_t *r)
{
    return r->kind == CFG_RELOC_JUMP_SLOT || r->kind == CFG_RELOC_GLOB_DAT
           || r->kind == CFG_RELOC_IRELATIVE;
}

/* Returned by x86_plt_symbols when BFD may name the stubs otherwise than we would. */
#define PLT_ASK_BFD 1

/*
 * Are the relocations we read (read_relocs) the dynamic ones BFD reads, those of the
 * sections linked to .dynsym (_bfd_elf_canonicalize_dynamic_reloc)? 1 or 0.
 */
static int
same_dynamic_relocs(const bfd_reader_t *r)
{
    size_t n, dynsym = 0;
    const Elf64_Shdr *sh = raw_shdrs(r, &n);
    for (size_t i = 0; i < n; i++)
        if (sh[i].sh_type == SHT_DYNSYM)
            dynsym = i;
    for (size_t i = 0; i < n; i++) {
        int bfd_reads = (sh[i].sh_type == SHT_RELA || sh[i].sh_type == SHT_REL)
                        && dynsym != 0 && sh[i].sh_link == dynsym;
        int we_read = sh[i].sh_type == SHT_RELA && (sh[i].sh_flags & SHF_ALLOC)
                      && sh[i].sh_offset % 8 == 0;
        if (bfd_reads != we_read)
            return 0;
    }
    return 1;
}

/*
 * The name BFD gives the stub that jumps through relocation REL's slot: its symbol's,
 * "*ABS*" for none, then "+0xADDEND" for an addend that is not 0, then "@plt"
 * (_bfd_x86_elf_get_synthetic_symtab). Malloc'd into *OUT; PLT_ASK_BFD when the raw
 * addend cannot be read back or the symbol has no name of its own.
 */
static int
x86_stub_name(const bfd_reader_t *r, const cfg_reloc_t *rel, char **out)
{
    uint64_t addend = rel->value; /* a symbol's value is added in when defined */
    if (rel->sym != NULL && (rel->addend_at == 0 || !load_word(r, rel->addend_at, &addend)))
        return PLT_ASK_BFD;
    if (rel->sym != NULL && rel->sym[0] == '\0')
        return PLT_ASK_BFD; /* BFD names a section symbol after its section */
    *out = plt_name(rel->sym != NULL ? rel->sym : "*ABS*", addend != 0, addend);
    return *out == NULL ? QP_ENOMEM : 0;
}

/* The stubs of the x86-64 PLT section SEC laid out as L (arch_plt_layout), named as BFD
 * names them; a relocation names one stub at most. */
static int
x86_section_stubs(cfg_image_t *img, const bfd_reader_t *r, const cfg_section_t *sec,
                  const arch_plt_layout_t *l, const plt_rel_vec_t *rels, uint8_t *used)
{
    size_t n = l->none ? 0 : (size_t)(sec->size / l->entry_size);
    for (size_t e = l->skip_first; e < n; e++) {
        uint64_t off = e * l->entry_size;
        const uint8_t *d = sec->bytes + off + l->jmp_end - 4;
        int32_t disp = (int32_t)((uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16
                                 | (uint32_t)d[3] << 24);
        size_t k = plt_rel_at(rels, sec->vma + off + l->jmp_end + (uint64_t)(int64_t)disp);
        if (k == rels->n || used[k])
            continue;
        if (k + 1 < rels->n && rels->v[k + 1].where == rels->v[k].where)
            return PLT_ASK_BFD; /* BFD's binary search picks either */
        char *name = NULL;
        int rc = x86_stub_name(r, &img->relocs[rels->v[k].idx], &name);
        if (rc == 0)
            rc = add_plt_symbol(img, name, sec->vma + off, 0);
        free(name);
        if (rc != 0)
            return rc;
        used[k] = 1;
    }
    return 0;
}

/* The section named NAME with contents in IMG (the first, as BFD finds it), or NULL. */
static const cfg_section_t *
section_named(const cfg_image_t *img, const char *name)
{
    for (size_t i = 0; i < img->nsections; i++)
        if (strcmp(img->sections[i].name, name) == 0)
            return img->sections[i].bytes != NULL && img->sections[i].size > 0
                       ? &img->sections[i] : NULL;
    return NULL;
}

/*
 * The x86-64 PLT stubs of IMG named as BFD's synthetic symbols name them (bfd/
 * elf64-x86-64.c, elf_x86_64_get_synthetic_symtab), in its order: from the relocations
 * read_relocs has read, where BFD would read and canonicalize every dynamic relocation
 * again (chromium: 1.1 million, 35 MB). NDYN: the number of dynamic symbols BFD reads
 * (none, no stubs). PLT_ASK_BFD when BFD may see the file otherwise: then IMG has no
 * more symbols than before.
 */
static int
x86_plt_symbols(cfg_image_t *img, const bfd_reader_t *r, long ndyn)
{
    static const char *const plts[] = { ".plt", ".plt.got", ".plt.sec", ".plt.bnd" };
    const cfg_section_t *sec[4];
    arch_plt_layout_t cur, lay[4];
    size_t nstubs = 0, nsyms = img->nsymbols;
    arch_plt_layout_init(&cur);
    for (int j = 0; j < 4; j++)
        if ((sec[j] = section_named(img, plts[j])) != NULL
            && arch_plt_layout(sec[j]->bytes, (size_t)sec[j]->size, j == 0, &cur, &lay[j]))
            nstubs += (size_t)(sec[j]->size / lay[j].entry_size);
        else
            sec[j] = NULL;
    if (ndyn <= 0 || nstubs == 0)
        return 0;
    if (!same_dynamic_relocs(r))
        return PLT_ASK_BFD;
    plt_rel_vec_t rels = { 0 };
    uint8_t *used = NULL;
    int rc = plt_relocs(img, names_x86_stub, &rels);
    if (rc == 0 && rels.n > 0 && (used = calloc(rels.n, 1)) == NULL)
        rc = QP_ENOMEM;
    if (rc == 0 && rels.n > 0)
        rc = grow_symbols(img, nstubs);
    for (int j = 0; rc == 0 && rels.n > 0 && j < 4; j++)
        if (sec[j] != NULL)
            rc = x86_section_stubs(img, r, sec[j], &lay[j], &rels, used);
    if (rc == PLT_ASK_BFD)
        img->nsymbols = nsyms;
    free(used);
    CFG_VEC_FREE(rels);
    return rc;
}

/*
 * The PLT's synthetic symbols (printf@plt) of the file ABFD reads, into *SYNTH; their
 * number. BFD reads every dynamic relocation to make them (chromium: 1.1 million, 35
 * MB) and keeps them until its file closes: they come from a BFD of their own, *APART
 * (with its dynamic symbols *APART_DYN), which the caller closes once it has copied
 * them (the static symbols serve no ELF target's synthetic symbols); when that cannot
 * be opened, from ABFD with its symbols ST and DYN. Under bfd_lock.
 */
static long
synthetic_symbols(bfd *abfd, long nst, asymbol **st, long ndyn, asymbol **dyn, bfd **apart,
                  asymbol ***apart_dyn, asymbol **synth)
{
    bfd *b = bfd_openr(bfd_get_filename(abfd), NULL);
    long ub = -1, n = 0;
    if (b != NULL && quiet_check_format(b))
        ub = bfd_get_dynamic_symtab_upper_bound(b);
    if (ub > 0 && (*apart_dyn = malloc(ub)) != NULL
        && (n = bfd_canonicalize_dynamic_symtab(b, *apart_dyn)) >= 0) {
        *apart = b;
        return n > 0 ? bfd_get_synthetic_symtab(b, 0, NULL, n, *apart_dyn, synth) : 0;
    }
    free(*apart_dyn);
    *apart_dyn = NULL;
    if (b != NULL)
        bfd_close(b);
    return bfd_get_synthetic_symtab(abfd, nst, st, ndyn, dyn, synth);
}

static int
read_symbols(cfg_image_t *img, bfd_reader_t *r)
{
    bfd *abfd = r->abfd;
    sym_size_vec_t sizes = { 0 }, objsizes = { 0 };
    asymbol **st = NULL, **dyn = NULL, *synth = NULL, **apart_dyn = NULL;
    bfd *apart = NULL;
    long nst = 0, ndyn = 0, nsynth = 0;
    int rc = collect_sizes(r, &sizes, 0);
    if (rc == 0)
        rc = collect_sizes(r, &objsizes, 1);
    if (rc < 0)
        goto out;
    bfd_enter();
    long ub = bfd_get_symtab_upper_bound(abfd);
    if (ub > 0 && (st = malloc(ub)) != NULL)
        nst = bfd_canonicalize_symtab(abfd, st);
    if (nst < 0)
        nst = 0;
    if (nst > 0)
        img->flags |= CFG_IMG_SYMTAB;
    ub = bfd_get_dynamic_symtab_upper_bound(abfd);
    if (ub > 0 && (dyn = malloc(ub)) != NULL)
        ndyn = bfd_canonicalize_dynamic_symtab(abfd, dyn);
    if (ndyn < 0)
        ndyn = 0;
    /* x86-64's PLT stubs are ours to name (after the symbols, in BFD's order) */
    int ours = cfg_image_isa(img)->elf_machine == ARCH_EM_X86_64 && r->plt_from != PLT_BFD;
    if (!ours)
        nsynth = synthetic_symbols(abfd, nst, st, ndyn, dyn, &apart, &apart_dyn, &synth);
    bfd_leave();
    if (nsynth < 0)
        nsynth = 0;
    size_t cap = (size_t)nst + (size_t)ndyn + (size_t)nsynth;
    img->symbols = calloc(cap ? cap : 1, sizeof(cfg_symbol_t));
    img->variables = calloc(cap ? cap : 1, sizeof(cfg_symbol_t));
    if (img->symbols == NULL || img->variables == NULL) {
        rc = QP_ENOMEM;
        goto out;
    }
    rc = add_bfd_symbols(img, st, nst, CFG_SYMSRC_SYMTAB, sizes.v, sizes.n, &objsizes);
    if (rc == 0)
        rc = add_bfd_symbols(img, dyn, ndyn, CFG_SYMSRC_DYNSYM, sizes.v, sizes.n, &objsizes);
    if (rc == 0 && ours && (rc = x86_plt_symbols(img, r, ndyn)) == PLT_ASK_BFD) {
        rc = r->plt_from == PLT_OURS_ONLY ? QP_EUNSUPP : 0;
        if (rc == 0) {
            bfd_enter();
            nsynth = synthetic_symbols(abfd, nst, st, ndyn, dyn, &apart, &apart_dyn, &synth);
            bfd_leave();
        }
        if (rc == 0 && nsynth > 0)
            rc = grow_symbols(img, (size_t)nsynth);
    }
    if (rc == 0 && nsynth > 0) {
        asymbol **sp = malloc(nsynth * sizeof(*sp));
        if (sp == NULL) {
            rc = QP_ENOMEM;
            goto out;
        }
        for (long i = 0; i < nsynth; i++)
            sp[i] = &synth[i];
        rc = add_bfd_symbols(img, sp, nsynth, CFG_SYMSRC_PLT, NULL, 0, NULL);
        free(sp);
    }
    if (rc == 0 && nsynth <= 0 && cfg_image_isa(img)->elf_machine == ARCH_EM_AARCH64)
        rc = plt_symbols(img);
    if (rc == 0)
        rc = read_tls_symbols(img, r);
out:
    free(st);
    free(dyn);
    free(synth);
    free(apart_dyn);
    close_bfd(apart);
    CFG_VEC_FREE(sizes);
    CFG_VEC_FREE(objsizes);
    return rc;
}

/*****************************************************************************
 * Symbols of a separate debug file (cfg_debug.c finds it)
 */

const uint8_t *
cfg_bfd_raw_section(const cfg_image_t *img, const char *name, size_t *len)
{
    const cfg_image_priv_t *priv = img->priv;
    const bfd_reader_t *r = priv->reader;
    if (r == NULL || r->map == NULL)
        return NULL;
    const Elf64_Shdr *sh = raw_shdr_named(r, name);
    if (sh == NULL || sh->sh_type == SHT_NOBITS || sh->sh_size == 0)
        return NULL;
    *len = sh->sh_size;
    return r->map + sh->sh_offset;
}

int
cfg_bfd_add_debug_symbols(cfg_image_t *img, const char *path, const cfg_debug_want_t *want)
{
    bfd_reader_t d = { 0 };
    int fd = -1, used = 0, rc = 0;
    asymbol **st = NULL;
    sym_size_vec_t sizes = { 0 }, objsizes = { 0 };
    if (open_mapped(path, &d, &fd) < 0)
        return 0;
    const arch_isa_t *isa;
    if (check_headers(&d, 1, &isa, NULL, 0) < 0 || isa != cfg_image_isa(img))
        goto out;
    if (want->build_id_len > 0) {
        /* The file must carry the same build-id: an older debug file of another build
         * would name the wrong code. */
        cfg_image_t ids = { 0 };
        size_t n;
        const Elf64_Shdr *sh = raw_shdrs(&d, &n);
        for (size_t i = 0; i < n; i++)
            if (sh[i].sh_type == SHT_NOTE)
                read_notes(&ids, d.map + sh[i].sh_offset, sh[i].sh_size);
        if (ids.build_id_len != want->build_id_len
            || memcmp(ids.build_id, want->build_id, want->build_id_len) != 0)
            goto out;
    }
    if (want->check_crc
        && (uint32_t)bfd_calc_gnu_debuglink_crc32(0, d.map, d.size) != want->crc)
        goto out;
    int not_elf = open_elf_bfd(path, fd, &d.abfd); /* BFD owns FD from here */
    fd = -1;
    if (not_elf < 0)
        goto out;
    bfd_enter();
    long ub = bfd_get_symtab_upper_bound(d.abfd);
    long nst = 0;
    if (ub > 0 && (st = malloc(ub)) != NULL)
        nst = bfd_canonicalize_symtab(d.abfd, st);
    bfd_leave();
    if (nst <= 0)
        goto out;
    if ((rc = collect_sizes(&d, &sizes, 0)) < 0 || (rc = collect_sizes(&d, &objsizes, 1)) < 0
        || (rc = grow_symbols(img, (size_t)nst)) < 0)
        goto out;
    size_t before = img->nsymbols;
    rc = add_bfd_symbols(img, st, nst, CFG_SYMSRC_SYMTAB, sizes.v, sizes.n, &objsizes);
    if (rc == 0 && img->nsymbols > before) {
        img->debug_file = cfg_image_intern(img, path);
        used = img->debug_file != NULL ? 1 : QP_ENOMEM;
    }
    /* Its symbols are read now, once: they must come from the file as it was opened (a
     * truncation faults, see cfg_mapped.c; a write in place would not). */
    struct stat now;
    int stat_rc = 0;
    if (rc == 0 && used == 1) {
        bfd_enter();
        stat_rc = bfd_stat(d.abfd, &now);
        bfd_leave();
    }
    if (rc == 0 && used == 1 && (stat_rc != 0 || !cfg_file_same(&d.st, &now)))
        used = CFG_DEBUG_CHANGED;
    bfd_reader_t *r = ((cfg_image_priv_t *)img->priv)->reader;
    if (rc == 0 && used == 1 && !want->own && r != NULL) {
        free(r->debug_path);
        r->debug_path = strdup(path);
        r->debug_st = d.st;
        used = r->debug_path != NULL ? 1 : QP_ENOMEM;
    }
out:
    free(st);
    CFG_VEC_FREE(sizes);
    CFG_VEC_FREE(objsizes);
    if (d.abfd != NULL)
        close_bfd(d.abfd);
    else if (fd >= 0)
        close(fd);
    unmap(&d);
    return rc < 0 ? rc : used;
}

/*****************************************************************************
 * Sections, segments, init arrays
 */

/* The section header of the non-NOBITS section at file offset OFF, or NULL. */
static const Elf64_Shdr *
raw_shdr_at(const bfd_reader_t *r, uint64_t off)
{
    size_t n;
    const Elf64_Shdr *sh = raw_shdrs(r, &n);
    for (size_t i = 1; i < n; i++)
        if (sh[i].sh_offset == off && sh[i].sh_type != SHT_NOBITS && sh[i].sh_size > 0
            && !(sh[i].sh_flags & SHF_ALLOC) && in_file(r, sh[i].sh_offset, sh[i].sh_size))
            return &sh[i];
    return NULL;
}

static int
read_sections(cfg_image_t *img, bfd_reader_t *r)
{
    bfd *abfd = r->abfd;
    size_t n = 0;
    for (asection *s = abfd->sections; s != NULL; s = s->next)
        n++;
    img->sections = calloc(n ? n : 1, sizeof(cfg_section_t));
    if (img->sections == NULL)
        return QP_ENOMEM;
    for (asection *s = abfd->sections; s != NULL; s = s->next) {
        cfg_section_t *o = &img->sections[img->nsections++];
        flagword f = bfd_section_flags(s);
        o->name = cfg_image_intern(img, bfd_section_name(s));
        if (o->name == NULL)
            return QP_ENOMEM;
        o->vma = bfd_section_vma(s);
        o->size = bfd_section_size(s);
        if (f & SEC_ALLOC)
            o->flags |= CFG_SEC_ALLOC;
        if (f & SEC_CODE)
            o->flags |= CFG_SEC_CODE;
        if (!(f & SEC_READONLY))
            o->flags |= CFG_SEC_WRITE;
        if ((f & SEC_LOAD) && (f & SEC_HAS_CONTENTS) && in_file(r, s->filepos, o->size)) {
            o->flags |= CFG_SEC_LOAD;
            o->file_off = s->filepos;
            o->bytes = r->map + s->filepos;
        } else if (!(f & SEC_ALLOC) && (f & SEC_HAS_CONTENTS)) {
            /* Non-alloc sections (.debug_*): the raw bytes of the file, from the section
             * header itself (BFD may report a decompressed size). */
            const Elf64_Shdr *sh = raw_shdr_at(r, s->filepos);
            if (sh != NULL) {
                o->size = sh->sh_size;
                o->file_off = sh->sh_offset;
                o->bytes = r->map + sh->sh_offset;
                if (sh->sh_flags & SHF_COMPRESSED)
                    o->flags |= CFG_SEC_COMPRESSED;
            }
        }
        if (o->vma + o->size < o->vma)
            return QP_EFORMAT;
    }
    return 0;
}

static int
read_segments(cfg_image_t *img, const bfd_reader_t *r, const Elf64_Phdr *ph, size_t nph)
{
    img->segments = calloc(nph, sizeof(cfg_segment_t));
    if (img->segments == NULL)
        return QP_ENOMEM;
    img->nsegments = nph;
    for (size_t i = 0; i < nph; i++) {
        cfg_segment_t *o = &img->segments[i];
        o->type = ph[i].p_type;
        o->flags = ((ph[i].p_flags & PF_X) ? CFG_SEG_X : 0) | ((ph[i].p_flags & PF_W) ? CFG_SEG_W : 0)
            | ((ph[i].p_flags & PF_R) ? CFG_SEG_R : 0);
        o->vaddr = ph[i].p_vaddr;
        o->memsz = ph[i].p_memsz;
        o->offset = ph[i].p_offset;
        o->filesz = ph[i].p_filesz;
        o->align = ph[i].p_align;
        if (ph[i].p_type == PT_INTERP)
            img->flags |= CFG_IMG_DYNAMIC;
        if (ph[i].p_type == PT_NOTE)
            read_notes(img, r->map + ph[i].p_offset, ph[i].p_filesz);
    }
    return 0;
}

static int
read_init_funcs(cfg_image_t *img, const dyn_info_t *d)
{
    CFG_VEC(uint64_t) v = { 0 };
    static const char *const arrays[] = { ".init_array", ".fini_array", ".preinit_array" };
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *s = &img->sections[i];
        int match = 0;
        for (size_t k = 0; k < 3; k++)
            match |= strcmp(s->name, arrays[k]) == 0;
        if (!match || s->bytes == NULL)
            continue;
        for (uint64_t off = 0; off + 8 <= s->size; off += 8) {
            uint64_t w = init_word(img, s->vma + off, s->bytes + off);
            if (w != 0 && w != UINT64_MAX && CFG_VEC_PUSH(v, w) < 0)
                return QP_ENOMEM;
        }
    }
    if ((d->init && CFG_VEC_PUSH(v, d->init) < 0) || (d->fini && CFG_VEC_PUSH(v, d->fini) < 0))
        return QP_ENOMEM;
    if (v.n)
        qsort(v.v, v.n, sizeof(uint64_t), cfg_u64_cmp);
    img->init_funcs = v.v;
    img->ninit_funcs = v.n;
    return 0;
}

/*****************************************************************************
 * The reader
 */

/*
 * Map PATH and keep its descriptor in *FD (BFD later reads the same file through it, not
 * through the path, which may have been replaced in between). O_NONBLOCK: opening a FIFO
 * must not wait for a writer; anything but a regular file is refused.
 */
/*
 * bfd_check_format, without the warnings BFD 2.40 writes to stderr itself while it tries
 * the formats (format.c's print_warnmsg calls fprintf(stderr) instead of the error
 * handler: "has a program header with invalid alignment"). A library never prints, so
 * stderr points to /dev/null for the call (under bfd_lock: two of these at once would
 * leave stderr at a closed FILE).
 */
static int
quiet_check_format(bfd *abfd)
{
    FILE *null = fopen("/dev/null", "w");
    FILE *saved = stderr;
    if (null != NULL)
        stderr = null;
    int ok = bfd_check_format(abfd, bfd_object);
    stderr = saved;
    if (null != NULL)
        fclose(null);
    return ok;
}

/*
 * A BFD of the ELF file at PATH, read through FD, which it owns from here (also when
 * this fails) into *OUT (NULL when it could not be made; else the caller closes it, also
 * when this fails). 0, QP_EIO or QP_EFORMAT (not ELF to BFD).
 */
static int
open_elf_bfd(const char *path, int fd, bfd **out)
{
    bfd_enter();
    bfd *abfd = bfd_fdopenr(path, NULL, fd);
    int rc = abfd == NULL ? QP_EIO : 0;
    if (rc == 0
        && (!quiet_check_format(abfd) || bfd_get_flavour(abfd) != bfd_target_elf_flavour))
        rc = QP_EFORMAT;
    bfd_leave();
    *out = abfd;
    return rc;
}

static int
open_mapped(const char *path, bfd_reader_t *r, int *fd_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == EISDIR ? QP_EDIR : QP_EIO;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0)
        rc = QP_EIO;
    else if (S_ISDIR(st.st_mode))
        rc = QP_EDIR;
    else if (!S_ISREG(st.st_mode))
        rc = QP_ENOTREG;
    else if (st.st_size < (off_t)EI_NIDENT)
        rc = QP_ENOTELF;
    if (rc < 0) {
        close(fd);
        return rc;
    }
    r->size = (size_t)st.st_size;
    r->st = st;
    void *m = mmap(NULL, r->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        r->size = 0;
        return QP_EIO;
    }
    r->map = m;
    cfg_mapped_add(m, r->size, path);
    *fd_out = fd;
    return 0;
}

/* IMG's reader of its file, or NULL when IMG was not read from a file (bytes, a
 * process) or, with HELD, has let go of it (cfg_image_release_file: no BFD left). */
static bfd_reader_t *
file_reader(const cfg_image_t *img, int held)
{
    const cfg_image_priv_t *priv = img != NULL ? img->priv : NULL;
    if (priv == NULL || priv->close != reader_close || (held && priv->file_released))
        return NULL;
    return priv->reader;
}

void
cfg_image_release_pages(const cfg_image_t *img)
{
    const bfd_reader_t *r = file_reader(img, 0);
    if (r == NULL)
        return;
    /* A private read-only file mapping: dropped pages come back as the file's bytes. */
    if (r->map != NULL)
        (void)madvise((void *)r->map, r->size, MADV_DONTNEED);
}


int
cfg_image_release_file(cfg_image_t *img)
{
    bfd_reader_t *r = file_reader(img, 1);
    if (r == NULL)
        return 0;
    cfg_image_priv_t *priv = img->priv;
    line_state_t *ls = r->lines;
    /* Room first, so that a failure changes nothing. */
    if (ls != NULL && CFG_VEC_FIT(priv->strings, priv->strings.n + ls->nnames) < 0)
        return QP_ENOMEM;
    /* The source file names given out (cfg_image_line) are the image's from now on. */
    for (size_t i = 0; ls != NULL && i < ls->cap; i++)
        if (ls->names[i] != NULL) {
            priv->strings.v[priv->strings.n++] = ls->names[i];
            ls->names[i] = NULL;
        }
    lines_free(ls);
    r->lines = NULL;
    cfg_dwtypes_free(priv->dwtypes);
    priv->dwtypes = NULL;
    /* The descriptors go (BFD's, libdw's); the file's mapping stays, the sections' bytes
     * in it: a mapping holds no descriptor, and its pages are the page cache's, shared
     * and reclaimable (a private copy cost a library's loaded size per load cycle). */
    close_bfd(r->abfd);
    r->abfd = NULL;
    free(r->debug_path);
    r->debug_path = NULL;
    priv->file_released = 1;
    return 0;
}

int
cfg_image_file_same(const cfg_image_t *img, const struct stat *st)
{
    const bfd_reader_t *r = file_reader(img, 1);
    if (r == NULL || st == NULL)
        return 1;
    return cfg_file_same(&r->st, st);
}

int
cfg_image_debug_same(const cfg_image_t *img)
{
    const bfd_reader_t *r = file_reader(img, 0);
    if (r == NULL)
        return 1;
    struct stat now;
    return r->debug_path == NULL
        || (stat(r->debug_path, &now) == 0 && cfg_file_same(&r->debug_st, &now));
}

int
cfg_image_open_bfd(const char *path, cfg_image_t **out)
{
    return cfg_image_open_bfd_why(path, out, NULL, 0);
}

static int
open_bfd(const char *path, cfg_image_t **out, char *why, size_t whylen, unsigned flags,
         plt_from_t plt_from)
{
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    if (path == NULL || out == NULL)
        return QP_EINVAL;
    cfg_image_t *img = cfg_image_alloc();
    bfd_reader_t *r = calloc(1, sizeof(*r));
    if (img == NULL || r == NULL) {
        free(r);
        cfg_image_destroy(img);
        return QP_ENOMEM;
    }
    cfg_image_priv_t *priv = img->priv;
    priv->reader = r;
    priv->close = reader_close;
    r->plt_from = plt_from;
    r->no_relative = (flags & CFG_OPEN_SYMBOL_RELOCS) != 0;
    int fd = -1;
    int rc = open_mapped(path, r, &fd);
    if (rc == 0)
        rc = check_headers(r, (flags & CFG_OPEN_ANY_ISA) != 0, &img->isa, why, whylen);
    if (rc == 0)
        rc = check_layout(r, why, whylen);
    if (rc < 0)
        goto fail;

    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)r->map;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(r->map + eh->e_phoff);
    dyn_info_t dyn;
    read_dynamic(r, ph, eh->e_phnum, &dyn);
    img->path = cfg_image_intern(img, path);
    img->entry = eh->e_entry;
    img->file_size = r->size;
    if (dyn.dynamic && !dyn.bind_now)
        img->flags |= CFG_IMG_LAZY;
    rc = read_segments(img, r, ph, eh->e_phnum);
    if (rc < 0)
        goto fail;
    if (eh->e_type == ET_DYN) {
        /* An ET_DYN file is an executable when marked PIE, or when it has an interpreter
         * and no soname (PIEs from linkers older than DF_1_PIE). */
        int interp = (img->flags & CFG_IMG_DYNAMIC) != 0;
        if (!dyn.pie_flag && !(interp && !dyn.has_soname))
            img->flags |= CFG_IMG_SHLIB;
        img->flags |= CFG_IMG_PIE;
        img->dyninit = dyn.dyninit;
    }

    rc = open_elf_bfd(path, fd, &r->abfd); /* BFD owns FD from here */
    fd = -1;
    if (rc < 0)
        goto fail;
    /* Our BFD knows x86 only: an AArch64 file is read as generic elf64-little (sections,
     * symbols, lines); its relocations and PLT entries are read here (read_relocs,
     * plt_symbols). */
    if ((img->isa == arch_isa_host() && bfd_get_arch(r->abfd) != bfd_arch_i386)
        || bfd_get_arch_size(r->abfd) != 64) {
        rc = QP_EARCH;
        goto fail;
    }
    if ((rc = read_sections(img, r)) < 0
        || (rc = read_relocs(img, r, (flags & CFG_OPEN_HUGE_PAGES) != 0)) < 0
        || (rc = read_symbols(img, r)) < 0)
        goto fail;
    if (img->build_id_len == 0 || !(img->flags & (CFG_IMG_IBT | CFG_IMG_SHSTK)))
        for (size_t i = 0; i < img->nsections; i++)
            if (strncmp(img->sections[i].name, ".note", 5) == 0 && img->sections[i].bytes
                && (img->sections[i].flags & CFG_SEC_ALLOC) == 0)
                read_notes(img, img->sections[i].bytes, img->sections[i].size);
    /* A stripped program: the symbols of its separate debug file, if one is installed;
     * then names for the entry and main, found from the code (cfg_debug.c). */
    if (!(img->flags & CFG_IMG_SYMTAB) && (rc = cfg_debug_find_symbols(img, path)) < 0) {
        if (rc == QP_EIO && img->debug_file != NULL && why != NULL && whylen > 0)
            snprintf(why, whylen, "its separate debug file %s changed while it was read",
                     img->debug_file);
        goto fail;
    }
    rc = cfg_image_finish(img);
    /* After the relocations are sorted: a linker need not write them in address order
     * (ld -z nocombreloc puts .rela.init_array after .rela.data.rel.ro; lld puts
     * .data's first), and the init arrays' words are looked up among them. */
    if (rc == 0 && !r->no_relative)
        rc = read_init_funcs(img, &dyn);
    if (rc == 0)
        rc = cfg_name_entry(img);
    if (rc < 0)
        goto fail;
    *out = img;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    cfg_image_destroy(img);
    return rc;
}

int
cfg_image_open_bfd_why(const char *path, cfg_image_t **out, char *why, size_t whylen)
{
    return open_bfd(path, out, why, whylen, 0u, PLT_OURS);
}

int
cfg_image_open_bfd_analysis(const char *path, cfg_image_t **out, char *why, size_t whylen)
{
    return open_bfd(path, out, why, whylen, CFG_OPEN_ANY_ISA, PLT_OURS);
}

int
cfg_image_open_bfd_flags(const char *path, cfg_image_t **out, char *why, size_t whylen,
                         unsigned flags)
{
    return open_bfd(path, out, why, whylen, flags, PLT_OURS);
}

/* The first difference between the symbols of A and B into WHY; 1, or 0 (none: WHY
 * says how many PLT symbols they have). */
static int
symbols_differ(const cfg_image_t *a, const cfg_image_t *b, char *why, size_t whylen)
{
    size_t n = a->nsymbols < b->nsymbols ? a->nsymbols : b->nsymbols;
    for (size_t i = 0; i < n; i++) {
        const cfg_symbol_t *x = &a->symbols[i], *y = &b->symbols[i];
        if (strcmp(x->name, y->name) != 0 || x->addr != y->addr || x->size != y->size
            || x->kind != y->kind || x->src != y->src || x->global != y->global) {
            snprintf(why, whylen, "symbol %zu: ours %s at %#llx (size %llu, kind %d, src %d, "
                     "global %d), BFD's %s at %#llx (size %llu, kind %d, src %d, global %d)",
                     i, x->name, (unsigned long long)x->addr, (unsigned long long)x->size,
                     x->kind, x->src, x->global, y->name, (unsigned long long)y->addr,
                     (unsigned long long)y->size, y->kind, y->src, y->global);
            return 1;
        }
    }
    size_t nplt = 0;
    for (size_t i = 0; i < a->nsymbols; i++)
        nplt += a->symbols[i].src == CFG_SYMSRC_PLT;
    snprintf(why, whylen, "%zu PLT symbols", nplt);
    if (a->nsymbols == b->nsymbols)
        return 0;
    snprintf(why, whylen, "%zu symbols of ours, %zu with BFD's PLT symbols", a->nsymbols,
             b->nsymbols);
    return 1;
}

int
cfg_bfd_plt_check(const char *path, char *why, size_t whylen)
{
    cfg_image_t *ours = NULL, *bfds = NULL;
    if (why == NULL || whylen == 0)
        return QP_EINVAL;
    int rc = open_bfd(path, &ours, why, whylen, 0u, PLT_OURS_ONLY);
    int left = rc == QP_EUNSUPP; /* then the usual open, which leaves them to BFD */
    if (left)
        rc = open_bfd(path, &ours, why, whylen, 0u, PLT_OURS);
    if (rc == 0)
        rc = open_bfd(path, &bfds, why, whylen, 0u, PLT_BFD);
    if (rc == 0)
        rc = symbols_differ(ours, bfds, why, whylen);
    cfg_image_destroy(ours);
    cfg_image_destroy(bfds);
    return rc == 0 && left ? 2 : rc;
}

/*****************************************************************************
 * Source lines
 */

static size_t
hash_name(const char *s)
{
    size_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* One copy of each file name, so that callers can compare names by pointer. */
static const char *
intern_name(line_state_t *ls, const char *s)
{
    if (2 * (ls->nnames + 1) > ls->cap) {
        size_t cap = ls->cap ? 2 * ls->cap : 256;
        char **v = calloc(cap, sizeof(char *));
        if (v == NULL)
            return NULL;
        for (size_t i = 0; i < ls->cap; i++)
            if (ls->names[i] != NULL) {
                size_t k = hash_name(ls->names[i]) & (cap - 1);
                while (v[k] != NULL)
                    k = (k + 1) & (cap - 1);
                v[k] = ls->names[i];
            }
        free(ls->names);
        ls->names = v;
        ls->cap = cap;
    }
    size_t k = hash_name(s) & (ls->cap - 1);
    while (ls->names[k] != NULL) {
        if (strcmp(ls->names[k], s) == 0)
            return ls->names[k];
        k = (k + 1) & (ls->cap - 1);
    }
    ls->names[k] = cfg_strdup(s);
    if (ls->names[k] != NULL)
        ls->nnames++;
    return ls->names[k];
}

static asection *
code_section_at(bfd *abfd, line_state_t *ls, uint64_t addr)
{
    asection *s = ls->last_sec;
    if (s != NULL && addr >= bfd_section_vma(s) && addr - bfd_section_vma(s) < bfd_section_size(s))
        return s;
    for (s = abfd->sections; s != NULL; s = s->next)
        if ((bfd_section_flags(s) & SEC_ALLOC) && addr >= bfd_section_vma(s)
            && addr - bfd_section_vma(s) < bfd_section_size(s)) {
            ls->last_sec = s;
            return s;
        }
    return NULL;
}

int
cfg_image_line(const cfg_image_t *img, uint64_t addr, const char **file, unsigned *line)
{
    if (img == NULL || file == NULL || line == NULL)
        return QP_EINVAL;
    *file = NULL;
    *line = 0;
    bfd_reader_t *r = file_reader(img, 1);
    if (r == NULL)
        return QP_ENOTFOUND; /* not read from a file (or let go of it): no line information */
    if (r->lines == NULL && (r->lines = calloc(1, sizeof(line_state_t))) == NULL)
        return QP_ENOMEM;
    line_state_t *ls = r->lines;
    line_entry_t *c = &ls->cache[(addr ^ (addr >> 12)) % LINE_CACHE_SIZE];
    if (c->addr != addr + 1) {
        asection *sec = code_section_at(r->abfd, ls, addr);
        const char *f = NULL, *fn = NULL;
        unsigned l = 0;
        c->addr = addr + 1;
        c->file = NULL;
        c->line = 0;
        int found = 0;
        if (sec != NULL) {
            bfd_enter();
            found = bfd_find_nearest_line(r->abfd, sec, NULL, addr - bfd_section_vma(sec), &f,
                                          &fn, &l);
            bfd_leave();
        }
        if (found && f != NULL && l != 0) {
            c->file = intern_name(ls, f);
            if (c->file == NULL) {
                c->addr = 0;
                return QP_ENOMEM;
            }
            c->line = l;
        }
    }
    if (c->file == NULL)
        return QP_ENOTFOUND;
    *file = c->file;
    *line = c->line;
    return 0;
}

int
cfg_image_func_line(const cfg_image_t *img, const char *name, uint64_t addr, const char **file,
                    unsigned *line)
{
    if (img == NULL || name == NULL || file == NULL || line == NULL)
        return QP_EINVAL;
    *file = NULL;
    *line = 0;
    bfd_reader_t *r = file_reader(img, 1);
    if (r == NULL)
        return QP_ENOTFOUND;
    if (r->lines == NULL && (r->lines = calloc(1, sizeof(line_state_t))) == NULL)
        return QP_ENOMEM;
    line_state_t *ls = r->lines;
    asection *sec = code_section_at(r->abfd, ls, addr);
    if (sec == NULL)
        return QP_ENOTFOUND;
    /* BFD finds a function's DW_AT_decl_line from a symbol: name and address. */
    bfd_enter();
    if (ls->func_sym == NULL)
        ls->func_sym = bfd_make_empty_symbol(r->abfd);
    asymbol *sym = ls->func_sym;
    const char *f = NULL;
    unsigned l = 0;
    int found = 0;
    if (sym != NULL) {
        sym->name = name;
        sym->section = sec;
        sym->value = addr - bfd_section_vma(sec);
        sym->flags = BSF_FUNCTION | BSF_GLOBAL;
        found = bfd_find_line(r->abfd, NULL, sym, &f, &l);
    }
    bfd_leave();
    if (sym == NULL)
        return QP_ENOMEM;
    if (!found || f == NULL || l == 0)
        return QP_ENOTFOUND;
    if ((*file = intern_name(ls, f)) == NULL)
        return QP_ENOMEM;
    *line = l;
    return 0;
}

/*****************************************************************************
 * Demangling (libiberty through BFD)
 */

/* libiberty's option bits: binutils-dev does not install demangle.h. */
#define CFG_DMGL_PARAMS (1 << 0)
#define CFG_DMGL_ANSI (1 << 1)

char *
cfg_demangle(const char *name)
{
    if (name == NULL || name[0] != '_')
        return NULL;
    /* Without a BFD, bfd_demangle is libiberty's demangler: no BFD state, no lock. */
    return bfd_demangle(NULL, name, CFG_DMGL_PARAMS | CFG_DMGL_ANSI);
}
