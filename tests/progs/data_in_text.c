/* Data inside .text, reached only by lea (as in BoringSSL's FIPS module after
 * delocate): the bytes decode as instructions, so analysis finds "procedures" there.
 * A rewrite must leave them intact: nothing vouches that they are code. */
#include <stdio.h>
#include <string.h>

__asm__(".text\n"
        ".p2align 4\n"
        "fmt_in_text: .asciz \"%02x %s\\n\"\n" /* 25 30 32 78 ...: and $imm,%eax; ... */
        ".p2align 4, 0x90\n"
        "table_in_text: .byte 0x55, 0x48, 0x89, 0xe5, 0xb8, 0x2a, 0, 0, 0, 0x5d, 0xc3\n"
        ".p2align 4, 0x90\n"
        "word_in_text: .asciz \"hello from .text\"\n"
        ".p2align 4, 0x90\n");

static const char *
addr_of_fmt(void)
{
    const char *p;
    __asm__("lea fmt_in_text(%%rip), %0" : "=r"(p));
    return p;
}

int
main(void)
{
    const unsigned char *t;
    const char *w;
    __asm__("lea table_in_text(%%rip), %0" : "=r"(t));
    __asm__("lea word_in_text(%%rip), %0" : "=r"(w));
    unsigned sum = 0;
    for (int i = 0; i < 11; i++)
        sum = sum * 31 + t[i];
    printf(addr_of_fmt(), sum & 0xff, w);
    printf("sum %u len %zu\n", sum, strlen(w));
    return 0;
}
