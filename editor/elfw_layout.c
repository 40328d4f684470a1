/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The ELF writer (elfw.c), the output's file layout: its program headers (new PT_LOADs
 * in reused entries, or the whole table moved) and the offsets of its sections, regions and
 * tables.
 */
#include "config.h"

#include "editor/elfw_priv.h"

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
int
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
    size_t maplen = 0; /* (libelf's mapping known: a truncation ends in one line) */
    const char *raw = e != NULL ? elf_rawfile(e, &maplen) : NULL; /* (sets MAPLEN first) */
    const void *map = cfg_mapped_add_file(raw, maplen, input);
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
    cfg_mapped_remove(map);
    if (e != NULL)
        elf_end(e);
    close(fd);
    return rc;
}

/* The most zero bytes added so that old kernels find the moved program headers. */
#define ELFW_PH_PAD_MAX (16u << 20)

int
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
