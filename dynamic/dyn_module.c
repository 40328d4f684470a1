/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The ELF files a process has mapped (its executable and shared libraries), from
 * /proc/PID/maps: which file, where it is loaded, and a path through which exactly that
 * file is read (its device and inode must be the mapping's: a library replaced on disk
 * since it was loaded, by a package upgrade say, is refused, never read in its place).
 */
#include "config.h"

#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dynamic/dyn.h"

#define PAGE 4096u

void
dyn_modules_free(dyn_module_t *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        free(v[i].name);
        free(v[i].path);
    }
    free(v);
}

/* The device and inode of PATH (following links) as maps writes them; 0 when none. */
static int
dev_ino(const char *path, uint64_t *dev, uint64_t *ino)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return 0;
    *dev = (uint64_t)major(st.st_dev) << 32 | minor(st.st_dev);
    *ino = (uint64_t)st.st_ino;
    return 1;
}

/* The module of V (N of them) with DEV and INO, or NULL. */
static dyn_module_t *
find(dyn_module_t *v, size_t n, uint64_t dev, uint64_t ino)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].dev == dev && v[i].ino == ino)
            return &v[i];
    return NULL;
}

/* Add room for one more module to *V (K used of *CAP) and to the flags *CODE. */
static int
grow(dyn_module_t **v, uint8_t **code, size_t k, size_t *cap)
{
    if (k < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 16;
    dyn_module_t *nv = realloc(*v, c * sizeof(*nv));
    if (nv != NULL)
        *v = nv;
    uint8_t *nc = realloc(*code, c);
    if (nc != NULL)
        *code = nc;
    if (nv == NULL || nc == NULL)
        return QP_ENOMEM;
    *cap = c;
    return 0;
}

int
dyn_proc_modules(int pid, dyn_module_t **out /*OUT*/, size_t *n /*OUT*/)
{
    char path[64], line[4096 + 128];
    dyn_module_t *v = NULL;
    uint8_t *code = NULL; /* per module: it has an executable mapping */
    size_t k = 0, cap = 0;
    uint64_t edev = 0, eino = 0;
    FILE *f;
    int rc = 0;

    if (pid <= 0 || out == NULL || n == NULL)
        return QP_EINVAL;
    snprintf(path, sizeof(path), "/proc/%d/exe", pid);
    int have_exe = dev_ino(path, &edev, &eino);
    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    if ((f = fopen(path, "r")) == NULL)
        return QP_EIO;
    /* The mappings of a file are gathered by device and inode (the first name kept). */
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long lo, hi, off, ino;
        unsigned maj, min;
        char perms[8];
        int name = 0;
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &lo, &hi, perms, &off, &maj,
                &min, &ino, &name)
                < 7
            || ino == 0 || name == 0 || line[name] != '/')
            continue;
        uint64_t dev = (uint64_t)maj << 32 | min;
        dyn_module_t *m = find(v, k, dev, ino);
        if (m == NULL) {
            if ((rc = grow(&v, &code, k, &cap)) < 0)
                break;
            m = &v[k];
            memset(m, 0, sizeof(*m));
            code[k++] = 0;
            m->dev = dev;
            m->ino = ino;
            m->lo = lo;
            m->one[0] = lo;
            m->one[1] = hi;
            m->exe = have_exe && dev == edev && ino == eino;
            m->path = strdup(line + name);
            const char *base = strrchr(line + name, '/') + 1;
            m->name = strndup(base, strcspn(base, " ")); /* " (deleted)" is not its name */
            if (m->path == NULL || m->name == NULL) {
                rc = QP_ENOMEM;
                break;
            }
        }
        /* (Address 0 is never mapped: base 0 means no mapping of offset 0 yet.) */
        if (off == 0 && (m->base == 0 || lo < m->base))
            m->base = lo;
        if (lo < m->lo)
            m->lo = lo;
        if (hi > m->hi)
            m->hi = hi;
        if (perms[2] == 'x')
            code[m - v] = 1;
    }
    fclose(f);
    if (rc < 0) {
        dyn_modules_free(v, k);
        free(code);
        return rc;
    }
    /* Keep the files with code (data files: locale archives, fonts, are not modules). */
    size_t j = 0;
    for (size_t i = 0; i < k; i++) {
        if (!code[i]) {
            free(v[i].name);
            free(v[i].path);
            continue;
        }
        v[j++] = v[i];
    }
    free(code);
    *out = v;
    *n = j;
    return 0;
}

int
dyn_module_path(int pid, const dyn_module_t *m, char *buf, size_t cap, const char **why)
{
    uint64_t dev = 0, ino = 0;

    if (pid <= 0 || m == NULL || buf == NULL || cap == 0 || why == NULL)
        return QP_EINVAL;
    *why = NULL;
    /* The process's view of the path (its root may be another: a container, chroot). */
    if (snprintf(buf, cap, "/proc/%d/root%s", pid, m->path) < (int)cap
        && dev_ino(buf, &dev, &ino) && dev == m->dev && ino == m->ino)
        return 0;
    /* The mapping itself (following it needs CAP_SYS_ADMIN). */
    snprintf(buf, cap, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)m->one[0],
        (unsigned long long)m->one[1]);
    if (dev_ino(buf, &dev, &ino) && dev == m->dev && ino == m->ino)
        return 0;
    *why = "the file mapped is no longer at its path (replaced or deleted since it was "
           "loaded) and /proc/PID/map_files cannot be opened (root only): restart the "
           "program to measure it";
    return QP_ENOTFOUND;
}

int
dyn_module_bias(const dyn_module_t *m, const cfg_image_t *img, uint64_t *bias /*OUT*/)
{
    uint64_t low = UINT64_MAX;

    if (m == NULL || img == NULL || bias == NULL)
        return QP_EINVAL;
    for (size_t i = 0; i < img->nsegments; i++)
        if (img->segments[i].type == 1 /* PT_LOAD */ && img->segments[i].vaddr < low)
            low = img->segments[i].vaddr;
    if (low == UINT64_MAX || m->base == 0)
        return QP_EFORMAT;
    *bias = m->base - (low & ~(uint64_t)(PAGE - 1));
    return 0;
}

/*****************************************************************************
 * The dynamic linker's debugger interface (struct r_debug)
 */

/* Offsets in struct r_debug (x86-64): r_version, r_map, r_brk, r_state, r_ldbase. */
#define R_BRK 16
#define R_STATE 24

int
dyn_proc_r_debug(dyn_proc_t *p, uint64_t *rdebug /*OUT*/, uint64_t *brk /*OUT*/)
{
    char path[64];
    uint64_t av[2], phdr = 0, phnum = 0, bias = 0, dyn = 0, dynsz = 0, r = 0;
    Elf64_Phdr ph[64];
    int fd, have_phdr = 0;

    if (p == NULL || rdebug == NULL || brk == NULL)
        return QP_EINVAL;
    snprintf(path, sizeof(path), "/proc/%d/auxv", dyn_proc_pid(p));
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return QP_EIO;
    while (read(fd, av, sizeof(av)) == (ssize_t)sizeof(av) && av[0] != AT_NULL) {
        if (av[0] == AT_PHDR)
            phdr = av[1];
        else if (av[0] == AT_PHNUM)
            phnum = av[1];
    }
    close(fd);
    if (phdr == 0 || phnum == 0 || phnum > 64)
        return QP_ENOTFOUND;
    QP_CHECK(dyn_proc_read(p, phdr, ph, phnum * sizeof(ph[0])));
    for (size_t i = 0; i < phnum; i++)
        if (ph[i].p_type == PT_PHDR) {
            bias = phdr - ph[i].p_vaddr;
            have_phdr = 1;
        }
    for (size_t i = 0; i < phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC) {
            dyn = ph[i].p_vaddr + bias;
            dynsz = ph[i].p_memsz;
        }
    if (!have_phdr || dyn == 0)
        return QP_ENOTFOUND; /* static, or no way to place the dynamic section */
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= dynsz && r == 0;
         off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        QP_CHECK(dyn_proc_read(p, dyn + off, &d, sizeof(d)));
        if (d.d_tag == DT_NULL)
            break;
        if (d.d_tag == DT_DEBUG) {
            if (d.d_un.d_ptr == 0)
                return QP_ENOTFOUND; /* the loader has not run yet */
            r = d.d_un.d_ptr;
        }
    }
    if (r == 0)
        return QP_ENOTFOUND;
    QP_CHECK(dyn_proc_read(p, r + R_BRK, brk, sizeof(*brk)));
    if (*brk == 0)
        return QP_ENOTFOUND;
    *rdebug = r;
    return 0;
}

int
dyn_proc_r_state(dyn_proc_t *p, uint64_t rdebug)
{
    int32_t st;
    QP_CHECK(dyn_proc_read(p, rdebug + R_STATE, &st, sizeof(st)));
    return st;
}
