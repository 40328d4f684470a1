/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_EH_H
#define QP_BASE_EH_H
/*
 * PURPOSE: the pointer encodings (DW_EH_PE_*) of .eh_frame, .eh_frame_hdr and LSDAs, read
 * one way for cfg/ (which names procedures by their FDEs) and editor/ (which rewrites
 * the tables). Header-only, on base/qp_bytes.h and elfutils' <dwarf.h>.
 */
#include <stdint.h>

#include <dwarf.h>

#include "base/qp_bytes.h"

/* Bytes of the value format of ENC: 2, 4 or 8, 0 for LEB128, -1 when invalid. */
static inline int
eh_pe_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case DW_EH_PE_absptr:
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8: return 8;
    case DW_EH_PE_udata2:
    case DW_EH_PE_sdata2: return 2;
    case DW_EH_PE_udata4:
    case DW_EH_PE_sdata4: return 4;
    case DW_EH_PE_uleb128:
    case DW_EH_PE_sleb128: return 0;
    default: return -1;
    }
}

/* A well-formed encoding (omit excluded): a known format and application. */
static inline int
eh_pe_valid(uint8_t enc)
{
    return enc != DW_EH_PE_omit && eh_pe_size(enc) >= 0 && (enc & 0x70) < DW_EH_PE_aligned;
}

/* The raw value of format ENC at R (signed formats sign-extended); an unknown format
 * sets R's error. */
static inline uint64_t
eh_rd_raw(rd_t *r, uint8_t enc)
{
    switch (enc & 0x0f) {
    case DW_EH_PE_absptr:
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8: return rd_n(r, 8);
    case DW_EH_PE_uleb128: return rd_uleb(r);
    case DW_EH_PE_udata2: return rd_n(r, 2);
    case DW_EH_PE_udata4: return rd_n(r, 4);
    case DW_EH_PE_sleb128: return (uint64_t)rd_sleb(r);
    case DW_EH_PE_sdata2: return (uint64_t)(int64_t)(int16_t)rd_n(r, 2);
    case DW_EH_PE_sdata4: return (uint64_t)(int64_t)(int32_t)rd_n(r, 4);
    default: r->err = 1; return 0;
    }
}

/*
 * The address a raw pointer RAW of encoding ENC, read from a field at address FIELD,
 * stands for: 0 on success, -1 for an application other than absolute or pc-relative.
 * As in libgcc, a raw zero is a null pointer whatever the application.
 */
static inline int
eh_pe_value(uint8_t enc, uint64_t raw, uint64_t field, uint64_t *val /*OUT*/)
{
    if (raw == 0) {
        *val = 0;
        return 0;
    }
    switch (enc & 0x70) {
    case DW_EH_PE_absptr: *val = raw; return 0;
    case DW_EH_PE_pcrel: *val = raw + field; return 0;
    default: return -1;
    }
}

#endif
