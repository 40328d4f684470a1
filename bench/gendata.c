/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT
 *
 * Deterministic text-like input for the bzip2 workload of bench/overhead.sh:
 * pseudo-words from a skewed vocabulary, numbers, punctuation, line breaks and a
 * sprinkling of random hex tokens, so the data is compressible (about 3:1 with
 * bzip2) but not trivially. The same bytes on every machine (xorshift64*, fixed seed).
 * Usage: gendata BYTES > FILE
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x9e3779b97f4a7c15ull;

static uint64_t
next(void)
{
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dull;
}

/* A uniform integer in [0, n). */
static unsigned
below(unsigned n)
{
    return (unsigned)((next() >> 33) % n);
}

#define NWORDS 6000

int
main(int argc, char **argv)
{
    static const char *syll[] = { "ka", "lo", "mi", "ne", "ru", "ta", "se", "vo", "pi",
        "da", "qu", "ex", "or", "an", "th", "is", "st", "ing", "er", "al", "con", "pre",
        "ble", "tion", "ment", "y", "o", "a", "i", "u" };
    static const char *punct[]
        = { ", ", ". ", "; ", ": ", " - ", "! ", "? ", " (", ") " };
    static char words[NWORDS][32];
    long long want, done = 0;
    int col = 0;
    char buf[64];

    if (argc != 2 || (want = atoll(argv[1])) <= 0) {
        fprintf(stderr, "usage: gendata BYTES\n");
        return 2;
    }
    for (int w = 0; w < NWORDS; w++) {
        int n = 1 + (int)below(4);
        words[w][0] = 0;
        for (int s = 0; s < n; s++)
            strcat(words[w], syll[below(sizeof syll / sizeof *syll)]);
    }
    while (done < want) {
        unsigned r = below(1000);
        int len;
        if (r < 820) {
            /* Zipf-like: small indices are much more frequent. */
            double u = (double)(next() >> 11) / 9007199254740992.0;
            unsigned w = (unsigned)(NWORDS * u * u * u);
            len = snprintf(buf, sizeof buf, "%s ", words[w % NWORDS]);
        } else if (r < 900) {
            len = snprintf(buf, sizeof buf, "%u ", below(r < 860 ? 100 : 1000000));
        } else if (r < 980) {
            len = snprintf(
                buf, sizeof buf, "%s", punct[below(sizeof punct / sizeof *punct)]);
        } else {
            len = snprintf(buf, sizeof buf, "0x%08x ", (unsigned)(next() >> 32));
        }
        col += len;
        if (col > 72) {
            buf[len++] = '\n';
            col = 0;
        }
        if (done + len > want)
            len = (int)(want - done);
        fwrite(buf, 1, (size_t)len, stdout);
        done += len;
    }
    return ferror(stdout) ? 1 : 0;
}
