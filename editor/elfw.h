/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_ELFW_H
#define QP_ELFW_H
/*
 * PURPOSE: the file half of the static editor: write a new ELF executable that is the
 * input plus patches to its loaded bytes, new loadable regions (relocated code, tables,
 * unwind data), updated symbols, a new PT_GNU_EH_FRAME target and, if asked, cleared CET
 * property bits. elfw.c is the only user of libelf. It knows nothing of CFGs or
 * instructions: the memory half (ed_*) decides every byte.
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/qp_err.h"
#include "editor/ed.h"

/* A new loadable region (becomes a PT_LOAD and a section). */
typedef struct elfw_region {
    const char *name;        /* section name, e.g. ".qpt.text" */
    uint64_t vaddr;          /* link-time address (PIE: relative like the input's) */
    const uint8_t *bytes;    /* contents (size bytes); NULL for zero-filled (NOBITS) */
    uint64_t size;           /* size in bytes */
    uint32_t prot;           /* ED_PROT_* bits (R, W, X); never W and X together */
    uint64_t align;          /* section alignment (the segment is page-aligned) */
    uint64_t mirror;         /* not 0: BYTES is NULL and the region maps the input's file
                              * bytes (patched) that are loaded at this address, whose
                              * page offset it shares: a second view of old text */
} elfw_region_t;

/* New bytes for part of an existing loaded section (old text redirects). */
typedef struct elfw_patch {
    uint64_t vaddr;          /* address in the input's loaded image */
    const uint8_t *bytes;    /* the new bytes */
    uint64_t len;            /* how many */
} elfw_patch_t;

/* A function symbol to (re)define in .symtab: a relocated procedure's new address. */
typedef struct elfw_symbol {
    const char *name;        /* the name (an existing .symtab name is moved, else added) */
    uint64_t value;          /* new address */
    uint64_t size;           /* new size */
    uint32_t region;         /* index of the region in elfw_request_t.regions holding it */
} elfw_symbol_t;

/* New contents for a non-alloc section (debug information), or a new such section. */
typedef struct elfw_section {
    const char *name;        /* section name, e.g. ".debug_line" */
    const uint8_t *bytes;    /* the contents */
    uint64_t size;           /* their size */
} elfw_section_t;

/*
 * FN(ARG, path) is called once the temporary output exists, and FN(ARG, NULL) once it is
 * renamed or removed, so that a tool can remove it when a signal ends the process (the
 * path stays valid until the NULL call).
 */
typedef struct elfw_tmp_hook {
    void (*fn)(void *arg, const char *tmp);
    void *arg;
} elfw_tmp_hook_t;

typedef struct elfw_request {
    const char *input;            /* the input executable (never modified) */
    const char *output;           /* the output path (written to a temp file, renamed) */
    const elfw_region_t *regions; /* new regions, in increasing address order */
    size_t nregions;
    const elfw_patch_t *patches;  /* patches, any order, non-overlapping */
    size_t npatches;
    const elfw_symbol_t *symbols; /* symbols to move or add */
    size_t nsymbols;
    const elfw_section_t *sections; /* non-alloc sections to replace or add, by name */
    size_t nsections;
    uint64_t eh_frame_hdr;        /* new PT_GNU_EH_FRAME address (inside a region, or
                                   * the input's with unwind_in_place), or 0 */
    uint64_t eh_frame_hdr_size;   /* its size */
    uint64_t unwind_in_place;     /* not 0: the new unwind tables were patched over the
                                   * input's, .eh_frame at its address with this many
                                   * bytes, .eh_frame_hdr at its address (eh_frame_hdr)
                                   * with eh_frame_hdr_size: both sections and
                                   * PT_GNU_EH_FRAME keep their places and shrink */
    int clear_cet;                /* clear IBT and SHSTK in .note.gnu.property */
    int rename_old_unwind;        /* rename the input's .eh_frame and .eh_frame_hdr to
                                   * .qpt.old.eh_frame*, because a new region named
                                   * .eh_frame replaces them (gdb reads that name) */
    uint64_t entry;               /* new e_entry, or 0 to keep the input's */
    const struct elfw_tmp_hook *tmp_hook; /* told about the temporary file, or NULL */
    const struct cfg_image *analysed; /* the image of the input the request was made
                                   * from, or NULL: the input read must be that file
                                   * unchanged since (cfg_image_file_same) */
    int *phdr_far;                /* OUT (or NULL): 1 when the moved program header
                                   * table is where only Linux >= 5.18 finds it (see
                                   * elfw_layout), else 0 */
} elfw_request_t;

/*
 * Write the output described by REQ. Original segments keep their file offsets and
 * addresses; the new regions come after the last PT_LOAD, each in its own page-aligned
 * PT_LOAD; when the program header table has no free slot, it is moved into a new
 * read-only PT_LOAD at the end (and PT_PHDR follows it). The output has the input's mode
 * without the set-user-ID and set-group-ID bits (an instrumented program is not the
 * audited one: making it privileged again is the user's deliberate chmod), is written to
 * a temporary file in the same directory and renamed over OUTPUT only when complete; an
 * existing OUTPUT that is not a regular file (a device, FIFO, socket) is never replaced; the same request gives byte-identical output.
 * An input that changed while it was rewritten (not the file REQ->analysed was read
 * from, or changed since; or changed before the output is renamed) fails with QP_EIO
 * ("input changed while it was rewritten"). On failure nothing is left
 * behind and ERR (ERRLEN bytes) holds one line saying why; returns 0, QP_EIO (errno
 * kept), QP_EFORMAT, QP_EUNSUPP or QP_ENOMEM; also QP_EINVAL for a bad request (OUTPUT
 * is the input or exists and is not a regular file, a W+X region, a region below the last segment's page, a patch outside
 * the loaded sections' bytes), QP_EDIR (INPUT or OUTPUT is a directory), QP_ENOTELF,
 * QP_EARCH (not x86-64 ELF64) and QP_ENOTEXEC (not ET_EXEC or ET_DYN).
 */
int elfw_write(const elfw_request_t *req, char *err, size_t errlen);


/*****************************************************************************
 * The static rewrite (elfw_rewrite.c): plan -> image -> unwind tables -> file
 */

struct cfg_prog;
struct ed_plan;

typedef struct elfw_rewrite_stats {
    uint64_t input_size;    /* bytes of the input file */
    uint64_t output_size;   /* bytes of the output file */
    uint64_t text_size;     /* bytes of new code */
    uint64_t unwind_size;   /* bytes of new unwind tables */
    uint32_t nfde_moved;    /* FDEs rewritten for moved code */
    uint64_t desc_size;     /* bytes of the measurement description */
    uint32_t setid_dropped; /* the input's S_ISUID/S_ISGID bits the output did not get */
    int phdr_far;           /* the program headers are where only Linux >= 5.18 finds
                             * them (elfw_request_t.phdr_far): older kernels and valgrind
                             * give the program a wrong AT_PHDR */
    ed_dwarf_out_t dwarf;   /* DWARF rewriting figures (secs freed: nsecs is 0) */
    ed_fde_fail_t unwind_fail; /* set when the rewrite failed because an FDE of moved
                                * code could not be rewritten: a plan made with it in
                                * ed_opts_t.stay keeps that code in place */
    uint32_t nplt_direct;   /* a shared library: JUMP_SLOT words its start points at the
                             * new code of its own procedures (elfw_got_fix) */
    const char *plt_why;    /* a shared library with none of them: why (static text) */
} elfw_rewrite_stats_t;

/*
 * Measurement to carry (NULL for the null rewrite): NCOUNTERS counters in a new
 * zero-filled writable region (after the runtime's state page), the runtime blob
 * (runtime/qprt.h) as the new entry point, and the description DESCRIBE produces once
 * the code is placed (it gets the plan and the address of counter 0; it returns the
 * serialized description, malloc'ed, and its id), in a non-alloc section `.qpt.desc`
 * (never loaded: the runtime gets only the id, in its parameters; qp reads the file).
 * With switchable increments, the table of their sites goes into a read-only region
 * `.qpt.locks` that the runtime uses to make them atomic (runtime/qprt.h).
 */
typedef struct elfw_instr {
    uint32_t ncounters;
    int lock_at_start;       /* switchable increments (ARCH_INC_SWITCH) are made atomic
                              * before the program runs (1: QPRT_F_LOCK_AT_START), or
                              * then unless a watcher is there (2: QPRT_F_LOCK_UNWATCHED) */
    int (*describe)(void *arg, const struct ed_plan *plan, uint64_t counters,
                    uint8_t **desc /*OUT*/, size_t *len /*OUT*/, uint64_t *id /*OUT*/);
    void *arg;
    /* Called (when not NULL) once the counters are placed, before the code is laid out:
     * the last moment to give the plan snippets that name counter addresses. */
    int (*placed)(void *arg, const struct ed_plan *plan, uint64_t counters);
    void *placed_arg;
    int watcher;             /* its hooks see every thread start and fork of the process
                              * (QPRT_F_WATCHER) */
    /* Control-flow tracing (non-zero): the runtime keeps per-thread trace buffers
     * (QPRT_F_TRACE) and writes their records in units of TRACE bytes, 4 or 2
     * (QPRT_F_TRACE16); and, when not NULL, SECTION (called after DESCRIBE) gives a
     * non-allocated section to add (its name, and malloc'ed bytes that the rewrite
     * frees). */
    int trace;
    int (*section)(void *arg, const char **name /*OUT*/, uint8_t **bytes /*OUT*/,
                   size_t *len /*OUT*/);
    void *section_arg;
} elfw_instr_t;

/* The address of the runtime's trace buffer refill (QPRT_TRACE_OFF in the blob), once
 * the runtime is placed (from elfw_instr_t.placed on). */
uint64_t elfw_trace_refill(const struct ed_plan *plan);

/* The runtime blob's address and its size in *SIZE, once it is placed (0: not yet). */
uint64_t elfw_runtime(const struct ed_plan *plan, uint64_t *size /*OUT*/);

/*
 * The runtime blob (runtime/qprt.h) a program of ELF machine MACHINE (ARCH_EM_*) carries:
 * with control-flow tracing (TRACE) or the smaller one without. Its bytes and *SIZE, or
 * NULL with one line in WHY (WHYLEN bytes) when there is none: tracing on AArch64, an
 * AArch64 runtime not built (configure found no aarch64-linux-gnu-gcc), another machine.
 */
const unsigned char *elfw_runtime_blob(unsigned machine, int trace, size_t *size /*OUT*/,
                                       char *why, size_t whylen);

/*****************************************************************************
 * The libraries a program loads (elfw_deps.c)
 */

/* A library a program needs at start. */
typedef struct elfw_dep {
    char *name; /* as DT_NEEDED names it (its soname) */
    char *path; /* the file the dynamic linker would load, or NULL when none is found */
} elfw_dep_t;

/*
 * The libraries PROGRAM loads at start: its DT_NEEDED entries and theirs, breadth first
 * (the loader's order), each name once, found as glibc's dynamic linker finds them:
 * DT_RPATH of the needing object, then of the program (for objects without DT_RUNPATH),
 * DT_RUNPATH of the needing object ($ORIGIN expanded), the folders of /etc/ld.so.conf
 * and the files it includes, then the system folders of the program's machine (x86-64
 * or AArch64; only libraries of that machine are taken). SYSROOT (NULL or "": none) is
 * where a program of another machine finds its libraries, as qemu-user's -L: every
 * absolute path is tried under it first (SYSROOT/etc/ld.so.conf replaces ours when it
 * exists). LD_LIBRARY_PATH and the loader's cache are not consulted, and nothing is run.
 * *INTERP gets the program's PT_INTERP (under SYSROOT when it is there: the dynamic
 * linker, not in the list) or NULL. Returns 0, or QP_EIO (errno kept), QP_EFORMAT (also
 * for a machine we do not rewrite), QP_ENOMEM with one line in ERR. Free with
 * elfw_deps_free.
 */
int elfw_deps(const char *program, const char *sysroot, elfw_dep_t **out /*OUT*/,
              size_t *n /*OUT*/, char **interp /*OUT*/, char *err, size_t errlen);
void elfw_deps_free(elfw_dep_t *v, size_t n);

/* How to write a rewrite (NULL: the defaults, all 0). */
typedef struct elfw_rewrite_opts {
    const elfw_tmp_hook_t *tmp_hook; /* passed on as elfw_request_t.tmp_hook, or NULL */
    int origin_first;  /* the output looks for its libraries in its own folder first:
                        * "$ORIGIN" ahead of its DT_RUNPATH, else of its DT_RPATH (added
                        * in a spare dynamic entry when it has neither), in a copy of
                        * .dynstr that DT_STRTAB names (.qpt.dynstr); nothing for a
                        * program without a dynamic section */
    /* The end of each phase of the writing (development timing, QP_DEBUG), or NULL. */
    void (*on_phase)(void *arg, const char *phase);
    void *phase_arg;
    unsigned threads;  /* 2 or more: the measurement description (elfw_instr_t.describe)
                        * is made on another thread while this one builds the unwind
                        * tables (0, 1: one after the other, the description not made
                        * when the tables failed); the output is the same, and a
                        * failure of the tables is the rewrite's error either way */
} elfw_rewrite_opts_t;

/*
 * Apply PLAN (its procedures move into a new executable region of the file's image),
 * build unwind tables for the moved code, and write OUTPUT from INPUT with elfw_write:
 * new regions, old-text redirects, moved .symtab symbols, the new PT_GNU_EH_FRAME, the
 * IBT/SHSTK property bits cleared (new code has no endbr64 landing pads), and DWARF debug
 * information that names the new code (ed_dwarf_build). Returns 0 or a QP_E* code with
 * one line in ERR; stats->unwind_fail says when an FDE was to blame.
 */
int elfw_rewrite(const struct cfg_prog *prog, struct ed_plan *plan, const elfw_instr_t *instr,
                 const char *input, const char *output, const elfw_rewrite_opts_t *opts,
                 elfw_rewrite_stats_t *stats /*OUT*/, char *err, size_t errlen);

/*
 * Where elfw_write puts the first new bytes of a rewrite of INPUT that adds sections and
 * section names (the file half's answer to ed_image's guess): the input's end, or the
 * offset of its section header table and name table when they end the file (they are
 * written anew). 0, or QP_EIO / QP_EFORMAT.
 */
int elfw_new_bytes_at(const char *input, uint64_t *off /*OUT*/);

/*
 * Make the dynamic section's DT_INIT entry (IMG's dyninit.init_at: DT_INIT or a spare
 * DT_NULL) start at START: 0, QP_EUNSUPP when IMG has no such entry.
 */
int elfw_set_init(ed_image_t *im, const cfg_image_t *img, uint64_t start);

/*
 * A shared library's calls of its own exported functions, straight to the new code
 * (editor/elfw_gotfix.c): once PLAN is applied to IM, a start (arch_emit_got_fix) with
 * the JUMP_SLOT words whose symbol IMG defines at an entry that now holds a redirect, in
 * a new executable region within [LO, HI)'s reach (its address in *AT), made IMG's
 * DT_INIT; it goes on to the start DT_INIT named before (the runtime's, the library's
 * own) if any. *N is the number of words; with none (or IMG binds lazily, or is no
 * library) nothing is added, *AT and *N are 0 and *WHY says why (static text, NULL for
 * no library). Returns 0 or a QP_E* code.
 */
int elfw_got_fix(ed_image_t *im, const cfg_image_t *img, struct ed_plan *plan, uint64_t lo,
                 uint64_t hi, uint64_t *at /*OUT*/, uint32_t *n /*OUT*/,
                 const char **why /*OUT*/);

#endif
