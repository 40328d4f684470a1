/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * What a killed dyn can leave, made by hand (tests/dyn-clean.sh): an anonymous r-x
 * mapping that starts with a trampoline header (dyn_tramp_hdr_t, of a dyn no longer
 * running) and three jumps into it in this program's own code, placed where other bytes
 * read as patches too: A; B, whose displacement holds 0xeb 0xf0 (a jmp rel8 by its
 * look, leading to A); C, right after the bytes e9 ff of the code (as a call's
 * displacement can end), which with C's first three bytes read as a jump into the
 * mapping. Built -no-pie: the mapping goes about 1 MB below the code.
 *   leftover DIR   "ready"; on DIR/craft: the patches in, "crafted"; on DIR/stop:
 *                  "ok same" when the patched bytes are the file's again, else "differs"
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Never run: the bytes the jumps go into (nops, and e9 ff at 40). */
__asm__(".text\n.globl victim\n.type victim,@function\nvictim:\n.fill 40,1,0x90\n"
        ".byte 0xe9,0xff\n.fill 22,1,0x90\nret\n.size victim,65\n");
extern const uint8_t victim[];

#define REGION 0x10000u

static void
wait_for(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    while (access(path, F_OK) != 0)
        usleep(10000);
}

static void
put_jmp(uint8_t *at, uint64_t to)
{
    int32_t rel = (int32_t)(int64_t)(to - ((uint64_t)(uintptr_t)at + 5));
    at[0] = 0xe9;
    memcpy(at + 1, &rel, 4);
}

int
main(int argc, char **argv)
{
    uint8_t *a = (uint8_t *)victim + 12, *b = (uint8_t *)victim + 24, *c = (uint8_t *)victim + 42;
    uint8_t file[64];
    /* B's displacement 0xfff0ebNN: its bytes 0xeb 0xf0 read as jmp rel8 -16 lead to A. */
    uint64_t tb = (uint64_t)(uintptr_t)b + 5 - 0xf1500u;
    uint64_t base = (tb & ~(uint64_t)4095) - REGION / 2;
    /* C's displacement 0xfff0fff0: e9 ff e9 f0 ff at 40 reads as a jump to about tb. */
    uint64_t tc = (uint64_t)(uintptr_t)c + 5 + (uint64_t)(int64_t)(int32_t)0xfff0fff0u;
    uint8_t *page = (uint8_t *)((uintptr_t)victim & ~(uintptr_t)4095);
    /* The pages of victim only (mprotect of others would change what maps shows). */
    size_t len = ((uintptr_t)victim + 65 - (uintptr_t)page + 4095) & ~(size_t)4095;

    if (argc != 2)
        return 2;
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int i = 0; i < 64; i++)
        file[i] = ((const volatile uint8_t *)victim)[i];
    printf("ready\n");
    wait_for(argv[1], "craft");
    uint8_t *r = mmap((void *)(uintptr_t)base, REGION, PROT_READ | PROT_WRITE,
        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (r == MAP_FAILED || (uint64_t)(uintptr_t)r != base) {
        printf("skip: no memory at %#llx\n", (unsigned long long)base);
        return 77;
    }
    /* The header (dynamic/dyn.h): magic, size, no counters, no flags, dyn pid 0. */
    memcpy(r, "qpt-dyn\1", 8);
    uint64_t size = REGION;
    memcpy(r + 8, &size, 8);
    memset(r + 256, 0xcc, REGION - 256);
    mprotect(r, REGION, PROT_READ | PROT_EXEC);
    mprotect(page, len, PROT_READ | PROT_WRITE | PROT_EXEC);
    put_jmp(a, base + 0x100);
    put_jmp(b, tb);
    put_jmp(c, tc);
    mprotect(page, len, PROT_READ | PROT_EXEC);
    if (b[2] != 0xeb || b[3] != 0xf0 || tc < base || tc >= base + REGION) {
        printf("skip: displacement %02x %02x\n", b[2], b[3]);
        return 77;
    }
    printf("crafted\n");
    wait_for(argv[1], "stop");
    const volatile uint8_t *now = victim; /* (read again: victim is const to C) */
    for (int i = 0; i < 64; i++)
        if (now[i] != file[i]) {
            printf("differs at victim+%d\n", i);
            return 1;
        }
    printf("ok same\n");
    return 0;
}
