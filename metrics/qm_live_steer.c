/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A live session steered while the process runs (qm_live_opts_t.commands): add, remove,
 * list, stacks, show, quit, help: read from qm_live_opts_t.commands_fd, answered
 * through on_reply.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/qm_priv.h"

/*****************************************************************************
 * Steering: commands while the process runs
 */

/* The answer to the add of metric I, in: waiting for its library, or in since a stop of
 * MS, said on the answer of metric FIRST (I itself, or one added with it before). */
static void
answer_added(qml_live_t *l, size_t i, double ms, size_t first)
{
    l->rep->added++;
    if (qm_state(l->set, i) == QM_WAITING) {
        qml_reply(
            l, "added #%zu %s (waiting for its library)", i + 1, qm_name(l->set, i));
        return;
    }
    qml_mark_placed(l, i);
    if (first == i)
        qml_reply(l, "added #%zu %s (stopped %.1f ms; predicted cost %.2f%%)", i + 1,
              qm_name(l->set, i), ms, qm_costs_predicted(l->costs, i));
    else
        qml_reply(l, "added #%zu %s (stopped with #%zu; predicted cost %.2f%%)", i + 1,
              qm_name(l->set, i), first + 1, qm_costs_predicted(l->costs, i));
}

static void
cmd_add(qml_live_t *l, const char *text)
{
    char why[2048] = "";
    size_t before = qm_count(l->set);
    int rc = qm_parse(text, "add", 1, &l->set, why, sizeof(why));
    if (rc < 0) {
        qml_reply_lines(l, why);
        return;
    }
    double ms;
    unsigned refused;
    rc = qml_place(l, before, 0, 1, &ms, &refused, why, sizeof(why));
    if (rc < 0 || refused > 0) {
        /* (Kept, out, when the numbers must stay those of the other processes.) */
        for (size_t i = before; l->o->keep_numbers && i < qm_count(l->set); i++)
            qm_set_off(l->set, i);
        qm_drop_parsed(l->set);
        if (rc < 0)
            qml_reply_lines(l, why);
        qml_reply(l, "nothing added");
        return;
    }
    answer_added(l, before, ms, before);
}

/*
 * Several adds read together (the search asks for a procedure's callees at once) go in
 * at one placement: one stop for their call counters and one for the metrics, not two
 * for each. They are answered in order, a line each, as one by one; the stop is said on
 * the first line (the others: "stopped with #N"). If the placement fails as a whole,
 * each is added alone again, for its own answer.
 */
static void
cmd_adds(qml_live_t *l, char **texts, size_t n)
{
    if (n == 1 || l->o->keep_numbers) {
        for (size_t k = 0; k < n; k++)
            cmd_add(l, texts[k]);
        return;
    }
    size_t before = qm_count(l->set), nbad = n;
    size_t *at = calloc(n, sizeof(size_t));   /* its metric, or SIZE_MAX */
    char **bad = calloc(n, sizeof(char *));    /* its parse error */
    int alone = at == NULL || bad == NULL;
    for (size_t k = 0; !alone && k < n; k++) {
        char why[2048] = "";
        size_t b = qm_count(l->set);
        if (qm_parse(texts[k], "add", 1, &l->set, why, sizeof(why)) < 0) {
            at[k] = SIZE_MAX;
            alone = (bad[k] = strdup(why)) == NULL;
        } else {
            at[k] = b;
            alone = qm_count(l->set) != b + 1;
        }
    }
    char why[2048] = "";
    double ms = 0;
    unsigned refused = 0;
    int rc = 0;
    if (!alone && qm_count(l->set) > before)
        rc = qml_place(l, before, 0, 1, &ms, &refused, why, sizeof(why));
    if (alone || rc < 0) {
        qm_drop_parsed(l->set);
        /* (One left waiting for its library by a failed placement: out, numbered.) */
        int each = alone || qm_count(l->set) == before;
        for (size_t i = before; i < qm_count(l->set); i++)
            qm_set_off(l->set, i);
        for (size_t k = 0; k < n; k++) {
            if (each)
                cmd_add(l, texts[k]);
            else {
                qml_reply_lines(l, why);
                qml_reply(l, "nothing added");
            }
        }
        n = 0;
    }
    size_t first = SIZE_MAX;
    for (size_t k = 0; k < n; k++) {
        if (at[k] == SIZE_MAX) {
            qml_reply_lines(l, bad[k]);
            qml_reply(l, "nothing added");
            continue;
        }
        size_t i = at[k];
        if (qm_state(l->set, i) == QM_PARSED) {
            qm_set_off(l->set, i); /* over the budget (said): its number stays taken */
            qml_reply(l, "nothing added");
            continue;
        }
        if (first == SIZE_MAX && qm_state(l->set, i) != QM_WAITING)
            first = i;
        answer_added(l, i, ms, first);
    }
    for (size_t k = 0; bad != NULL && k < nbad; k++)
        free(bad[k]);
    free(bad);
    free(at);
}

/* The metric named by ARG: "#N" (as list numbers them) or its name. */
static int
find_metric(qml_live_t *l, const char *arg, size_t *i)
{
    size_t n = qm_count(l->set);
    if (arg[0] == '#') {
        char *end;
        unsigned long k = strtoul(arg + 1, &end, 10);
        if (*end != '\0' || k == 0 || k > n)
            return -1;
        *i = k - 1;
        return 0;
    }
    for (size_t k = 0; k < n; k++)
        if (qm_state(l->set, k) == QM_ON && strcmp(qm_name(l->set, k), arg) == 0) {
            *i = k;
            return 0;
        }
    return -1;
}

static void
cmd_remove(qml_live_t *l, const char *arg)
{
    size_t i;
    if (find_metric(l, arg, &i) < 0 || qm_state(l->set, i) != QM_ON) {
        qml_reply(l, "remove: no metric '%s' in the program (see 'list')", arg);
        return;
    }
    char why[2048] = "";
    double ms;
    if (qml_steer(l, qml_set_up_remove, &i, &ms, why, sizeof(why)) < 0) {
        qml_reply_lines(l, why);
        return;
    }
    qm_release(l->set, l->s);
    qm_costs_release(l->costs, l->s);
    l->rep->removed++;
    qml_reply(l, "removed #%zu %s (stopped %.1f ms)", i + 1, qm_name(l->set, i), ms);
}

static int
set_up_removes(qml_live_t *l, void *arg, char *why, size_t whylen)
{
    const size_t *v = arg; /* v[0]: how many, then the metrics */
    for (size_t k = 1; k <= v[0]; k++)
        QM_CHECK(qml_set_up_remove(l, (void *)&v[k], why, whylen));
    return 0;
}

/* Removes read together, in one stop (the search refutes several tests at once). */
static void
cmd_removes(qml_live_t *l, char **args, size_t n)
{
    size_t *v = n > 1 ? calloc(n + 1, sizeof(size_t)) : NULL;
    for (size_t k = 0; v != NULL && k < n; k++) {
        size_t i;
        int twice = 0;
        for (size_t j = 1; j <= v[0]; j++)
            twice |= find_metric(l, args[k], &i) == 0 && v[j] == i;
        if (find_metric(l, args[k], &i) < 0 || qm_state(l->set, i) != QM_ON || twice) {
            free(v); /* (an error to answer in its place: one by one) */
            v = NULL;
        } else
            v[++v[0]] = i;
    }
    if (v == NULL) {
        for (size_t k = 0; k < n; k++)
            cmd_remove(l, args[k]);
        return;
    }
    char why[2048] = "";
    double ms;
    if (qml_steer(l, set_up_removes, v, &ms, why, sizeof(why)) < 0) {
        for (size_t k = 0; k < n; k++)
            qml_reply_lines(l, why);
        free(v);
        return;
    }
    qm_release(l->set, l->s);
    qm_costs_release(l->costs, l->s);
    for (size_t k = 1; k <= v[0]; k++) {
        l->rep->removed++;
        if (k == 1)
            qml_reply(l, "removed #%zu %s (stopped %.1f ms)", v[k] + 1,
                qm_name(l->set, v[k]), ms);
        else
            qml_reply(l, "removed #%zu %s (stopped with #%zu)", v[k] + 1,
                qm_name(l->set, v[k]), v[1] + 1);
    }
    free(v);
}

/* One thread's stack for cmd_stacks: a line of the executable's procedures on it,
 * innermost first ("?" for code elsewhere: libraries, trampolines). */
static int
stack_line(void *arg, int tid, uint64_t thread_ptr, const uint64_t *pcs, size_t n)
{
    (void)thread_ptr;
    qml_live_t *l = arg;
    char line[2000];
    size_t len = (size_t)snprintf(line, sizeof(line), "stack %d:", tid);
    for (size_t k = 0; k < n && len < sizeof(line) - 200; k++) {
        uint32_t p;
        const char *name = qpt_block_at(l->s, pcs[k], &p, NULL) == 0 ? qpt_proc_name(l->s, p)
                                                                     : NULL;
        len += (size_t)snprintf(line + len, sizeof(line) - len, " %s", name ? name : "?");
    }
    qml_reply(l, "%s", line);
    return 0;
}

/* Each thread's call stack now (the process stopped for it): the procedures of the
 * executable on it, innermost first; then "stacks end". The search takes the callees
 * on the stacks first. */
static void
cmd_stacks(qml_live_t *l)
{
    double t0 = qm_now();
    int rc = qpt_stop(l->s);
    if (rc == 0) {
        rc = qpt_thread_stacks(l->s, stack_line, l);
        int r2 = qpt_run(l->s);
        rc = rc < 0 ? rc : r2;
    }
    if (rc < 0)
        qml_reply(l, "stacks: %s", qpt_error(l->s));
    qml_reply(l, "stacks end (stopped %.1f ms)", (qm_now() - t0) * 1e3);
}

static void
cmd_list(qml_live_t *l)
{
    size_t n = qm_count(l->set), on = 0;
    for (size_t i = 0; i < n; i++)
        if (qm_state(l->set, i) != QM_PARSED) {
            qml_reply(l, "#%zu %s%s", i + 1, qm_name(l->set, i),
                  qm_state(l->set, i) == QM_OFF       ? "  (removed)"
                  : qm_state(l->set, i) == QM_WAITING ? "  (waiting: its library not loaded, "
                                                        "or not in this program)"
                                                      : "");
            on++;
        }
    if (on == 0)
        qml_reply(l, "no metric (add one: add count calls(PATTERN))");
}

static int
cmd_show(qml_live_t *l)
{
    char why[512];
    int enough = qml_sample(l, why, sizeof(why));
    if (enough < 0) {
        qml_reply(l, "show: %s", why);
        return 0;
    }
    return enough;
}

static void
command(qml_live_t *l, char *line)
{
    while (isspace((unsigned char)*line))
        line++;
    size_t len = strlen(line);
    while (len > 0 && isspace((unsigned char)line[len - 1]))
        line[--len] = '\0';
    char *arg = line + strcspn(line, " \t");
    if (*arg != '\0')
        *arg++ = '\0';
    while (isspace((unsigned char)*arg))
        arg++;
    if (line[0] == '\0' || line[0] == '#')
        return;
    if (strcmp(line, "add") == 0 && *arg != '\0')
        cmd_add(l, arg);
    else if (strcmp(line, "remove") == 0 && *arg != '\0')
        cmd_remove(l, arg);
    else if (strcmp(line, "list") == 0 && *arg == '\0')
        cmd_list(l);
    else if (strcmp(line, "stacks") == 0 && *arg == '\0')
        cmd_stacks(l);
    else if (strcmp(line, "show") == 0 && *arg == '\0')
        l->quit = cmd_show(l);
    else if ((strcmp(line, "quit") == 0 || strcmp(line, "exit") == 0) && *arg == '\0')
        l->quit = 1;
    else if (strcmp(line, "help") == 0) {
        qml_reply(l, "add METRIC      measure METRIC from now on (qpt-metrics(5)), e.g.");
        qml_reply(l, "                add count calls(malloc) inside(main)");
        qml_reply(
            l, "remove NAME|#N  take a metric out (its snippets leave the process)");
        qml_reply(l, "list            the metrics, numbered");
        qml_reply(l,
            "stacks          each thread's call stack: the program's procedures on it");
        qml_reply(l, "show            the table now");
        qml_reply(l, "quit            end the session (the final table, everything out)");
    } else
        qml_reply(l, "%s: unknown command, or its argument missing (try 'help')", line);
}

/* The first complete line of the command input into LINE (its newline gone, no spaces at
 * its start): 0 when there is none. */
static int
take_line(qml_live_t *l, char *line)
{
    char *nl = memchr(l->buf, '\n', l->nbuf);
    if (nl == NULL)
        return 0;
    *nl = '\0';
    size_t k = (size_t)(nl - l->buf) + 1;
    const char *p = l->buf;
    while (isspace((unsigned char)*p))
        p++;
    memmove(line, p, strlen(p) + 1);
    memmove(l->buf, l->buf + k, l->nbuf - k);
    l->nbuf -= k;
    return 1;
}

/* Is the next complete line of the input VERB's? */
static int
next_is(const qml_live_t *l, const char *verb)
{
    const char *nl = memchr(l->buf, '\n', l->nbuf), *p = l->buf;
    while (nl != NULL && p < nl && isspace((unsigned char)*p))
        p++;
    size_t len = strlen(verb);
    return nl != NULL && (size_t)(nl - p) > len && strncmp(p, verb, len) == 0;
}

/* TEXT without the spaces around it (in place). */
static char *
trimmed(char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    size_t len = strlen(text);
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        text[--len] = '\0';
    return text;
}

/* Read what the command input has (waiting at most SECS), and run the complete lines. */
void
qml_commands(qml_live_t *l, double secs)
{
    struct pollfd pfd = { l->o->commands_fd, POLLIN, 0 };
    int r = poll(&pfd, 1, (int)(secs * 1e3));
    if (r <= 0)
        return;
    ssize_t n = read(l->o->commands_fd, l->buf + l->nbuf, sizeof(l->buf) - 1 - l->nbuf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        l->eof = 1;
        if (l->nbuf > 0) { /* a last line without its newline */
            l->buf[l->nbuf] = '\0';
            l->nbuf = 0;
            command(l, l->buf);
        }
        return;
    }
    l->nbuf += (size_t)n;
    char line[sizeof(l->buf)];
    while (!l->quit && take_line(l, line)) {
        /* Adds (removes) that came together are done together: one stop for all. */
        const char *verb = strncmp(line, "add ", 4) == 0      ? "add "
                           : strncmp(line, "remove ", 7) == 0 ? "remove "
                                                              : NULL;
        if (verb == NULL) {
            command(l, line);
        } else {
            char *lines[64];
            size_t k = 0, len = strlen(verb);
            lines[k++] = strdup(line);
            while (k < 64 && next_is(l, verb) && take_line(l, line))
                lines[k++] = strdup(line);
            int ok = 1;
            for (size_t j = 0; j < k; j++)
                ok &= lines[j] != NULL && trimmed(lines[j] + len)[0] != '\0';
            if (!ok || k == 1) {
                for (size_t j = 0; j < k && !l->quit; j++)
                    if (lines[j] != NULL)
                        command(l, lines[j]);
            } else {
                char *args[64];
                for (size_t j = 0; j < k; j++)
                    args[j] = trimmed(lines[j] + len);
                if (verb[0] == 'a')
                    cmd_adds(l, args, k);
                else
                    cmd_removes(l, args, k);
            }
            for (size_t j = 0; j < k; j++)
                free(lines[j]);
        }
        if (!l->quit && l->o->on_reply != NULL)
            l->o->on_reply(l->o->arg, NULL);
    }
    if (l->nbuf == sizeof(l->buf) - 1) {
        qml_reply(l, "a command longer than %zu bytes: ignored", sizeof(l->buf) - 2);
        l->nbuf = 0;
    }
}

