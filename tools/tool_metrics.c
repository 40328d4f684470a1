/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Metrics for the tools: reading the texts, printing the table (tools/tool_metrics.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/tool.h"
#include "tools/tool_metrics.h"

#define MAX_METRICS_FILE (1u << 20)

/* The contents of PATH (a regular file, at most 1 MiB), NUL-terminated; NULL (errno, or
 * WHY when it is not a regular file). */
static char *
slurp(const char *path, char *why, size_t whylen)
{
    FILE *f = tool_fopen_read(path, why, whylen); /* a FIFO is refused, not waited on */
    if (f == NULL)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || st.st_size > MAX_METRICS_FILE) {
        fclose(f);
        errno = EFBIG;
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    int bad = buf == NULL || ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        errno = buf ? EIO : ENOMEM;
        return NULL;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n) != NULL) {
        free(buf);
        errno = EINVAL;
        return NULL;
    }
    return buf;
}

int
tool_metrics_parse(const char *prog, const char *const *args, const char *order, size_t n,
                   qm_set_t **set)
{
    char why[2048];
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (order[i] == 'e')
            rc = qm_parse(args[i], "-e", 1, set, why, sizeof(why));
        else {
            why[0] = '\0';
            char *text = slurp(args[i], why, sizeof(why));
            if (text == NULL) {
                fprintf(stderr, "%s: --metrics %s: %s\n", prog, args[i],
                        why[0] ? why : errno == EINVAL ? "not a text file" : strerror(errno));
                return -1;
            }
            rc = qm_parse(text, args[i], 0, set, why, sizeof(why));
            free(text);
        }
        if (rc < 0) {
            fprintf(stderr, "%s: %s\n", prog, why);
            return -1;
        }
    }
    return 0;
}

void
tool_metrics_note(void *arg, const char *note)
{
    fprintf(stderr, "%s: note: %s\n", (const char *)arg, note);
}

static const char *
kind_name(int kind)
{
    return kind == QM_WALL ? "wall_ns" : kind == QM_CPU ? "cpu_ns" : kind == QM_SUM ? "sum"
           : kind == QM_MAX ? "max" : kind == QM_MIN ? "min" : kind == QM_AVG ? "avg" : "count";
}

/* A row's value as a number: a count's unsigned, an expression's signed. */
static void
value_text(char *buf, size_t len, const qm_row_t *r)
{
    if (QM_IS_VALUED(r->kind))
        snprintf(buf, len, "%lld", (long long)r->value);
    else
        snprintf(buf, len, "%llu", (unsigned long long)r->value);
}

void
tool_csv_field(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void
tool_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void
percent(char *buf, size_t len, double v)
{
    if (v < 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.2f%%", v);
}

int
tool_metrics_print_costs(FILE *f, const qm_set_t *set, const qm_cost_t *costs, size_t n,
                         int overall)
{
    if (n == 0)
        return 0;
    size_t w = 20;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(qm_name(set, costs[i].metric));
        w = l > w ? l : w;
    }
    w = w > 40 ? 40 : w;
    fprintf(f, "%-*s  %9s  %9s  %9s  %12s   (time added to the program's own)\n", (int)w + 2,
            "cost of", "predicted", "modelled", "measured", "calls/s");
    for (size_t i = 0; i < n; i++) {
        char p[32], o[32], m[32];
        percent(p, sizeof(p), costs[i].predicted);
        percent(o, sizeof(o), overall ? costs[i].overall : costs[i].observed);
        percent(m, sizeof(m), costs[i].slowdown);
        /* A longer name is printed whole (the columns move for its row only). */
        fprintf(f, "  %-*s  %9s  %9s  %9s  %12.0f\n", (int)w, qm_name(set, costs[i].metric),
                p, o, m, costs[i].calls_per_s);
    }
    return fflush(f) != 0 || ferror(f) ? -1 : 0;
}

int
tool_metrics_print(FILE *f, const qm_set_t *set, const qm_row_t *rows, size_t n, int kind)
{
    if (kind == TM_CSV) {
        fprintf(f, "metric,focus,kind,value,measured\n");
        for (size_t i = 0; i < n; i++) {
            tool_csv_field(f, qm_name(set, rows[i].metric));
            fputc(',', f);
            tool_csv_field(f, rows[i].focus);
            /* max, min, avg of no call: an empty value */
            char v[32];
            value_text(v, sizeof(v), &rows[i]);
            fprintf(f, ",%s,%s,%d\n", kind_name(rows[i].kind), rows[i].empty ? "" : v,
                    rows[i].measured);
        }
    } else if (kind == TM_JSON) {
        fprintf(f, "[");
        for (size_t i = 0; i < n; i++) {
            fprintf(f, "%s\n  {\"metric\": ", i ? "," : "");
            tool_json_string(f, qm_name(set, rows[i].metric));
            fprintf(f, ", \"focus\": ");
            tool_json_string(f, rows[i].focus);
            char v[32];
            value_text(v, sizeof(v), &rows[i]);
            fprintf(f, ", \"kind\": \"%s\", \"value\": %s, \"measured\": %s",
                    kind_name(rows[i].kind), rows[i].empty ? "null" : v,
                    rows[i].measured ? "true" : "false");
            if (rows[i].unit[0]) {
                fprintf(f, ", \"unit\": ");
                tool_json_string(f, rows[i].unit);
            }
            fprintf(f, "}");
        }
        fprintf(f, "\n]\n");
    } else {
        size_t w = 6;
        for (size_t i = 0; i < n; i++) {
            size_t l = strlen(qm_name(set, rows[i].metric));
            w = l > w ? l : w;
        }
        w = w > 40 ? 40 : w;
        fprintf(f, "%-*s  %16s  %s\n", (int)w, "metric", "value", "focus");
        for (size_t i = 0; i < n; i++) {
            char v[32];
            if (!rows[i].measured)
                snprintf(v, sizeof(v), "not measured");
            else if (rows[i].empty)
                snprintf(v, sizeof(v), "-");
            else if (rows[i].kind == QM_COUNT || QM_IS_VALUED(rows[i].kind)) {
                value_text(v, sizeof(v), &rows[i]);
                if (rows[i].unit[0]) {
                    size_t l = strlen(v);
                    snprintf(v + l, sizeof(v) - l, " %.15s", rows[i].unit);
                }
            } else
                snprintf(v, sizeof(v), "%.3f ms", (double)rows[i].value / 1e6);
            /* A longer name is printed whole (the columns move for its row only). */
            fprintf(f, "%-*s  %16s  %s\n", (int)w, qm_name(set, rows[i].metric), v,
                    rows[i].focus);
        }
    }
    return fflush(f) != 0 || ferror(f) ? -1 : 0;
}
