/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Runs relocated and emitted AArch64 code (cross-compiled by tests/a64.sh with
 * arch/aarch64/ sources, run under qemu-aarch64). Each snippet of snippets.S is copied to a
 * page at A and relocated instruction by instruction, with an old->new map for the
 * branches inside it, to A + 4 KiB, A + 64 MiB (every short form out of reach) and
 * A + 2 GiB (bl through its veneer, adrp far); the copy at A and the relocated code
 * must return the same value for each argument, and keep x16/x17 (except after a far
 * bl: AAPCS64 lets calls change them) and sp. Then the counter increments (plain and,
 * from 4 threads, atomic), the NZCV save/restore, and the counting drivers' pieces at a
 * point (increments using dead registers, LSE, hook calls) keeping every other register. Prints one line per failure and a
 * summary; exit 0 when all pass.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "arch/aarch64/a64_priv.h"

#define A_BASE 0x20000000ull
static const uint64_t places[] = {0x1000, 0x4000000, 0x80010000ull};

static int failures, checks, skipped, verbose;

#define SNIPS(X)                                                                          \
    X(s_cbz) X(s_cbnz) X(s_tbz) X(s_tbnz) X(s_bcond) X(s_loop) X(s_b) X(s_bl) X(s_pac)   \
    X(s_adr) X(s_adrp) X(s_ldrx) X(s_ldrx4) X(s_ldrw) X(s_ldrsw) X(s_ldrs) X(s_ldrd)     \
    X(s_ldrq) X(s_prfm) X(s_xzr)
#define DECL(n) extern const uint8_t n[], n##_end[];
SNIPS(DECL)
#define ROW(n) {#n, n, n##_end},
static const struct {
    const char *name;
    const uint8_t *start, *end;
} snips[] = {SNIPS(ROW)};

/* Call FN(ARG) with NZCV = FLAGS, x16/x17 set to markers; report them and sp after. */
static uint64_t
probe(void *fn, uint64_t arg, uint64_t flags, uint64_t *r16, uint64_t *r17, uint64_t *nzcv,
      int64_t *dsp)
{
    register uint64_t x0 __asm__("x0") = arg;
    uint64_t o16, o17, sp0, sp1, f = flags, of;
    __asm__ volatile("mov %[sp0], sp\n\t"
                     "movz x16, #0x1616\n\t"
                     "movz x17, #0x1717\n\t"
                     "msr nzcv, %[f]\n\t"
                     "blr %[fn]\n\t"
                     "mrs %[of], nzcv\n\t"
                     "mov %[o16], x16\n\t"
                     "mov %[o17], x17\n\t"
                     "mov %[sp1], sp\n\t"
                     : "+r"(x0), [o16] "=&r"(o16), [o17] "=&r"(o17), [sp0] "=&r"(sp0),
                       [sp1] "=&r"(sp1), [of] "=&r"(of)
                     : [fn] "r"(fn), [f] "r"(f)
                     : "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11",
                       "x12", "x13", "x14", "x15", "x16", "x17", "x30", "v0", "v1", "v2",
                       "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18", "v19", "v20",
                       "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30",
                       "v31", "memory", "cc");
    *r16 = o16, *r17 = o17, *nzcv = of, *dsp = (int64_t)(sp1 - sp0);
    return x0;
}

#define FAIL(...)                                                                        \
    do {                                                                                 \
        printf("FAIL ");                                                                 \
        printf(__VA_ARGS__);                                                             \
        printf("\n");                                                                    \
        failures++;                                                                      \
    } while (0)

static void
flush(void *p, size_t n)
{
    __builtin___clear_cache((char *)p, (char *)p + n);
}

/*
 * Relocate CODE[0..N) (running at OLD) to NEW; returns the length, or -1. Sizes depend
 * on reach, so the map is iterated until no size changes.
 */
static int
relocate(const uint8_t *code, size_t n, uint64_t old, uint8_t *out, uint64_t new_addr,
         int *far_bl)
{
    uint64_t map[64];
    int sz[64];
    size_t k = n / 4;
    for (size_t i = 0; i < k; i++)
        sz[i] = 4;
    for (int round = 0; round < 8; round++) {
        uint64_t at = new_addr;
        for (size_t i = 0; i < k; i++) {
            map[i] = at;
            at += (uint64_t)sz[i];
        }
        int changed = 0, len = 0;
        *far_bl = 0;
        for (size_t i = 0; i < k; i++) {
            arch_insn_t in;
            if (a64_decode(code + 4 * i, 4, old + 4 * i, &in) < 0) {
                memcpy(out + len, code + 4 * i, 4);
                len += 4;
                continue;
            }
            uint64_t t = in.target;
            if ((in.flags & ARCH_F_BRANCH_REL) && t >= old && t < old + n)
                t = map[(t - old) / 4];
            int r = a64_reloc_insn(code + 4 * i, &in, map[i], t, 1, out + len, 32);
            if (r < 0)
                return -1;
            if (r == 12 && in.kind == ARCH_KIND_CALL)
                *far_bl = 1;
            if (r != sz[i])
                changed = 1, sz[i] = r;
            len += r;
        }
        if (!changed)
            return len;
    }
    return -1;
}

/*
 * The snippet's code up to and including its first pc-relative instruction, relocated
 * to NEW with every target left at OLD (what the editor does to a block it moves alone),
 * then a jump back to the instruction after it: `b` in reach, else through x17
 * (*VIA_X17 set). Returns the length, -2 for a branch out of reach, or -1.
 */
static int
relocate_head(const uint8_t *code, size_t n, uint64_t old, uint8_t *out, uint64_t new_addr,
              int *far_bl, int *via_x17)
{
    int len = 0;
    *far_bl = *via_x17 = 0;
    for (size_t i = 0; i < n / 4; i++) {
        arch_insn_t in;
        if (a64_decode(code + 4 * i, 4, old + 4 * i, &in) < 0)
            return -1;
        int r = a64_reloc_insn(code + 4 * i, &in, new_addr + (uint64_t)len, in.target, 1,
                               out + len, 32);
        if (r == QP_ERANGE && (in.flags & ARCH_F_BRANCH_REL))
            return -2; /* a branch out of reach: refused, as documented */
        if (r < 0)
            return -1;
        if (r == 12 && in.kind == ARCH_KIND_CALL)
            *far_bl = 1;
        len += r;
        if (a64_form(a64_word(code + 4 * i)) == A64_FORM_OTHER)
            continue;
        uint64_t at = new_addr + (uint64_t)len, back = old + 4 * i + 4;
        r = a64_emit_jmp(at, back, out + len, 8);
        if (r == QP_ERANGE) {
            int64_t pages = (int64_t)(back >> 12) - (int64_t)(at >> 12);
            uint32_t w[3] = {a64_enc_adrp(17, pages), a64_enc_add_imm(17, 17, back & 0xfff),
                             0xd61f0220u /* br x17 */};
            memcpy(out + len, w, 12);
            *via_x17 = 1;
            r = 12;
        }
        return r < 0 ? -1 : len + r;
    }
    return -1;
}

static void
test_snippets(uint8_t *a)
{
    static const uint64_t args[] = {0, 1, 3, 5, 7, 8, 42, 1ull << 32, 1ull << 40,
                                    (uint64_t)-2};
    for (size_t s = 0; s < sizeof snips / sizeof snips[0]; s++) {
        size_t n = (size_t)(snips[s].end - snips[s].start);
        memset(a, 0, 256);
        memcpy(a, snips[s].start, 256); /* the code and its literals */
        flush(a, 256);
        for (size_t p = 0; p < sizeof places / sizeof places[0]; p++) {
            uint8_t *x = (uint8_t *)(uintptr_t)(A_BASE + places[p]);
          for (int head = 0; head < 2; head++) {
            int far_bl, via_x17 = 0;
            int len = head ? relocate_head(a, n, A_BASE, x, A_BASE + places[p], &far_bl,
                                           &via_x17)
                           : relocate(a, n, A_BASE, x, A_BASE + places[p], &far_bl);
            checks++;
            if (len == -2 && places[p] > 0x8000000) {
                skipped++; /* a branch 2 GiB from its target: out of reach by design */
                continue;
            }
            if (len < 0) {
                FAIL("%s at +%#llx%s: relocation failed", snips[s].name,
                     (unsigned long long)places[p], head ? " (head)" : "");
                continue;
            }
            flush(x, (size_t)len);
            if (verbose)
                printf("%s%s: %zu bytes -> %d at +%#llx\n", snips[s].name,
                       head ? " (head)" : "", n, len, (unsigned long long)places[p]);
            for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
                uint64_t r16, r17, f0, f1, w16, w17;
                int64_t d0, d1;
                uint64_t want = probe(a, args[i], 0, &w16, &w17, &f0, &d0);
                uint64_t got = probe(x, args[i], 0, &r16, &r17, &f1, &d1);
                checks++;
                if (got != want || d1 != 0 || f0 != f1
                    || (!far_bl && r16 != w16) || (!far_bl && !via_x17 && r17 != w17))
                    FAIL("%s at +%#llx (%d bytes) arg %#llx: %#llx, want %#llx (x16 %#llx "
                         "x17 %#llx sp %+lld)",
                         snips[s].name, (unsigned long long)places[p], len,
                         (unsigned long long)args[i], (unsigned long long)got,
                         (unsigned long long)want, (unsigned long long)r16,
                         (unsigned long long)r17, (long long)d1);
            }
          }
        }
    }
}

static uint64_t *counter;
static uint8_t *atomic_code;

static void *
hammer(void *unused)
{
    (void)unused;
    uint64_t r16, r17, f;
    int64_t d;
    for (int i = 0; i < 20000; i++)
        probe(atomic_code, 0, 0, &r16, &r17, &f, &d);
    return NULL;
}

static void
test_emitters(uint8_t *code, uint64_t *data)
{
    static const uint32_t ret = 0xd65f03c0u;
    /* plain counter, NZCV = N|V before: kept, and x16/x17/sp kept */
    counter = data + 3;
    int n = a64_emit_counter_inc((uint64_t)(uintptr_t)code, (uint64_t)(uintptr_t)counter,
                                 ARCH_INC_PLAIN, code, 64);
    memcpy(code + n, &ret, 4);
    flush(code, (size_t)n + 4);
    for (int i = 0; i < 3; i++) {
        uint64_t r16, r17, f;
        int64_t d;
        uint64_t x0 = probe(code, 77, 0x90000000u, &r16, &r17, &f, &d);
        checks++;
        if (x0 != 77 || r16 != 0x1616 || r17 != 0x1717 || d != 0 || f != 0x90000000u)
            FAIL("counter: x0 %#llx x16 %#llx x17 %#llx sp %+lld nzcv %#llx",
                 (unsigned long long)x0, (unsigned long long)r16, (unsigned long long)r17,
                 (long long)d, (unsigned long long)f);
    }
    checks++;
    if (*counter != 3)
        FAIL("counter: %llu, want 3", (unsigned long long)*counter);

    /* atomic counter from 4 threads */
    atomic_code = code + 256;
    counter = data + 8;
    n = a64_emit_counter_inc((uint64_t)(uintptr_t)atomic_code, (uint64_t)(uintptr_t)counter,
                             ARCH_INC_ATOMIC, atomic_code, 64);
    memcpy(atomic_code + n, &ret, 4);
    flush(atomic_code, (size_t)n + 4);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    checks++;
    if (*counter != 80000)
        FAIL("atomic counter: %llu, want 80000", (unsigned long long)*counter);

    /* NZCV: save; cmp x0, x0 (sets Z and C); restore; must come back as it was */
    uint8_t *f = code + 512;
    int len = a64_emit_flags_save(f, 64);
    static const uint32_t cmp = 0xeb00001fu; /* cmp x0, x0 */
    memcpy(f + len, &cmp, 4);
    len += 4;
    len += a64_emit_flags_restore(f + len, 64);
    memcpy(f + len, &ret, 4);
    flush(f, (size_t)len + 4);
    static const uint64_t flagsets[] = {0, 0x90000000u, 0xf0000000u, 0x20000000u};
    for (size_t i = 0; i < 4; i++) {
        uint64_t r16, r17, got;
        int64_t d;
        probe(f, 5, flagsets[i], &r16, &r17, &got, &d);
        checks++;
        if (got != flagsets[i] || r16 != 0x1616 || r17 != 0x1717 || d != 0)
            FAIL("nzcv: %#llx, want %#llx (x16 %#llx sp %+lld)", (unsigned long long)got,
                 (unsigned long long)flagsets[i], (unsigned long long)r16, (long long)d);
    }
}

/*
 * Run FN with x0..x29 = IN[0..29] and NZCV = IN[30]; OUT[0..29] gets x0..x29 after it,
 * OUT[30] NZCV, OUT[31] how far sp moved. FN is called with blr x30, so it sees every
 * register but x30 as set (x30 is its return address).
 */
uint64_t pa_sp;
void probe_all(void *fn, const uint64_t *in, uint64_t *out);
__asm__(".text\n"
        ".globl probe_all\n"
        "probe_all:\n"
        "    stp x29, x30, [sp, #-112]!\n"
        "    stp x19, x20, [sp, #16]\n"
        "    stp x21, x22, [sp, #32]\n"
        "    stp x23, x24, [sp, #48]\n"
        "    stp x25, x26, [sp, #64]\n"
        "    stp x27, x28, [sp, #80]\n"
        "    str x2, [sp, #96]\n"
        "    mov x3, sp\n"
        "    adrp x4, pa_sp\n"
        "    str x3, [x4, :lo12:pa_sp]\n"
        "    mov x30, x0\n"
        "    ldr x3, [x1, #240]\n"
        "    msr nzcv, x3\n"
        "    ldp x2, x3, [x1, #16]\n"
        "    ldp x4, x5, [x1, #32]\n"
        "    ldp x6, x7, [x1, #48]\n"
        "    ldp x8, x9, [x1, #64]\n"
        "    ldp x10, x11, [x1, #80]\n"
        "    ldp x12, x13, [x1, #96]\n"
        "    ldp x14, x15, [x1, #112]\n"
        "    ldp x16, x17, [x1, #128]\n"
        "    ldp x18, x19, [x1, #144]\n"
        "    ldp x20, x21, [x1, #160]\n"
        "    ldp x22, x23, [x1, #176]\n"
        "    ldp x24, x25, [x1, #192]\n"
        "    ldp x26, x27, [x1, #208]\n"
        "    ldp x28, x29, [x1, #224]\n"
        "    ldp x0, x1, [x1, #0]\n"
        "    blr x30\n"
        "    sub sp, sp, #32\n"
        "    stp x0, x1, [sp]\n"
        "    mrs x0, nzcv\n"
        "    str x0, [sp, #16]\n"
        "    add x0, sp, #32\n"
        "    str x0, [sp, #24]\n"
        "    adrp x0, pa_sp\n"
        "    ldr x0, [x0, :lo12:pa_sp]\n"
        "    ldr x0, [x0, #96]\n"
        "    stp x2, x3, [x0, #16]\n"
        "    stp x4, x5, [x0, #32]\n"
        "    stp x6, x7, [x0, #48]\n"
        "    stp x8, x9, [x0, #64]\n"
        "    stp x10, x11, [x0, #80]\n"
        "    stp x12, x13, [x0, #96]\n"
        "    stp x14, x15, [x0, #112]\n"
        "    stp x16, x17, [x0, #128]\n"
        "    stp x18, x19, [x0, #144]\n"
        "    stp x20, x21, [x0, #160]\n"
        "    stp x22, x23, [x0, #176]\n"
        "    stp x24, x25, [x0, #192]\n"
        "    stp x26, x27, [x0, #208]\n"
        "    stp x28, x29, [x0, #224]\n"
        "    ldp x2, x3, [sp]\n"
        "    stp x2, x3, [x0]\n"
        "    ldr x2, [sp, #16]\n"
        "    str x2, [x0, #240]\n"
        "    ldr x2, [sp, #24]\n"
        "    adrp x3, pa_sp\n"
        "    ldr x3, [x3, :lo12:pa_sp]\n"
        "    sub x2, x2, x3\n"
        "    str x2, [x0, #248]\n"
        "    mov sp, x3\n"
        "    ldp x19, x20, [sp, #16]\n"
        "    ldp x21, x22, [sp, #32]\n"
        "    ldp x23, x24, [sp, #48]\n"
        "    ldp x25, x26, [sp, #64]\n"
        "    ldp x27, x28, [sp, #80]\n"
        "    ldp x29, x30, [sp], #112\n"
        "    ret\n");

/*
 * The drivers' pieces at a point (a64_emit_counter_inc_at, a64_emit_call_protected): run
 * with every register set and each NZCV value, only the registers said to be dead may
 * change, NZCV and sp never; the counter counts every run.
 */
static void
test_point_pieces(uint8_t *code, uint64_t *data)
{
    static const uint32_t ret = 0xd65f03c0u;
    static const struct {
        const char *name;
        int mode;
        uint32_t dead;
        int hook; /* a call of a hook (here a bare ret) instead of an increment */
    } cases[] = {
        {"plain spilled", ARCH_INC_PLAIN, 0, 0},
        {"plain x3,x9 dead", ARCH_INC_PLAIN, 1u << 3 | 1u << 9, 0},
        {"plain x18,x29 dead (unused)", ARCH_INC_PLAIN, 1u << 18 | 1u << 29, 0},
        {"ldxr/stxr spilled", ARCH_INC_ATOMIC, 0, 0},
        {"ldxr/stxr x10-x12 dead", ARCH_INC_ATOMIC, 7u << 10, 0},
        {"stadd spilled", ARCH_INC_ATOMIC_LSE, 0, 0},
        {"stadd x0,x1 dead", ARCH_INC_ATOMIC_LSE, 3u, 0},
        {"hook call", 0, 0, 1},
    };
    static const uint64_t flagsets[] = {0, 0x90000000u, 0xf0000000u, 0x60000000u};
    uint8_t *hook = code + 3072;
    memcpy(hook, &ret, 4);
    flush(hook, 4);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t *at = code + 1024 + 128 * c;
        uint64_t *ctr = data + 32 + c;
        arch_snip_ctx_t ctx = {0};
        ctx.dead_regs = cases[c].dead;
        ctx.live_flags = ARCH_FLAGS_STATUS;
        int n = cases[c].hook
                    ? a64_emit_call_protected((uint64_t)(uintptr_t)at,
                                              (uint64_t)(uintptr_t)hook, at, 120)
                    : a64_emit_counter_inc_at((uint64_t)(uintptr_t)at,
                                              (uint64_t)(uintptr_t)ctr, cases[c].mode, &ctx,
                                              at, 120);
        checks++;
        if (n < 0) {
            FAIL("%s: emitting: %d", cases[c].name, n);
            continue;
        }
        memcpy(at + n, &ret, 4);
        flush(at, (size_t)n + 4);
        for (size_t f = 0; f < sizeof flagsets / sizeof flagsets[0]; f++) {
            uint64_t in[31], out[32];
            for (int r = 0; r < 30; r++)
                in[r] = 0xa64000000000ull + (uint64_t)r * 0x1111 + f;
            in[30] = flagsets[f];
            probe_all(at, in, out);
            checks++;
            for (int r = 0; r < 30; r++)
                if (out[r] != in[r] && !(cases[c].dead >> r & 1u))
                    FAIL("%s: x%d changed (%#llx, was %#llx)", cases[c].name, r,
                         (unsigned long long)out[r], (unsigned long long)in[r]);
            if (out[30] != flagsets[f] || out[31] != 0)
                FAIL("%s: nzcv %#llx (was %#llx), sp moved %+lld", cases[c].name,
                     (unsigned long long)out[30], (unsigned long long)flagsets[f],
                     (long long)out[31]);
        }
        checks++;
        if (!cases[c].hook && *ctr != 4)
            FAIL("%s: counter %llu, want 4", cases[c].name, (unsigned long long)*ctr);
    }
}

static void *
map_at(uint64_t addr, size_t len, int prot)
{
    void *p = mmap((void *)(uintptr_t)addr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                   -1, 0);
    if (p == MAP_FAILED || (uint64_t)(uintptr_t)p != addr) {
        printf("harness: cannot map %#llx\n", (unsigned long long)addr);
        return NULL;
    }
    return p;
}

int
main(int argc, char **argv)
{
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    int rwx = PROT_READ | PROT_WRITE | PROT_EXEC;
    uint8_t *a = map_at(A_BASE, 4096, rwx);
    if (!a)
        return 2;
    for (size_t p = 0; p < sizeof places / sizeof places[0]; p++)
        if (!map_at(A_BASE + places[p], 4096, rwx))
            return 2;
    uint64_t *data = map_at(A_BASE + 0x100000, 4096, PROT_READ | PROT_WRITE);
    uint8_t *code = map_at(A_BASE + 0x7f000000ull, 4096, rwx); /* counters ~2 GiB away */
    if (!data || !code)
        return 2;
    test_snippets(a);
    test_emitters(code, data);
    test_point_pieces(code, data);
    printf("a64 harness: %d checks, %d failures, %d skipped (a branch 2 GiB from its target)\n",
           checks, failures, skipped);
    return failures ? 1 : 0;
}
