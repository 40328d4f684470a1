/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* The code tests/a64/harness.c copies to a page and relocates: each snippet is a
 * function of x0 returning x0, with its pc-relative forms pointing inside itself;
 * NAME_end marks the end of its code, literals follow. */
        .arch armv8.3-a
        .section .rodata
        .balign 16
#define SNIP(name) .globl name; .balign 16; name:
#define END(name) .globl name##_end; name##_end:
SNIP(s_cbz)      cbz x0, 1f; mov x0, #1; ret; 1: mov x0, #2; ret
END(s_cbz)
SNIP(s_cbnz)     cbnz w0, 1f; mov x0, #1; ret; 1: mov x0, #2; ret
END(s_cbnz)
SNIP(s_tbz)      tbz x0, #3, 1f; mov x0, #1; ret; 1: mov x0, #2; ret
END(s_tbz)
SNIP(s_tbnz)     tbnz x0, #40, 1f; mov x0, #1; ret; 1: mov x0, #2; ret
END(s_tbnz)
SNIP(s_bcond)    cmp x0, #3; b.lt 1f; mov x0, #1; ret; 1: mov x0, #2; ret
END(s_bcond)
SNIP(s_loop)     and x0, x0, #0xff; mov x1, #0; 1: add x1, x1, x0; subs x0, x0, #1; b.gt 1b; mov x0, x1; ret
END(s_loop)
SNIP(s_b)        b 1f; mov x0, #1; 1: add x0, x0, #5; ret
END(s_b)
SNIP(s_bl)       stp x29, x30, [sp, #-16]!; bl 1f; ldp x29, x30, [sp], #16; ret
                 1: add x0, x0, #42; ret
END(s_bl)
SNIP(s_pac)      paciasp; stp x29, x30, [sp, #-16]!; bl 1f; ldp x29, x30, [sp], #16
                 autiasp; ret; 1: add x0, x0, #1; ret
END(s_pac)
SNIP(s_adr)      adr x0, 1f; ret; END(s_adr); 1: .quad 0
SNIP(s_adrp)     adrp x0, s_adrp; ret
END(s_adrp)
SNIP(s_ldrx)     ldr x0, 1f; ret; END(s_ldrx); .balign 8; 1: .quad 0x1122334455667788
SNIP(s_ldrx4)    ldr x0, 1f; ret; END(s_ldrx4); .balign 8; .word 0; 1: .quad 0x8877665544332211
SNIP(s_ldrw)     ldr w0, 1f; ret; END(s_ldrw); 1: .word 0x89abcdef
SNIP(s_ldrsw)    ldrsw x0, 1f; ret; END(s_ldrsw); 1: .word 0x89abcdef
SNIP(s_ldrs)     ldr s0, 1f; fmov w0, s0; ret; END(s_ldrs); 1: .word 0x40490fdb
SNIP(s_ldrd)     ldr d0, 1f; fmov x0, d0; ret; END(s_ldrd); .balign 8; 1: .quad 0x400921fb54442d18
SNIP(s_ldrq)     ldr q0, 1f; umov x0, v0.d[1]; ret; END(s_ldrq); .balign 16; 1: .quad 1, 0x0123456789abcdef
SNIP(s_prfm)     prfm pldl1keep, 1f; mov x0, #7; ret; END(s_prfm); 1: .quad 0
SNIP(s_xzr)      ldr xzr, 1f; mov x0, #9; ret; END(s_xzr); .balign 8; 1: .quad 0
