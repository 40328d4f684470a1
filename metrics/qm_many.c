/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The same metrics in several processes at once (the ranks of a parallel job): a child
 * process per target runs qm_live_run on it (each tracer its own process: ptrace and
 * wait stay per target), and sends its report back through a pipe. The parent reads
 * the pipes as they fill, waits for the children, and passes a stop on to them; a parent
 * that dies (SIGKILL) stops them too (PR_SET_PDEATHSIG), so no target is left measured.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metrics/qm_priv.h"

/* What a child sends: messages, each a header and LEN bytes. */
enum { MSG_SAMPLE = 1, MSG_REPLY, MSG_PROMPT, MSG_REPORT };
typedef struct msg {
    int kind;                /* MSG_* */
    size_t len;              /* the bytes that follow */
} msg_t;

/* MSG_REPORT: this, then NROWS rows, then NHIST histograms (hist_t and its USED
 * words each; the end). MSG_SAMPLE: a double T (seconds since the
 * session's start), then rows. MSG_REPLY: an answer's text (with its NUL). MSG_PROMPT:
 * nothing (the session waits for the next command). */
typedef struct wire {
    int rc, ended, status;
    double secs, stop_ms;
    size_t nrows;
    size_t nhist;
    char why[1024];
} wire_t;

/* A metric's histogram as sent (USED 0: none). */
typedef struct hist_wire {
    double width;
    size_t used;
} hist_wire_t;

/* A child's end of the pipe, for its callbacks. */
typedef struct kid_out {
    int fd;
    int ok;                  /* every write so far went */
} kid_out_t;

/* Write A (N bytes) and B (M bytes) after a header of KIND to K's pipe. */
static void
send_msg(kid_out_t *k, int kind, const void *a, size_t n, const void *b, size_t m)
{
    msg_t h = { kind, n + m };
    const void *part[3] = { &h, a, b };
    size_t len[3] = { sizeof(h), n, m };
    for (int i = 0; i < 3 && k->ok; i++) {
        const char *p = part[i];
        size_t left = len[i];
        while (left > 0) {
            ssize_t w = write(k->fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                k->ok = 0;
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
}

/* qm_live_opts_t.on_sample in a child: the table, to the parent. */
static int
kid_sample(void *arg, const qm_set_t *set, const qm_row_t *rows, size_t n,
           const qm_cost_t *costs, size_t ncosts, double t)
{
    (void)set;
    (void)costs;
    (void)ncosts;
    send_msg(arg, MSG_SAMPLE, &t, sizeof(t), rows, n * sizeof(qm_row_t));
    return 0;
}

/* qm_live_opts_t.on_reply in a child: an answer (or the prompt's moment), to the parent. */
static void
kid_reply(void *arg, const char *line)
{
    if (line == NULL)
        send_msg(arg, MSG_PROMPT, NULL, 0, NULL, 0);
    else
        send_msg(arg, MSG_REPLY, line, strlen(line) + 1, NULL, 0);
}

long
qm_rank_of(int pid)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK=", "PMI_RANK=", "PMIX_RANK=",
                                        "SLURM_PROCID=" };
    char path[64], *buf = malloc(1 << 20);
    snprintf(path, sizeof(path), "/proc/%d/environ", pid);
    FILE *f = buf ? fopen(path, "r") : NULL;
    size_t n = f ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    long rank = -1;
    for (size_t v = 0; buf != NULL && rank < 0 && v < sizeof(vars) / sizeof(vars[0]); v++)
        for (size_t i = 0; i < n && rank < 0; i += strlen(buf + i) + 1) {
            buf[n] = '\0';
            size_t len = strlen(vars[v]);
            if (strncmp(buf + i, vars[v], len) == 0) {
                char *end;
                long r = strtol(buf + i + len, &end, 10);
                if (end != buf + i + len && *end == '\0' && r >= 0)
                    rank = r;
            }
        }
    free(buf);
    return rank;
}

static void
child(qm_set_t *set, const qm_live_opts_t *o, int pid, int fd, int cmd_fd, pid_t parent)
{
    /* A parent killed (even by SIGKILL) ends this session the clean way: SIGINT, which
     * the caller's handler turns into *o->stop, as it does for the parent. */
    prctl(PR_SET_PDEATHSIG, SIGINT);
    if (getppid() != parent)
        _exit(1); /* it died before that: take nothing in */
    /* Its samples and answers go to the parent, which shows them all together; its
     * commands come from the parent, which reads them once for every process. */
    kid_out_t out = { fd, 1 };
    qm_live_opts_t mine = *o;
    mine.pid = pid;
    mine.argv = NULL;
    mine.on_sample = o->interval > 0 || o->commands ? kid_sample : NULL;
    mine.commands_fd = cmd_fd;
    mine.on_reply = kid_reply;
    mine.arg = &out; /* (on_ready: the caller's, from the child) */
    mine.keep_numbers = 1;
    qm_live_report_t rep;
    wire_t w;
    memset(&w, 0, sizeof(w));
    w.rc = qm_live_run(set, &mine, &rep, w.why, sizeof(w.why));
    w.ended = rep.ended;
    w.status = rep.status;
    w.secs = rep.secs;
    w.stop_ms = rep.stop_ms;
    w.nrows = rep.rows ? rep.nrows : 0;
    w.nhist = rep.nhist;
    /* The histograms after the rows, in one message. */
    size_t hlen = 0;
    for (size_t i = 0; i < rep.nhist; i++)
        hlen += sizeof(hist_wire_t) + 8 * qpt_hist_used(rep.hist[i]);
    char *tail = malloc(w.nrows * sizeof(qm_row_t) + hlen + 1);
    if (tail == NULL) {
        w.nhist = 0;
        hlen = 0;
    }
    size_t at = 0;
    if (tail != NULL && w.nrows > 0) {
        memcpy(tail, rep.rows, w.nrows * sizeof(qm_row_t));
        at = w.nrows * sizeof(qm_row_t);
    }
    for (size_t i = 0; tail != NULL && i < rep.nhist; i++) {
        hist_wire_t hw = { qpt_hist_width(rep.hist[i]), qpt_hist_used(rep.hist[i]) };
        memcpy(tail + at, &hw, sizeof(hw));
        at += sizeof(hw);
        for (size_t b = 0; b < hw.used; b++, at += 8) {
            uint64_t v = qpt_hist_get(rep.hist[i], 0, b);
            memcpy(tail + at, &v, 8);
        }
    }
    send_msg(&out, MSG_REPORT, &w, sizeof(w), tail != NULL ? tail : (const char *)rep.rows,
             tail != NULL ? at : w.nrows * sizeof(qm_row_t));
    free(tail);
    qm_live_report_free(&rep);
    _exit(out.ok ? 0 : 1);
}

/* The parent's view of the children. */
typedef struct many {
    qm_set_t *set;           /* with the metrics commands add (the rows' names) */
    const qm_live_opts_t *o;
    size_t n;
    qm_many_report_t *rep;
    pid_t *kids;
    int *fds;                /* the children's messages (-1: at its end) */
    int *cmd;                /* their commands (-1: closed) */
    char **buf;              /* what came and is not taken yet */
    size_t *got, *cap;
    int *done;               /* its report came */
    int *fresh;              /* a sample came since the last table */
    int *prompted;           /* waits for the next command */
    double t;                /* the latest sample's time */
    char line[8192];         /* a command being read */
    size_t nline;
    uint64_t **hist_v;       /* per metric: the job's histogram (the processes' summed) */
    size_t *hist_n;          /* ... its buckets used */
    double *hist_w;          /* ... their width (0: none yet) */
    size_t nhist;
} many_t;

/* "rank R" or "pid P": how process I is named. */
static void
label_of(const many_t *m, size_t i, char *buf, size_t len)
{
    const qm_proc_report_t *p = &m->rep->v[i];
    if (p->rank >= 0)
        snprintf(buf, len, "rank %ld", p->rank);
    else
        snprintf(buf, len, "pid %d", p->pid);
}

/* A table when every process still measured has sent a sample since the last one. */
static void
maybe_table(many_t *m)
{
    size_t any = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (!m->done[i] && m->fds[i] >= 0 && !m->fresh[i])
            return;
        any += m->fresh[i];
    }
    if (any == 0 || m->o->on_many_sample == NULL)
        return;
    m->o->on_many_sample(m->o->arg, m->set, m->rep, m->t);
    for (size_t i = 0; i < m->n; i++)
        m->fresh[i] = 0;
}

/* The prompt's moment once every process still measured waits for a command. */
static void
maybe_prompt(many_t *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (!m->done[i] && m->fds[i] >= 0 && !m->prompted[i])
            return;
    for (size_t i = 0; i < m->n; i++)
        m->prompted[i] = 0;
    if (m->o->on_reply != NULL)
        m->o->on_reply(m->o->arg, NULL);
}

/* Rows (K bytes at P) as process I's, replacing what it had. */
static void
take_rows(many_t *m, size_t i, const char *p, size_t k)
{
    qm_proc_report_t *r = &m->rep->v[i];
    size_t n = k / sizeof(qm_row_t);
    qm_row_t *v = malloc((n + 1) * sizeof(qm_row_t));
    if (v == NULL)
        return;
    memcpy(v, p, n * sizeof(qm_row_t));
    free(r->rows);
    r->rows = v;
    r->nrows = n;
}

/* The job's histograms: room for NHIST metrics. 0, or -1. */
static int
grow_hists(many_t *m, size_t nhist)
{
    if (nhist <= m->nhist)
        return 0;
    uint64_t **v = realloc(m->hist_v, nhist * sizeof(uint64_t *));
    if (v == NULL)
        return -1;
    m->hist_v = v;
    size_t *n = realloc(m->hist_n, nhist * sizeof(size_t));
    if (n == NULL)
        return -1;
    m->hist_n = n;
    double *w = realloc(m->hist_w, nhist * sizeof(double));
    if (w == NULL)
        return -1;
    m->hist_w = w;
    for (size_t k = m->nhist; k < nhist; k++) {
        m->hist_v[k] = NULL;
        m->hist_n[k] = 0;
        m->hist_w[k] = 0;
    }
    m->nhist = nhist;
    return 0;
}

/*
 * A child's histograms (W's NHIST, LEN bytes at P) added to the job's, bucket by bucket,
 * at the wider of the two widths (both start at the same width and fold by doubling:
 * the narrower's buckets are summed into the wider's). The children started within a
 * few ms of each other: their buckets' starts differ by that much.
 */
static void
take_hists(many_t *m, const wire_t *w, const char *p, size_t len)
{
    if (grow_hists(m, w->nhist) < 0)
        return;
    size_t at = 0;
    for (size_t k = 0; k < w->nhist; k++) {
        hist_wire_t hw;
        if (len - at < sizeof(hw))
            return;
        memcpy(&hw, p + at, sizeof(hw));
        at += sizeof(hw);
        if (len - at < 8 * hw.used)
            return;
        const char *vals = p + at;
        at += 8 * hw.used;
        if (hw.used == 0 || hw.width <= 0)
            continue;
        uint64_t *jv = m->hist_v[k];
        while (m->hist_w[k] > 0 && m->hist_w[k] < hw.width * 0.999) {
            for (size_t b = 0; b < m->hist_n[k]; b += 2)
                jv[b / 2] = jv[b] + (b + 1 < m->hist_n[k] ? jv[b + 1] : 0);
            m->hist_n[k] = (m->hist_n[k] + 1) / 2;
            m->hist_w[k] *= 2;
        }
        if (m->hist_w[k] <= 0)
            m->hist_w[k] = hw.width;
        size_t f = 1; /* the child's buckets per the job's */
        while (hw.width * (double)f < m->hist_w[k] * 0.999)
            f *= 2;
        size_t need = (hw.used + f - 1) / f;
        if (need > m->hist_n[k]) {
            if ((jv = realloc(m->hist_v[k], need * sizeof(uint64_t))) == NULL)
                continue;
            memset(jv + m->hist_n[k], 0, (need - m->hist_n[k]) * sizeof(uint64_t));
            m->hist_v[k] = jv;
            m->hist_n[k] = need;
        }
        for (size_t b = 0; b < hw.used; b++) {
            uint64_t v;
            memcpy(&v, vals + 8 * b, 8);
            jv[b / f] += v;
        }
    }
}

/* The job's histograms as qpt_hist_t's into REP (each replayed bucket by bucket). */
static void
job_hists(many_t *m, qm_many_report_t *rep)
{
    if (m->nhist == 0 || (rep->hist = calloc(m->nhist, sizeof(qpt_hist_t *))) == NULL)
        return;
    rep->nhist = m->nhist;
    for (size_t k = 0; k < m->nhist; k++) {
        size_t nb = m->hist_n[k] < 2 ? 2 : m->hist_n[k] + m->hist_n[k] % 2;
        if (m->hist_n[k] == 0 || qpt_hist_create(1, nb, m->hist_w[k], 0, &rep->hist[k]) < 0)
            continue;
        uint64_t total = 0;
        for (size_t b = 0; b < m->hist_n[k]; b++) {
            total += m->hist_v[k][b];
            qpt_hist_add(rep->hist[k], ((double)b + 0.5) * m->hist_w[k], &total);
        }
    }
}

/* The complete messages child I sent, taken. */
static void
take_messages(many_t *m, size_t i)
{
    size_t at = 0;
    msg_t h;
    while (m->got[i] - at >= sizeof(h)) {
        memcpy(&h, m->buf[i] + at, sizeof(h));
        if (m->got[i] - at - sizeof(h) < h.len)
            break;
        const char *p = m->buf[i] + at + sizeof(h);
        char label[48], text[2200];
        if (h.kind == MSG_SAMPLE && h.len >= sizeof(double)) {
            memcpy(&m->t, p, sizeof(double));
            take_rows(m, i, p + sizeof(double), h.len - sizeof(double));
            m->fresh[i] = 1;
            maybe_table(m);
        } else if (h.kind == MSG_REPLY && h.len > 0 && m->o->on_reply != NULL) {
            label_of(m, i, label, sizeof(label));
            snprintf(text, sizeof(text), "%s: %.*s", label, (int)h.len - 1, p);
            m->o->on_reply(m->o->arg, text);
        } else if (h.kind == MSG_PROMPT) {
            m->prompted[i] = 1;
            maybe_prompt(m);
        } else if (h.kind == MSG_REPORT && h.len >= sizeof(wire_t)) {
            wire_t w;
            qm_proc_report_t *r = &m->rep->v[i];
            memcpy(&w, p, sizeof(w));
            r->rc = w.rc;
            r->ended = w.ended;
            r->status = w.status;
            r->secs = w.secs;
            r->stop_ms = w.stop_ms;
            snprintf(r->why, sizeof(r->why), "%s", w.why);
            free(r->rows);
            r->rows = NULL;
            r->nrows = 0;
            if (w.nrows > 0 && h.len >= sizeof(w) + w.nrows * sizeof(qm_row_t))
                take_rows(m, i, p + sizeof(w), w.nrows * sizeof(qm_row_t));
            if (h.len >= sizeof(w) + w.nrows * sizeof(qm_row_t))
                take_hists(m, &w, p + sizeof(w) + w.nrows * sizeof(qm_row_t),
                           h.len - sizeof(w) - w.nrows * sizeof(qm_row_t));
            m->done[i] = 1;
        }
        at += sizeof(h) + h.len;
    }
    memmove(m->buf[i], m->buf[i] + at, m->got[i] - at);
    m->got[i] -= at;
}

/*
 * A command line (LEN bytes at LINE): an `add` is parsed here first, into the set that
 * names the rows: one with an error is answered here once (with its caret) and goes to
 * no process (1: it goes to every one).
 */
static int
parsed_here(many_t *m, const char *line, size_t len)
{
    char text[8192], why[2048];
    snprintf(text, sizeof(text), "%.*s", (int)len, line);
    text[strcspn(text, "\n")] = '\0';
    const char *p = text + strspn(text, " \t");
    if (strncmp(p, "add", 3) != 0 || (p[3] != ' ' && p[3] != '\t'))
        return 1;
    p += 3 + strspn(p + 3, " \t");
    if (*p == '\0' || qm_parse(p, "add", 1, &m->set, why, sizeof(why)) == 0)
        return 1;
    for (const char *w = why; *w != '\0' && m->o->on_reply != NULL;) {
        size_t k = strcspn(w, "\n");
        snprintf(text, sizeof(text), "%.*s", (int)k, w);
        m->o->on_reply(m->o->arg, text);
        w += k + (w[k] == '\n');
    }
    if (m->o->on_reply != NULL)
        m->o->on_reply(m->o->arg, NULL);
    return 0;
}

/* Commands: what the input has, each complete line to every process still measured;
 * at the input's end, their command pipes closed (the end of each session's input). */
static void
forward_commands(many_t *m)
{
    ssize_t k = read(m->o->commands_fd, m->line + m->nline, sizeof(m->line) - 1 - m->nline);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    int eof = k <= 0;
    m->nline += k > 0 ? (size_t)k : 0;
    size_t upto = 0;
    for (size_t j = 0; j < m->nline; j++)
        if (m->line[j] == '\n')
            upto = j + 1;
    if (eof || m->nline == sizeof(m->line) - 1)
        upto = m->nline; /* a last line without its newline: as it is */
    for (size_t at = 0, len; at < upto; at += len) {
        len = strcspn(m->line + at, "\n");
        len += at + len < upto ? 1 : 0;
        if (!parsed_here(m, m->line + at, len))
            continue;
        for (size_t i = 0; i < m->n; i++) {
            if (m->cmd[i] < 0 || m->done[i])
                continue;
            if (send(m->cmd[i], m->line + at, len, MSG_NOSIGNAL) != (ssize_t)len
                || (m->line[at + len - 1] != '\n'
                    && send(m->cmd[i], "\n", 1, MSG_NOSIGNAL) != 1)) {
                close(m->cmd[i]);
                m->cmd[i] = -1;
            }
        }
    }
    memmove(m->line, m->line + upto, m->nline - upto);
    m->nline -= upto;
    for (size_t i = 0; eof && i < m->n; i++)
        if (m->cmd[i] >= 0) {
            close(m->cmd[i]);
            m->cmd[i] = -1;
        }
}

int
qm_live_run_many(qm_set_t *set, const qm_live_opts_t *o, const int *pids, size_t n,
                 qm_many_report_t *rep, char *why, size_t whylen)
{
    memset(rep, 0, sizeof(*rep));
    if (set == NULL || o == NULL || pids == NULL || n == 0)
        return QPT_EINVAL;
    many_t m = { 0 };
    m.set = set;
    m.o = o;
    m.n = n;
    m.rep = rep;
    rep->v = calloc(n, sizeof(qm_proc_report_t));
    m.kids = calloc(n, sizeof(pid_t));
    m.fds = calloc(n, sizeof(int));
    m.cmd = calloc(n, sizeof(int));
    m.buf = calloc(n, sizeof(char *));
    m.got = calloc(n, sizeof(size_t));
    m.cap = calloc(n, sizeof(size_t));
    m.done = calloc(n, sizeof(int));
    m.fresh = calloc(n, sizeof(int));
    m.prompted = calloc(n, sizeof(int));
    int rc = 0;
    if (rep->v == NULL || m.kids == NULL || m.fds == NULL || m.cmd == NULL || m.buf == NULL
        || m.got == NULL || m.cap == NULL || m.done == NULL || m.fresh == NULL
        || m.prompted == NULL)
        rc = QPT_ENOMEM;
    rep->n = rc == 0 ? n : 0;
    pid_t parent = getpid();
    for (size_t i = 0; rc == 0 && i < n; i++)
        m.fds[i] = m.cmd[i] = -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rep->v[i].pid = pids[i];
        rep->v[i].rank = qm_rank_of(pids[i]);
        /* (The commands through a socket: a session that ended gives EPIPE, not a
         * SIGPIPE that would end the caller.) */
        int pf[2], cf[2] = { -1, -1 };
        if (pipe(pf) < 0
            || (o->commands && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cf) < 0)) {
            snprintf(why, whylen, "pipe: %s", strerror(errno));
            rc = QPT_EIO;
            break;
        }
        fflush(NULL);
        m.kids[i] = fork();
        if (m.kids[i] == 0) {
            close(pf[0]);
            if (cf[1] >= 0)
                close(cf[1]);
            for (size_t j = 0; j < i; j++) {
                close(m.fds[j]);
                if (m.cmd[j] >= 0)
                    close(m.cmd[j]);
            }
            child(set, o, pids[i], pf[1], cf[0], parent);
        }
        close(pf[1]);
        if (cf[0] >= 0)
            close(cf[0]);
        if (m.kids[i] < 0) {
            close(pf[0]);
            if (cf[1] >= 0)
                close(cf[1]);
            snprintf(why, whylen, "fork: %s", strerror(errno));
            rc = QPT_EIO;
            break;
        }
        m.fds[i] = pf[0];
        m.cmd[i] = cf[1];
    }
    /* Read every pipe to its end (a child blocks on a full one), and the commands; pass
     * a stop on. */
    size_t open = 0;
    for (size_t i = 0; i < rep->n; i++)
        open += m.fds[i] >= 0;
    int stopped = 0, input = o->commands && rc == 0;
    struct pollfd *pf = calloc(n + 1, sizeof(*pf));
    while (open > 0 && pf != NULL) {
        if (!stopped && o->stop != NULL && *o->stop) {
            stopped = 1;
            for (size_t i = 0; i < n; i++)
                if (m.kids[i] > 0)
                    kill(m.kids[i], SIGINT);
        }
        for (size_t i = 0; i < n; i++)
            pf[i] = (struct pollfd) { m.fds[i], POLLIN, 0 };
        pf[n] = (struct pollfd) { input ? o->commands_fd : -1, POLLIN, 0 };
        int r = poll(pf, (nfds_t)n + 1, 100);
        if (r > 0 && input && (pf[n].revents & (POLLIN | POLLHUP | POLLERR))) {
            forward_commands(&m);
            for (size_t i = 0, any = 0; i <= n; i++)
                if (i == n)
                    input = any;
                else
                    any |= m.cmd[i] >= 0;
        }
        for (size_t i = 0; r > 0 && i < n; i++) {
            if (m.fds[i] < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (m.got[i] == m.cap[i]) {
                size_t c = m.cap[i] ? 2 * m.cap[i] : 65536;
                char *b = realloc(m.buf[i], c);
                if (b == NULL) {
                    close(m.fds[i]);
                    m.fds[i] = -1;
                    open--;
                    continue;
                }
                m.buf[i] = b;
                m.cap[i] = c;
            }
            ssize_t k = read(m.fds[i], m.buf[i] + m.got[i], m.cap[i] - m.got[i]);
            if (k > 0) {
                m.got[i] += (size_t)k;
                take_messages(&m, i);
            } else if (k == 0 || errno != EINTR) {
                close(m.fds[i]);
                m.fds[i] = -1;
                open--;
                if (m.cmd[i] >= 0) { /* (its session is over: no more commands) */
                    close(m.cmd[i]);
                    m.cmd[i] = -1;
                }
                maybe_table(&m);
                maybe_prompt(&m);
            }
        }
    }
    free(pf);
    for (size_t i = 0; i < rep->n; i++) {
        int st;
        if (m.kids[i] > 0)
            while (waitpid(m.kids[i], &st, 0) < 0 && errno == EINTR)
                ;
        if (!m.done[i]) { /* (no report: what it sampled last is not its end) */
            free(rep->v[i].rows);
            rep->v[i].rows = NULL;
            rep->v[i].nrows = 0;
            rep->v[i].rc = QPT_EIO;
            snprintf(rep->v[i].why, sizeof(rep->v[i].why), "%d: its session ended without "
                     "a report", pids[i]);
        }
    }
    for (size_t i = 0; i < rep->n; i++) {
        free(m.buf[i]);
        if (m.fds[i] >= 0)
            close(m.fds[i]);
        if (m.cmd[i] >= 0)
            close(m.cmd[i]);
    }
    job_hists(&m, rep);
    for (size_t k = 0; k < m.nhist; k++)
        free(m.hist_v[k]);
    free(m.hist_v);
    free(m.hist_n);
    free(m.hist_w);
    free(m.kids);
    free(m.fds);
    free(m.cmd);
    free(m.buf);
    free(m.got);
    free(m.cap);
    free(m.done);
    free(m.fresh);
    free(m.prompted);
    if (rc < 0 && rep->n == 0) {
        free(rep->v);
        rep->v = NULL;
    }
    return rc;
}

void
qm_many_report_free(qm_many_report_t *rep)
{
    for (size_t i = 0; rep != NULL && i < rep->n; i++)
        free(rep->v[i].rows);
    for (size_t k = 0; rep != NULL && k < rep->nhist; k++)
        qpt_hist_destroy(rep->hist[k]);
    if (rep != NULL) {
        free(rep->hist);
        rep->hist = NULL;
        rep->nhist = 0;
        free(rep->v);
        rep->v = NULL;
        rep->n = 0;
    }
}
