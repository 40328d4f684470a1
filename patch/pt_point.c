/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Points and flags: what holds where a snippet runs, and the one liveness rule every
 * driver and dyn use to decide when a snippet must save the flags.
 */
#include "patch/patch.h"

arch_snip_ctx_t
pt_point_ctx(uint32_t kind, uint8_t live_flags)
{
    /* An entry or exit where the flags are live is not known to be reached by the ABI:
     * its red zone may be in use. Before a call and after it returned, the call's push
     * (or the callee) has clobbered the red zone anyway. */
    switch (kind) {
    case PT_POINT_ENTRY:
        return (arch_snip_ctx_t) { ARCH_SNX_ENTRY, 0, live_flags, !live_flags };
    case PT_POINT_EXIT:
        return (arch_snip_ctx_t) { ARCH_SNX_RETURN, 0, live_flags, !live_flags };
    case PT_POINT_CALL: return (arch_snip_ctx_t) { ARCH_SNX_CALL, 0, live_flags, 1 };
    case PT_POINT_AFTER_CALL:
        return (arch_snip_ctx_t) { ARCH_SNX_AFTER_CALL, 0, live_flags, 1 };
    default: return (arch_snip_ctx_t) { 0, 0, live_flags, 0 };
    }
}

uint8_t
pt_flags_live_before(const arch_insn_t *in, uint8_t live, pt_abi_t abi)
{
    switch (in->kind) {
    case ARCH_KIND_CALL:
    case ARCH_KIND_CALL_IND:
        /* Under the ABI the callee may change every flag: nothing after a call reads
         * them unset. */
        return abi == PT_ABI_SYSV ? in->flags_read : (uint8_t)(live | in->flags_read);
    case ARCH_KIND_RET: return abi == PT_ABI_SYSV ? 0 : ARCH_FLAGS_STATUS;
    default: return (uint8_t)((live & ~in->flags_written) | in->flags_read);
    }
}

void
pt_flags_live_in(const arch_insn_t *v, size_t n, uint8_t live_out, uint8_t *live)
{
    uint8_t l = live_out;
    for (size_t i = n; i-- > 0;) {
        l = pt_flags_live_before(&v[i], l, PT_ABI_SYSV);
        live[i] = l & ARCH_FLAGS_STATUS;
    }
}

uint8_t
pt_flags_at_entry(int abi_entry)
{
    return abi_entry ? 0 : ARCH_FLAGS_STATUS;
}
