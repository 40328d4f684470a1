/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The ELF writer (elfw.c), the output's sections: the new regions, the grown string
 * tables, and the symbols that name moved and new code.
 */
#include "config.h"

#include "editor/elfw_priv.h"

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
void
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
int
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

int
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
int
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

int
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
