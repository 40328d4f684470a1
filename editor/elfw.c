/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The ELF writer: with elfw_sections.c (sections, symbols) and elfw_layout.c (program
 * headers, file layout), through elfw_priv.h, the only files that include libelf.h and
 * gelf.h.
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

#include "editor/elfw_priv.h"

/*****************************************************************************
 * State of one elfw_write call
 */

int
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

int
elfw_fail_elf(elfw_ctx_t *c, int rc, const char *path)
{
    (void)path; /* the caller names the input */
    return elfw_fail(c, rc, "%s", elf_errmsg(-1));
}

int
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

int
elfw_buf_append(elfw_buf_t *b, const void *data, size_t n)
{
    QP_CHECK(elfw_buf_reserve(b, n));
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

uint64_t
elfw_align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) & ~(a - 1);
}

/* The smallest offset >= CUR that is congruent to VADDR modulo M (a power of two). */
uint64_t
elfw_congruent(uint64_t cur, uint64_t vaddr, uint64_t m)
{
    return cur + ((vaddr - cur) & (m - 1));
}

int
elfw_is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

const char *
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

/* The message of an input that is not the file analysed, or changed since. */
static const char elfw_input_changed[] = "input changed while it was rewritten";

static int
elfw_read_input(elfw_ctx_t *c)
{
    const char *path = c->req->input;
    size_t done = 0;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return elfw_fail_errno(c, "cannot open", path);
    c->in_fd = fd; /* closed by elfw_ctx_free */
    if (fstat(fd, &c->in_st) != 0)
        return elfw_fail_errno(c, "cannot read", path);
    if (S_ISDIR(c->in_st.st_mode))
        return elfw_fail(c, QP_EDIR, "is a directory");
    if (!S_ISREG(c->in_st.st_mode))
        return elfw_fail(c, QP_EINVAL, "not a regular file");
    if (!cfg_image_file_same(c->req->analysed, &c->in_st))
        return elfw_fail(c, QP_EIO, "%s", elfw_input_changed);
    if ((uint64_t)c->in_st.st_size > SIZE_MAX / 2)
        return elfw_fail(c, QP_ENOMEM, "file too large");
    c->insize = (size_t)c->in_st.st_size;
    c->img = malloc(c->insize > 0 ? c->insize : 1);
    if (c->img == NULL)
        return elfw_fail(c, QP_ENOMEM, "out of memory");
    while (done < c->insize) {
        ssize_t n = pread(fd, c->img + done, c->insize - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            return elfw_fail(c, QP_EIO, "%s", elfw_input_changed); /* it shrank */
        if (n < 0)
            return elfw_fail_errno(c, "cannot read", path);
        done += (size_t)n;
    }
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
uint64_t
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
    /* The last moment to refuse an input that changed since it was read. */
    struct stat now;
    if (fstat(c->in_fd, &now) != 0 || !cfg_file_same(&c->in_st, &now))
        return elfw_fail(c, QP_EIO, "%s", elfw_input_changed);
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
    if (c->in_fd >= 0)
        close(c->in_fd);
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
    c.in_fd = -1;
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
