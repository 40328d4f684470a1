/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A minimal .eh_frame reader: only the address ranges of FDEs, which name procedures in
 * stripped binaries. Follows the LSB "Exception Frames" format: CIEs give the pointer
 * encoding of their FDEs in the 'R' augmentation.
 */
#include "base/qp_bytes.h"
#include "base/qp_eh.h"
#include "base/qp_ehframe.h"
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

/* The CIE at OFF (base/qp_ehframe.h), for its FDEs' encodings: any version, an unknown
 * augmentation read up to the letter not understood. -1 when it is no CIE. */
static int
read_cie(const uint8_t *buf, size_t len, uint64_t off, eh_cie_t *ci)
{
    eh_rec_t r;
    if (eh_rec_read(buf, len, off, &r) != 1 || !r.is_cie)
        return -1;
    return eh_cie_parse(buf, &r, ci);
}

int
cfg_ehframe_walk(const uint8_t *buf, size_t len, uint64_t vma,
                 int (*fn)(void *arg, const cfg_fde_t *fde), void *arg)
{
    if (buf == NULL || fn == NULL)
        return QP_EINVAL;
    int nfde = 0;
    /* A one-entry cache: consecutive FDEs almost always share their CIE. */
    uint64_t cached = UINT64_MAX;
    eh_cie_t ci;
    uint64_t off = 0;
    eh_rec_t r;
    int got;
    while ((got = eh_rec_read(buf, len, off, &r)) == 1) {
        off = r.end;
        if (r.is_cie)
            continue;
        /* An FDE: its CIE pointer is the distance back from its own field. */
        if (r.cie_ptr > r.body)
            return nfde ? nfde : QP_EFORMAT;
        uint64_t cie_off = r.body - r.cie_ptr;
        if (cached != cie_off) {
            if (read_cie(buf, len, cie_off, &ci) < 0)
                return nfde ? nfde : QP_EFORMAT;
            cached = cie_off;
        }
        if (ci.fde_enc == DW_EH_PE_omit || (ci.fde_enc & DW_EH_PE_indirect)
            || (ci.fde_enc & 0x70) == DW_EH_PE_datarel)
            continue;
        eh_fde_t f;
        if (eh_fde_parse(buf, &r, &ci, &f) < 0)
            continue;
        cfg_fde_t fde;
        fde.start = f.begin_raw
                    + ((ci.fde_enc & 0x70) == DW_EH_PE_pcrel ? vma + f.begin_pos : 0);
        uint64_t range = f.range;
        fde.end = fde.start + range;
        fde.signal = ci.signal;
        fde.lsda = 0;
        fde.addr = vma + r.off;
        rd_t c = { buf, f.aug_end, f.aug_pos, 0 };
        if (ci.lsda_enc != DW_EH_PE_omit && !(ci.lsda_enc & DW_EH_PE_indirect)
            && (ci.lsda_enc & 0x70) != DW_EH_PE_datarel && f.aug_end > f.aug_pos)
            fde.lsda = rd_encoded(&c, ci.lsda_enc, vma + f.aug_pos);
        if (!c.err && range > 0 && fde.end > fde.start && fde.start != 0) {
            nfde++;
            int rc = fn(arg, &fde);
            if (rc < 0)
                return rc;
        }
    }
    if (got < 0)
        return nfde ? nfde : QP_EFORMAT;
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
