/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The metric language (qpt-metrics(5)): a hand-written lexer and recursive-descent
 * parser. Every error names the origin, line and column, and shows the line with a caret.
 *
 *   file       := { 'metric' NAME '=' body ';' | 'list' NAME '=' '{' PATTERN {',' PATTERN} '}' ';'
 *                  | 'constraint' NAME '=' expr ';' }
 *   body       := kind { 'inside' '(' PATTERN ')' | 'where' expr
 *                      | 'per' ('procedure' | 'module' | 'call' 'site' | 'thread' | 'argN'
 *                               | 'value' '(' expr ')')
 *                      | 'total' | 'pre' | 'post' | 'prepend' | 'append' | 'unit' STRING }
 *   kind       := 'count' 'calls' '(' PATTERN ')' | 'time' ('wall' | 'cpu') '(' PATTERN ')'
 *               | ('sum' | 'max' | 'min' | 'avg') '(' expr ')' 'calls' '(' PATTERN ')'
 *   expr       := C's operators || && | ^ & == != < <= > >= << >> + - * / % ! - (unary),
 *                 * (unary: the 8-byte word at), E[I] (the word at E + 8 * I),
 *                 load1/2/4/8(E) (1, 2, 4, 8 bytes at E, zero-extended), over integers,
 *                 arg1..arg6, retval, constraints and the program's variables by name
 *
 * A PATTERN that is a list's name stands for the list's patterns (joined by '\n', which
 * no pattern holds); a name in an expression that is a constraint's stands for a copy of
 * its expression (positions and all: an error in it points at the definition).
 *
 * `#` starts a comment to the end of the line.
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/qm_priv.h"

typedef struct parser {
    const char *text, *origin;
    size_t pos;
    unsigned line, col;   /* of pos */
    char *why;
    size_t whylen;
    int failed;
    unsigned nest;        /* parentheses and unary operators being parsed */
    const qm_set_t *set;  /* its lists and constraints */
} parser_t;

/* The list or constraint NAME of SET, or NULL. */
static const qm_def_t *
find_def(const qm_set_t *set, const char *name, size_t len)
{
    for (size_t i = 0; set != NULL && i < set->ndefs; i++)
        if (strlen(set->defs[i].name) == len && strncmp(set->defs[i].name, name, len) == 0)
            return &set->defs[i];
    return NULL;
}

int
qm_error_at(const char *text, const char *origin, unsigned line, unsigned col, char *why,
            size_t whylen, const char *fmt, ...)
{
    if (why == NULL || whylen == 0)
        return QPT_EINVAL;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* The text of LINE. */
    const char *l = text;
    for (unsigned k = 1; k < line && *l; k++) {
        const char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : l + strlen(l);
    }
    size_t len = strcspn(l, "\n");
    if (len > 200)
        len = 200;
    char caret[256];
    unsigned c = col > 1 ? col - 1 : 0;
    if (c > 200)
        c = 200;
    for (unsigned k = 0; k < c; k++)
        caret[k] = k < len && l[k] == '\t' ? '\t' : ' ';
    caret[c] = '^';
    caret[c + 1] = '\0';
    snprintf(why, whylen, "%s:%u:%u: %s\n    %.*s\n    %s", origin, line, col, msg, (int)len,
             l, caret);
    return QPT_EINVAL;
}

/* The message at LINE:COL of the text being parsed (the first error only). */
static int
fail_at(parser_t *p, unsigned line, unsigned col, const char *fmt, ...)
{
    if (p->failed)
        return QPT_EINVAL;
    p->failed = 1;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return qm_error_at(p->text, p->origin, line, col, p->why, p->whylen, "%s", msg);
}

/*****************************************************************************
 * Lexing
 */

static int
peekc(const parser_t *p)
{
    return (unsigned char)p->text[p->pos];
}

static void
advance(parser_t *p)
{
    if (p->text[p->pos] == '\n') {
        p->line++;
        p->col = 1;
    } else
        p->col++;
    p->pos++;
}

static void
skip_space(parser_t *p)
{
    for (;;) {
        int c = peekc(p);
        if (c == '#')
            while (peekc(p) && peekc(p) != '\n')
                advance(p);
        else if (c && isspace(c))
            advance(p);
        else
            return;
    }
}

/* Is the next token the word W (an identifier, not a prefix of a longer one)? */
static int
at_word(parser_t *p, const char *w)
{
    skip_space(p);
    size_t n = strlen(w);
    return strncmp(p->text + p->pos, w, n) == 0
           && !(isalnum((unsigned char)p->text[p->pos + n]) || p->text[p->pos + n] == '_');
}

static int
accept_word(parser_t *p, const char *w)
{
    if (!at_word(p, w))
        return 0;
    for (size_t k = strlen(w); k > 0; k--)
        advance(p);
    return 1;
}

/* The next non-space character, as a token of its own. */
static int
accept_char(parser_t *p, int c)
{
    skip_space(p);
    if (peekc(p) != c)
        return 0;
    advance(p);
    return 1;
}

/* What is there, for messages: the next word or character. */
static const char *
what_is_here(parser_t *p, char *buf, size_t len)
{
    skip_space(p);
    int c = peekc(p);
    if (c == 0)
        return "the end";
    size_t n = 0;
    if (isalnum(c) || c == '_')
        while (n + 1 < len - 2 && (isalnum((unsigned char)p->text[p->pos + n])
                                   || p->text[p->pos + n] == '_'))
            n++;
    else
        n = 1;
    snprintf(buf, len, "'%.*s'", (int)n, p->text + p->pos);
    return buf;
}

static int
expect_char(parser_t *p, int c, const char *what)
{
    if (accept_char(p, c))
        return 0;
    char here[64];
    return fail_at(p, p->line, p->col, "expected %s, found %s", what,
                   what_is_here(p, here, sizeof(here)));
}

/* An identifier into a new string; NULL (after an error) when there is none. */
static char *
identifier(parser_t *p, const char *what)
{
    skip_space(p);
    int c = peekc(p);
    if (!(isalpha(c) || c == '_')) {
        char here[64];
        fail_at(p, p->line, p->col, "expected %s, found %s", what,
                what_is_here(p, here, sizeof(here)));
        return NULL;
    }
    size_t start = p->pos;
    while (isalnum(peekc(p)) || peekc(p) == '_')
        advance(p);
    return strndup(p->text + start, p->pos - start);
}

/* '(' PATTERN ')': the raw text between, trimmed; its position. The pattern may hold
 * balanced parentheses: a C++ signature, calls(geo::norm(int, int)). */
static char *
pattern(parser_t *p, unsigned *line, unsigned *col)
{
    if (expect_char(p, '(', "'('") < 0)
        return NULL;
    skip_space(p);
    *line = p->line;
    *col = p->col;
    size_t start = p->pos;
    int depth = 0;
    unsigned open_line = 0, open_col = 0; /* the outermost '(' inside, while open */
    while (peekc(p) && peekc(p) != '\n' && (peekc(p) != ')' || depth > 0)) {
        if (peekc(p) == '(' && depth++ == 0)
            open_line = p->line, open_col = p->col;
        depth -= peekc(p) == ')';
        advance(p);
    }
    if (peekc(p) != ')') {
        /* An unclosed '(' in it: the pattern was to end there. */
        fail_at(p, depth > 0 ? open_line : p->line, depth > 0 ? open_col : p->col,
                "expected ')' after the pattern");
        return NULL;
    }
    size_t end = p->pos;
    while (end > start && isspace((unsigned char)p->text[end - 1]))
        end--;
    advance(p);
    if (end == start) {
        fail_at(p, *line, *col, "an empty pattern");
        return NULL;
    }
    const qm_def_t *d = find_def(p->set, p->text + start, end - start);
    if (d != NULL && d->patterns != NULL)
        return strdup(d->patterns); /* a list: its patterns */
    return strndup(p->text + start, end - start);
}

/*****************************************************************************
 * Expressions
 */

static qm_expr_t *
mk(parser_t *p, int op, unsigned line, unsigned col, qm_expr_t *a, qm_expr_t *b)
{
    unsigned depth = 1 + (a && b ? (a->depth > b->depth ? a->depth : b->depth)
                                 : a ? a->depth : b ? b->depth : 0);
    if (op == QE_LOAD)
        depth += QM_LOAD_DEPTH - 1; /* its snippet checks the address: deeper */
    if (depth > QM_MAX_DEPTH) {
        qm_expr_free(a);
        qm_expr_free(b);
        fail_at(p, line, col, "the expression is nested deeper than %d levels", QM_MAX_DEPTH);
        return NULL;
    }
    qm_expr_t *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        qm_expr_free(a);
        qm_expr_free(b);
        fail_at(p, line, col, "out of memory");
        return NULL;
    }
    e->op = op;
    e->line = line;
    e->col = col;
    e->depth = depth;
    e->a = a;
    e->b = b;
    return e;
}

static qm_expr_t *expr(parser_t *p);

/* A copy of constraint D's expression E (where its name is used), its positions in D's
 * text; NULL when out of memory. */
static qm_expr_t *
expr_copy(const qm_expr_t *e, const qm_def_t *d)
{
    if (e == NULL)
        return NULL;
    qm_expr_t *c = malloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    *c = *e;
    c->name = NULL;
    c->a = c->b = NULL;
    c->src = e->src != NULL ? e->src : d->src; /* a constraint used in a constraint: */
    c->origin = e->src != NULL ? e->origin : d->origin; /* where it was written */
    if ((e->name != NULL && (c->name = strdup(e->name)) == NULL)
        || (e->a != NULL && (c->a = expr_copy(e->a, d)) == NULL)
        || (e->b != NULL && (c->b = expr_copy(e->b, d)) == NULL)) {
        qm_expr_free(c);
        return NULL;
    }
    return c;
}

/* Enter a parenthesis or a unary operator at LINE:COL: 0, or -1 (after an error) past
 * QM_MAX_DEPTH of them (the parser recurses on each). */
static int
enter(parser_t *p, unsigned line, unsigned col)
{
    if (++p->nest <= QM_MAX_DEPTH)
        return 0;
    fail_at(p, line, col, "the expression is nested deeper than %d levels", QM_MAX_DEPTH);
    return -1;
}

static qm_expr_t *
primary(parser_t *p)
{
    skip_space(p);
    unsigned line = p->line, col = p->col;
    int c = peekc(p);
    if (accept_char(p, '(')) {
        if (enter(p, line, col) < 0)
            return NULL;
        qm_expr_t *e = expr(p);
        p->nest--;
        if (e != NULL && expect_char(p, ')', "')'") < 0) {
            qm_expr_free(e);
            return NULL;
        }
        return e;
    }
    if (isdigit(c)) {
        char *end;
        size_t start = p->pos;
        unsigned long long v = strtoull(p->text + start, &end, 0);
        if (isalnum((unsigned char)*end) || *end == '_') {
            fail_at(p, line, col, "a malformed number");
            return NULL;
        }
        while (p->text + p->pos < end)
            advance(p);
        qm_expr_t *e = mk(p, QE_NUM, line, col, NULL, NULL);
        if (e != NULL)
            e->num = (int64_t)v;
        return e;
    }
    if (isalpha(c) || c == '_') {
        char *name = identifier(p, "a name");
        if (name == NULL)
            return NULL;
        if (strcmp(name, "retval") == 0) {
            free(name);
            return mk(p, QE_RET, line, col, NULL, NULL);
        }
        if (strncmp(name, "arg", 3) == 0 && name[3] >= '1' && name[3] <= '6' && name[4] == 0) {
            qm_expr_t *e = mk(p, QE_ARG, line, col, NULL, NULL);
            if (e != NULL)
                e->num = name[3] - '1';
            free(name);
            return e;
        }
        if (strncmp(name, "arg", 3) == 0 && name[3] != 0
            && strspn(name + 3, "0123456789") == strlen(name + 3)) {
            /* arg0, arg7: an argument the language cannot read, not an unknown variable */
            fail_at(p, line, col, "'%s': the arguments are arg1 to arg6 (counted from 1; "
                    "the C API's qpt_arg counts from 0)", name);
            free(name);
            return NULL;
        }
        skip_space(p);
        if (strcmp(name, "tid") == 0 && peekc(p) == '(') {
            /* tid(): the calling thread's kernel id (instrumentation of one thread) */
            free(name);
            advance(p);
            if (expect_char(p, ')', "')' (tid() takes no argument)") < 0)
                return NULL;
            return mk(p, QE_TID, line, col, NULL, NULL);
        }
        int size = strcmp(name, "load1") == 0 ? 1 : strcmp(name, "load2") == 0 ? 2
                   : strcmp(name, "load4") == 0 ? 4 : strcmp(name, "load8") == 0 ? 8 : 0;
        skip_space(p);
        if (size != 0 && peekc(p) == '(') {
            /* loadN(ADDR): N bytes of the program's memory at ADDR */
            free(name);
            advance(p);
            if (enter(p, line, col) < 0)
                return NULL;
            qm_expr_t *a = expr(p);
            p->nest--;
            if (a != NULL && expect_char(p, ')', "')'") < 0) {
                qm_expr_free(a);
                return NULL;
            }
            qm_expr_t *e = a ? mk(p, QE_LOAD, line, col, a, NULL) : NULL;
            if (e != NULL)
                e->num = size;
            return e;
        }
        const qm_def_t *d = find_def(p->set, name, strlen(name));
        if (d != NULL && d->expr != NULL) {
            /* a constraint: its expression, as if written here */
            free(name);
            qm_expr_t *c = expr_copy(d->expr, d);
            if (c == NULL)
                fail_at(p, line, col, "out of memory");
            else if (c->depth + p->nest > QM_MAX_DEPTH) {
                qm_expr_free(c);
                fail_at(p, line, col, "the expression is nested deeper than %d levels",
                        QM_MAX_DEPTH);
                return NULL;
            }
            return c;
        }
        if (d != NULL) {
            fail_at(p, line, col, "'%s' is a list of procedures, not a value", name);
            free(name);
            return NULL;
        }
        qm_expr_t *e = mk(p, QE_VAR, line, col, NULL, NULL);
        if (e == NULL) {
            free(name);
            return NULL;
        }
        e->name = name;
        return e;
    }
    char here[64];
    fail_at(p, line, col, "expected a number, argN, a variable or '(', found %s",
            what_is_here(p, here, sizeof(here)));
    return NULL;
}

/* After argN: { '->' name | '.' name } as one QE_FIELD over the QE_ARG (A), resolved
 * per procedure from its DWARF types when the metric is placed. */
static qm_expr_t *
field_path(parser_t *p, qm_expr_t *a)
{
    unsigned line = a->line, col = a->col;
    char path[256];
    size_t n = 0;
    unsigned narrows = 0;
    for (;;) {
        skip_space(p);
        const char *t = p->text + p->pos;
        size_t op = t[0] == '-' && t[1] == '>' ? 2 : t[0] == '.' ? 1 : 0;
        if (op == 0)
            break;
        if (op == 1 && a->op == QE_ARG && n == 0) {
            fail_at(p, p->line, p->col, "an argument is a value, not a struct: "
                    "'->' reads through it");
            qm_expr_free(a);
            return NULL;
        }
        for (size_t k = 0; k < op; k++)
            advance(p);
        skip_space(p);
        if (!isalpha(peekc(p)) && peekc(p) != '_') {
            fail_at(p, p->line, p->col, "expected a field name after '%s'", op == 2 ? "->" : ".");
            qm_expr_free(a);
            return NULL;
        }
        char *name = identifier(p, "a field name");
        if (name == NULL) {
            qm_expr_free(a);
            return NULL;
        }
        int w = snprintf(path + n, sizeof(path) - n, "%s%s", op == 2 ? "->" : ".", name);
        free(name);
        if (w < 0 || (size_t)w >= sizeof(path) - n) {
            fail_at(p, line, col, "a field path longer than %zu characters", sizeof(path) - 1);
            qm_expr_free(a);
            return NULL;
        }
        n += (size_t)w;
        narrows += op == 2;
    }
    if (n == 0)
        return a;
    if (narrows > 8) {
        fail_at(p, line, col, "more than 8 '->' in one field path");
        qm_expr_free(a);
        return NULL;
    }
    qm_expr_t *e = mk(p, QE_FIELD, line, col, a, NULL);
    if (e == NULL)
        return NULL;
    e->num = a->num;
    e->depth += 3 * narrows; /* a read, an add and a sign extension each */
    if ((e->name = strdup(path)) == NULL) {
        qm_expr_free(e);
        fail_at(p, line, col, "out of memory");
        return NULL;
    }
    if (e->depth > QM_MAX_DEPTH) {
        qm_expr_free(e);
        fail_at(p, line, col, "the expression is nested deeper than %d levels", QM_MAX_DEPTH);
        return NULL;
    }
    return e;
}

/* primary { '[' expr ']' }: E[I] is the 8-byte word at E + 8 * I; argN->field. */
static qm_expr_t *
postfix(parser_t *p)
{
    qm_expr_t *a = primary(p);
    if (a != NULL && a->op == QE_ARG)
        a = field_path(p, a);
    for (;;) {
        skip_space(p);
        unsigned line = p->line, col = p->col;
        if (a == NULL || !accept_char(p, '['))
            return a;
        if (enter(p, line, col) < 0) {
            qm_expr_free(a);
            return NULL;
        }
        qm_expr_t *i = expr(p);
        p->nest--;
        if (i != NULL && expect_char(p, ']', "']'") < 0) {
            qm_expr_free(i);
            i = NULL;
        }
        if (i == NULL) {
            qm_expr_free(a);
            return NULL;
        }
        qm_expr_t *eight = mk(p, QE_NUM, line, col, NULL, NULL);
        if (eight == NULL) {
            qm_expr_free(a);
            qm_expr_free(i);
            return NULL;
        }
        eight->num = 8;
        qm_expr_t *off = mk(p, QE_MUL, line, col, i, eight);
        qm_expr_t *at = off ? mk(p, QE_ADD, line, col, a, off) : NULL;
        if (off == NULL)
            qm_expr_free(a);
        if ((a = at ? mk(p, QE_LOAD, line, col, at, NULL) : NULL) != NULL)
            a->num = 8;
    }
}

static qm_expr_t *
unary(parser_t *p)
{
    skip_space(p);
    unsigned line = p->line, col = p->col;
    int op = 0;
    if (peekc(p) == '!' && p->text[p->pos + 1] != '=') {
        advance(p);
        op = QE_NOT;
    } else if (accept_char(p, '-'))
        op = QE_NEG;
    else if (accept_char(p, '*'))
        op = QE_LOAD; /* *E: the 8-byte word at E */
    else
        return postfix(p);
    if (enter(p, line, col) < 0)
        return NULL;
    qm_expr_t *a = unary(p);
    p->nest--;
    qm_expr_t *e = a ? mk(p, op, line, col, a, NULL) : NULL;
    if (e != NULL && op == QE_LOAD)
        e->num = 8;
    return e;
}

/* Binary levels, loosest first; within a level, the longest operators first. */
static const struct level {
    const char *ops[4];
    int codes[4];
} levels[] = {
    { { "||" }, { QE_LOR } },
    { { "&&" }, { QE_LAND } },
    { { "|" }, { QE_OR } },
    { { "^" }, { QE_XOR } },
    { { "&" }, { QE_AND } },
    { { "==", "!=" }, { QE_EQ, QE_NE } },
    { { "<=", ">=", "<", ">" }, { QE_LE, QE_GE, QE_LT, QE_GT } },
    { { "<<", ">>" }, { QE_SHL, QE_SHR } },
    { { "+", "-" }, { QE_ADD, QE_SUB } },
    { { "*", "/", "%" }, { QE_MUL, QE_DIV, QE_MOD } },
};
#define NLEVELS (sizeof(levels) / sizeof(levels[0]))

/* The operator of level L at the current position (0: none); consumes it. */
static int
accept_level_op(parser_t *p, size_t l)
{
    skip_space(p);
    const char *at = p->text + p->pos;
    for (int k = 0; k < 4 && levels[l].ops[k] != NULL; k++) {
        const char *op = levels[l].ops[k];
        size_t n = strlen(op);
        if (strncmp(at, op, n) != 0)
            continue;
        /* `|` is not `||`, `&` not `&&`, `<` not `<<` or `<=`. */
        if (n == 1 && (at[1] == at[0] || ((at[0] == '<' || at[0] == '>') && at[1] == '=')))
            continue;
        for (size_t i = 0; i < n; i++)
            advance(p);
        return levels[l].codes[k];
    }
    return 0;
}

static qm_expr_t *
binary(parser_t *p, size_t l)
{
    if (l == NLEVELS)
        return unary(p);
    qm_expr_t *a = binary(p, l + 1);
    while (a != NULL) {
        skip_space(p);
        unsigned line = p->line, col = p->col;
        int op = accept_level_op(p, l);
        if (op == 0)
            break;
        qm_expr_t *b = binary(p, l + 1);
        if (b == NULL) {
            qm_expr_free(a);
            return NULL;
        }
        a = mk(p, op, line, col, a, b);
    }
    return a;
}

static qm_expr_t *
expr(parser_t *p)
{
    return binary(p, 0);
}

void
qm_expr_free(qm_expr_t *e)
{
    if (e == NULL)
        return;
    qm_expr_free(e->a);
    qm_expr_free(e->b);
    free(e->name);
    free(e);
}

/*****************************************************************************
 * Metrics
 */

void
qm_metric_free(qm_metric_t *m)
{
    free(m->name);
    free(m->origin);
    free(m->src);
    free(m->pattern);
    free(m->inside);
    free(m->from);
    qm_expr_free(m->where);
    qm_expr_free(m->key);
    qm_expr_free(m->value);
    free(m->key_text);
    for (size_t i = 0; i < m->nprocs; i++) {
        free(m->procs[i].name);
        free(m->procs[i].module);
    }
    free(m->procs);
    free(m->handles);
    memset(m, 0, sizeof(*m));
}

/* kind { constraint } into M. */
static int
body(parser_t *p, qm_metric_t *m)
{
    skip_space(p);
    unsigned line = p->line, col = p->col;
    if (accept_word(p, "count")) {
        if (!accept_word(p, "calls"))
            return fail_at(p, p->line, p->col, "expected 'calls' after 'count'");
        m->kind = QM_COUNT;
    } else if (accept_word(p, "time")) {
        if (accept_word(p, "wall"))
            m->kind = QM_WALL;
        else if (accept_word(p, "cpu"))
            m->kind = QM_CPU;
        else
            return fail_at(p, p->line, p->col, "expected 'wall' or 'cpu' after 'time'");
    } else if (at_word(p, "sum") || at_word(p, "max") || at_word(p, "min")
               || at_word(p, "avg")) {
        /* sum(EXPR) calls(PATTERN): EXPR's values at the calls, added up (max...) */
        m->kind = accept_word(p, "sum") ? QM_SUM : accept_word(p, "max") ? QM_MAX
                  : accept_word(p, "min") ? QM_MIN : (accept_word(p, "avg"), QM_AVG);
        if (expect_char(p, '(', "'('") < 0 || (m->value = expr(p)) == NULL
            || expect_char(p, ')', "')'") < 0)
            return QPT_EINVAL;
        if (!accept_word(p, "calls"))
            return fail_at(p, p->line, p->col, "expected 'calls' after the value");
    } else {
        char here[64];
        return fail_at(p, line, col, "expected 'count calls(...)', 'time wall|cpu(...)' or "
                       "'sum|max|min|avg(EXPR) calls(...)', found %s",
                       what_is_here(p, here, sizeof(here)));
    }
    if ((m->pattern = pattern(p, &m->pat_line, &m->pat_col)) == NULL)
        return QPT_EINVAL;
    m->focus = QM_PER_PROC;
    int focused = 0;   /* a 'per' or 'total' was read: one focus, or proc/module x thread */
    for (;;) {
        skip_space(p);
        unsigned l = p->line, c = p->col;
        if (accept_word(p, "unit")) {
            /* unit "bytes": how the values are shown */
            skip_space(p);
            unsigned ul = p->line, uc = p->col;
            if (m->kind == QM_WALL || m->kind == QM_CPU)
                return fail_at(p, l, c, "a timer's unit is ns");
            if (m->unit[0] != '\0')
                return fail_at(p, l, c, "a second 'unit'");
            if (!accept_char(p, '"'))
                return fail_at(p, ul, uc, "expected the unit in double quotes (unit \"bytes\")");
            size_t n = 0;
            while (peekc(p) && peekc(p) != '"' && peekc(p) != '\n') {
                int ch = peekc(p);
                if (n + 1 >= sizeof(m->unit) || !(isalnum(ch) || strchr("_/%.-", ch)))
                    return fail_at(p, p->line, p->col, "a unit is up to %zu letters, digits "
                                   "and _ / %% . -", sizeof(m->unit) - 1);
                m->unit[n++] = (char)ch;
                advance(p);
            }
            m->unit[n] = '\0';
            if (!accept_char(p, '"'))
                return fail_at(p, p->line, p->col, "expected '\"' after the unit");
            if (n == 0)
                return fail_at(p, ul, uc, "an empty unit");
        } else if (accept_word(p, "inside")) {
            if (m->inside != NULL)
                return fail_at(p, l, c, "a second 'inside'");
            if ((m->inside = pattern(p, &m->in_line, &m->in_col)) == NULL)
                return QPT_EINVAL;
        } else if (accept_word(p, "from")) {
            /* from(F) per call site: the calls made inside F (dyn --calls-from F) */
            if (m->from != NULL)
                return fail_at(p, l, c, "a second 'from'");
            if ((m->from = pattern(p, &m->from_line, &m->from_col)) == NULL)
                return QPT_EINVAL;
        } else if (accept_word(p, "where")) {
            if (m->where != NULL)
                return fail_at(p, l, c, "a second 'where' (combine them with &&)");
            if ((m->where = expr(p)) == NULL)
                return QPT_EINVAL;
        } else if (at_word(p, "per") || at_word(p, "total")) {
            int before = focused++ ? m->focus : 0;
            if (before != 0 && (m->by_thread || !(before == QM_PER_PROC || before == QM_PER_MODULE
                                                  || before == QM_PER_THREAD)))
                return fail_at(p, l, c, "a second focus: only 'per procedure' or 'per module' "
                               "combine, with 'per thread'");
            if (accept_word(p, "total")) {
                if (before != 0)
                    return fail_at(p, l, c, "a second focus: 'total' combines with none");
                m->focus = QM_TOTAL;
                continue;
            }
            accept_word(p, "per");
            skip_space(p);
            unsigned kl = p->line, kc = p->col;
            size_t from = p->pos;
            if (before != 0) {
                /* per procedure per thread, per thread per module...: a row per pair */
                int other = accept_word(p, "procedure") ? QM_PER_PROC
                            : accept_word(p, "module")  ? QM_PER_MODULE
                            : accept_word(p, "thread")  ? QM_PER_THREAD : 0;
                if (other == 0 || (other == QM_PER_THREAD) == (before == QM_PER_THREAD))
                    return fail_at(p, kl, kc, "a second focus: only 'per procedure' or 'per "
                                   "module' combine, with 'per thread'");
                m->by_thread = 1;
                m->focus = other == QM_PER_THREAD ? before : other;
                continue;
            }
            if (accept_word(p, "procedure"))
                m->focus = QM_PER_PROC;
            else if (accept_word(p, "thread"))
                m->focus = QM_PER_THREAD;
            else if (accept_word(p, "module"))
                m->focus = QM_PER_MODULE;
            else if (accept_word(p, "call")) {
                /* per call site: foreach direct call of the procedures */
                if (!accept_word(p, "site"))
                    return fail_at(p, p->line, p->col, "expected 'site' after 'per call'");
                if (m->kind != QM_COUNT && m->kind != QM_SUM && m->kind != QM_WALL
                    && m->kind != QM_CPU)
                    return fail_at(p, kl, kc, "a row per call site is for counts, sums and timers");
                m->focus = QM_PER_SITE;
            }
            else if (accept_word(p, "value")) {
                /* per value(EXPR): a row per value, e.g. a lock's address */
                if (expect_char(p, '(', "'(' after 'value'") < 0)
                    return QPT_EINVAL;
                skip_space(p);
                from = p->pos;
                if ((m->key = expr(p)) == NULL)
                    return QPT_EINVAL;
                size_t to = p->pos;
                if (expect_char(p, ')', "')'") < 0)
                    return QPT_EINVAL;
                while (to > from && isspace((unsigned char)p->text[to - 1]))
                    to--;
                if ((m->key_text = strndup(p->text + from, to - from)) == NULL)
                    return QPT_ENOMEM;
                m->focus = QM_PER_VALUE;
            } else if (peekc(p) == 'a') {
                /* per argN: per value(argN) */
                qm_expr_t *k = primary(p);
                if (k == NULL)
                    return QPT_EINVAL;
                if (k->op != QE_ARG) {
                    qm_expr_free(k);
                    return fail_at(p, kl, kc, "expected 'procedure', 'module', 'call site', "
                                   "'thread', 'argN' or 'value(EXPR)' after 'per'");
                }
                qm_expr_free(m->key);
                m->key = k;
                free(m->key_text);
                if ((m->key_text = strndup(p->text + from, p->pos - from)) == NULL)
                    return QPT_ENOMEM;
                m->focus = QM_PER_VALUE;
            } else
                return fail_at(p, p->line, p->col, "expected 'procedure', 'module', 'call site', "
                               "'thread', 'argN' or 'value(EXPR)' after 'per'");
            if (m->focus == QM_PER_VALUE && m->kind != QM_COUNT)
                return fail_at(p, kl, kc, "a row per value is for counts (a timer's value at "
                               "its stop is not known; sum, max... keep two words a row)");
        } else if (accept_word(p, "pre"))
            m->post = 0;
        else if (accept_word(p, "post")) {
            if (m->kind == QM_WALL || m->kind == QM_CPU)
                return fail_at(p, l, c, "'post' is for counts (a timer runs from entry to "
                               "return)");
            m->post = 1;
        } else if (accept_word(p, "prepend"))
            m->append = 0;
        else if (accept_word(p, "append"))
            m->append = 1;
        else if (accept_word(p, "shared")) {
            /* one timer a procedure for the whole process (dyn --time's) */
            if (m->kind != QM_WALL)
                return fail_at(p, l, c, "'shared' is for wall timers (time wall)");
            m->shared = 1;
            m->shared_line = l;
            m->shared_col = c;
        } else if (m->shared && (m->inside != NULL || m->by_thread || m->focus == QM_PER_THREAD
                                 || m->focus == QM_PER_SITE))
            return fail_at(p, m->shared_line, m->shared_col, "a 'shared' timer has no thread "
                           "of its own: not with inside(), per thread or per call site");
        else if (m->from != NULL && m->focus != QM_PER_SITE)
            return fail_at(p, m->from_line, m->from_col, "from() chooses call sites: with "
                           "'per call site'");
        else
            return 0;
    }
}

/* The name of a list or constraint at the parser (new, or NULL after an error). */
static char *
def_name(parser_t *p, const qm_set_t *set)
{
    skip_space(p);
    unsigned line = p->line, col = p->col;
    char *name = identifier(p, "a name");
    if (name == NULL)
        return NULL;
    if (find_def(set, name, strlen(name)) != NULL) {
        fail_at(p, line, col, "'%s' is defined twice", name);
        free(name);
        return NULL;
    }
    if (strncmp(name, "arg", 3) == 0 || strcmp(name, "retval") == 0
        || (strncmp(name, "load", 4) == 0 && strlen(name) == 5)) {
        fail_at(p, line, col, "'%s' is a name of the language", name);
        free(name);
        return NULL;
    }
    if (expect_char(p, '=', "'='") < 0) {
        free(name);
        return NULL;
    }
    return name;
}

/* One pattern of a list: the raw text up to ',' or '}', trimmed; its patterns (a list's
 * name stands for them). */
static char *
list_item(parser_t *p)
{
    skip_space(p);
    unsigned line = p->line, col = p->col;
    size_t start = p->pos;
    while (peekc(p) && !strchr(",}()#\n", peekc(p)))
        advance(p);
    size_t end = p->pos;
    while (end > start && isspace((unsigned char)p->text[end - 1]))
        end--;
    if (end == start) {
        char here[64];
        fail_at(p, line, col, "expected a pattern, found %s", what_is_here(p, here, sizeof(here)));
        return NULL;
    }
    const qm_def_t *d = find_def(p->set, p->text + start, end - start);
    if (d != NULL && d->expr != NULL) {
        fail_at(p, line, col, "'%.*s' is a constraint, not a list", (int)(end - start),
                p->text + start);
        return NULL;
    }
    return d != NULL ? strdup(d->patterns) : strndup(p->text + start, end - start);
}

/* 'list' NAME '=' '{' PATTERN {',' PATTERN} '}' or 'constraint' NAME '=' EXPR (the
 * keyword read), into D. */
static int
definition(parser_t *p, qm_set_t *set, int list, qm_def_t *d)
{
    if ((d->name = def_name(p, set)) == NULL)
        return QPT_EINVAL;
    if (!list)
        return (d->expr = expr(p)) != NULL ? 0 : QPT_EINVAL;
    if (expect_char(p, '{', "'{'") < 0)
        return QPT_EINVAL;
    size_t len = 0;
    do {
        char *item = list_item(p);
        if (item == NULL)
            return QPT_EINVAL;
        size_t n = strlen(item);
        char *v = realloc(d->patterns, len + n + 2);
        if (v == NULL) {
            free(item);
            return QPT_ENOMEM;
        }
        if (len > 0)
            v[len++] = '\n';
        memcpy(v + len, item, n + 1);
        len += n;
        d->patterns = v;
        free(item);
    } while (accept_char(p, ','));
    return expect_char(p, '}', "',' or '}'");
}

static void
def_free(qm_def_t *d)
{
    free(d->src);
    free(d->origin);
    free(d->name);
    free(d->patterns);
    qm_expr_free(d->expr);
    memset(d, 0, sizeof(*d));
}

static int
add_def(qm_set_t *set, const qm_def_t *d)
{
    qm_def_t *v = realloc(set->defs, (set->ndefs + 1) * sizeof(*v));
    if (v == NULL)
        return QPT_ENOMEM;
    set->defs = v;
    set->defs[set->ndefs++] = *d;
    return 0;
}

static int
add_metric(qm_set_t *set, qm_metric_t *m)
{
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 8;
        qm_metric_t *v = realloc(set->v, cap * sizeof(*v));
        if (v == NULL)
            return QPT_ENOMEM;
        set->v = v;
        set->cap = cap;
    }
    set->v[set->n++] = *m;
    return 0;
}

int
qm_parse(const char *text, const char *origin, int one, qm_set_t **setp, char *why,
         size_t whylen)
{
    if (text == NULL || origin == NULL || setp == NULL)
        return QPT_EINVAL;
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    qm_set_t *set = *setp;
    int made = set == NULL;
    if (made && (set = calloc(1, sizeof(*set))) == NULL)
        return QPT_ENOMEM;
    size_t before = set->n, defs_before = set->ndefs;
    parser_t p = { text, origin, 0, 1, 1, why, whylen, 0, 0, set };
    int rc = 0;
    while (rc == 0) {
        qm_metric_t m;
        memset(&m, 0, sizeof(m));
        skip_space(&p);
        if (peekc(&p) == 0)
            break;
        if (one) {
            rc = body(&p, &m);
            if (rc == 0) {
                skip_space(&p);
                if (peekc(&p) != 0) {
                    char here[64];
                    rc = fail_at(&p, p.line, p.col, "expected 'inside', 'where', 'per', "
                                 "'total' or the end, found %s",
                                 what_is_here(&p, here, sizeof(here)));
                }
            }
            if (rc == 0) {
                size_t len = strlen(text);
                while (len > 0 && isspace((unsigned char)text[len - 1]))
                    len--;
                const char *t = text;
                while (isspace((unsigned char)*t))
                    t++, len--;
                m.name = strndup(t, len);
            }
        } else if (at_word(&p, "list") || at_word(&p, "constraint")) {
            /* a definition, for the metrics after it */
            qm_def_t d = { 0 };
            int list = accept_word(&p, "list");
            if (!list)
                accept_word(&p, "constraint");
            if ((rc = definition(&p, set, list, &d)) == 0) {
                char here[64];
                if (!accept_char(&p, ';'))
                    rc = fail_at(&p, p.line, p.col, "expected ';', found %s",
                                 what_is_here(&p, here, sizeof(here)));
            }
            if (rc == 0 && ((d.src = strdup(text)) == NULL || (d.origin = strdup(origin)) == NULL))
                rc = QPT_ENOMEM;
            if (rc == 0)
                rc = add_def(set, &d);
            if (rc < 0)
                def_free(&d);
            continue;
        } else {
            unsigned line = p.line, col = p.col;
            if (!accept_word(&p, "metric")) {
                char here[64];
                rc = fail_at(&p, line, col, "expected 'metric', 'list' or 'constraint', "
                             "found %s", what_is_here(&p, here, sizeof(here)));
            } else if ((m.name = identifier(&p, "the metric's name")) == NULL)
                rc = QPT_EINVAL;
            else {
                for (size_t i = 0; i < set->n && rc == 0; i++)
                    if (strcmp(set->v[i].name, m.name) == 0)
                        rc = fail_at(&p, line, col, "metric '%s' is defined twice", m.name);
                if (rc == 0 && (rc = expect_char(&p, '=', "'='")) == 0
                    && (rc = body(&p, &m)) == 0) {
                    char here[64];
                    if (!accept_char(&p, ';'))
                        rc = fail_at(&p, p.line, p.col, "expected 'inside', 'where', 'per', "
                                     "'total' or ';', found %s",
                                     what_is_here(&p, here, sizeof(here)));
                }
            }
        }
        if (rc == 0 && m.name == NULL)
            rc = QPT_ENOMEM;
        if (rc == 0 && ((m.origin = strdup(origin)) == NULL || (m.src = strdup(text)) == NULL))
            rc = QPT_ENOMEM;
        if (rc == 0)
            rc = add_metric(set, &m);
        if (rc < 0)
            qm_metric_free(&m);
        if (one)
            break;
    }
    if (rc == 0 && set->n == before && set->ndefs == defs_before) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: no metric", origin);
        rc = QPT_EINVAL;
    }
    if (rc < 0) {
        /* Nothing of this text stays. */
        while (set->n > before)
            qm_metric_free(&set->v[--set->n]);
        while (set->ndefs > defs_before)
            def_free(&set->defs[--set->ndefs]);
        if (made) {
            qm_free(set);
            set = NULL;
        }
        if (why != NULL && whylen > 0 && why[0] == '\0')
            snprintf(why, whylen, "%s: %s", origin, qpt_strerror(rc));
        return rc;
    }
    *setp = set;
    return 0;
}

qm_set_t *
qm_new(void)
{
    return calloc(1, sizeof(qm_set_t));
}

size_t
qm_count(const qm_set_t *set)
{
    return set ? set->n : 0;
}

const char *
qm_name(const qm_set_t *set, size_t i)
{
    return set && i < set->n ? set->v[i].name : NULL;
}

void
qm_free(qm_set_t *set)
{
    if (set == NULL)
        return;
    for (size_t i = 0; i < set->n; i++)
        qm_metric_free(&set->v[i]);
    free(set->v);
    for (size_t i = 0; i < set->ndefs; i++)
        def_free(&set->defs[i]);
    free(set->defs);
    free(set);
}
