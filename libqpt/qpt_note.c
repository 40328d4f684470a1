/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Notes: text a rewrite carries for the programs that read its profiles (qpt_note_set,
 * qpt_note_read, qpt_profile_note). A note is a string of the rewrite's description
 * (QPT_NOTE_TAG, its name, a newline, its text), so the description's id covers it and a
 * profile of another rewrite can never be read with it. qpt-rewrite -e keeps its metrics'
 * layout in the note "metrics" (metrics/qm_results.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_desc.h"
#include "base/qp_format.h"
#include "report/qp_profile.h"
#include "cfg/cfg.h"
#include "libqpt/qpt_priv.h"

#define NOTE_NAME_MAX 64
#define NOTE_TEXT_MAX (64u << 20)

/* 1 when NAME is 1 to NOTE_NAME_MAX letters, digits, '.', '_' or '-'. */
static int
note_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > NOTE_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
              || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int
qpt_note_set(qpt_space_t *s, const char *name, const char *text)
{
    if (s == NULL || name == NULL || text == NULL)
        return QP_EINVAL;
    if (s->ops != &qpt_file_ops)
        return qpt_fail(s, QP_EUNSUPP, "a note goes into a rewritten program: a process "
                                       "has none");
    if (!note_name_ok(name))
        return qpt_fail(s, QP_EINVAL, "a note's name has 1 to %d letters, digits, '.', '_' "
                                      "or '-'", NOTE_NAME_MAX);
    if (strlen(text) > NOTE_TEXT_MAX)
        return qpt_fail(s, QP_EINVAL, "%s: a note has at most %u bytes", name, NOTE_TEXT_MAX);
    char *str = malloc(strlen(QPT_NOTE_TAG) + strlen(name) + 1 + strlen(text) + 1);
    if (str == NULL)
        return QP_ENOMEM;
    strcpy(str, QPT_NOTE_TAG);
    strcat(str, name);
    strcat(str, "\n");
    strcat(str, text);
    size_t tag = strlen(QPT_NOTE_TAG) + strlen(name) + 1;
    for (size_t i = 0; i < s->nnotes; i++)
        if (strncmp(s->notes[i], str, tag) == 0) { /* the same name: replaced */
            free(s->notes[i]);
            s->notes[i] = str;
            return 0;
        }
    char **v = realloc(s->notes, (s->nnotes + 1) * sizeof(*v));
    if (v == NULL) {
        free(str);
        return QP_ENOMEM;
    }
    s->notes = v;
    s->notes[s->nnotes++] = str;
    return 0;
}

int
qpt_notes_describe(const qpt_space_t *s, qp_desc_t *d)
{
    uint32_t off;
    for (size_t i = 0; i < s->nnotes; i++)
        QP_CHECK(qp_desc_add_string(d, s->notes[i], &off));
    return 0;
}

void
qpt_notes_free(qpt_space_t *s)
{
    for (size_t i = 0; i < s->nnotes; i++)
        free(s->notes[i]);
    free(s->notes);
    s->notes = NULL;
    s->nnotes = 0;
}

/* The text of note NAME in description D, malloc'ed into *TEXT; QP_ENOTFOUND. */
static int
find_note(const qp_desc_t *d, const char *name, char **text)
{
    size_t tag = strlen(QPT_NOTE_TAG), n = strlen(name);
    for (uint32_t o = 0; o < d->hdr.strtab_size;) {
        const char *str = qp_desc_str(d, o);
        if (strncmp(str, QPT_NOTE_TAG, tag) == 0 && strncmp(str + tag, name, n) == 0
            && str[tag + n] == '\n')
            return (*text = strdup(str + tag + n + 1)) != NULL ? 0 : QP_ENOMEM;
        o += (uint32_t)strlen(str) + 1;
    }
    return QP_ENOTFOUND;
}

int
qpt_note_read(const char *program, const char *name, char **text, uint64_t *id, char *why,
              size_t whylen)
{
    char dummy[8];
    if (why == NULL || whylen == 0) {
        why = dummy;
        whylen = sizeof(dummy);
    }
    if (program == NULL || name == NULL || text == NULL)
        return QP_EINVAL;
    *text = NULL;
    qp_desc_t d;
    memset(&d, 0, sizeof(d));
    int rc = qpt_program_desc(program, &d, why, whylen);
    if (rc == 0 && (rc = find_note(&d, name, text)) == QP_ENOTFOUND)
        snprintf(why, whylen, "%s: no note '%s' in the program", program, name);
    if (rc == 0 && id != NULL)
        *id = d.hdr.id;
    qp_desc_free(&d);
    return qpt_public_rc(rc);
}

int
qpt_profile_note(const char *profile, const char *name, char **text, char *why, size_t whylen)
{
    char dummy[8];
    if (why == NULL || whylen == 0) {
        why = dummy;
        whylen = sizeof(dummy);
    }
    if (profile == NULL || name == NULL || text == NULL)
        return QP_EINVAL;
    *text = NULL;
    qp_profile_t p;
    qp_desc_t d;
    memset(&d, 0, sizeof(d));
    int rc = qp_profile_read(profile, &p, why, whylen);
    if (rc == 0) {
        rc = qpt_profile_desc(profile, &p, &d, why, whylen);
        if (rc == 0 && (rc = find_note(&d, name, text)) == QP_ENOTFOUND)
            snprintf(why, whylen, "%s: no note '%s' in the program that wrote it (%s)",
                     profile, name, p.hdr.exe);
        qp_desc_free(&d);
        qp_profile_free(&p);
    }
    if (rc < 0 && strncmp(why, profile, strlen(profile)) != 0) { /* name the profile */
        char *w = strdup(why);
        if (w != NULL)
            snprintf(why, whylen, "%s: %s", profile, w);
        free(w);
    }
    return qpt_public_rc(rc);
}
