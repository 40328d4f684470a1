/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A minimal .eh_frame reader: only the address ranges of FDEs, which name procedures in
 * stripped binaries. Follows the LSB "Exception Frames" format: CIEs give the pointer
 * encoding of their FDEs in the 'R' augmentation.
 */
#include "base/qp_bytes.h"
#include "base/qp_eh.h"
#include "cfg/cfg_priv.h"

/* Read a pointer in encoding ENC; FIELD_VMA is the address of the field (for pcrel). */
static uint64_t
rd_encoded(rd_t *c, uint8_t enc, uint64_t field_vma)
{
    uint64_t v = eh_rd_raw(c, enc);
    if ((enc & 0x70) == DW_EH_PE_pcrel)
        v += field_vma;
    return v;
}

typedef struct cie_info {
    uint64_t off;     /* offset of the CIE in the section */
    uint8_t fde_enc;  /* pointer encoding of FDE pc_begin */
    int signal;       /* 'S' augmentation */
    int zaug;         /* 'z': FDEs carry augmentation data */
    uint8_t lsda_enc; /* 'L': encoding of the FDE's LSDA pointer, or omit */
} cie_info_t;

/* Parse the CIE at OFF (its length field) and return its FDE pointer encoding. */
static int
parse_cie(const uint8_t *buf, size_t len, uint64_t off, uint8_t *enc, int *signal, int *zaug,
          uint8_t *lsda_enc)
{
    rd_t c = { buf, len, off, 0 };
    uint64_t l = rd_n(&c, 4);
    if (l == 0xffffffff)
        l = rd_n(&c, 8);
    if (c.err || l > (uint64_t)(c.len - c.pos))
        return -1;
    c.len = c.pos + l;
    if (rd_n(&c, 4) != 0) /* CIE id */
        return -1;
    uint8_t version = (uint8_t)rd_n(&c, 1);
    const char *aug = (const char *)c.p + c.pos;
    const uint8_t *nul = memchr(c.p + c.pos, 0, c.len - c.pos);
    if (nul == NULL)
        return -1;
    c.pos = (size_t)(nul - c.p) + 1;
    if (strstr(aug, "eh") != NULL)
        rd_n(&c, 8);
    if (version >= 4) {
        rd_n(&c, 1); /* address size */
        rd_n(&c, 1); /* segment size */
    }
    rd_uleb(&c);                          /* code alignment */
    rd_sleb(&c);                          /* data alignment */
    if (version == 1)
        rd_n(&c, 1);
    else
        rd_uleb(&c);                      /* return address register */
    *enc = DW_EH_PE_absptr;
    *signal = 0;
    *zaug = aug[0] == 'z';
    *lsda_enc = DW_EH_PE_omit;
    if (aug[0] != 'z')
        return c.err ? -1 : 0;
    rd_uleb(&c); /* augmentation data length */
    for (const char *a = aug + 1; *a && !c.err; a++) {
        switch (*a) {
        case 'L': *lsda_enc = (uint8_t)rd_n(&c, 1); break;
        case 'R': *enc = (uint8_t)rd_n(&c, 1); break;
        case 'P': {
            uint8_t penc = (uint8_t)rd_n(&c, 1);
            rd_encoded(&c, penc & 0x7f, 0);
            break;
        }
        case 'S': *signal = 1; break;
        case 'B':
        case 'G': break;
        default: return 0; /* unknown augmentation: the rest cannot be parsed, enc may be right */
        }
    }
    return c.err ? -1 : 0;
}

int
cfg_ehframe_walk(const uint8_t *buf, size_t len, uint64_t vma,
                 int (*fn)(void *arg, const cfg_fde_t *fde), void *arg)
{
    if (buf == NULL || fn == NULL)
        return QP_EINVAL;
    int nfde = 0;
    /* A one-entry cache: consecutive FDEs almost always share their CIE. */
    cie_info_t cache = { UINT64_MAX, 0, 0, 0, DW_EH_PE_omit };
    uint64_t off = 0;
    while (off + 4 <= len) {
        rd_t c = { buf, len, off, 0 };
        uint64_t l = rd_n(&c, 4);
        if (l == 0) /* terminator */
            break;
        if (l == 0xffffffff)
            l = rd_n(&c, 8);
        if (c.err || l > (uint64_t)(c.len - c.pos) || l < 4)
            return nfde ? nfde : QP_EFORMAT;
        size_t next = c.pos + l;
        c.len = next;
        uint64_t id_pos = c.pos;
        uint32_t id = (uint32_t)rd_n(&c, 4);
        if (id != 0) {
            /* An FDE: id is the distance back to its CIE from the id field. */
            if (id > id_pos)
                return nfde ? nfde : QP_EFORMAT;
            uint64_t cie_off = id_pos - id;
            if (cache.off != cie_off) {
                uint8_t enc, lenc;
                int signal, zaug;
                if (parse_cie(buf, len, cie_off, &enc, &signal, &zaug, &lenc) < 0)
                    return nfde ? nfde : QP_EFORMAT;
                cache.off = cie_off;
                cache.fde_enc = enc;
                cache.signal = signal;
                cache.zaug = zaug;
                cache.lsda_enc = lenc;
            }
            if (cache.fde_enc == DW_EH_PE_omit || (cache.fde_enc & DW_EH_PE_indirect)
                || (cache.fde_enc & 0x70) == DW_EH_PE_datarel)
                goto next;
            uint64_t field = vma + c.pos;
            cfg_fde_t fde;
            fde.start = rd_encoded(&c, cache.fde_enc, field);
            uint64_t range = rd_encoded(&c, cache.fde_enc & 0x0f, 0);
            fde.end = fde.start + range;
            fde.signal = cache.signal;
            fde.lsda = 0;
            fde.addr = vma + off;
            if (cache.zaug) {
                uint64_t alen = rd_uleb(&c);
                size_t adata = c.pos;
                if (cache.lsda_enc != DW_EH_PE_omit && !(cache.lsda_enc & DW_EH_PE_indirect)
                    && (cache.lsda_enc & 0x70) != DW_EH_PE_datarel && alen > 0) {
                    uint64_t lfield = vma + c.pos;
                    fde.lsda = rd_encoded(&c, cache.lsda_enc, lfield);
                }
                c.pos = adata; /* the rest of the augmentation data is not needed */
            }
            if (!c.err && range > 0 && fde.end > fde.start && fde.start != 0) {
                nfde++;
                int rc = fn(arg, &fde);
                if (rc < 0)
                    return rc;
            }
        }
    next:
        off = next;
    }
    return nfde;
}

/*****************************************************************************
 * .eh_frame_hdr: the search table
 */

static int
pair_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] > y[1]) - (x[1] < y[1]);
}

int
cfg_ehhdr_table(const uint8_t *buf, size_t len, uint64_t vma, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (buf == NULL || len < 4)
        return 0;
    rd_t c = { buf, len, 4, 0 };
    uint8_t ptr_enc = buf[1], cnt_enc = buf[2], tab_enc = buf[3];
    /* libgcc searches only this shape; else it reads .eh_frame itself. */
    if (buf[0] != 1 || tab_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4)
        || ptr_enc == DW_EH_PE_omit || (ptr_enc & 0x70) > DW_EH_PE_pcrel
        || cnt_enc == DW_EH_PE_omit || (cnt_enc & 0x70) != DW_EH_PE_absptr)
        return 0;
    rd_encoded(&c, ptr_enc, 0);
    uint64_t count = rd_encoded(&c, cnt_enc, 0);
    if (c.err || count > (uint64_t)(c.len - c.pos) / 8)
        return c.err ? 0 : QP_EFORMAT;
    uint64_t *v = malloc((count ? count : 1) * 2 * sizeof(uint64_t));
    if (v == NULL)
        return QP_ENOMEM;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t loc = vma + (uint64_t)(int64_t)(int32_t)rd_n(&c, 4);
        v[2 * i] = vma + (uint64_t)(int64_t)(int32_t)rd_n(&c, 4);
        v[2 * i + 1] = loc;
    }
    qsort(v, (size_t)count, 2 * sizeof(uint64_t), pair_cmp);
    *out = v;
    *n = (size_t)count;
    return 0;
}

/*****************************************************************************
 * LSDA (.gcc_except_table): landing pads
 */

int
cfg_lsda_walk(const uint8_t *buf, size_t len, uint64_t vma, uint64_t func_start,
              int (*fn)(void *arg, uint64_t landing_pad), void *arg)
{
    if (buf == NULL || fn == NULL)
        return QP_EINVAL;
    rd_t c = { buf, len, 0, 0 };
    uint8_t lpstart_enc = (uint8_t)rd_n(&c, 1);
    uint64_t lpstart = func_start;
    if (lpstart_enc != DW_EH_PE_omit)
        lpstart = rd_encoded(&c, lpstart_enc, vma + c.pos);
    uint8_t ttype_enc = (uint8_t)rd_n(&c, 1);
    if (ttype_enc != DW_EH_PE_omit)
        rd_uleb(&c);
    uint8_t cs_enc = (uint8_t)rd_n(&c, 1);
    uint64_t cs_len = rd_uleb(&c);
    if (c.err || cs_len > (uint64_t)(c.len - c.pos))
        return QP_EFORMAT;
    c.len = c.pos + cs_len;
    int n = 0;
    while (c.pos < c.len && !c.err) {
        rd_encoded(&c, cs_enc & 0x0f, 0); /* start */
        rd_encoded(&c, cs_enc & 0x0f, 0); /* length */
        uint64_t lp = rd_encoded(&c, cs_enc & 0x0f, 0);
        rd_uleb(&c); /* action */
        if (c.err)
            return QP_EFORMAT;
        if (lp != 0) {
            QP_CHECK(fn(arg, lpstart + lp));
            n++;
        }
    }
    return n;
}
