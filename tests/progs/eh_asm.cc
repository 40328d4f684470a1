// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
//
// Unwind tables that compilers rarely make, written by hand: C++ exceptions thrown by a
// callback unwind through these assembly functions, so every frame needs an FDE that
// says what the old one said, for code that moved and code that did not.
//   asm_pair_a, asm_pair_b   two functions under one FDE, padding between them (they
//                            may move, together)
//   asm_padded               an FDE that starts in the padding before its symbol, as
//                            glibc's hand-written functions have
//   asm_mix_x, asm_mix_y     one FDE over a function that can move and one that cannot
//                            (it jumps over a cs prefix, into the middle of an
//                            instruction): neither may move
//   asm_lockskip             glibc's `je 1f; lock; 1: op`: moves (the jump goes to the
//                            locked instruction)
//   asm_split_a, asm_split_b one FDE over two functions, the first with a cold fragment
//                            outside it: layout would not keep the FDE's code together
//   asm_catch                catch (...) in a cold fragment with its own FDE and LSDA,
//                            whose landing pad comes after a one-byte nop, as g++ -O3
//                            makes them (offset 0 would mean "no landing pad")
//   asm_big                  catch (...) 60000 bytes into a function, in an LSDA with
//                            2-byte call-site fields: they overflow when the code grows
//                            (stretch mode), and then the function must stay in place
#include <cstdio>
#include <stdexcept>
#include <string>

extern "C" {
int asm_pair_a(int (*cb)(int), int x);
int asm_pair_b(int (*cb)(int), int x);
int asm_padded(int (*cb)(int), int x);
int asm_mix_x(int (*cb)(int), int x);
int asm_mix_y(int (*cb)(int), int x);
int asm_lockskip(int (*cb)(int), int x);
int asm_split_a(int (*cb)(int), int x);
int asm_split_b(int (*cb)(int), int x);
int asm_catch(int (*cb)(int), int x);
int asm_big(int (*cb)(int), int x);
int asm_lock_count;
}

// Each function calls cb with a value derived from x, keeping rbx (pushed, described by
// the CFA rows) across the call; an exception from cb unwinds through its frame.
asm(R"(
        .text
        .globl asm_pair_a
        .type asm_pair_a, @function
        .p2align 4
asm_pair_a:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        lea 1(%rsi), %ebx
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
        add %ebx, %eax
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .size asm_pair_a, .-asm_pair_a
        .p2align 4
        .globl asm_pair_b
        .type asm_pair_b, @function
asm_pair_b:
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        lea 2(%rsi), %ebx
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
        imul %ebx, %eax
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_endproc
        .size asm_pair_b, .-asm_pair_b

        .p2align 4
        .cfi_startproc
        .byte 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00
        .byte 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00
        .globl asm_padded
        .type asm_padded, @function
asm_padded:
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        lea 3(%rsi), %ebx
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
        sub %ebx, %eax
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_endproc
        .size asm_padded, .-asm_padded

        .p2align 4
        .globl asm_mix_x
        .type asm_mix_x, @function
asm_mix_x:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        lea 4(%rsi), %ebx
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
        xor %ebx, %eax
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .size asm_mix_x, .-asm_mix_x
        .globl asm_mix_y
        .type asm_mix_y, @function
asm_mix_y:
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        lea 5(%rsi), %ebx
        cmpl $0, asm_lock_count(%rip)
        je 1f
        .byte 0x2e
1:      incl asm_lock_count(%rip)
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
        add %ebx, %eax
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_endproc
        .size asm_mix_y, .-asm_mix_y

        .p2align 4
        .globl asm_lockskip
        .type asm_lockskip, @function
asm_lockskip:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        lea 9(%rsi), %ebx
        cmpl $0, asm_lock_count(%rip)
        je 1f
        lock
1:      incl asm_lock_count(%rip)
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
        add %ebx, %eax
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_endproc
        .size asm_lockskip, .-asm_lockskip

        .p2align 4
        .globl asm_split_a
        .type asm_split_a, @function
asm_split_a:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        lea 6(%rsi), %ebx
        test %esi, %esi
        js asm_split_a.cold
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
.Lsplit_ret:
        add %ebx, %eax
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .size asm_split_a, .-asm_split_a
        .globl asm_split_b
        .type asm_split_b, @function
asm_split_b:
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        lea 7(%rsi), %ebx
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
        sub %ebx, %eax
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_endproc
        .size asm_split_b, .-asm_split_b

        .p2align 4
        .type asm_split_a.cold, @function
asm_split_a.cold:
        .cfi_startproc
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        neg %ebx
        mov %rdi, %rax
        mov %ebx, %edi
        call *%rax
        jmp .Lsplit_ret
        .cfi_endproc
        .size asm_split_a.cold, .-asm_split_a.cold

        .p2align 4
        .globl asm_catch
        .type asm_catch, @function
asm_catch:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        mov %esi, %ebx
        jmp .Lcatch_call
.Lcatch_back:
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_endproc
        .size asm_catch, .-asm_catch

        .p2align 4
        .type asm_catch.cold, @function
asm_catch.cold:
        .cfi_startproc
        .cfi_personality 0x9b, .Lasm_personality
        .cfi_lsda 0x1b, .Lasm_catch_lsda
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        nop
.Lcatch_pad:
        mov %rax, %rdi
        call __cxa_begin_catch@PLT
        call __cxa_end_catch@PLT
        mov $-1, %eax
        jmp .Lcatch_back
.Lcatch_call:
        mov %rdi, %rax
        lea 8(%rbx), %edi
.Lcatch_cs:
        call *%rax
.Lcatch_cs_end:
        add %ebx, %eax
        jmp .Lcatch_back
        .cfi_endproc
        .size asm_catch.cold, .-asm_catch.cold

        .p2align 4
        .globl asm_big
        .type asm_big, @function
asm_big:
        .cfi_startproc
        .cfi_personality 0x9b, .Lasm_personality
        .cfi_lsda 0x1b, .Lasm_big_lsda
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        mov %esi, %eax
        .rept 20000
        add $3, %eax
        .endr
        mov %rdi, %rcx
        mov %eax, %ebx
        mov %eax, %edi
.Lbig_cs:
        call *%rcx
.Lbig_cs_end:
        add %ebx, %eax
.Lbig_out:
        .cfi_remember_state
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_restore_state
.Lbig_pad:
        mov %rax, %rdi
        call __cxa_begin_catch@PLT
        call __cxa_end_catch@PLT
        mov $-2, %eax
        jmp .Lbig_out
        .cfi_endproc
        .size asm_big, .-asm_big

        .section .data.rel.ro,"aw",@progbits
        .p2align 3
.Lasm_personality:
        .quad __gxx_personality_v0

        .section .gcc_except_table,"a",@progbits
        .p2align 2
.Lasm_catch_lsda:
        .byte 0xff
        .byte 0x9b
        .uleb128 .Lasm_tt_end - .Lasm_tt_off
.Lasm_tt_off:
        .byte 0x01
        .uleb128 .Lasm_cs_end - .Lasm_cs
.Lasm_cs:
        .uleb128 .Lcatch_cs - asm_catch.cold
        .uleb128 .Lcatch_cs_end - .Lcatch_cs
        .uleb128 .Lcatch_pad - asm_catch.cold
        .uleb128 1
.Lasm_cs_end:
        .byte 1, 0
        .p2align 2
        .long 0
.Lasm_tt_end:

        .p2align 2
.Lasm_big_lsda:
        .byte 0xff
        .byte 0x9b
        .uleb128 .Lbig_tt_end - .Lbig_tt_off
.Lbig_tt_off:
        .byte 0x02
        .uleb128 .Lbig_cs_tab_end - .Lbig_cs_tab
.Lbig_cs_tab:
        .2byte .Lbig_cs - asm_big
        .2byte .Lbig_cs_end - .Lbig_cs
        .2byte .Lbig_pad - asm_big
        .uleb128 1
.Lbig_cs_tab_end:
        .byte 1, 0
        .p2align 2
        .long 0
.Lbig_tt_end:
        .text
)");

static int calls;

static int
twice(int v)
{
    calls++;
    return 2 * v;
}

static int
refuse(int v)
{
    calls++;
    throw std::runtime_error("callback refused " + std::to_string(v));
}

int
main()
{
    struct {
        const char* name;
        int (*fn)(int (*)(int), int);
    } fns[] = { { "asm_pair_a", asm_pair_a }, { "asm_pair_b", asm_pair_b },
                { "asm_padded", asm_padded }, { "asm_mix_x", asm_mix_x },
                { "asm_mix_y", asm_mix_y },   { "asm_split_a", asm_split_a },
                { "asm_split_b", asm_split_b }, { "asm_catch", asm_catch },
                { "asm_big", asm_big }, { "asm_lockskip", asm_lockskip } };
    int caught = 0;
    for (const auto& f : fns)
        for (int x : { 10, -3 }) {
            std::printf("%s(twice, %d) = %d\n", f.name, x, f.fn(twice, x));
            try {
                std::printf("%s(refuse, %d) = %d\n", f.name, x, f.fn(refuse, x));
            } catch (const std::runtime_error& e) {
                std::printf("%s(refuse, %d): %s\n", f.name, x, e.what());
                caught++;
            }
        }
    std::printf("calls %d, caught %d, lock count %d\n", calls, caught, asm_lock_count);
    return 0;
}
