/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The libraries a program loads at start, found as glibc's dynamic linker finds them
 * (elfw.h, elfw_deps): the file half of a whole-program rewrite. The dynamic sections
 * are read by hand from the file's program headers; nothing here runs the program or
 * its loader (ldd would). Libraries are those of the program's machine (x86-64 or
 * AArch64): a program of another machine than ours finds them under a sysroot, as
 * qemu-user's -L finds them for it.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "editor/elfw.h"

/* One object's dynamic section, read from its file. */
typedef struct dyn_obj {
    char **needed;   /* DT_NEEDED names */
    size_t nneeded;
    char *rpath;     /* DT_RPATH or NULL */
    char *runpath;   /* DT_RUNPATH or NULL */
    char *interp;    /* PT_INTERP or NULL */
    char *dir;       /* the folder of its file (realpath), for $ORIGIN */
    unsigned machine; /* e_machine: EM_X86_64 or EM_AARCH64 */
} dyn_obj_t;

/* Where a program's libraries are looked for: its machine and the sysroot. */
typedef struct lib_search {
    unsigned machine;    /* the program's e_machine: libraries must have the same */
    const char *sysroot; /* absolute folders are tried under it first; NULL: none */
} lib_search_t;

static void
dyn_obj_free(dyn_obj_t *o)
{
    for (size_t i = 0; i < o->nneeded; i++)
        free(o->needed[i]);
    free(o->needed);
    free(o->rpath);
    free(o->runpath);
    free(o->interp);
    free(o->dir);
    memset(o, 0, sizeof(*o));
}

/* The file offset of link-time address A, from the PT_LOAD headers; 0 when unmapped. */
static uint64_t
file_offset(const Elf64_Phdr *ph, size_t n, uint64_t a, uint64_t size)
{
    for (size_t i = 0; i < n; i++)
        if (ph[i].p_type == PT_LOAD && a >= ph[i].p_vaddr && ph[i].p_filesz >= size
            && a - ph[i].p_vaddr <= ph[i].p_filesz - size)
            return ph[i].p_offset + (a - ph[i].p_vaddr);
    return 0;
}

/* EH's machine when it is the header of a little-endian ELF64 object of a machine we
 * rewrite (EM_X86_64, EM_AARCH64); 0 otherwise. */
static unsigned
elf64_machine(const Elf64_Ehdr *eh)
{
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64
        || eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_phentsize != sizeof(Elf64_Phdr))
        return 0;
    return eh->e_machine == EM_X86_64 || eh->e_machine == EM_AARCH64 ? eh->e_machine : 0;
}

/* LEN bytes at offset OFF of FD (a file of SIZE bytes), malloc'ed; NULL when they are
 * not all in the file (errno EINVAL), or the read fails or comes short (the file shrank;
 * errno EIO). Read, not mapped: a library truncated while it is read is an error, never
 * a SIGBUS. */
static uint8_t *
read_at(int fd, size_t size, uint64_t off, uint64_t len)
{
    if (off > size || len > size - off) {
        errno = EINVAL;
        return NULL;
    }
    uint8_t *b = malloc(len ? len : 1);
    if (b == NULL)
        return NULL;
    if (len > 0 && pread(fd, b, len, (off_t)off) != (ssize_t)len) {
        free(b);
        errno = errno ? errno : EIO;
        return NULL;
    }
    return b;
}

/* A NUL-terminated string at offset O of the table T of N bytes: a copy or NULL. */
static char *
str_at(const uint8_t *t, uint64_t n, uint64_t o)
{
    if (t == NULL || o >= n || memchr(t + o, 0, n - o) == NULL)
        return NULL;
    return strdup((const char *)t + o);
}

/* Read PATH's dynamic section. 0, QP_EIO (errno kept), QP_EFORMAT or QP_ENOMEM. */
static int
dyn_obj_read(const char *path, dyn_obj_t *o)
{
    memset(o, 0, sizeof(*o));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO is refused, not waited on */
    if (fd < 0)
        return QP_EIO;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        errno = errno ? errno : EINVAL;
        return QP_EIO;
    }
    size_t size = (size_t)st.st_size;
    int rc = QP_EFORMAT;
    Elf64_Ehdr eh;
    Elf64_Phdr *ph = NULL;
    Elf64_Dyn *dyn = NULL;
    uint8_t *strs = NULL;
    size_t ndyn = 0;
    uint64_t strtab = 0, strsz = 0;
    if (size < sizeof(eh))
        goto out;
    if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh)) {
        rc = QP_EIO;
        goto out;
    }
    if ((o->machine = elf64_machine(&eh)) == 0 || eh.e_phoff >= size
        || eh.e_phnum > (size - eh.e_phoff) / sizeof(Elf64_Phdr))
        goto out;
    if ((ph = (Elf64_Phdr *)read_at(fd, size, eh.e_phoff, eh.e_phnum * sizeof(*ph))) == NULL)
        goto read_error;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_INTERP && ph[i].p_filesz > 0 && o->interp == NULL) {
            uint8_t *s = read_at(fd, size, ph[i].p_offset, ph[i].p_filesz);
            if (s == NULL && errno != EINVAL)
                goto read_error;
            if (s != NULL && s[ph[i].p_filesz - 1] == 0)
                o->interp = (char *)s;
            else
                free(s);
        }
        if (ph[i].p_type == PT_DYNAMIC && ph[i].p_offset % 8 == 0 && dyn == NULL) {
            dyn = (Elf64_Dyn *)read_at(fd, size, ph[i].p_offset, ph[i].p_filesz);
            if (dyn == NULL && errno != EINVAL)
                goto read_error;
            ndyn = dyn != NULL ? ph[i].p_filesz / sizeof(Elf64_Dyn) : 0;
        }
    }
    for (size_t k = 0; k < ndyn && dyn[k].d_tag != DT_NULL; k++) {
        if (dyn[k].d_tag == DT_STRTAB)
            strtab = dyn[k].d_un.d_ptr;
        if (dyn[k].d_tag == DT_STRSZ)
            strsz = dyn[k].d_un.d_val;
    }
    uint64_t stroff = ndyn > 0 ? file_offset(ph, eh.e_phnum, strtab, strsz) : 0;
    if (stroff != 0 && (strs = read_at(fd, size, stroff, strsz)) == NULL && errno != EINVAL)
        goto read_error;
    rc = QP_ENOMEM;
    o->needed = calloc(ndyn + 1, sizeof(char *));
    if (o->needed == NULL)
        goto out;
    for (size_t k = 0; k < ndyn && dyn[k].d_tag != DT_NULL; k++) {
        Elf64_Sxword t = dyn[k].d_tag;
        if (t != DT_NEEDED && t != DT_RPATH && t != DT_RUNPATH)
            continue;
        char *s = str_at(strs, strsz, dyn[k].d_un.d_val);
        if (s == NULL) {
            rc = QP_EFORMAT;
            goto out;
        }
        if (t == DT_NEEDED)
            o->needed[o->nneeded++] = s;
        else if (t == DT_RPATH && o->rpath == NULL)
            o->rpath = s;
        else if (t == DT_RUNPATH && o->runpath == NULL)
            o->runpath = s;
        else
            free(s);
    }
    char real[PATH_MAX];
    if (realpath(path, real) == NULL) {
        rc = QP_EIO;
        goto out;
    }
    char *slash = strrchr(real, '/');
    *slash = '\0';
    o->dir = strdup(real[0] ? real : "/");
    rc = o->dir != NULL ? 0 : QP_ENOMEM;
    goto out;
read_error:
    rc = errno == ENOMEM ? QP_ENOMEM : QP_EIO;
out:
    free(ph);
    free(dyn);
    free(strs);
    close(fd);
    if (rc < 0) {
        int saved = errno;
        dyn_obj_free(o);
        errno = saved;
    }
    return rc;
}

/* A growing list of strings. */
typedef struct strs {
    char **v;
    size_t n, cap;
} strs_t;

static int
strs_push(strs_t *s, const char *x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        char **v = realloc(s->v, cap * sizeof(char *));
        if (v == NULL)
            return QP_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    if ((s->v[s->n] = strdup(x)) == NULL)
        return QP_ENOMEM;
    s->n++;
    return 0;
}

static void
strs_free(strs_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof(*s));
}

/* The folders of /etc/ld.so.conf and the files it includes (glob patterns), in order. */
static int
conf_dirs(const char *file, strs_t *out, int depth)
{
    FILE *f = depth < 8 ? fopen(file, "re") : NULL;
    if (f == NULL)
        return 0;
    char line[PATH_MAX + 16];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        char *h = strchr(line, '#');
        if (h != NULL)
            *h = '\0';
        char *s = line + strspn(line, " \t");
        s[strcspn(s, " \t\r\n")] = '\0';
        if (*s == '\0')
            continue;
        if (strcmp(s, "include") == 0) {
            char *pat = s + strlen(s) + 1;
            pat += strspn(pat, " \t");
            pat[strcspn(pat, " \t\r\n")] = '\0';
            glob_t g;
            if (*pat && glob(pat, 0, NULL, &g) == 0) {
                for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
                    rc = conf_dirs(g.gl_pathv[i], out, depth + 1);
                globfree(&g);
            }
        } else if (*s == '/')
            rc = strs_push(out, s);
    }
    fclose(f);
    return rc;
}

/* Is PATH a loadable ELF64 file of machine MACHINE? (The loader skips the others.) */
static int
loadable(const char *path, unsigned machine)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO is not waited on */
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    ssize_t r = read(fd, &eh, sizeof(eh));
    close(fd);
    return r == (ssize_t)sizeof(eh) && elf64_machine(&eh) == machine;
}

/* A copy of PATH, a file of S's machine: under the sysroot first when PATH is absolute
 * (qemu-user's -L: the guest's "/lib/x" is SYSROOT/lib/x when that exists), then PATH
 * itself; NULL when neither is one. */
static char *
loadable_at(const lib_search_t *s, const char *path)
{
    char under[PATH_MAX];
    if (s->sysroot != NULL && path[0] == '/'
        && snprintf(under, sizeof(under), "%s%s", s->sysroot, path) < (int)sizeof(under)
        && loadable(under, s->machine))
        return strdup(under);
    return loadable(path, s->machine) ? strdup(path) : NULL;
}

/* Look for NAME in the colon-separated folders of LIST ($ORIGIN is ORIGIN). */
static char *
find_in(const lib_search_t *s, const char *list, const char *origin, const char *name)
{
    if (list == NULL)
        return NULL;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ":");
        char dir[PATH_MAX], path[PATH_MAX];
        if (len < sizeof(dir)) {
            memcpy(dir, p, len);
            dir[len] = '\0';
            const char *rest = NULL;
            if (strncmp(dir, "$ORIGIN", 7) == 0)
                rest = dir + 7;
            else if (strncmp(dir, "${ORIGIN}", 9) == 0)
                rest = dir + 9;
            int n = rest != NULL ? snprintf(path, sizeof(path), "%s%s/%s", origin, rest, name)
                                 : snprintf(path, sizeof(path), "%s/%s", dir[0] ? dir : ".", name);
            char *found = n > 0 && (size_t)n < sizeof(path) ? loadable_at(s, path) : NULL;
            if (found != NULL)
                return found;
        }
        p += len;
        if (*p == ':')
            p++;
    }
    return NULL;
}

/* Find NAME, needed by OBJ, of the program PROG (glibc's order, see elfw.h). */
static char *
find_lib(const lib_search_t *s, const char *name, const dyn_obj_t *obj,
         const dyn_obj_t *prog, const strs_t *conf)
{
    if (strchr(name, '/') != NULL)
        return loadable_at(s, name);
    char *r = NULL;
    if (obj->runpath == NULL) {
        r = find_in(s, obj->rpath, obj->dir, name);
        if (r == NULL && prog != obj && prog->runpath == NULL)
            r = find_in(s, prog->rpath, prog->dir, name);
    }
    if (r == NULL)
        r = find_in(s, obj->runpath, obj->dir, name);
    for (size_t i = 0; r == NULL && i < conf->n; i++)
        r = find_in(s, conf->v[i], "", name);
    /* Debian's glibc: the multiarch folders, then the generic ones. */
    const char *system_dirs = s->machine == EM_AARCH64
        ? "/lib/aarch64-linux-gnu:/usr/lib/aarch64-linux-gnu:/lib64:/usr/lib64:/lib:/usr/lib"
        : "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib64:/usr/lib64:/lib:/usr/lib";
    if (r == NULL)
        r = find_in(s, system_dirs, "", name);
    return r;
}

void
elfw_deps_free(elfw_dep_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].path);
    }
    free(v);
}

int
elfw_deps(const char *program, const char *sysroot, elfw_dep_t **out, size_t *nout,
          char **interp, char *err, size_t errlen)
{
    *out = NULL;
    *nout = 0;
    *interp = NULL;
    dyn_obj_t prog;
    int rc = dyn_obj_read(program, &prog);
    if (rc < 0) {
        snprintf(err, errlen, "%s", rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
        return rc;
    }
    const lib_search_t search = { prog.machine, sysroot != NULL && sysroot[0] ? sysroot : NULL };
    /* The sysroot's own ld.so.conf when it has one (its includes are then read as
     * written, from our "/"), else ours: it names folders of every machine, and the
     * libraries of another machine are passed over. */
    strs_t conf = { 0 };
    char cfile[PATH_MAX];
    if (search.sysroot == NULL
        || snprintf(cfile, sizeof(cfile), "%s/etc/ld.so.conf", search.sysroot)
            >= (int)sizeof(cfile)
        || access(cfile, R_OK) != 0)
        snprintf(cfile, sizeof(cfile), "/etc/ld.so.conf");
    rc = conf_dirs(cfile, &conf, 0);
    elfw_dep_t *v = NULL;
    size_t n = 0, cap = 0;
    /* Breadth first, as the loader loads them; each name once. */
    dyn_obj_t *objs = NULL;
    size_t nobjs = 0;
    /* The object whose needs are followed: the program, then objs[0], objs[1], ...
     * (looked up again after each addition: objs moves when it grows). */
    for (size_t next = 0; rc == 0; next++) {
#define CUR (next == 0 ? &prog : &objs[next - 1])
        for (size_t i = 0; rc == 0 && i < CUR->nneeded; i++) {
            const char *name = CUR->needed[i];
            int seen = 0;
            for (size_t k = 0; k < n && !seen; k++)
                seen = strcmp(v[k].name, name) == 0;
            if (seen)
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                elfw_dep_t *nv = realloc(v, cap * sizeof(*v));
                dyn_obj_t *no = realloc(objs, cap * sizeof(*objs));
                if (nv != NULL)
                    v = nv;
                if (no != NULL)
                    objs = no;
                if (nv == NULL || no == NULL) {
                    rc = QP_ENOMEM;
                    break;
                }
            }
            v[n].name = strdup(name);
            v[n].path = find_lib(&search, name, CUR, &prog, &conf);
            memset(&objs[n], 0, sizeof(objs[n]));
            if (v[n].name == NULL) {
                free(v[n].path);
                rc = QP_ENOMEM;
                break;
            }
            /* A library that cannot be read has no dependencies to follow. */
            if (v[n].path != NULL && dyn_obj_read(v[n].path, &objs[n]) == QP_ENOMEM)
                rc = QP_ENOMEM;
            n++;
            nobjs = n;
        }
#undef CUR
        if (next >= nobjs)
            break;
    }
    for (size_t i = 0; i < nobjs; i++)
        dyn_obj_free(&objs[i]);
    free(objs);
    strs_free(&conf);
    if (rc == 0 && prog.interp != NULL)
        *interp = search.sysroot != NULL ? loadable_at(&search, prog.interp) : NULL;
    if (rc == 0 && prog.interp != NULL && *interp == NULL)
        *interp = strdup(prog.interp);
    dyn_obj_free(&prog);
    if (rc < 0) {
        elfw_deps_free(v, n);
        snprintf(err, errlen, "%s", qp_strerror(rc));
        return rc;
    }
    *out = v;
    *nout = n;
    return 0;
}
