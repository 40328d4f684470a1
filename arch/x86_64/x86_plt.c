/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * x86-64 PLT stubs: the forms GNU ld and lld write, recognised as BFD's synthetic symbols
 * recognise them (bfd/elf64-x86-64.c, elf_x86_64_get_synthetic_symtab), so that cfg/ can
 * name the stubs without BFD reading every dynamic relocation.
 */
#include <string.h>

#include "arch/arch.h"

int
arch_plt_slot(const uint8_t *buf, size_t len, uint64_t addr, uint64_t *slot)
{
    size_t i = 0;
    if (buf == NULL || slot == NULL)
        return 0;
    if (len >= 4 && buf[0] == 0xf3 && buf[1] == 0x0f && buf[2] == 0x1e && buf[3] == 0xfa)
        i = 4; /* endbr64 */
    if (i < len && buf[i] == 0xf2)
        i++; /* bnd */
    if (i + 6 > len || buf[i] != 0xff || buf[i + 1] != 0x25)
        return 0;
    int32_t disp = (int32_t)((uint32_t)buf[i + 2] | (uint32_t)buf[i + 3] << 8
                             | (uint32_t)buf[i + 4] << 16 | (uint32_t)buf[i + 5] << 24);
    *slot = addr + i + 6 + (uint64_t)(int64_t)disp;
    return (int)(i + 6);
}

/* The non-lazy forms: an entry begins with PREFIX (up to its disp32). */
static const struct {
    uint8_t prefix[8];
    uint8_t prefix_len, entry_size;
} nonlazy[] = {
    { { 0xff, 0x25 }, 2, 8 },                               /* jmp *slot(%rip); xchg %ax,%ax */
    { { 0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x25 }, 6, 16 },       /* endbr64; jmp; nopw */
    { { 0xf2, 0xff, 0x25 }, 3, 8 },                         /* bnd jmp; nop */
    { { 0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25 }, 7, 16 }, /* endbr64; bnd jmp; nopl */
};

static void
nonlazy_layout(unsigned form, arch_plt_layout_t *out)
{
    *out = (arch_plt_layout_t) { .form = (uint8_t)form, .entry_size = nonlazy[form].entry_size,
                                 .jmp_end = (uint8_t)(nonlazy[form].prefix_len + 4) };
}

static int
nonlazy_is(const uint8_t *buf, size_t len, unsigned form)
{
    return len >= nonlazy[form].entry_size
           && memcmp(buf, nonlazy[form].prefix, nonlazy[form].prefix_len) == 0;
}

void
arch_plt_layout_init(arch_plt_layout_t *cur)
{
    nonlazy_layout(0, cur);
}

/* A lazy PLT (16-byte entries after PLT0), *OUT; 0 when BUF does not begin with PLT0. */
static int
lazy_layout(const uint8_t *buf, size_t len, arch_plt_layout_t *out)
{
    static const uint8_t endbr_push0[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x68, 0x00 };
    if (len < 32 || buf[0] != 0xff || buf[1] != 0x35)
        return 0; /* push GOT+8(%rip) */
    if (buf[6] == 0xff && buf[7] == 0x25) {
        /* jmp *GOT+16(%rip): entries `jmp *slot; push N; jmp PLT0`, or, when the first
         * is `endbr64; push 0`, lazy halves whose stubs are in .plt.sec */
        *out = (arch_plt_layout_t) { .entry_size = 16, .jmp_end = 6, .skip_first = 1 };
        out->none = memcmp(buf + 16, endbr_push0, sizeof(endbr_push0)) == 0;
        return 1;
    }
    if (buf[6] == 0xf2 && buf[7] == 0xff && buf[8] == 0x25) {
        /* bnd jmp *GOT+16(%rip): the stubs are in .plt.sec or .plt.bnd */
        *out = (arch_plt_layout_t) { .entry_size = 16, .skip_first = 1, .none = 1 };
        return 1;
    }
    return 0;
}

int
arch_plt_layout(const uint8_t *buf, size_t len, int may_be_lazy, arch_plt_layout_t *cur,
                arch_plt_layout_t *out)
{
    if (buf == NULL || cur == NULL || out == NULL)
        return 0;
    if (may_be_lazy && lazy_layout(buf, len, out))
        return 1;
    if (nonlazy_is(buf, len, cur->form)) {
        *out = *cur;
        return 1;
    }
    for (unsigned f = 1; f < sizeof(nonlazy) / sizeof(nonlazy[0]); f++)
        if (nonlazy_is(buf, len, f)) {
            nonlazy_layout(f, cur);
            *out = *cur;
            return 1;
        }
    return 0;
}
