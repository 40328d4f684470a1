/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Code patched in place in a Go program, both modes' one rule: no instruction that may
 * fault is displaced. Go turns a fault (a nil dereference) into a panic by the faulting
 * pc, which the runtime looks up in its .gopclntab: displaced into a trampoline (or run
 * in a procedure's copy), the instruction faults at an address of no function, and the
 * panic's walk of the stack stops the program ("fatal error: unknown caller pc") where
 * the original panics and may recover. The ISA says which instructions may fault
 * (arch_isa_t.go_may_fault).
 */
#include "patch/patch.h"

const char pt_go_fault_why[] = "a Go instruction that may fault (its panic needs its address)";

int
pt_go_may_fault(const arch_isa_t *isa, const uint8_t *buf, size_t len, uint64_t addr)
{
    if (isa == NULL || isa->go_may_fault == NULL || buf == NULL)
        return 1;
    return isa->go_may_fault(buf, len, addr) != 0;
}

int
pt_go_faults_in(const arch_isa_t *isa, const uint8_t *buf, size_t len, uint64_t addr)
{
    if (isa == NULL || isa->decode == NULL || buf == NULL)
        return 1;
    for (size_t k = 0; k < len;) {
        arch_insn_t in;
        if (isa->decode(buf + k, len - k, addr + k, &in) < 0
            || pt_go_may_fault(isa, buf + k, len - k, addr + k))
            return 1;
        k += in.len;
    }
    return 0;
}
