/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of three cfg/ analyses on hand-made input: jump-table recognition
 * (cfg_jtab.c) on tiny code images, dominators and natural loops (cfg_loops.c) on
 * hand-built graphs, cross-checked against a naive reference on random graphs, and the
 * noreturn fixpoint (cfg_noreturn.c) kept up to date over rounds on random call graphs,
 * against the same analysis from scratch and a plain reference.
 * The code bytes were produced by GNU as and ld (-Ttext=0x1000); the source of each
 * image is in the comment above it, with the addresses of its labels.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg/cfg_priv.h"

#define VMA 0x1000

/*****************************************************************************
 * Jump tables: the images
 */

/* clang-format off */
/*
 * start:  mov %edi,%eax
 *         cmp $3,%eax
 *         ja def
 *         mov %eax,%eax
 * jump:   jmp *tab(,%rax,8)
 * c0:     mov $10,%eax
 *         ret
 * c1:     mov $11,%eax
 *         ret
 * c2:     mov $12,%eax
 *         ret
 * c3:     mov $13,%eax
 *         ret
 * def:    xor %eax,%eax
 *         ret
 *         .p2align 3
 * tab:    .quad c0, c1, c2, c3
 *         .quad 0x12345678
 *
 * start=1000 jump=1009 c0=1010 c1=1016 c2=101c c3=1022 def=1028 tab=1030
 */
static const uint8_t jt_abs[] = {
    0x89, 0xf8, 0x83, 0xf8, 0x03, 0x77, 0x21, 0x89, 0xc0, 0xff, 0x24, 0xc5,
    0x30, 0x10, 0x00, 0x00, 0xb8, 0x0a, 0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0b,
    0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0c, 0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0d,
    0x00, 0x00, 0x00, 0xc3, 0x31, 0xc0, 0xc3, 0x0f, 0x1f, 0x44, 0x00, 0x00,
    0x10, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x16, 0x10, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x1c, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x22, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x78, 0x56, 0x34, 0x12,
    0x00, 0x00, 0x00, 0x00,
};

/*
 * start:  cmp $4,%edi
 *         ja def
 *         lea tab(%rip),%rdx
 *         mov %edi,%edi
 *         movslq (%rdx,%rdi,4),%rax
 *         add %rdx,%rax
 * jump:   jmp *%rax
 * c0:     mov $10,%eax
 *         ret
 * c1:     mov $11,%eax
 *         ret
 * c2:     mov $12,%eax
 *         ret
 * c3:     mov $13,%eax
 *         ret
 * def:    xor %eax,%eax
 *         ret
 *         .p2align 2
 * tab:    .long c0-tab, c1-tab, c2-tab, def-tab, c3-tab
 *         .long 0x7fff0000
 *
 * start=1000 jump=1015 c0=1017 c1=101d c2=1023 c3=1029 def=102f tab=1034
 */
static const uint8_t jt_gcc_o2[] = {
    0x83, 0xff, 0x04, 0x77, 0x2a, 0x48, 0x8d, 0x15, 0x28, 0x00, 0x00, 0x00,
    0x89, 0xff, 0x48, 0x63, 0x04, 0xba, 0x48, 0x01, 0xd0, 0xff, 0xe0, 0xb8,
    0x0a, 0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0b, 0x00, 0x00, 0x00, 0xc3, 0xb8,
    0x0c, 0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0d, 0x00, 0x00, 0x00, 0xc3, 0x31,
    0xc0, 0xc3, 0x66, 0x90, 0xe3, 0xff, 0xff, 0xff, 0xe9, 0xff, 0xff, 0xff,
    0xef, 0xff, 0xff, 0xff, 0xfb, 0xff, 0xff, 0xff, 0xf5, 0xff, 0xff, 0xff,
    0x00, 0x00, 0xff, 0x7f,
};

/*
 * start:  push %rbp
 *         mov %rsp,%rbp
 *         mov %edi,-0x14(%rbp)
 *         cmpl $5,-0x14(%rbp)
 *         ja def
 *         mov -0x14(%rbp),%eax
 *         lea 0x0(,%rax,4),%rdx
 *         lea tab(%rip),%rax
 *         mov (%rdx,%rax,1),%eax
 *         cltq
 *         lea tab(%rip),%rdx
 *         add %rdx,%rax
 * jump:   jmp *%rax
 * c0:     mov $10,%eax
 *         jmp out
 * c1:     mov $11,%eax
 *         jmp out
 * c2:     mov $12,%eax
 *         jmp out
 * c3:     mov $13,%eax
 *         jmp out
 * def:    xor %eax,%eax
 * out:    pop %rbp
 *         ret
 *         .p2align 2
 * tab:    .long c0-tab, c1-tab, c2-tab, def-tab, c3-tab, c0-tab
 *         .long 0x7fff0000
 *
 * start=1000 jump=102e c0=1030 c1=1037 c2=103e c3=1045 def=104c out=104e tab=1050
 */
static const uint8_t jt_gcc_o0[] = {
    0x55, 0x48, 0x89, 0xe5, 0x89, 0x7d, 0xec, 0x83, 0x7d, 0xec, 0x05, 0x77,
    0x3f, 0x8b, 0x45, 0xec, 0x48, 0x8d, 0x14, 0x85, 0x00, 0x00, 0x00, 0x00,
    0x48, 0x8d, 0x05, 0x31, 0x00, 0x00, 0x00, 0x8b, 0x04, 0x02, 0x48, 0x98,
    0x48, 0x8d, 0x15, 0x25, 0x00, 0x00, 0x00, 0x48, 0x01, 0xd0, 0xff, 0xe0,
    0xb8, 0x0a, 0x00, 0x00, 0x00, 0xeb, 0x17, 0xb8, 0x0b, 0x00, 0x00, 0x00,
    0xeb, 0x10, 0xb8, 0x0c, 0x00, 0x00, 0x00, 0xeb, 0x09, 0xb8, 0x0d, 0x00,
    0x00, 0x00, 0xeb, 0x02, 0x31, 0xc0, 0x5d, 0xc3, 0xe0, 0xff, 0xff, 0xff,
    0xe7, 0xff, 0xff, 0xff, 0xee, 0xff, 0xff, 0xff, 0xfc, 0xff, 0xff, 0xff,
    0xf5, 0xff, 0xff, 0xff, 0xe0, 0xff, 0xff, 0xff, 0x00, 0x00, 0xff, 0x7f,
};

/*
 * start:  push %rbp
 *         mov %rsp,%rbp
 *         mov %edi,-0x4(%rbp)
 *         mov -0x4(%rbp),%eax
 *         add $0xffffff9f,%eax
 *         mov %eax,%ecx
 *         mov %rcx,-0x10(%rbp)
 *         sub $0x7,%eax
 *         ja def
 *         mov -0x10(%rbp),%rax
 *         lea tab(%rip),%rcx
 *         movslq (%rcx,%rax,4),%rax
 *         add %rcx,%rax
 * jump:   jmp *%rax
 * c0:     mov $10,%eax
 *         jmp out
 * c1:     mov $11,%eax
 *         jmp out
 * c2:     mov $12,%eax
 *         jmp out
 * def:    xor %eax,%eax
 * out:    pop %rbp
 *         ret
 *         .p2align 2
 * tab:    .long c0-tab, c1-tab, c2-tab, def-tab, c0-tab, c1-tab, c2-tab, c0-tab
 *
 * start=1000 jump=102a c0=102c c1=1033 c2=103a def=1041 out=1043 tab=1048
 */
static const uint8_t jt_clang_o0[] = {
    0x55, 0x48, 0x89, 0xe5, 0x89, 0x7d, 0xfc, 0x8b, 0x45, 0xfc, 0x83, 0xc0,
    0x9f, 0x89, 0xc1, 0x48, 0x89, 0x4d, 0xf0, 0x83, 0xe8, 0x07, 0x77, 0x29,
    0x48, 0x8b, 0x45, 0xf0, 0x48, 0x8d, 0x0d, 0x25, 0x00, 0x00, 0x00, 0x48,
    0x63, 0x04, 0x81, 0x48, 0x01, 0xc8, 0xff, 0xe0, 0xb8, 0x0a, 0x00, 0x00,
    0x00, 0xeb, 0x10, 0xb8, 0x0b, 0x00, 0x00, 0x00, 0xeb, 0x09, 0xb8, 0x0c,
    0x00, 0x00, 0x00, 0xeb, 0x02, 0x31, 0xc0, 0x5d, 0xc3, 0x0f, 0x1f, 0x00,
    0xe4, 0xff, 0xff, 0xff, 0xeb, 0xff, 0xff, 0xff, 0xf2, 0xff, 0xff, 0xff,
    0xf9, 0xff, 0xff, 0xff, 0xe4, 0xff, 0xff, 0xff, 0xeb, 0xff, 0xff, 0xff,
    0xf2, 0xff, 0xff, 0xff, 0xe4, 0xff, 0xff, 0xff,
};

/*
 * start:  mov %esi,%eax
 *         cmp $0x3,%edi
 *         ja def
 *         mov %edi,%ecx
 *         lea tab(%rip),%rdx
 *         movslq (%rdx,%rcx,4),%rcx
 *         add %rdx,%rcx
 * jump:   jmp *%rcx
 * c0:     add $10,%eax
 *         ret
 * c1:     add $11,%eax
 *         ret
 * c2:     add $12,%eax
 *         ret
 * def:    ret
 *         .p2align 2
 * tab:    .long c0-tab, c1-tab, c2-tab, c1-tab
 *         .long c0-tab
 *
 * start=1000 jump=1017 c0=1019 c1=101d c2=1021 def=1025 tab=1028
 */
static const uint8_t jt_clang_o2[] = {
    0x89, 0xf0, 0x83, 0xff, 0x03, 0x77, 0x1e, 0x89, 0xf9, 0x48, 0x8d, 0x15,
    0x18, 0x00, 0x00, 0x00, 0x48, 0x63, 0x0c, 0x8a, 0x48, 0x01, 0xd1, 0xff,
    0xe1, 0x83, 0xc0, 0x0a, 0xc3, 0x83, 0xc0, 0x0b, 0xc3, 0x83, 0xc0, 0x0c,
    0xc3, 0xc3, 0x66, 0x90, 0xf1, 0xff, 0xff, 0xff, 0xf5, 0xff, 0xff, 0xff,
    0xf9, 0xff, 0xff, 0xff, 0xf5, 0xff, 0xff, 0xff, 0xf1, 0xff, 0xff, 0xff,
};

/*
 * start:  lea tab(%rip),%rdx
 *         movslq (%rdx,%rdi,4),%rax
 *         add %rdx,%rax
 * jump:   jmp *%rax
 * c0:     mov $10,%eax
 *         ret
 * c1:     mov $11,%eax
 *         ret
 * c2:     mov $12,%eax
 *         ret
 *         .p2align 2
 * tab:    .long c0-tab, c1-tab, c2-tab
 *         .long 0x7fff0000
 *
 * start=1000 jump=100e c0=1010 c1=1016 c2=101c tab=1024
 */
static const uint8_t jt_scan[] = {
    0x48, 0x8d, 0x15, 0x1d, 0x00, 0x00, 0x00, 0x48, 0x63, 0x04, 0xba, 0x48,
    0x01, 0xd0, 0xff, 0xe0, 0xb8, 0x0a, 0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0b,
    0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0c, 0x00, 0x00, 0x00, 0xc3, 0x66, 0x90,
    0xec, 0xff, 0xff, 0xff, 0xf2, 0xff, 0xff, 0xff, 0xf8, 0xff, 0xff, 0xff,
    0x00, 0x00, 0xff, 0x7f,
};

/*
 * start:  cmp $2,%edi
 *         ja def
 *         mov %edi,%edi
 * jump:   jmp *tab(,%rdi,8)
 * c0:     mov $10,%eax
 *         ret
 * c1:     mov $11,%eax
 *         ret
 * def:    ret
 *         .p2align 3
 * tab:    .quad c0, c1, 0x90000
 *
 * start=1000 jump=1007 c0=100e c1=1014 def=101a tab=1020
 */
static const uint8_t jt_reject[] = {
    0x83, 0xff, 0x02, 0x77, 0x15, 0x89, 0xff, 0xff, 0x24, 0xfd, 0x20, 0x10,
    0x00, 0x00, 0xb8, 0x0a, 0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0b, 0x00, 0x00,
    0x00, 0xc3, 0xc3, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x0e, 0x10, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x14, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/*
 * start:  cmp $3,%edi
 *         jbe inr
 *         jmp def
 * inr:    mov %edi,%edi
 *         mov tab(,%rdi,8),%rax
 * jump:   jmp *%rax
 * c0:     mov $10,%eax
 *         ret
 * c1:     mov $11,%eax
 *         ret
 * def:    ret
 *         .p2align 3
 * tab:    .quad c0, c1, def, c0
 *         .quad c1, c0
 *
 * start=1000 inr=1007 jump=1011 c0=1013 c1=1019 def=101f tab=1020
 */
static const uint8_t jt_jbe[] = {
    0x83, 0xff, 0x03, 0x76, 0x02, 0xeb, 0x18, 0x89, 0xff, 0x48, 0x8b, 0x04,
    0xfd, 0x20, 0x10, 0x00, 0x00, 0xff, 0xe0, 0xb8, 0x0a, 0x00, 0x00, 0x00,
    0xc3, 0xb8, 0x0b, 0x00, 0x00, 0x00, 0xc3, 0xc3, 0x13, 0x10, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x19, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x1f, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x13, 0x10, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x19, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x13, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/*
 * start:  cmp $1,%edi
 *         jbe def
 *         mov %edi,%edi
 * jump:   jmp *tab(,%rdi,8)
 * c0:     mov $10,%eax
 *         ret
 * c1:     mov $11,%eax
 *         ret
 * def:    ret
 *         .p2align 3
 * tab:    .quad c0, c1, def
 *         .quad 0
 *
 * start=1000 jump=1007 c0=100e c1=1014 def=101a tab=1020
 */
static const uint8_t jt_wrongdir[] = {
    0x83, 0xff, 0x01, 0x76, 0x15, 0x89, 0xff, 0xff, 0x24, 0xfd, 0x20, 0x10,
    0x00, 0x00, 0xb8, 0x0a, 0x00, 0x00, 0x00, 0xc3, 0xb8, 0x0b, 0x00, 0x00,
    0x00, 0xc3, 0xc3, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x0e, 0x10, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x14, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x1a, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
};

/*
 * start:  cmp $3,%edi
 *         ja def
 *         lea tab(%rip),%rdx
 *         mov %edi,%edi
 *         movslq (%rdx,%rdi,4),%rax
 *         call def
 *         add %rdx,%rax
 * jump:   jmp *%rax
 * c0:     ret
 * def:    ret
 *         .p2align 2
 * tab:    .long c0-tab, c0-tab, c0-tab, c0-tab
 *
 * start=1000 jump=101a c0=101c def=101d tab=1020
 */
static const uint8_t jt_clobber[] = {
    0x83, 0xff, 0x03, 0x77, 0x18, 0x48, 0x8d, 0x15, 0x14, 0x00, 0x00, 0x00,
    0x89, 0xff, 0x48, 0x63, 0x04, 0xba, 0xe8, 0x06, 0x00, 0x00, 0x00, 0x48,
    0x01, 0xd0, 0xff, 0xe0, 0xc3, 0xc3, 0x66, 0x90, 0xfc, 0xff, 0xff, 0xff,
    0xfc, 0xff, 0xff, 0xff, 0xfc, 0xff, 0xff, 0xff, 0xfc, 0xff, 0xff, 0xff,
};

/*
 * start:  cmp $2,%edi
 *         ja def
 *         lea tab(%rip),%rdx
 *         mov %edi,%edi
 * jump:   jmp *(%rdx,%rdi,8)
 * c0:     mov $10,%eax
 *         ret
 * c1:     mov $11,%eax
 *         ret
 * def:    ret
 *         .p2align 3
 * tab:    .quad 0, c1, 0
 *
 * start=1000 jump=100e c0=1011 c1=1017 def=101d tab=1020
 */
static const uint8_t jt_pie[] = {
    0x83, 0xff, 0x02, 0x77, 0x18, 0x48, 0x8d, 0x15, 0x14, 0x00, 0x00, 0x00,
    0x89, 0xff, 0xff, 0x24, 0xfa, 0xb8, 0x0a, 0x00, 0x00, 0x00, 0xc3, 0xb8,
    0x0b, 0x00, 0x00, 0x00, 0xc3, 0xc3, 0x66, 0x90, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x17, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/*
 * start:  movzbl (%rdi),%eax
 *         sub $0x61,%eax
 *         cmp $0x3,%al
 *         ja def
 *         movzbl %al,%eax
 *         lea tab(%rip),%rdx
 *         movslq (%rdx,%rax,4),%rax
 *         add %rdx,%rax
 * jump:   jmp *%rax
 * c0:     mov $10,%eax
 *         ret
 * c1:     mov $11,%eax
 *         ret
 * def:    xor %eax,%eax
 *         ret
 *         .p2align 2
 * tab:    .long c0-tab, c1-tab, def-tab, c1-tab
 *         .long c0-tab
 *
 * start=1000 jump=101b c0=101d c1=1023 def=1029 tab=102c
 */
static const uint8_t jt_byte[] = {
    0x0f, 0xb6, 0x07, 0x83, 0xe8, 0x61, 0x3c, 0x03, 0x77, 0x1f, 0x0f, 0xb6,
    0xc0, 0x48, 0x8d, 0x15, 0x18, 0x00, 0x00, 0x00, 0x48, 0x63, 0x04, 0x82,
    0x48, 0x01, 0xd0, 0xff, 0xe0, 0xb8, 0x0a, 0x00, 0x00, 0x00, 0xc3, 0xb8,
    0x0b, 0x00, 0x00, 0x00, 0xc3, 0x31, 0xc0, 0xc3, 0xf1, 0xff, 0xff, 0xff,
    0xf7, 0xff, 0xff, 0xff, 0xfd, 0xff, 0xff, 0xff, 0xf7, 0xff, 0xff, 0xff,
    0xf1, 0xff, 0xff, 0xff,
};

/*
 * start:  lea tab(%rip),%r8
 *         xor %edx,%edx
 * loop:   mov (%rdi,%rdx,4),%ecx
 *         cmp $0x2,%ecx
 *         ja def
 *         movslq (%r8,%rcx,4),%rcx
 *         add %r8,%rcx
 * jump:   jmp *%rcx
 * c0:     add $1,%rdx
 *         jmp loop
 * c1:     add $2,%rdx
 *         jmp loop
 * def:    ret
 *         .p2align 2
 * tab:    .long c0-tab, c1-tab, def-tab
 *
 * start=1000 loop=1009 jump=1018 c0=101a c1=1020 def=1026 tab=1028
 */
static const uint8_t jt_hoist[] = {
    0x4c, 0x8d, 0x05, 0x21, 0x00, 0x00, 0x00, 0x31, 0xd2, 0x8b, 0x0c, 0x97,
    0x83, 0xf9, 0x02, 0x77, 0x15, 0x49, 0x63, 0x0c, 0x88, 0x4c, 0x01, 0xc1,
    0xff, 0xe1, 0x48, 0x83, 0xc2, 0x01, 0xeb, 0xe9, 0x48, 0x83, 0xc2, 0x02,
    0xeb, 0xe3, 0xc3, 0x90, 0xf2, 0xff, 0xff, 0xff, 0xf8, 0xff, 0xff, 0xff,
    0xfe, 0xff, 0xff, 0xff,
};
/*
 * start:  cmp $0x10000,%edi
 *         ja def
 *         mov %edi,%edi
 * jump:   jmp *tab(,%rdi,8)
 * c0:     mov $10,%eax
 *         ret
 * def:    ret
 *         .p2align 3
 * tab:    .quad c0, def, c0
 *
 * start=1000 jump=100a c0=1011 def=1017 tab=1018
 */
static const uint8_t jt_absurd[] = {
    0x81, 0xff, 0x00, 0x00, 0x01, 0x00, 0x77, 0x0f, 0x89, 0xff, 0xff, 0x24,
    0xfd, 0x18, 0x10, 0x00, 0x00, 0xb8, 0x0a, 0x00, 0x00, 0x00, 0xc3, 0xc3,
    0x11, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x17, 0x10, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x11, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/*
 * start:  lea tab(%rip),%rdx
 *         cmp $2,%edi
 *         ja def
 *         ret
 * blk:    movslq (%rdx,%rdi,4),%rax
 *         add %rdx,%rax
 * jump:   jmp *%rax
 * c0:     ret
 * def:    ret
 *         .p2align 2
 * tab:    .long c0-tab, def-tab, c0-tab
 *
 * start=1000 blk=100d jump=1014 c0=1016 def=1017 tab=1018
 */
static const uint8_t jt_afterret[] = {
    0x48, 0x8d, 0x15, 0x11, 0x00, 0x00, 0x00, 0x83, 0xff, 0x02, 0x77, 0x0b,
    0xc3, 0x48, 0x63, 0x04, 0xba, 0x48, 0x01, 0xd0, 0xff, 0xe0, 0xc3, 0xc3,
    0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff,
};

/*
 * start:  lea tab(%rip),%rdx
 *         test %esi,%esi
 *         jne skip
 *         cmp $1,%edi
 *         ja def
 * skip:   mov %edi,%edi
 *         movslq (%rdx,%rdi,4),%rax
 *         add %rdx,%rax
 * jump:   jmp *%rax
 * c0:     ret
 * c1:     ret
 * def:    ret
 *         .p2align 2
 * tab:    .long c0-tab, c1-tab, def-tab
 *         .long 0x7fff0000
 *
 * start=1000 skip=1010 jump=1019 c0=101b c1=101c def=101d tab=1020
 */
static const uint8_t jt_skipguard[] = {
    0x48, 0x8d, 0x15, 0x19, 0x00, 0x00, 0x00, 0x85, 0xf6, 0x75, 0x05, 0x83,
    0xff, 0x01, 0x77, 0x0d, 0x89, 0xff, 0x48, 0x63, 0x04, 0xba, 0x48, 0x01,
    0xd0, 0xff, 0xe0, 0xc3, 0xc3, 0xc3, 0x66, 0x90, 0xfb, 0xff, 0xff, 0xff,
    0xfc, 0xff, 0xff, 0xff, 0xfd, 0xff, 0xff, 0xff, 0x00, 0x00, 0xff, 0x7f,
};

/*
 * start:  cmp $1,%edi
 *         ja in
 *         nop
 * in:     mov %edi,%edi
 * jump:   jmp *tab(,%rdi,8)
 * c0:     ret
 * c1:     ret
 * def:    ret
 *         .p2align 3
 * tab:    .quad c0, c1, def
 *         .quad 0
 *
 * start=1000 in=1006 jump=1008 c0=100f c1=1010 def=1011 tab=1018
 */
static const uint8_t jt_rejoin[] = {
    0x83, 0xff, 0x01, 0x77, 0x01, 0x90, 0x89, 0xff, 0xff, 0x24, 0xfd, 0x18,
    0x10, 0x00, 0x00, 0xc3, 0xc3, 0xc3, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00,
    0x0f, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x10, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x11, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* clang-format on */

/*****************************************************************************
 * Jump tables: helpers
 */

/* An image of test code and the window of instructions leading to its jump. */
typedef struct jt_fixture {
    cfg_image_t *img;      /* the code image */
    arch_insn_t insns[64]; /* decoded instructions up to the jump */
    cfg_insn_window_t w;   /* the window over insns */
} jt_fixture_t;

/*
 * Make an image of the LEN BYTES at VMA and decode them linearly up to and including the
 * jump at JUMP into F's window. Direct unconditional jumps are left out, as a builder
 * following a chain of single-predecessor blocks would.
 */
static void
jt_setup(jt_fixture_t *f, const uint8_t *bytes, size_t len, uint64_t jump)
{
    uint64_t a = VMA;
    size_t n = 0;

    ck_assert_int_eq(cfg_image_from_bytes(bytes, len, VMA, &f->img), 0);
    for (;;) {
        arch_insn_t in;
        ck_assert_uint_lt(a, VMA + len);
        ck_assert_int_eq(arch_decode(bytes + (a - VMA), len - (a - VMA), a, &in), 0);
        if (in.kind != ARCH_KIND_JMP) {
            ck_assert_uint_lt(n, 64);
            f->insns[n++] = in;
        }
        if (a == jump)
            break;
        ck_assert_uint_lt(a, jump);
        a += in.len;
    }
    ck_assert_int_eq(f->insns[n - 1].kind, ARCH_KIND_JMP_IND);
    f->w.insns = f->insns;
    f->w.n = n;
}

/* Recognise the table of F, code being [VMA, HI); returns cfg_jtab_match's answer. */
static int
jt_match(jt_fixture_t *f, uint64_t hi, cfg_table_t *t)
{
    memset(t, 0xa5, sizeof(*t));
    return cfg_jtab_match(f->img, &f->w, VMA, hi, t);
}

static void
jt_check(const jt_fixture_t *f, const cfg_table_t *t, uint64_t jump, uint64_t addr,
    uint64_t base, int size, int relative, int bounded, const uint64_t *targets,
    uint32_t n)
{
    ck_assert_uint_eq(t->jump, jump);
    ck_assert_uint_eq(t->addr, addr);
    ck_assert_uint_eq(t->base, base);
    ck_assert_int_eq(t->entry_size, size);
    ck_assert_int_eq(t->relative, relative);
    ck_assert_int_eq(t->bounded, bounded);
    ck_assert_uint_eq(t->nentries, n);
    for (uint32_t i = 0; i < n; i++)
        ck_assert_uint_eq(cfg_jtab_entry(f->img, t, i), targets[i]);
    ck_assert_uint_eq(cfg_jtab_entry(f->img, t, n), 0);
}

#define JT_SETUP(f, name, jump) jt_setup(&(f), jt_##name, sizeof(jt_##name), (jump))
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/*****************************************************************************
 * Jump tables: tests
 */

START_TEST(test_cfg_jtab_abs_nonpic)
{
    static const uint64_t want[] = { 0x1010, 0x1016, 0x101c, 0x1022 };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, abs, 0x1009);
    ck_assert_int_eq(jt_match(&f, 0x1030, &t), 1);
    jt_check(&f, &t, 0x1009, 0x1030, 0, 8, 0, 1, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_pic_gcc_o2)
{
    static const uint64_t want[] = { 0x1017, 0x101d, 0x1023, 0x102f, 0x1029 };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, gcc_o2, 0x1015);
    ck_assert_int_eq(jt_match(&f, 0x1034, &t), 1);
    jt_check(&f, &t, 0x1015, 0x1034, 0x1034, 4, 1, 1, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_pic_gcc_o0_stack_slot)
{
    static const uint64_t want[] = { 0x1030, 0x1037, 0x103e, 0x104c, 0x1045, 0x1030 };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, gcc_o0, 0x102e);
    ck_assert_int_eq(jt_match(&f, 0x1050, &t), 1);
    jt_check(&f, &t, 0x102e, 0x1050, 0x1050, 4, 1, 1, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_pic_clang_o0_sub_bound)
{
    static const uint64_t want[]
        = { 0x102c, 0x1033, 0x103a, 0x1041, 0x102c, 0x1033, 0x103a, 0x102c };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, clang_o0, 0x102a);
    ck_assert_int_eq(jt_match(&f, 0x1048, &t), 1);
    jt_check(&f, &t, 0x102a, 0x1048, 0x1048, 4, 1, 1, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_pic_clang_o2)
{
    static const uint64_t want[] = { 0x1019, 0x101d, 0x1021, 0x101d };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, clang_o2, 0x1017);
    ck_assert_int_eq(jt_match(&f, 0x1028, &t), 1);
    jt_check(&f, &t, 0x1017, 0x1028, 0x1028, 4, 1, 1, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_scan_without_bound)
{
    static const uint64_t want[] = { 0x1010, 0x1016, 0x101c };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, scan, 0x100e);
    ck_assert_int_eq(jt_match(&f, 0x1024, &t), 1);
    jt_check(&f, &t, 0x100e, 0x1024, 0x1024, 4, 1, 0, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

/* A relocated word among the scanned entries is a pointer, no offset: the relative
 * table ends before it (the next object of read-only data). */
START_TEST(test_cfg_jtab_scan_stops_at_reloc)
{
    static const uint64_t want[] = { 0x1010, 0x1016 };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, scan, 0x100e);
    f.img->relocs = calloc(1, sizeof(cfg_reloc_t));
    ck_assert_ptr_nonnull(f.img->relocs);
    f.img->relocs[0]
        = (cfg_reloc_t) { .where = 0x102c, .value = 0x1010, .kind = CFG_RELOC_RELATIVE };
    f.img->nrelocs = 1;
    ck_assert_int_eq(jt_match(&f, 0x1024, &t), 1);
    jt_check(&f, &t, 0x100e, 0x1024, 0x1024, 4, 1, 0, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_byte_compare)
{
    static const uint64_t want[] = { 0x101d, 0x1023, 0x1029, 0x1023 };
    jt_fixture_t f;
    cfg_table_t t;

    /* A char switch: the compare looks at %al only, the index is its zero-extension. */
    JT_SETUP(f, byte, 0x101b);
    ck_assert_int_eq(jt_match(&f, 0x102c, &t), 1);
    jt_check(&f, &t, 0x101b, 0x102c, 0x102c, 4, 1, 1, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_hoisted_base_needs_window)
{
    static const uint64_t want[] = { 0x101a, 0x1020, 0x1026 };
    jt_fixture_t f;
    cfg_table_t t;
    cfg_insn_window_t w;

    /* The table base is loaded before the loop: found only if the window reaches it. */
    JT_SETUP(f, hoist, 0x1018);
    ck_assert_int_eq(jt_match(&f, 0x1028, &t), 1);
    jt_check(&f, &t, 0x1018, 0x1028, 0x1028, 4, 1, 1, want, NELEM(want));
    ck_assert_uint_eq(f.insns[2].addr, 0x1009);
    w.insns = &f.insns[2];
    w.n = f.w.n - 2;
    ck_assert_int_eq(cfg_jtab_match(f.img, &w, VMA, 0x1028, &t), 0);
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_rejects_entry_out_of_range)
{
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, reject, 0x1007);
    ck_assert_int_eq(jt_match(&f, 0x1020, &t), 0);
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_rejects_entry_outside_proc)
{
    jt_fixture_t f;
    cfg_table_t t;

    /* Entry 3 (def) lies past the procedure's end: the bounded table is not accepted. */
    JT_SETUP(f, gcc_o2, 0x1015);
    ck_assert_int_eq(jt_match(&f, 0x102f, &t), 0);
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_rejects_absurd_bound)
{
    jt_fixture_t f;
    cfg_table_t t;

    /* 65537 entries: not a table, even though the first ones look fine. */
    JT_SETUP(f, absurd, 0x100a);
    ck_assert_int_eq(jt_match(&f, 0x1018, &t), 0);
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_jbe_taken_path)
{
    static const uint64_t want[] = { 0x1013, 0x1019, 0x101f, 0x1013 };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, jbe, 0x1011);
    ck_assert_uint_eq(f.w.n, 5); /* cmp jbe mov mov jmp: the jmp to def is left out */
    ck_assert_int_eq(jt_match(&f, 0x1020, &t), 1);
    jt_check(&f, &t, 0x1011, 0x1020, 0, 8, 0, 1, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_guard_wrong_direction_scans)
{
    static const uint64_t want[] = { 0x100e, 0x1014, 0x101a };
    jt_fixture_t f;
    cfg_table_t t;

    /* jbe leaves the path to the table for values above the bound: no proof. */
    JT_SETUP(f, wrongdir, 0x1007);
    ck_assert_int_eq(jt_match(&f, 0x1020, &t), 1);
    jt_check(&f, &t, 0x1007, 0x1020, 0, 8, 0, 0, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_path_starts_after_ret)
{
    jt_fixture_t f;
    cfg_table_t t;

    /* The lea before the ret is not on the path: %rdx is unknown at blk. */
    JT_SETUP(f, afterret, 0x1014);
    ck_assert_int_eq(jt_match(&f, 0x1018, &t), 0);
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_skipped_guard_scans)
{
    static const uint64_t want[] = { 0x101b, 0x101c, 0x101d };
    jt_fixture_t f;
    cfg_table_t t;

    /* jne skip bypasses the compare: the table is found, but not bounded by it. */
    JT_SETUP(f, skipguard, 0x1019);
    ck_assert_int_eq(jt_match(&f, 0x1020, &t), 1);
    jt_check(&f, &t, 0x1019, 0x1020, 0x1020, 4, 1, 0, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_guard_target_rejoins_scans)
{
    static const uint64_t want[] = { 0x100f, 0x1010, 0x1011 };
    jt_fixture_t f;
    cfg_table_t t;

    /* ja in: the out-of-range values reach the jump too. */
    JT_SETUP(f, rejoin, 0x1008);
    ck_assert_int_eq(jt_match(&f, 0x1018, &t), 1);
    jt_check(&f, &t, 0x1008, 0x1018, 0, 8, 0, 0, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_call_clobbers)
{
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, clobber, 0x101a);
    ck_assert_int_eq(jt_match(&f, 0x1020, &t), 0);
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_pie_relative_relocs)
{
    static const uint64_t want[] = { 0x1011, 0x1017, 0x101d };
    jt_fixture_t f;
    cfg_table_t t;

    JT_SETUP(f, pie, 0x100e);
    f.img->relocs = calloc(3, sizeof(cfg_reloc_t));
    ck_assert_ptr_nonnull(f.img->relocs);
    /* Entries 0 and 2 hold 0 in the file; an ABS64 at entry 2 must be ignored. */
    f.img->relocs[0]
        = (cfg_reloc_t) { .where = 0x1020, .value = 0x1011, .kind = CFG_RELOC_RELATIVE };
    f.img->relocs[1]
        = (cfg_reloc_t) { .where = 0x1030, .value = 0x1017, .kind = CFG_RELOC_ABS64 };
    f.img->relocs[2]
        = (cfg_reloc_t) { .where = 0x1030, .value = 0x101d, .kind = CFG_RELOC_RELATIVE };
    f.img->nrelocs = 3;
    ck_assert_int_eq(jt_match(&f, 0x1020, &t), 1);
    jt_check(&f, &t, 0x100e, 0x1020, 0, 8, 0, 1, want, NELEM(want));
    cfg_image_destroy(f.img);
}
END_TEST

/*
 * AArch64 (cfg/ on the program's ISA): code addresses the program holds (relocated
 * words) that are not multiples of 4 are no labels. A computed jump of unknown targets
 * tries every held address in its procedure; a misaligned one was decoded across two
 * instructions (glibc's static __vfwprintf_internal got a block at an odd address).
 */
START_TEST(test_cfg_a64_held_misaligned)
{
    static const uint32_t code[] = {
        0x8b020001, /* 1000 add x1, x0, x2 */
        0xd61f0020, /* 1004 br x1: targets unknown */
        0xd503201f, /* 1008 nop */
        0x52800020, /* 100c mov w0, #1 (a held label) */
        0xd65f03c0, /* 1010 ret */
    };
    uint8_t b[sizeof code];
    for (size_t i = 0; i < NELEM(code); i++)
        for (int k = 0; k < 4; k++)
            b[4 * i + k] = (uint8_t)(code[i] >> (8 * k));
    cfg_image_t *img;
    ck_assert_int_eq(cfg_image_from_bytes(b, sizeof b, VMA, &img), 0);
    img->isa = arch_isa_for_machine(ARCH_EM_AARCH64);
    ck_assert_ptr_nonnull(img->isa);
    img->relocs = calloc(2, sizeof(cfg_reloc_t));
    ck_assert_ptr_nonnull(img->relocs);
    img->relocs[0] = (cfg_reloc_t) { .where = 0x2000, .value = 0x100c,
                                     .kind = CFG_RELOC_RELATIVE };
    img->relocs[1] = (cfg_reloc_t) { .where = 0x2008, .value = 0x100e,
                                     .kind = CFG_RELOC_RELATIVE };
    img->nrelocs = 2;
    cfg_prog_t *prog;
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    ck_assert_ptr_eq(prog->isa, img->isa);
    const cfg_proc_t *p = cfg_proc_at(prog, VMA);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(p->unsafe);
    ck_assert_uint_ne(cfg_block_at(prog, 0x100c), CFG_NONE);
    ck_assert_uint_eq(prog->blocks[cfg_block_at(prog, 0x100c)].start, 0x100c);
    for (uint32_t i = 0; i < prog->nblocks; i++)
        ck_assert_uint_eq(prog->blocks[i].start % 4, 0);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/*
 * AArch64: a switch table whose address is spilled to a stack slot (sqlite's VM: formed
 * and stored once, reloaded before each `br`) is resolved when the slot provably holds
 * it, and left unresolved when the slot's address is taken, when it is stored to again,
 * when sp moves on a way back into the load, or when a way into the load skips the
 * store (variants patch one word of the procedure).
 */
static void
a64_slot_build(uint32_t at, uint32_t word, uint32_t *ntables, uint32_t *nunres)
{
    uint32_t code[0x104 / 4] = {
        0xd10083ff, /* 1000 sub sp, sp, #32 */
        0xd503201f, /* 1004 nop */
        0x90000000, /* 1008 adrp x0, 0x1000 */
        0x91040000, /* 100c add x0, x0, #0x100: the table */
        0xf9000be0, /* 1010 str x0, [sp, #16] */
        0x7100085f, /* 1014 cmp w2, #2 */
        0x54000188, /* 1018 b.hi 1048 */
        0xf9400be0, /* 101c ldr x0, [sp, #16] */
        0x38624800, /* 1020 ldrb w0, [x0, w2, uxtw] */
        0x10000061, /* 1024 adr x1, 1030 */
        0x8b208820, /* 1028 add x0, x1, w0, sxtb #2 */
        0xd61f0000, /* 102c br x0 */
        0x52800022, /* 1030 case 0: mov w2, #1 */
        0x17fffff8, /* 1034 b 1014 (the loop) */
        0x52800040, /* 1038 case 1: mov w0, #2 */
        0x14000005, /* 103c b 1050 */
        0x52800060, /* 1040 case 2: mov w0, #3 */
        0x14000003, /* 1044 b 1050 */
        0x52800000, /* 1048 default: mov w0, #0 */
        0xd503201f, /* 104c nop */
        0x910083ff, /* 1050 add sp, sp, #32 */
        0xd65f03c0, /* 1054 ret */
    };
    code[0x100 / 4] = 0x00040200; /* 1100: the table, byte entries 0, 2, 4 */
    if (word != 0)
        code[(at - VMA) / 4] = word;
    uint8_t b[sizeof code];
    for (size_t i = 0; i < NELEM(code); i++)
        for (int k = 0; k < 4; k++)
            b[4 * i + k] = (uint8_t)(code[i] >> (8 * k));
    cfg_image_t *img;
    ck_assert_int_eq(cfg_image_from_bytes(b, sizeof b, VMA, &img), 0);
    img->isa = arch_isa_for_machine(ARCH_EM_AARCH64);
    ck_assert_ptr_nonnull(img->isa);
    cfg_prog_t *prog;
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    const cfg_proc_t *p = cfg_proc_at(prog, VMA);
    ck_assert_ptr_nonnull(p);
    *ntables = p->ntables;
    *nunres = p->nind_unresolved;
    if (p->ntables == 1) {
        ck_assert_uint_eq(prog->tables[0].addr, 0x1100);
        ck_assert_uint_eq(prog->tables[0].nentries, 3);
        ck_assert_uint_eq(prog->tables[0].anchor, 0x1024);
        for (uint32_t i = 0; i < 3; i++)
            ck_assert_uint_eq(cfg_jtab_entry(img, &prog->tables[0], i), 0x1030 + 8 * i);
    }
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}

START_TEST(test_cfg_a64_table_in_stack_slot)
{
    static const struct {
        uint32_t at, word;
        const char *what;
    } refused[] = {
        { 0x1030, 0x910043e3, "add x3, sp, #16: the slot's address taken" },
        { 0x1030, 0x910003e3, "mov x3, sp: the frame's address taken" },
        { 0x1030, 0xf9000be3, "str x3, [sp, #16]: stored again" },
        { 0x1030, 0xa9010fe2, "stp x2, x3, [sp, #16]: stored again, in a pair" },
        { 0x1030, 0xb80143e3, "stur w3, [sp, #20]: half of it stored again" },
        { 0x1030, 0xd10043ff, "sub sp, sp, #16: the frame moves, then the loop" },
        { 0x1004, 0x34000083, "cbz w3, 1014: a way into the load skips the store" },
        { 0x1030, 0xd10003a3, "sub x3, x29, #0: an address from the frame pointer" },
    };
    uint32_t nt, nu;
    a64_slot_build(0, 0, &nt, &nu);
    ck_assert_msg(nt == 1 && nu == 0,
        "the spilled table not resolved (%u tables, %u unresolved)", nt, nu);
    for (size_t i = 0; i < NELEM(refused); i++) {
        a64_slot_build(refused[i].at, refused[i].word, &nt, &nu);
        ck_assert_msg(
            nt == 0 && nu == 1, "%s: %u tables, %u unresolved", refused[i].what, nt, nu);
    }
}
END_TEST

START_TEST(test_cfg_jtab_not_a_table)
{
    jt_fixture_t f;
    cfg_table_t t;
    cfg_insn_window_t w;

    JT_SETUP(f, gcc_o2, 0x1015);
    /* Without the lea and the load the target is just a register. */
    w.insns = &f.insns[f.w.n - 1];
    w.n = 1;
    ck_assert_int_eq(cfg_jtab_match(f.img, &w, VMA, 0x1034, &t), 0);
    /* A window not ending in an indirect jump, and bad arguments. */
    w.insns = f.insns;
    w.n = 2;
    ck_assert_int_eq(cfg_jtab_match(f.img, &w, VMA, 0x1034, &t), 0);
    ck_assert_int_eq(cfg_jtab_match(f.img, NULL, VMA, 0x1034, &t), 0);
    ck_assert_int_eq(cfg_jtab_match(NULL, &f.w, VMA, 0x1034, &t), 0);
    ck_assert_int_eq(cfg_jtab_match(f.img, &f.w, 0x1034, VMA, &t), 0);
    w.n = 0;
    ck_assert_int_eq(cfg_jtab_match(f.img, &w, VMA, 0x1034, &t), 0);
    cfg_image_destroy(f.img);
}
END_TEST

START_TEST(test_cfg_jtab_entry_unreadable)
{
    cfg_table_t t = { .addr = 0x1ff8, .entry_size = 8, .nentries = 4 };
    jt_fixture_t f;

    JT_SETUP(f, abs, 0x1009);
    ck_assert_uint_eq(cfg_jtab_entry(f.img, &t, 0), 0);
    t.addr = 0x1030;
    ck_assert_uint_eq(cfg_jtab_entry(f.img, &t, 0), 0x1010);
    ck_assert_uint_eq(cfg_jtab_entry(f.img, &t, 4), 0);
    t.entry_size = 3;
    ck_assert_uint_eq(cfg_jtab_entry(f.img, &t, 0), 0);
    ck_assert_uint_eq(cfg_jtab_entry(NULL, &t, 0), 0);
    cfg_image_destroy(f.img);
}
END_TEST

/*****************************************************************************
 * Loops: building graphs by hand
 */

/*
 * A program of two procedures: a one-block dummy first (so that global and local block
 * numbers differ), then the procedure under test with N blocks and the edges E (pairs of
 * local numbers; -1 as destination leaves the procedure).
 */
typedef struct lp_graph {
    cfg_prog_t prog;     /* the program */
    cfg_proc_t procs[2]; /* the dummy and the procedure under test */
    cfg_block_t *blocks; /* prog.blocks */
    cfg_edge_t *edges;   /* prog.edges */
    uint32_t *preds;     /* prog.preds */
} lp_graph_t;

static void
lp_build(lp_graph_t *g, uint32_t n, const int (*e)[2], uint32_t ne)
{
    uint32_t *cnt = calloc(n + 2, sizeof(uint32_t));

    memset(g, 0, sizeof(*g));
    g->blocks = calloc(n + 1, sizeof(cfg_block_t));
    g->edges = calloc(ne + 1, sizeof(cfg_edge_t));
    g->preds = calloc(ne + 1, sizeof(uint32_t));
    ck_assert(cnt && g->blocks && g->edges && g->preds);
    /* Edges grouped by source block (counting sort, stable). */
    for (uint32_t i = 0; i < ne; i++)
        cnt[e[i][0] + 1]++;
    for (uint32_t b = 0; b < n; b++)
        cnt[b + 1] += cnt[b];
    for (uint32_t b = 0; b < n; b++) {
        cfg_block_t *blk = &g->blocks[b + 1];
        blk->start = 0x1000 + 16 * (uint64_t)b;
        blk->end = blk->start + 16;
        blk->proc = 1;
        blk->succ = cnt[b];
        blk->nsucc = cnt[b + 1] - cnt[b];
        /* Garbage that the analysis must overwrite. */
        blk->idom = 12345;
        blk->loop_depth = 77;
        blk->is_loop_head = 9;
    }
    for (uint32_t i = 0; i < ne; i++) {
        cfg_edge_t *x = &g->edges[cnt[e[i][0]]++];
        x->from = (uint32_t)e[i][0] + 1;
        x->to = e[i][1] < 0 ? CFG_NONE : (uint32_t)e[i][1] + 1;
        x->kind = e[i][1] < 0 ? CFG_EDGE_RETURN : CFG_EDGE_JUMP;
    }
    /* Predecessors grouped by destination block. */
    memset(cnt, 0, (n + 2) * sizeof(uint32_t));
    for (uint32_t i = 0; i < ne; i++)
        if (g->edges[i].to != CFG_NONE)
            cnt[g->edges[i].to]++;
    for (uint32_t b = 1; b <= n; b++) {
        g->blocks[b].npred = cnt[b];
        cnt[b] += cnt[b - 1];
        g->blocks[b].pred = cnt[b - 1];
    }
    for (uint32_t i = 0; i < ne; i++)
        if (g->edges[i].to != CFG_NONE)
            g->preds[cnt[g->edges[i].to - 1]++] = i;
    free(cnt);
    g->blocks[0].start = 0x100;
    g->blocks[0].end = 0x110;
    g->blocks[0].succ = ne;
    g->procs[0]
        = (cfg_proc_t) { .name = "dummy", .block = 0, .nblocks = 1, .parent = CFG_NONE };
    g->procs[1] = (cfg_proc_t) { .name = "f",
        .entry = 0x1000,
        .block = 1,
        .nblocks = n,
        .parent = CFG_NONE,
        .flags = CFG_PROC_IRREDUCIBLE,
        .nloops = 99 };
    g->prog.procs = g->procs;
    g->prog.nprocs = 2;
    g->prog.blocks = g->blocks;
    g->prog.nblocks = n + 1;
    g->prog.edges = g->edges;
    g->prog.nedges = ne;
    g->prog.preds = g->preds;
}

static void
lp_free(lp_graph_t *g)
{
    free(g->blocks);
    free(g->edges);
    free(g->preds);
}

/* The local immediate dominator of local block B, or -1. */
static int
lp_idom(const lp_graph_t *g, uint32_t b)
{
    uint32_t d = g->blocks[b + 1].idom;
    return d == CFG_NONE ? -1 : (int)d - 1;
}

/* Check idom, depth and head of every block against the arrays. */
static void
lp_expect(
    const lp_graph_t *g, const int *idom, const int *depth, const int *head, uint32_t n)
{
    for (uint32_t b = 0; b < n; b++) {
        ck_assert_msg(lp_idom(g, b) == idom[b], "idom of %u: %d, want %d", b,
            lp_idom(g, b), idom[b]);
        ck_assert_msg(g->blocks[b + 1].loop_depth == depth[b], "depth of %u: %d, want %d",
            b, g->blocks[b + 1].loop_depth, depth[b]);
        ck_assert_msg(g->blocks[b + 1].is_loop_head == head[b], "head of %u: %d, want %d",
            b, g->blocks[b + 1].is_loop_head, head[b]);
    }
}

#define LP_RUN(g, edges, n)                                                              \
    do {                                                                                 \
        lp_build(&(g), (n), (edges), NELEM(edges));                                      \
        ck_assert_int_eq(cfg_loops_proc(&(g).prog, &(g).procs[1]), 0);                   \
    } while (0)

/*****************************************************************************
 * Loops: tests
 */

START_TEST(test_cfg_loops_straight_line)
{
    static const int e[][2] = { { 0, 1 }, { 1, 2 }, { 2, -1 } };
    static const int idom[] = { -1, 0, 1 }, depth[] = { 0, 0, 0 }, head[] = { 0, 0, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 3);
    lp_expect(&g, idom, depth, head, 3);
    ck_assert_uint_eq(g.procs[1].nloops, 0);
    ck_assert_uint_eq(g.procs[1].flags & CFG_PROC_IRREDUCIBLE, 0);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_diamond)
{
    static const int e[][2] = { { 0, 1 }, { 0, 2 }, { 1, 3 }, { 2, 3 }, { 3, -1 } };
    static const int idom[] = { -1, 0, 0, 0 }, depth[] = { 0, 0, 0, 0 },
                     head[] = { 0, 0, 0, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 4);
    lp_expect(&g, idom, depth, head, 4);
    ck_assert_uint_eq(g.procs[1].nloops, 0);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_single_loop)
{
    static const int e[][2] = { { 0, 1 }, { 1, 2 }, { 2, 1 }, { 2, 3 }, { 3, -1 } };
    static const int idom[] = { -1, 0, 1, 2 }, depth[] = { 0, 1, 1, 0 },
                     head[] = { 0, 1, 0, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 4);
    lp_expect(&g, idom, depth, head, 4);
    ck_assert_uint_eq(g.procs[1].nloops, 1);
    ck_assert_uint_eq(g.procs[1].flags & CFG_PROC_IRREDUCIBLE, 0);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_self_loop)
{
    static const int e[][2] = { { 0, 1 }, { 1, 1 }, { 1, 2 } };
    static const int idom[] = { -1, 0, 1 }, depth[] = { 0, 1, 0 }, head[] = { 0, 1, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 3);
    lp_expect(&g, idom, depth, head, 3);
    ck_assert_uint_eq(g.procs[1].nloops, 1);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_nested)
{
    /* 1..4 is the outer loop, 2..3 the inner one. */
    static const int e[][2] = { { 0, 1 }, { 1, 2 }, { 2, 3 }, { 3, 2 }, { 3, 4 },
        { 4, 1 }, { 4, 5 }, { 5, -1 } };
    static const int idom[] = { -1, 0, 1, 2, 3, 4 }, depth[] = { 0, 1, 2, 2, 1, 0 },
                     head[] = { 0, 1, 1, 0, 0, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 6);
    lp_expect(&g, idom, depth, head, 6);
    ck_assert_uint_eq(g.procs[1].nloops, 2);
    ck_assert_uint_eq(g.procs[1].flags & CFG_PROC_IRREDUCIBLE, 0);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_two_back_edges_one_header)
{
    /* continue (2 -> 1) and the loop end (3 -> 1): one loop. */
    static const int e[][2]
        = { { 0, 1 }, { 1, 2 }, { 1, 4 }, { 2, 1 }, { 2, 3 }, { 3, 1 }, { 4, -1 } };
    static const int idom[] = { -1, 0, 1, 2, 1 }, depth[] = { 0, 1, 1, 1, 0 },
                     head[] = { 0, 1, 0, 0, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 5);
    lp_expect(&g, idom, depth, head, 5);
    ck_assert_uint_eq(g.procs[1].nloops, 1);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_irreducible)
{
    /* 1 and 2 are both entered from 0: the cycle has no header that dominates it. */
    static const int e[][2]
        = { { 0, 1 }, { 0, 2 }, { 1, 2 }, { 2, 1 }, { 1, 3 }, { 3, -1 } };
    static const int idom[] = { -1, 0, 0, 1 }, depth[] = { 0, 0, 0, 0 },
                     head[] = { 0, 0, 0, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 4);
    lp_expect(&g, idom, depth, head, 4);
    ck_assert_uint_eq(g.procs[1].nloops, 0);
    ck_assert_uint_ne(g.procs[1].flags & CFG_PROC_IRREDUCIBLE, 0);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_irreducible_inside_loop)
{
    /* A natural loop 1..4 whose body holds the irreducible cycle 2 <-> 3. */
    static const int e[][2] = { { 0, 1 }, { 1, 2 }, { 1, 3 }, { 2, 3 }, { 3, 2 },
        { 3, 4 }, { 4, 1 }, { 4, 5 } };
    static const int idom[] = { -1, 0, 1, 1, 3, 4 }, depth[] = { 0, 1, 1, 1, 1, 0 },
                     head[] = { 0, 1, 0, 0, 0, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 6);
    lp_expect(&g, idom, depth, head, 6);
    ck_assert_uint_eq(g.procs[1].nloops, 1);
    ck_assert_uint_ne(g.procs[1].flags & CFG_PROC_IRREDUCIBLE, 0);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_unreachable_blocks)
{
    /* 2 is unreachable and jumps into the loop; 3 is an isolated self loop. */
    static const int e[][2] = { { 0, 1 }, { 1, 1 }, { 1, 4 }, { 2, 1 }, { 3, 3 } };
    static const int idom[] = { -1, 0, -1, -1, 1 }, depth[] = { 0, 1, 0, 0, 0 },
                     head[] = { 0, 1, 0, 0, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 5);
    lp_expect(&g, idom, depth, head, 5);
    ck_assert_uint_eq(g.procs[1].nloops, 1);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_entry_is_header)
{
    /* The entry block heads a loop; block 1 is earlier in address order elsewhere. */
    static const int e[][2] = { { 0, 1 }, { 1, 0 }, { 1, -1 } };
    static const int idom[] = { -1, 0 }, depth[] = { 1, 1 }, head[] = { 1, 0 };
    lp_graph_t g;

    LP_RUN(g, e, 2);
    lp_expect(&g, idom, depth, head, 2);
    ck_assert_uint_eq(g.procs[1].nloops, 1);
    lp_free(&g);
}
END_TEST

START_TEST(test_cfg_loops_bad_args)
{
    static const int e[][2] = { { 0, -1 } };
    lp_graph_t g;

    lp_build(&g, 1, e, 1);
    ck_assert_int_eq(cfg_loops_proc(NULL, &g.procs[1]), QP_EINVAL);
    ck_assert_int_eq(cfg_loops_proc(&g.prog, NULL), QP_EINVAL);
    g.procs[1].nblocks = 5;
    ck_assert_int_eq(cfg_loops_proc(&g.prog, &g.procs[1]), QP_EINVAL);
    g.procs[1].nblocks = 0;
    ck_assert_int_eq(cfg_loops_proc(&g.prog, &g.procs[1]), 0);
    ck_assert_uint_eq(g.procs[1].nloops, 0);
    lp_free(&g);
}
END_TEST

/*
 * The reference: dominator sets by the textbook fixpoint, natural loops by a backward
 * walk per back edge, reducibility as "the graph without its back edges is acyclic".
 */
#define RN 40

typedef struct lp_ref {
    uint64_t dom[RN]; /* bit d of dom[b] set: d dominates b */
    int reach[RN];    /* b is reachable from the entry */
    int idom[RN];     /* immediate dominator, -1 for the entry or unreachable */
    int depth[RN];    /* loops containing b */
    int head[RN];     /* b heads a loop */
    int nloops;       /* loop headers */
    int irreducible;  /* not reducible */
} lp_ref_t;

static void
lp_reference(int n, const int (*e)[2], int ne, lp_ref_t *r)
{
    memset(r, 0, sizeof(*r));
    r->reach[0] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < ne; i++)
            if (e[i][1] >= 0 && r->reach[e[i][0]] && !r->reach[e[i][1]])
                r->reach[e[i][1]] = changed = 1;
    }
    uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
    for (int b = 0; b < n; b++)
        r->dom[b] = b == 0 ? 1 : all;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int b = 1; b < n; b++) {
            if (!r->reach[b])
                continue;
            uint64_t d = all;
            for (int i = 0; i < ne; i++)
                if (e[i][1] == b && r->reach[e[i][0]])
                    d &= r->dom[e[i][0]];
            d |= 1ull << b;
            if (d != r->dom[b]) {
                r->dom[b] = d;
                changed = 1;
            }
        }
    }
    for (int b = 0; b < n; b++) {
        r->idom[b] = -1;
        if (b == 0 || !r->reach[b])
            continue;
        /* The strict dominator dominated by every other strict dominator. */
        uint64_t s = r->dom[b] & ~(1ull << b);
        for (int d = 0; d < n; d++)
            if ((s >> d & 1) && (r->dom[d] & s) == s)
                r->idom[b] = d;
    }
    /* Natural loops. */
    uint64_t body[RN] = { 0 };
    for (int i = 0; i < ne; i++) {
        int u = e[i][0], v = e[i][1];
        if (v < 0 || !r->reach[u] || !(r->dom[u] >> v & 1))
            continue;
        uint64_t b = (1ull << v) | (1ull << u);
        int stack[RN], sp = 0;
        if (u != v)
            stack[sp++] = u;
        while (sp > 0) {
            int y = stack[--sp];
            for (int k = 0; k < ne; k++)
                if (e[k][1] == y && r->reach[e[k][0]] && !(b >> e[k][0] & 1)) {
                    b |= 1ull << e[k][0];
                    stack[sp++] = e[k][0];
                }
        }
        body[v] |= b;
        r->head[v] = 1;
    }
    for (int h = 0; h < n; h++) {
        r->nloops += r->head[h];
        for (int b = 0; b < n; b++)
            r->depth[b] += r->head[h] && (body[h] >> b & 1);
    }
    /* Reducible iff the reachable graph without back edges is acyclic (Kahn). */
    int indeg[RN] = { 0 }, queue[RN], qh = 0, qt = 0, seen = 0, nreach = 0;
    for (int i = 0; i < ne; i++) {
        int u = e[i][0], v = e[i][1];
        if (v >= 0 && r->reach[u] && !(r->dom[u] >> v & 1))
            indeg[v]++;
    }
    for (int b = 0; b < n; b++) {
        nreach += r->reach[b];
        if (r->reach[b] && indeg[b] == 0)
            queue[qt++] = b;
    }
    while (qh < qt) {
        int u = queue[qh++];
        seen++;
        for (int i = 0; i < ne; i++)
            if (e[i][0] == u && e[i][1] >= 0 && !(r->dom[u] >> e[i][1] & 1)
                && --indeg[e[i][1]] == 0)
                queue[qt++] = e[i][1];
    }
    r->irreducible = seen != nreach;
}

START_TEST(test_cfg_loops_random_vs_reference)
{
    unsigned seed = 12345u + (unsigned)_i * 7919u;
    int e[4 * RN][2];
    lp_graph_t g;
    lp_ref_t r;

    for (int iter = 0; iter < 200; iter++) {
        seed = seed * 1103515245u + 12345u;
        int n = 1 + (int)((seed >> 16) % RN);
        int ne = 0;
        for (int b = 0; b < n; b++) {
            seed = seed * 1103515245u + 12345u;
            int k = (int)((seed >> 16) % 4);
            for (int j = 0; j < k && ne < 4 * RN; j++) {
                seed = seed * 1103515245u + 12345u;
                int to = (int)((seed >> 16) % (unsigned)(n + 1)) - 1;
                /* Mostly forward, to get loops and not only chaos. */
                seed = seed * 1103515245u + 12345u;
                if (to >= 0 && to < b && (seed >> 16) % 3 != 0)
                    to = b + 1 < n ? b + 1 : -1;
                e[ne][0] = b;
                e[ne++][1] = to;
            }
        }
        lp_reference(n, (const int(*)[2])e, ne, &r);
        lp_build(&g, (uint32_t)n, (const int(*)[2])e, (uint32_t)ne);
        ck_assert_int_eq(cfg_loops_proc(&g.prog, &g.procs[1]), 0);
        lp_expect(&g, r.idom, r.depth, r.head, (uint32_t)n);
        ck_assert_uint_eq(g.procs[1].nloops, (unsigned)r.nloops);
        ck_assert_int_eq(!!(g.procs[1].flags & CFG_PROC_IRREDUCIBLE), r.irreducible);
        lp_free(&g);
    }
}
END_TEST

START_TEST(test_cfg_loops_large_is_fast)
{
    /*
     * 183002 blocks: 3000 nests of 30 loops in a row (30 headers, one body block, 30
     * latches each). A quadratic algorithm would not finish before the timeout.
     */
    enum { NEST = 30, CHAINS = 3000, PER = 2 * NEST + 1 };
    uint32_t n = 1 + CHAINS * PER + 1;
    int(*e)[2] = malloc((size_t)n * 3 * sizeof(*e));
    uint32_t ne = 0;
    lp_graph_t g;

    ck_assert_ptr_nonnull(e);
    for (uint32_t c = 0; c < CHAINS; c++) {
        int base = 1 + (int)(c * PER);
        int prev = base - 1;
        /* Headers h_i = base + i, then the innermost body, then latches in reverse. */
        for (int i = 0; i < NEST; i++) {
            e[ne][0] = prev;
            e[ne++][1] = base + i;
            prev = base + i;
        }
        int body = base + NEST;
        e[ne][0] = prev;
        e[ne++][1] = body;
        prev = body;
        for (int i = NEST - 1; i >= 0; i--) {
            int latch = base + NEST + 1 + (NEST - 1 - i);
            e[ne][0] = prev;
            e[ne++][1] = latch;
            e[ne][0] = latch;
            e[ne++][1] = base + i;
            prev = latch;
        }
    }
    e[ne][0] = (int)(n - 2);
    e[ne++][1] = (int)(n - 1);
    lp_build(&g, n, (const int(*)[2])e, ne);
    ck_assert_int_eq(cfg_loops_proc(&g.prog, &g.procs[1]), 0);
    ck_assert_uint_eq(g.procs[1].nloops, NEST * CHAINS);
    ck_assert_uint_eq(g.blocks[1 + 1 + NEST].loop_depth, NEST); /* innermost body */
    ck_assert_uint_eq(g.blocks[1 + 1].loop_depth, 1);           /* outermost header */
    ck_assert_uint_eq(g.blocks[1 + 1 + NEST + 1].loop_depth, NEST);
    ck_assert_uint_eq(g.blocks[n].loop_depth, 0);
    lp_free(&g);
    free(e);
}
END_TEST

/*****************************************************************************
 * Discovery: the procedures' lookup index
 */

/*
 * The procedures' entries (b->entry, which cfg_discover_find searches) follow the
 * procedures a round adds (cfg_discover_add_new) and a gap sweep merges
 * (cfg_discover_sweep_end), and the pool's procedures are ordered by them; every
 * address finds the procedure a search of the procedures themselves finds.
 */
static void
check_find_index(const cfg_builder_t *b, const cfg_find_index_t *fx)
{
    (void)fx;
    ck_assert_uint_eq(b->entry.n, b->procs.n);
    for (size_t i = 0; i < b->procs.n; i++) {
        ck_assert_uint_eq(b->entry.v[i], cfg_bproc_at(b, i)->p.entry);
        ck_assert(i == 0 || b->entry.v[i - 1] < b->entry.v[i]);
    }
    for (uint64_t a = VMA - 1; a <= VMA + 0x100; a++) {
        uint32_t want = CFG_NONE;
        for (size_t i = 0; i < b->procs.n; i++)
            if (a >= cfg_bproc_at(b, i)->p.entry && a < cfg_bproc_at(b, i)->p.end)
                want = (uint32_t)i;
        ck_assert_uint_eq(cfg_discover_find(b, a), want);
    }
}

/* Every procedure's extent in B is what cfg_discover_extents would set now. */
static void
check_extents_current(cfg_builder_t *b)
{
    uint64_t ends[8];
    ck_assert_uint_le(b->procs.n, NELEM(ends));
    for (size_t i = 0; i < b->procs.n; i++)
        ends[i] = cfg_bproc_at(b, i)->p.end;
    cfg_discover_extents(b);
    for (size_t i = 0; i < b->procs.n; i++)
        ck_assert_uint_eq(cfg_bproc_at(b, i)->p.end, ends[i]);
}

/* cfg_procs_drop's question: the procedures at 0x1008 and 0x1080. */
static int
drop_1008_1080(void *arg, const cfg_bproc_t *bp)
{
    (void)arg;
    return bp->p.entry == 0x1008 || bp->p.entry == 0x1080;
}

START_TEST(test_cfg_find_index_follows_adds)
{
    uint8_t code[0x100];
    memset(code, 0xc3, sizeof code); /* ret, ret, ... */
    cfg_image_t *img;
    ck_assert_int_eq(cfg_image_from_bytes(code, sizeof code, VMA, &img), 0);
    cfg_builder_t b;
    memset(&b, 0, sizeof(b));
    cfg_find_index_t fx = { 0 };
    b.find = &fx;
    b.img = img;
    b.nscratch = 1;
    ck_assert_int_eq(cfg_discover(&b), 0);
    cfg_discover_freeze(&b, 1);
    cfg_discover_freeze(&b, 0);
    check_find_index(&b, &fx);
    static const uint64_t round[] = { 0x1080, 0x1010, 0x10f0 };
    for (size_t k = 0; k < NELEM(round); k++) {
        ck_assert_int_eq(CFG_VEC_PUSH(b.new_entries, round[k]), 0);
        ck_assert_int_eq(CFG_VEC_PUSH(b.new_srcs, (uint32_t)CFG_SRC_CALL), 0);
    }
    ck_assert_int_eq(cfg_discover_add_new(&b), (int)NELEM(round));
    check_find_index(&b, &fx);
    /* A sweep (and a round) moves no procedure, only ids in b->procs: 0x1008 goes
     * before all but the first, which an array of procedures would move up. */
    size_t nbefore = b.procs.n;
    const cfg_bproc_t *before[8];
    uint64_t before_entry[8];
    ck_assert_uint_le(nbefore, NELEM(before));
    for (size_t i = 0; i < nbefore; i++) {
        before[i] = cfg_bproc_at(&b, i);
        before_entry[i] = before[i]->p.entry;
    }
    ck_assert_int_eq(cfg_discover_sweep_begin(&b), 0);
    static const uint64_t sweep[] = { 0x1040, 0x1008 };
    for (size_t k = 0; k < NELEM(sweep); k++) {
        ck_assert_int_eq(CFG_VEC_PUSH(b.new_entries, sweep[k]), 0);
        ck_assert_int_eq(CFG_VEC_PUSH(b.new_srcs, (uint32_t)CFG_SRC_GAP), 0);
        ck_assert_int_eq(cfg_discover_add_new(&b), 1);
    }
    ck_assert_int_eq(cfg_discover_sweep_end(&b), 0);
    ck_assert_uint_eq(b.procs.n, 1 + NELEM(round) + NELEM(sweep));
    check_find_index(&b, &fx);
    for (size_t k = 0; k < nbefore; k++) {
        size_t i = 0;
        while (i < b.procs.n && b.entry.v[i] != before_entry[k])
            i++;
        ck_assert_uint_lt(i, b.procs.n);
        ck_assert_ptr_eq(cfg_bproc_at(&b, i), before[k]);
    }
    /* The sweep's end set only the extents its procedures changed: all of them as
     * recomputed from scratch. */
    check_extents_current(&b);
    /* So does a drop, of the procedures it leaves out: the others keep their slots. */
    const cfg_bproc_t *kept = cfg_bproc_at(&b, b.procs.n - 1);
    ck_assert_int_eq(cfg_procs_drop(&b, drop_1008_1080, NULL), 2);
    ck_assert_uint_eq(b.procs.n, NELEM(round) + NELEM(sweep) - 1);
    ck_assert_ptr_eq(cfg_bproc_at(&b, b.procs.n - 1), kept);
    ck_assert_uint_eq(cfg_bproc_at(&b, 0)->p.end, 0x1010);
    check_find_index(&b, &fx);
    check_extents_current(&b);
    cfg_bpool_free(&b);
    for (size_t i = 0; i < b.strings.n; i++)
        free(b.strings.v[i]);
    CFG_VEC_FREE(b.strings);
    CFG_VEC_FREE(b.new_entries);
    CFG_VEC_FREE(b.new_srcs);
    CFG_VEC_FREE(b.unbuilt);
    CFG_VEC_FREE(b.nr_dirty);
    CFG_VEC_FREE(b.addr_taken);
    CFG_VEC_FREE(b.landing_pads);
    free(fx.buckets.at);
    cfg_image_destroy(img);
}
END_TEST

/*****************************************************************************
 * The suite
 */

/* .eh_frame_hdr's search table: pairs (FDE, start) by FDE; other shapes are no table. */
START_TEST(test_cfg_ehhdr_table)
{
    /* version 1, eh_frame_ptr pcrel sdata4, count udata4, table datarel sdata4 */
    uint8_t h[12 + 3 * 8] = { 1, 0x1b, 0x03, 0x3b, 0, 0, 0, 0, 3, 0, 0, 0 };
    const int32_t ent[6] = { 0x100, 0x900, 0x200, 0x800, 0x300, 0x700 }; /* loc, fde */
    memcpy(h + 12, ent, sizeof(ent));
    uint64_t *v = NULL;
    size_t n = 0;
    ck_assert_int_eq(cfg_ehhdr_table(h, sizeof(h), 0x1000, &v, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(v[0], 0x1700); /* sorted by FDE */
    ck_assert_uint_eq(v[1], 0x1300);
    ck_assert_uint_eq(v[4], 0x1900);
    ck_assert_uint_eq(v[5], 0x1100);
    free(v);
    /* A count past the section: malformed. */
    h[8] = 4;
    ck_assert_int_eq(cfg_ehhdr_table(h, sizeof(h), 0x1000, &v, &n), QP_EFORMAT);
    ck_assert_ptr_null(v);
    /* Another table encoding: libgcc searches .eh_frame itself, no table. */
    h[8] = 3;
    h[3] = 0x03;
    ck_assert_int_eq(cfg_ehhdr_table(h, sizeof(h), 0x1000, &v, &n), 0);
    ck_assert_ptr_null(v);
    ck_assert_uint_eq(n, 0);
}
END_TEST

/*****************************************************************************
 * The noreturn fixpoint (cfg_noreturn.c): kept up to date from one analysis to the
 * next, against the same analysis made from scratch, on random call graphs
 */

#define NR_SLOTS 64       /* procedures at NR_SLOT(k): room to add some */
#define NR_SPACING 0x100  /* between two slots */
#define NR_SLOT(k) (0x1000 + NR_SPACING * (uint64_t)(k))
#define NR_EXTENT 0x300   /* the longest extent: over the next slots while empty */
#define NR_OUT 0x90000    /* an address in no procedure */
#define NR_ROUNDS 100     /* analyses a seed */

static uint32_t
nr_rand(uint32_t *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 16;
}

/* Somewhere a call or a jump may go: a procedure's entry (or a slot's, maybe empty),
 * the inside of one, or no procedure. */
static uint64_t
nr_rand_target(uint32_t *seed)
{
    uint32_t r = nr_rand(seed) % 16;
    uint64_t slot = NR_SLOT(nr_rand(seed) % NR_SLOTS);
    return r == 0 ? NR_OUT : r == 1 ? slot + 0x20 : slot;
}

/* New random blocks and edges for BP (as a build would make them). */
static void
nr_rand_body(cfg_builder_t *b, cfg_bproc_t *bp, uint32_t *seed)
{
    uint32_t nb = 1 + nr_rand(seed) % 6;
    bp->blocks.n = bp->edges.n = 0;
    for (uint32_t k = 0; k < nb; k++) {
        cfg_block_t bl = { 0 };
        bl.start = bp->p.entry + 0x10 * (uint64_t)k;
        bl.end = bl.start + 0x10;
        bl.succ = (uint32_t)bp->edges.n;
        uint32_t r = nr_rand(seed) % 8;
        cfg_edge_t e = { k, k + 1, 0, CFG_EDGE_FALL };
        if (k + 1 == nb) { /* the last: leaves, or loops */
            e.to = CFG_NONE;
            e.kind = r < 3 ? CFG_EDGE_RETURN
                : r < 5    ? CFG_EDGE_TAILCALL
                : r == 5   ? CFG_EDGE_UNRESOLVED
                           : CFG_EDGE_NORETURN;
            if (e.kind == CFG_EDGE_TAILCALL)
                e.target = nr_rand(seed) % 8 == 0 ? 0 : nr_rand_target(seed);
            if (r == 7) {
                e.kind = CFG_EDGE_JUMP;
                e.to = nr_rand(seed) % nb;
            }
        } else if (r < 4) {
            e.kind = CFG_EDGE_CALLRET;
            bl.call_target = nr_rand_target(seed);
        } else if (r == 4) {
            cfg_edge_t t = { k, nr_rand(seed) % nb, 0, CFG_EDGE_TAKEN };
            ck_assert_int_eq(CFG_VEC_PUSH(bp->edges, t), 0);
        }
        ck_assert_int_eq(CFG_VEC_PUSH(bp->edges, e), 0);
        bl.nsucc = (uint32_t)bp->edges.n - bl.succ;
        ck_assert_int_eq(CFG_VEC_PUSH(bp->blocks, bl), 0);
    }
    bp->entry_block = 0;
    bp->blocks_ver = cfg_blocks_changed(b);
    ck_assert_int_eq(cfg_note_noret_sites(bp), 0);
}

/* BP was built again, or its extent or fragment mark changed (what the builder notes). */
static void
nr_dirty(cfg_builder_t *b, cfg_bproc_t *bp)
{
    bp->nr_dirty = 1;
    ck_assert_int_eq(CFG_VEC_PUSH(b->nr_dirty, bp->p.entry), 0);
}

/* Extents from the entries (each to the next one, or NR_EXTENT); a changed one noted
 * (calls into it may now go to a neighbour, or the other way), a new one too. The
 * number of procedures whose extent changed, new ones aside. */
static size_t
nr_extents(cfg_builder_t *b)
{
    size_t changed = 0;
    b->gen++;
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *bp = cfg_bproc_at(b, i);
        uint64_t end = i + 1 < b->procs.n ? cfg_bproc_at(b, i + 1)->p.entry
                                          : bp->p.entry + NR_EXTENT;
        if (end > bp->p.entry + NR_EXTENT)
            end = bp->p.entry + NR_EXTENT;
        if (end != bp->p.end) {
            changed += bp->p.end != 0;
            nr_dirty(b, bp);
        }
        bp->p.start = bp->p.entry;
        bp->p.end = end;
    }
    return changed;
}

/* A procedure at SLOT, unless there is one: 1 if added. */
static int
nr_add_proc(cfg_builder_t *b, uint32_t slot, uint32_t *seed)
{
    uint64_t entry = NR_SLOT(slot);
    size_t at = 0;
    while (at < b->procs.n && cfg_bproc_at(b, at)->p.entry < entry)
        at++;
    if (at < b->procs.n && cfg_bproc_at(b, at)->p.entry == entry)
        return 0;
    cfg_bproc_t bp;
    memset(&bp, 0, sizeof(bp));
    bp.p.entry = bp.p.start = entry;
    bp.p.parent = CFG_NONE;
    if (nr_rand(seed) % 12 == 0) { /* exit() and the like */
        bp.p.flags |= CFG_PROC_NORETURN;
        bp.name_noreturn = 1;
    }
    nr_rand_body(b, &bp, seed);
    ck_assert_int_eq(cfg_procs_insert(b, at, &bp), 0);
    return 1;
}

static void
nr_free_proc(cfg_bproc_t *bp)
{
    CFG_VEC_FREE(bp->blocks);
    CFG_VEC_FREE(bp->edges);
    CFG_VEC_FREE(bp->noret_sites);
}

/* Remove a random procedure of B (it has more than 2): the slot it was at. */
static uint32_t
nr_remove_proc(cfg_builder_t *b, uint32_t *seed)
{
    size_t at = nr_rand(seed) % b->procs.n;
    uint32_t slot = (uint32_t)((cfg_bproc_at(b, at)->p.entry - NR_SLOT(0)) / NR_SPACING);
    nr_free_proc(cfg_bproc_at(b, at));
    size_t after = b->procs.n - 1 - at;
    memmove(&b->procs.v[at], &b->procs.v[at + 1], after * sizeof(uint32_t));
    memmove(&b->entry.v[at], &b->entry.v[at + 1], after * sizeof(uint64_t));
    b->procs.n--;
    b->entry.n--;
    return slot;
}

/* A procedure added at a random empty slot other than EXCEPT, if there is one: 1 if
 * added. (At EXCEPT's entry it would be one built again, which the builder notes.) */
static int
nr_add_elsewhere(cfg_builder_t *b, uint32_t except, uint32_t *seed)
{
    uint32_t first = nr_rand(seed) % NR_SLOTS;
    for (uint32_t k = 0; k < NR_SLOTS; k++) {
        uint32_t slot = (first + k) % NR_SLOTS;
        if (slot != except && nr_add_proc(b, slot, seed))
            return 1;
    }
    return 0;
}

/* A copy of B's procedures in C, for an analysis from scratch. */
static void
nr_copy(const cfg_builder_t *b, cfg_builder_t *c)
{
    memset(c, 0, sizeof(*c));
    c->gen = b->gen;
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t bp = *cfg_bproc_at(b, i);
        memset(&bp.blocks, 0, sizeof(bp.blocks));
        memset(&bp.edges, 0, sizeof(bp.edges));
        memset(&bp.noret_sites, 0, sizeof(bp.noret_sites));
        for (size_t k = 0; k < cfg_bproc_at(b, i)->blocks.n; k++)
            ck_assert_int_eq(CFG_VEC_PUSH(bp.blocks, cfg_bproc_at(b, i)->blocks.v[k]), 0);
        for (size_t k = 0; k < cfg_bproc_at(b, i)->edges.n; k++)
            ck_assert_int_eq(CFG_VEC_PUSH(bp.edges, cfg_bproc_at(b, i)->edges.v[k]), 0);
        bp.nr_dirty = 0;
        ck_assert_int_eq(cfg_procs_insert(c, c->procs.n, &bp), 0);
    }
}

static void
nr_builder_free(cfg_builder_t *b)
{
    cfg_bpool_free(b);
    CFG_VEC_FREE(b->nr_dirty);
    cfg_nr_deps_free(b->nr);
}

/* The procedure of B whose extent holds ADDR (EXACT: whose entry is ADDR), or -1. */
static long
nr_ref_find(const cfg_builder_t *b, uint64_t addr, int exact)
{
    for (size_t i = 0; i < b->procs.n; i++) {
        const cfg_proc_t *p = &cfg_bproc_at(b, i)->p;
        if (exact ? p->entry == addr : (addr >= p->entry && addr < p->end))
            return (long)i;
    }
    return -1;
}

/* May procedure I of B return, by MR (the others' "may return")? The reference: every
 * path from the entry, by a plain search. */
static int
nr_ref_may_return(const cfg_builder_t *b, size_t i, const uint8_t *mr)
{
    const cfg_bproc_t *bp = cfg_bproc_at(b, i);
    if (bp->blocks.n == 0 || (bp->p.flags & CFG_PROC_RESUMED))
        return 1;
    uint8_t seen[16] = { 0 };
    uint32_t stack[16], sp = 0;
    ck_assert_uint_le(bp->blocks.n, 16);
    stack[sp++] = bp->entry_block;
    seen[bp->entry_block] = 1;
    while (sp > 0) {
        const cfg_block_t *bl = &bp->blocks.v[stack[--sp]];
        for (uint32_t k = 0; k < bl->nsucc; k++) {
            const cfg_edge_t *e = &bp->edges.v[bl->succ + k];
            long c;
            if (e->kind == CFG_EDGE_RETURN || e->kind == CFG_EDGE_UNRESOLVED)
                return 1;
            if (e->kind == CFG_EDGE_NORETURN)
                continue;
            if (e->kind == CFG_EDGE_TAILCALL) {
                c = e->target ? nr_ref_find(b, e->target, 0) : -1;
                if (c < 0 || mr[c])
                    return 1;
                continue;
            }
            if (e->kind == CFG_EDGE_CALLRET && bl->call_target
                && (c = nr_ref_find(b, bl->call_target, 1)) >= 0 && !mr[c])
                continue;
            if (e->to != CFG_NONE && !seen[e->to]) {
                seen[e->to] = 1;
                stack[sp++] = e->to;
            }
        }
    }
    return 0;
}

/* B's marks are the least fixpoint of "may return", computed plainly, and no call to
 * a procedure marked is left with its return edge. */
static void
nr_ref_check(const cfg_builder_t *b, int round)
{
    uint8_t mr[NR_SLOTS] = { 0 };
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < b->procs.n; i++)
            if (!mr[i] && !cfg_bproc_at(b, i)->name_noreturn
                && !(cfg_bproc_at(b, i)->p.flags & CFG_PROC_FRAGMENT)
                && nr_ref_may_return(b, i, mr))
                mr[i] = changed = 1;
    }
    for (size_t i = 0; i < b->procs.n; i++) {
        const cfg_bproc_t *bp = cfg_bproc_at(b, i);
        int marked = !mr[i] && !(bp->p.flags & CFG_PROC_FRAGMENT);
        ck_assert_msg(!!(bp->p.flags & CFG_PROC_NORETURN) == marked,
            "round %d: procedure at %#llx: mark %d, the reference's %d", round,
            (unsigned long long)bp->p.entry, !!(bp->p.flags & CFG_PROC_NORETURN), marked);
    }
    for (size_t i = 0; i < b->procs.n; i++) {
        const cfg_bproc_t *bp = cfg_bproc_at(b, i);
        for (size_t k = 0; k < bp->edges.n; k++) {
            const cfg_edge_t *e = &bp->edges.v[k];
            long c = e->kind == CFG_EDGE_CALLRET
                ? nr_ref_find(b, bp->blocks.v[e->from].call_target, 1)
                : -1;
            ck_assert_msg(c < 0 || !(cfg_bproc_at(b, c)->p.flags & CFG_PROC_NORETURN),
                "round %d: procedure at %#llx: its call of %#llx returns", round,
                (unsigned long long)bp->p.entry,
                (unsigned long long)bp->blocks.v[e->from].call_target);
        }
    }
}

START_TEST(test_cfg_noreturn_incremental_vs_scratch)
{
    uint32_t seed = 4242u + (uint32_t)_i * 7919u;
    cfg_builder_t b;
    cfg_u64_vec_t noret = { 0 }, noret2 = { 0 };
    size_t seen_noret = 0, seen_cut = 0, seen_extents = 0;
    memset(&b, 0, sizeof(b));
    for (uint32_t s = 0; s < NR_SLOTS; s++)
        if (nr_rand(&seed) % 3 != 0)
            nr_add_proc(&b, s, &seed);
    nr_extents(&b);
    for (int round = 0; round < NR_ROUNDS; round++) {
        if (round > 0) {
            /* What happens between two analyses: procedures built again, added, removed,
             * one replaced by another (as many as before, other entries); then extents
             * change; procedures tied as fragments or untied. */
            uint32_t r = nr_rand(&seed) % 5;
            if (r == 0)
                nr_add_proc(&b, nr_rand(&seed) % NR_SLOTS, &seed);
            else if (r == 1 && b.procs.n > 2)
                nr_remove_proc(&b, &seed);
            else if (r == 2 && b.procs.n > 2)
                nr_add_elsewhere(&b, nr_remove_proc(&b, &seed), &seed);
            if (r <= 2)
                seen_extents += nr_extents(&b);
            for (uint32_t k = nr_rand(&seed) % 5; k > 0; k--) {
                cfg_bproc_t *bp = cfg_bproc_at(&b, nr_rand(&seed) % b.procs.n);
                if (nr_rand(&seed) % 4 == 0)
                    bp->p.flags ^= CFG_PROC_FRAGMENT;
                else
                    nr_rand_body(&b, bp, &seed);
                nr_dirty(&b, bp);
            }
        }
        cfg_builder_t c;
        nr_copy(&b, &c);
        ck_assert_int_eq(cfg_nr_noreturn_and_prune(&b, &noret), 0);
        ck_assert_int_eq(cfg_nr_noreturn_and_prune(&c, &noret2), 0);
        ck_assert_uint_eq(noret.n, noret2.n);
        for (size_t i = 0; i < noret.n; i++)
            ck_assert_uint_eq(noret.v[i], noret2.v[i]);
        for (size_t i = 0; i < b.procs.n; i++) {
            const cfg_bproc_t *x = cfg_bproc_at(&b, i), *y = cfg_bproc_at(&c, i);
            ck_assert_msg(x->p.flags == y->p.flags
                    && cfg_nr_may_return(&b, i) == cfg_nr_may_return(&c, i),
                "round %d: procedure at %#llx", round, (unsigned long long)x->p.entry);
            ck_assert_uint_eq(x->blocks.n, y->blocks.n);
            ck_assert_uint_eq(x->edges.n, y->edges.n);
            for (size_t k = 0; k < x->edges.n; k++)
                ck_assert_msg(x->edges.v[k].kind == y->edges.v[k].kind
                        && x->edges.v[k].to == y->edges.v[k].to,
                    "round %d: procedure at %#llx, edge %zu", round,
                    (unsigned long long)x->p.entry, k);
        }
        nr_ref_check(&c, round);
        nr_builder_free(&c);
        seen_noret += noret.n;
        for (size_t i = 0; i < b.procs.n; i++)
            seen_cut += cfg_bproc_at(&b, i)->noret_sites.n;
    }
    /* Not a vacuous test: in some rounds some never returned, some calls were cut, and
     * extents changed as procedures came and went. */
    ck_assert_uint_gt(seen_noret, 0);
    ck_assert_uint_gt(seen_cut, 0);
    ck_assert_uint_gt(seen_extents, 0);
    CFG_VEC_FREE(noret);
    CFG_VEC_FREE(noret2);
    nr_builder_free(&b);
}
END_TEST

/* Every file mapped at once is known to the SIGBUS handler: a whole process's libraries
 * (qp report keeps each module's image mapped), more than the first table's 16. */
START_TEST(test_cfg_mapped_many)
{
    enum { N = 200, LEN = 64 };
    static char maps[N * LEN];
    char path[32];
    for (int i = 0; i < N; i++) {
        snprintf(path, sizeof(path), "lib%d.so", i);
        cfg_mapped_add(maps + i * LEN, LEN, path);
    }
    for (int i = 0; i < N; i++) {
        snprintf(path, sizeof(path), "lib%d.so", i);
        const char *at = cfg_mapped_at(maps + i * LEN + LEN - 1);
        ck_assert_msg(at != NULL && strcmp(at, path) == 0, "mapping %d unknown", i);
    }
    for (int i = 0; i < N; i++)
        cfg_mapped_remove(maps + i * LEN);
    ck_assert_ptr_null(cfg_mapped_at(maps));
    ck_assert_ptr_null(cfg_mapped_at(maps + (N - 1) * LEN));
}
END_TEST

/* A write whose modification time was set back (touch -d) still changes the file's
 * state: its change time moved. */
START_TEST(test_cfg_file_same_ctime)
{
    struct stat a;
    memset(&a, 0, sizeof(a));
    a.st_dev = 1;
    a.st_ino = 2;
    a.st_size = 3;
    a.st_mtim.tv_sec = 4;
    a.st_ctim.tv_sec = 5;
    struct stat b = a;
    ck_assert_int_eq(cfg_file_same(&a, &b), 1);
    b.st_ctim.tv_nsec = 1;
    ck_assert_int_eq(cfg_file_same(&a, &b), 0);
    b = a;
    b.st_mtim.tv_nsec = 1;
    ck_assert_int_eq(cfg_file_same(&a, &b), 0);
}
END_TEST

static Suite *
cfg_units_suite(void)
{
    Suite *s = suite_create("cfg_units");
    TCase *tc;

    tc = tcase_create("jtab");
    tcase_add_test(tc, test_cfg_jtab_abs_nonpic);
    tcase_add_test(tc, test_cfg_jtab_pic_gcc_o2);
    tcase_add_test(tc, test_cfg_jtab_pic_gcc_o0_stack_slot);
    tcase_add_test(tc, test_cfg_jtab_pic_clang_o0_sub_bound);
    tcase_add_test(tc, test_cfg_jtab_pic_clang_o2);
    tcase_add_test(tc, test_cfg_jtab_scan_without_bound);
    tcase_add_test(tc, test_cfg_jtab_scan_stops_at_reloc);
    tcase_add_test(tc, test_cfg_jtab_byte_compare);
    tcase_add_test(tc, test_cfg_jtab_hoisted_base_needs_window);
    tcase_add_test(tc, test_cfg_jtab_rejects_entry_out_of_range);
    tcase_add_test(tc, test_cfg_jtab_rejects_entry_outside_proc);
    tcase_add_test(tc, test_cfg_jtab_rejects_absurd_bound);
    tcase_add_test(tc, test_cfg_jtab_jbe_taken_path);
    tcase_add_test(tc, test_cfg_jtab_guard_wrong_direction_scans);
    tcase_add_test(tc, test_cfg_jtab_path_starts_after_ret);
    tcase_add_test(tc, test_cfg_jtab_skipped_guard_scans);
    tcase_add_test(tc, test_cfg_jtab_guard_target_rejoins_scans);
    tcase_add_test(tc, test_cfg_jtab_call_clobbers);
    tcase_add_test(tc, test_cfg_jtab_pie_relative_relocs);
    tcase_add_test(tc, test_cfg_a64_held_misaligned);
    tcase_add_test(tc, test_cfg_a64_table_in_stack_slot);
    tcase_add_test(tc, test_cfg_jtab_not_a_table);
    tcase_add_test(tc, test_cfg_jtab_entry_unreadable);
    suite_add_tcase(s, tc);

    tc = tcase_create("loops");
    tcase_add_test(tc, test_cfg_loops_straight_line);
    tcase_add_test(tc, test_cfg_loops_diamond);
    tcase_add_test(tc, test_cfg_loops_single_loop);
    tcase_add_test(tc, test_cfg_loops_self_loop);
    tcase_add_test(tc, test_cfg_loops_nested);
    tcase_add_test(tc, test_cfg_loops_two_back_edges_one_header);
    tcase_add_test(tc, test_cfg_loops_irreducible);
    tcase_add_test(tc, test_cfg_loops_irreducible_inside_loop);
    tcase_add_test(tc, test_cfg_loops_unreachable_blocks);
    tcase_add_test(tc, test_cfg_loops_entry_is_header);
    tcase_add_test(tc, test_cfg_loops_bad_args);
    tcase_add_loop_test(tc, test_cfg_loops_random_vs_reference, 0, 10);
    tcase_add_test(tc, test_cfg_loops_large_is_fast);
    tcase_add_test(tc, test_cfg_ehhdr_table);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);

    tc = tcase_create("index");
    tcase_add_test(tc, test_cfg_find_index_follows_adds);
    suite_add_tcase(s, tc);

    tc = tcase_create("noreturn");
    tcase_add_loop_test(tc, test_cfg_noreturn_incremental_vs_scratch, 0, 20);
    suite_add_tcase(s, tc);

    tc = tcase_create("mapped");
    tcase_add_test(tc, test_cfg_mapped_many);
    tcase_add_test(tc, test_cfg_file_same_ctime);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cfg_units_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
