/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_CFG_H
#define QP_CFG_H
/*
 * PURPOSE: the program model. A neutral image (sections, segments, symbols, dynamic
 * relocations, entry point, build-id) read from an executable through BFD (cfg_bfd.c is
 * the only BFD user, every call under one lock: images may be opened, read and closed
 * from several threads, one thread at a time per image) or built from bytes by tests; procedures discovered in it; one control
 * flow graph per procedure with jump tables, dominators and natural loops.
 * cfg/ depends on arch/ only. It never sees libelf or ptrace and never writes files.
 * Lifetimes: an image owns every string and byte it hands out until cfg_image_destroy();
 * a program (cfg_prog_t) points into its image and must be destroyed first.
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"
#include "base/qp_edge.h"

#define CFG_NONE UINT32_MAX

/*****************************************************************************
 * The image
 */

enum {
    CFG_SEC_ALLOC = 1u << 0, /* occupies memory at run time */
    CFG_SEC_LOAD = 1u << 1,  /* has contents in the file (not .bss) */
    CFG_SEC_CODE = 1u << 2,  /* executable */
    CFG_SEC_WRITE = 1u << 3, /* writable */
    CFG_SEC_COMPRESSED = 1u << 4, /* SHF_COMPRESSED: bytes are the compressed file bytes */
};

typedef struct cfg_section {
    const char *name;     /* ".text" */
    uint64_t vma;         /* link-time address */
    uint64_t size;        /* size in bytes */
    uint64_t file_off;    /* offset in the file (0 for NOBITS) */
    const uint8_t *bytes; /* contents: the loaded bytes (CFG_SEC_LOAD), or the file bytes of
                           * a non-alloc section with contents (.debug_*); else NULL */
    uint32_t flags;       /* CFG_SEC_* */
} cfg_section_t;

enum {
    CFG_SEG_X = 1u << 0,
    CFG_SEG_W = 1u << 1,
    CFG_SEG_R = 1u << 2,
};

typedef struct cfg_segment {
    uint32_t type;        /* p_type (PT_LOAD = 1, ...) as in the file */
    uint32_t flags;       /* CFG_SEG_* */
    uint64_t vaddr;       /* p_vaddr */
    uint64_t memsz;       /* p_memsz */
    uint64_t offset;      /* p_offset */
    uint64_t filesz;      /* p_filesz */
    uint64_t align;       /* p_align */
} cfg_segment_t;

typedef enum cfg_sym_kind {
    CFG_SYM_FUNC = 0,  /* STT_FUNC */
    CFG_SYM_IFUNC,     /* STT_GNU_IFUNC: the address is the resolver */
    CFG_SYM_OBJECT,    /* STT_OBJECT */
    CFG_SYM_NOTYPE,    /* STT_NOTYPE (labels in hand-written assembly) */
    CFG_SYM_OTHER,
    CFG_SYM_TLS,       /* STT_TLS (in cfg_image_t.variables only): the address is the
                        * offset in the PT_TLS image */
} cfg_sym_kind_t;

typedef enum cfg_sym_src {
    CFG_SYMSRC_SYMTAB = 0, /* .symtab */
    CFG_SYMSRC_DYNSYM,     /* .dynsym */
    CFG_SYMSRC_PLT,        /* synthetic foo@plt */
    CFG_SYMSRC_CODE,       /* named from the code: _start (the entry), main */
} cfg_sym_src_t;

typedef struct cfg_symbol {
    const char *name;    /* as in the file ("foo@plt" for PLT entries) */
    uint64_t addr;       /* value */
    uint64_t size;       /* st_size, 0 if unknown */
    uint8_t kind;        /* cfg_sym_kind_t */
    uint8_t src;         /* cfg_sym_src_t */
    uint8_t global;      /* nonzero for global or weak binding */
} cfg_symbol_t;

typedef enum cfg_reloc_kind {
    CFG_RELOC_RELATIVE = 0, /* word at `where` = load base + value */
    CFG_RELOC_IRELATIVE,    /* word = resolver(value)(): value is an IFUNC resolver */
    CFG_RELOC_ABS64,        /* word = symbol + addend (value = symbol value + addend, if defined) */
    CFG_RELOC_GLOB_DAT,
    CFG_RELOC_JUMP_SLOT,
    CFG_RELOC_OTHER,
} cfg_reloc_kind_t;

typedef struct cfg_reloc {
    uint64_t where;      /* address of the relocated word */
    uint64_t value;      /* addend, or symbol value + addend for ABS64 to a defined symbol */
    const char *sym;     /* symbol name or NULL */
    uint64_t addend_at;  /* link-time address of the entry's r_addend when it is in a
                          * loaded SHT_RELA section, else 0 (RELR: the addend is the
                          * word in place) */
    uint8_t kind;        /* cfg_reloc_kind_t */
} cfg_reloc_t;

enum {
    CFG_IMG_PIE = 1u << 0,      /* ET_DYN executable (PIE or static-pie) */
    CFG_IMG_DYNAMIC = 1u << 1,  /* has PT_INTERP: linked against shared libraries */
    CFG_IMG_SYMTAB = 1u << 2,   /* has a .symtab (not stripped) */
    CFG_IMG_IBT = 1u << 3,      /* GNU property: IBT */
    CFG_IMG_SHSTK = 1u << 4,    /* GNU property: SHSTK */
    CFG_IMG_SHLIB = 1u << 5,    /* a shared library (ET_DYN, not an executable; also
                                 * CFG_IMG_PIE: its code is position independent) */
    CFG_IMG_LAZY = 1u << 6,     /* has a dynamic section and binds symbols lazily (no
                                 * DT_BIND_NOW, DF_BIND_NOW or DF_1_NOW) */
};

/* Where a shared library's initialisation starts (the runtime of a rewritten library
 * takes its place): DT_INIT, or a spare entry of the dynamic section that can become
 * one. */
typedef struct cfg_dyninit {
    uint64_t init;       /* DT_INIT's value (link-time address), or 0 */
    uint64_t init_at;    /* address of DT_INIT's entry (its tag) in the dynamic section,
                          * or of the spare DT_NULL that can become DT_INIT, or 0 */
} cfg_dyninit_t;

typedef struct cfg_image {
    const char *path;          /* as given to the reader */
    uint32_t flags;            /* CFG_IMG_* */
    uint64_t entry;            /* e_entry */
    cfg_section_t *sections;   /* in file order */
    size_t nsections;
    cfg_segment_t *segments;   /* program headers in file order */
    size_t nsegments;
    cfg_symbol_t *symbols;     /* sorted by address, then by preference (symtab func first) */
    size_t nsymbols;
    cfg_symbol_t *variables;   /* data objects outside code (.data, .bss, .rodata; not
                                * thread-local), in symbol-table order: for lookups by name */
    size_t nvariables;
    cfg_reloc_t *relocs;       /* dynamic relocations, sorted by `where` */
    size_t nrelocs;
    cfg_dyninit_t dyninit;     /* shared libraries: where initialisation starts */
    uint64_t *init_funcs;      /* code addresses from .init_array/.preinit_array/.fini_array */
    size_t ninit_funcs;
    uint8_t build_id[64];      /* NT_GNU_BUILD_ID descriptor */
    size_t build_id_len;       /* 0 when there is none */
    uint64_t file_size;        /* size of the file in bytes */
    const char *debug_file;    /* the separate debug file whose symbols were read (the
                                * program is stripped), or NULL */
    void *priv;                /* the reader's own state */
    const arch_isa_t *isa;     /* the instruction set (from e_machine); NULL means the
                                * host's, x86-64 (cfg_image_isa) */
} cfg_image_t;

/* The instruction set of IMG's code: its isa, or x86-64 when none was set. */
static inline const arch_isa_t *
cfg_image_isa(const cfg_image_t *img)
{
    return img->isa != NULL ? img->isa : arch_isa_host();
}

/*
 * Read the executable or shared library at PATH (CFG_IMG_SHLIB). Fails with QP_EIO
 * (cannot open; errno is kept), QP_EDIR, QP_ENOTELF, QP_EARCH (not ELF64 little-endian, or a
 * machine arch/ does not know), QP_EUNSUPP (a machine arch/ knows that the rest does not:
 * AArch64; cfg_image_open_bfd_why says so), QP_EFORMAT,
 * QP_ENOMEM. On success *OUT is owned by the caller (cfg_image_destroy).
 */
int cfg_image_open_bfd(const char *path, cfg_image_t **out /*OUT*/);

/*
 * As cfg_image_open_bfd; when it fails, WHY (WHYLEN bytes, may be NULL) gets a phrase
 * naming the defect when there is more to say than the error code ("section .eh_frame at
 * 0x3248 does not match its segment (...)"), else an empty string. Among the QP_EFORMAT
 * cases: an allocated section whose address, file offset or size disagrees with the
 * PT_LOAD segment that loads it (the loader uses only segments, this reader sections),
 * .bss outside every segment's memory, and .eh_frame_hdr or .dynamic where
 * PT_GNU_EH_FRAME or PT_DYNAMIC is not.
 */
int
cfg_image_open_bfd_why(
    const char *path, cfg_image_t **out /*OUT*/, char *why, size_t whylen);

/*
 * As cfg_image_open_bfd_why, for any ISA arch/ knows (AArch64 too; img->isa says which),
 * where the functions above refuse all but x86-64 with QP_EUNSUPP: the analysis, qp's
 * reports and qpt-rewrite (which refuses what its drivers cannot do on that ISA) use
 * it; libqpt's mutators, metrics and dyn know only x86-64.
 */
int
cfg_image_open_bfd_analysis(
    const char *path, cfg_image_t **out /*OUT*/, char *why, size_t whylen);

/* How cfg_image_open_bfd_flags reads a file. */
enum {
    CFG_OPEN_ANY_ISA = 1u << 0, /* any ISA arch/ knows, as cfg_image_open_bfd_analysis */
    /* The big arrays the reader writes whole (the relocations: chromium's 44 MB) ask for
     * transparent huge pages (base/qp_huge.h). The caller decides: qp's report gains
     * (fewer page faults), the rewriter loses (system time on our VM: tools/tool_heap.c). */
    CFG_OPEN_HUGE_PAGES = 1u << 1,
    /* Without the relative relocations (CFG_RELOC_RELATIVE: a PIE's pointers into itself,
     * chromium's 1.1 million, 44 MB, never stored) nor the init functions they locate
     * (img->init_funcs is empty): for a reader that looks up the relocations of symbols
     * only (qp's flat report: the GOT slots of PLT stubs) and never builds the CFG. */
    CFG_OPEN_SYMBOL_RELOCS = 1u << 2,
};

/* As cfg_image_open_bfd_why, with FLAGS (CFG_OPEN_*). */
int
cfg_image_open_bfd_flags(const char *path, cfg_image_t **out /*OUT*/, char *why,
                         size_t whylen, unsigned flags);

/*
 * A one-section image of raw code: N bytes at VMA, entry at VMA. For tests and for
 * analysing code that has no file. The bytes are copied.
 */
int cfg_image_from_bytes(const uint8_t *b, size_t n, uint64_t vma, cfg_image_t **out /*OUT*/);

/*
 * Where separate debug files are looked for, for every image read after this call:
 * DIRS is a colon-separated list of directories, each searched like gdb's
 * debug-file-directory (DIR/.build-id/xx/rest.debug by build-id, DIR/PATHDIR/NAME for a
 * .gnu_debuglink NAME); NULL restores the default, /usr/lib/debug. Process-wide (set it
 * before reading, from one thread). Returns 0 or QP_ENOMEM.
 */
int cfg_set_debug_dirs(const char *dirs);

/*
 * The demangled (C++, Rust, D) form of NAME with its parameters, in a new string the
 * caller frees; NULL when NAME is not a mangled name (or on ENOMEM).
 */
char *cfg_demangle(const char *name);

/*
 * Does PAT name the procedure whose stored name is NAME? PAT is compared (GLOB: as an
 * fnmatch pattern) with NAME, with its demangled form, with that form without the
 * parameter list ("ns::f" for "_ZN2ns1fEi"), and for a template function also without
 * its return type ("f<int>" for "int f<int>(int)").
 */
int cfg_name_match(const char *pat, const char *name, int glob);

/*
 * A pattern MODULE:NAME names the procedures NAME of the source files MODULE: the ':'
 * that separates them (one ':', C++'s '::' being part of a name), or NULL when PAT has
 * no module. cfg_module_match: do the N bytes of PAT (a shell pattern) name the source
 * FILE, by its path or its last component? FILE NULL: no.
 */
const char *cfg_module_sep(const char *pat);
int cfg_module_match(const char *pat, size_t n, const char *file);

/* Free an image and everything it owns. NULL is fine. */
void cfg_image_destroy(cfg_image_t *img);

/*
 * For a reader of big files (qp report on chromium): let go of the resident pages of
 * IMG's mapped file (opened with cfg_image_open_bfd; else nothing happens). The bytes
 * stay where they are and readable: a page touched again is read back from the page
 * cache. What was read once (relocations, a description's index and its id check)
 * then stops counting in the process's memory.
 */
void cfg_image_release_pages(const cfg_image_t *img);

/*
 * Let go of the descriptors of the file IMG was read from (cfg_image_open_bfd): its BFD
 * and that of its DWARF types; for an image kept long after its file is needed (a library
 * a process unloaded, whose procedures' names a mutator still reads: one descriptor each
 * otherwise). The file's mapping stays (it holds no descriptor; its pages are the page
 * cache's), and so does everything read: sections and their bytes, symbols, relocations,
 * names (also the source file names cfg_image_line gave), the decoded instructions and
 * the CFG. From then on the source lines, the DWARF types and the file's state are
 * unknown (cfg_image_line, cfg_image_func_line and cfg_arg_field: not found;
 * cfg_image_file_same: 1, as for an image not read from a file). Not while another
 * thread uses IMG (other images: yes). Returns 0 (also for an image not read from a file, or released
 * already) or QP_ENOMEM (IMG unchanged).
 */
int cfg_image_release_file(cfg_image_t *img);

/*
 * Has the file IMG was read from (cfg_image_open_bfd) changed since it was opened? ST is
 * the file's state now (fstat of a descriptor opened since, or of the same path): 1
 * when it is the same file (device, inode) with the same size and modification time as
 * at the opening, else 0; 1 also for an image not read from a file.
 */
struct stat;
int cfg_image_file_same(const cfg_image_t *img, const struct stat *st);

/*
 * Is the separate debug file whose symbols IMG took (img->debug_file) still the file,
 * size and modification time it was when they were read (its path stat'ed now)? 1 when
 * it is, or when IMG took none; else 0.
 */
int cfg_image_debug_same(const cfg_image_t *img);

/* Are A and B the states of the same file (device, inode) with the same size,
 * modification time and change time? 1 or 0. */
int cfg_file_same(const struct stat *a, const struct stat *b);

/*
 * The path of the input file whose mapping (an image's, cfg_image_open_bfd) holds ADDR,
 * or NULL. Async-signal-safe: for a SIGBUS handler, which a read of a page past the end
 * of a file truncated under the process raises. The string is valid while the image is.
 */
const char *cfg_mapped_at(const void *addr);

/*
 * Another reader's mapping MAP of LEN bytes of the file PATH (libelf's, where elf_begin
 * reads with ELF_C_READ_MMAP as libdw's DWARF_C_READ does: elf_rawfile gives it) made
 * known to cfg_mapped_at as well, so that a file truncated while it is read ends a tool
 * in one line, not in a crash. Returns MAP, to give cfg_mapped_remove before it is
 * unmapped (elf_end), or NULL (MAP NULL, or no slot was free: a fault there stays a
 * crash).
 */
const void *cfg_mapped_add_file(const void *map, size_t len, const char *path);

/* Forget the mapping MAP (cfg_mapped_add_file's; NULL: nothing), before it is unmapped. */
void cfg_mapped_remove(const void *map);

/* The best symbol naming code at ADDR (the image is finished: symbols are sorted by
 * address, then by preference), or NULL. */
const cfg_symbol_t *cfg_image_symbol_at(const cfg_image_t *img, uint64_t addr);

/* The section holding ADDR (loaded contents only), or NULL. */
const cfg_section_t *cfg_image_section_at(const cfg_image_t *img, uint64_t addr);

/* The section named NAME that has contents (allocated or not: e.g. .qpt.desc), or NULL. */
const cfg_section_t *cfg_image_section_named(const cfg_image_t *img, const char *name);

/*
 * A pointer to the loaded bytes at ADDR and how many follow in the same section
 * (*AVAIL), or NULL when ADDR is not in a section with contents.
 */
const uint8_t *cfg_image_ptr(const cfg_image_t *img, uint64_t addr, size_t *avail /*OUT*/);

/*
 * Decode the instruction at ADDR in the image (arch_decode on its bytes), reading no
 * further than LIMIT, or to the end of its section when LIMIT <= ADDR. Returns 0, or
 * QP_EDECODE (not an instruction, or no bytes at ADDR). Code is decoded once: the
 * analysis, the drivers and the editor all come back to the same instructions, so what
 * was decoded in an executable section is kept in the image (the image itself does not
 * change; the cache is freed with it).
 */
int cfg_image_decode(const cfg_image_t *img, uint64_t addr, uint64_t limit,
                     arch_insn_t *out /*OUT*/);

/*
 * The address of the last instruction of the block [START, START + SIZE) that holds
 * NINSNS instructions (0: any number), decoded from IMG; 0 when the bytes there are not
 * those instructions (the rewriter wrote a jump to the relocated code over a moved
 * entry: decode the original program instead).
 */
uint64_t cfg_image_last_insn(const cfg_image_t *img, uint64_t start, uint64_t size,
                             uint32_t ninsns);

/* Free what cfg_image_decode keeps, when the code is not going to be decoded again
 * (cfg_image_decode still works, decoding anew). */
void cfg_image_decode_done(const cfg_image_t *img);

/*
 * Keep what cfg_image_decode decoded so far in less memory (a chromium: 1.4 -> 0.5 GiB),
 * read only: instructions decoded later are decoded each time. For the end of the
 * analysis, when no other thread decodes; the work is split over NTHREADS threads (0 or
 * 1: the caller's alone). Without the memory it keeps the cache as is.
 */
void cfg_image_decode_freeze(const cfg_image_t *img, unsigned nthreads);

/* True when ADDR lies in an executable section. */
int cfg_image_is_code(const cfg_image_t *img, uint64_t addr);

/* The language runtime a program was built with, where it constrains code layout. */
typedef enum cfg_runtime {
    CFG_RUNTIME_C = 0, /* C, C++, Fortran, Rust...: code addresses only in code and data */
    CFG_RUNTIME_GO,    /* Go: the runtime maps return addresses through .gopclntab */
    CFG_RUNTIME_GHC,   /* GHC Haskell: info tables sit right before the code they describe */
} cfg_runtime_t;

/* Which runtime IMG was built with (section names, symbols, the GHC RTS's strings). */
cfg_runtime_t cfg_image_runtime(const cfg_image_t *img);

/*
 * The source file and line of the instruction at ADDR, from the DWARF line table
 * (cfg_bfd.c, through BFD's nearest-line lookup with a cache in front). *FILE is owned
 * by the image, and one file name is always the same pointer. Returns 0, QP_ENOTFOUND
 * (no line information for ADDR, or an image not read from a file), QP_EINVAL or
 * QP_ENOMEM. One thread at a time per image (the cache lives in it).
 */
int cfg_image_line(const cfg_image_t *img, uint64_t addr, const char **file /*OUT*/,
                   unsigned *line /*OUT*/);

/*
 * The declaration line (DW_AT_decl_line) of the function NAME whose code contains ADDR,
 * where gcov puts a function's entry count. Same results and rules as cfg_image_line.
 */
int cfg_image_func_line(const cfg_image_t *img, const char *name, uint64_t addr,
                        const char **file /*OUT*/, unsigned *line /*OUT*/);

/*
 * A field of a procedure's argument by its DWARF type (cfg_dwtype.c): the value of
 * `argN->a.b->c` is v = argN, then for each i < nloads: v = read SIZE[i] bytes at
 * v + OFFSET[i] (zero-extended; IS_SIGNED: the last one is a signed integer).
 */
#define CFG_FIELD_MAX 8
typedef struct cfg_field {
    int nloads;
    int64_t offset[CFG_FIELD_MAX];
    int size[CFG_FIELD_MAX];
    int is_signed;
} cfg_field_t;

/*
 * The field PATH ("->len", "->hdr.len", "->next->len") of argument ARG (0..5) of the
 * procedure at link-time address ENTRY named PROC (for the refusal of compiler clones;
 * may be NULL), from the debug information of IMG or its separate debug file. 0;
 * QP_ENOTFOUND with one line in WHY (no DWARF, not an integer register, no such member,
 * a bit-field, ...); QP_EINVAL.
 */
int cfg_arg_field(const cfg_image_t *img, uint64_t entry, const char *proc, int arg,
                  const char *path, cfg_field_t *out /*OUT*/, char *why, size_t whylen);

/*****************************************************************************
 * The program: procedures, blocks, edges
 */

/* How a procedure was found (cfg_proc_t.sources, a bit set). */
enum {
    CFG_SRC_SYMBOL = 1u << 0,   /* a function symbol */
    CFG_SRC_EH_FRAME = 1u << 1, /* an .eh_frame FDE starts there */
    CFG_SRC_CALL = 1u << 2,     /* the target of a direct call */
    CFG_SRC_ENTRY = 1u << 3,    /* the ELF entry point */
    CFG_SRC_INIT = 1u << 4,     /* named by .init_array/.fini_array/.preinit_array, DT_INIT/FINI */
    CFG_SRC_PLT = 1u << 5,      /* a PLT entry */
    CFG_SRC_GAP = 1u << 6,      /* valid code in a gap no other procedure reaches (seed 3.6) */
    CFG_SRC_TAILCALL = 1u << 7, /* the target of a jump from another procedure */
    CFG_SRC_ADDR = 1u << 8,     /* a code address held in data or relocations */
    CFG_SRC_SECTION = 1u << 9,  /* the start of a code section (.init, .fini) */
    CFG_NSRC = 10,
};

/* Names for the CFG_SRC_* bits, index = bit number. */
extern const char *const cfg_src_names[CFG_NSRC];

/* cfg_edge_kind_t, CFG_EDGE_*, cfg_edge_kind_names: base/qp_edge.h (the formats store them). */

typedef struct cfg_edge {
    uint32_t from;     /* source block */
    uint32_t to;       /* destination block, CFG_NONE when the edge leaves the procedure */
    uint64_t target;   /* target address where one exists (tail call, table entry), else 0 */
    uint8_t kind;      /* cfg_edge_kind_t */
} cfg_edge_t;

typedef struct cfg_block {
    uint64_t start;       /* address of the first instruction */
    uint64_t end;         /* address after the last instruction */
    uint32_t proc;        /* owning procedure */
    uint32_t ninsns;      /* instructions in the block */
    uint32_t succ;        /* first outgoing edge in prog->edges */
    uint32_t nsucc;       /* number of outgoing edges */
    uint32_t pred;        /* first entry in prog->preds (edge indices of incoming edges) */
    uint32_t npred;       /* number of incoming edges */
    uint64_t call_target; /* the callee when the block ends in a direct call, else 0 */
    uint32_t idom;        /* immediate dominator, CFG_NONE for the entry or unreachable */
    uint16_t loop_depth;  /* number of natural loops containing the block */
    uint8_t last_kind;    /* arch_kind_t of the last instruction */
    uint8_t is_loop_head; /* target of a back edge */
    uint8_t gap_entry;    /* code of its procedure that no known edge reaches, found by
                           * sweeping the procedure's bytes because one of its jumps has
                           * unknown targets (an interpreter's handlers): it may be
                           * entered by that jump (cfg_held_addrs: CFG_HELD_GAP) */
} cfg_block_t;

/* A recovered jump table. */
typedef struct cfg_table {
    uint64_t jump;        /* address of the indirect jump that uses it */
    uint64_t addr;        /* address of the first entry */
    uint64_t base;        /* relative tables: the value entries are added to; else 0 */
    uint32_t nentries;    /* number of entries */
    uint8_t entry_size;   /* 4 or 8 (AArch64: 1, 2 or 4) */
    uint8_t relative;     /* entries are signed offsets from base */
    uint8_t bounded;      /* bound proven by a guarding compare (else found by scanning) */
    uint8_t shift;        /* relative tables: base + (entry << shift) (AArch64: 2) */
    uint8_t zext;         /* relative tables: entries are unsigned (AArch64's ldrb + uxtb) */
    uint8_t cut;          /* scanned, and stopped where other data starts (cfg_scanend.c):
                           * an index past the end would reach the old code */
    uint64_t anchor;      /* AArch64: the `adr` forming base, when the editor may move
                           * base and rewrite the entries (arch_jtab_t.anchor); else 0 */
} cfg_table_t;

enum {
    CFG_PROC_NORETURN = 1u << 0,   /* never returns (known name or proven) */
    CFG_PROC_PLT = 1u << 1,        /* a PLT stub */
    CFG_PROC_MULTI_ENTRY = 1u << 2,/* other procedures jump into its interior */
    CFG_PROC_FRAGMENT = 1u << 3,   /* a cold fragment: its blocks belong to `parent` */
    CFG_PROC_IRREDUCIBLE = 1u << 4,/* has a retreating edge that is not a back edge */
    CFG_PROC_RESUMED = 1u << 5,    /* its calls return, whatever its code: Go's runtime
                                    * resumes the caller at the return address (morestack,
                                    * mcall; known by name only) */
};

typedef struct cfg_proc {
    const char *name;         /* symbol name, or "sub_<hex>" for unnamed code */
    uint64_t entry;           /* entry address */
    uint64_t start;           /* extent of the procedure's main part: [start, end) */
    uint64_t end;
    uint32_t block;           /* first block (prog->blocks[block] is the entry block) */
    uint32_t nblocks;         /* blocks [block, block + nblocks), entry first then by address */
    uint32_t sources;         /* CFG_SRC_* */
    uint32_t flags;           /* CFG_PROC_* */
    uint32_t parent;          /* for a fragment: the procedure owning it, else CFG_NONE */
    const char *unsafe;       /* NULL when safe to relocate, else the reason */
    uint32_t ntables;         /* jump tables resolved */
    uint32_t nind_unresolved; /* indirect jumps (not tail calls) with unknown targets */
    uint32_t nloops;          /* natural loops (back edges) */
} cfg_proc_t;

typedef struct cfg_stats {
    uint64_t text_bytes;     /* bytes in executable sections */
    uint64_t block_bytes;    /* bytes inside CFG blocks */
    uint64_t padding_bytes;  /* alignment padding between procedures */
    uint64_t dead_bytes;     /* dead code after calls that never return */
    uint64_t data_bytes;     /* bytes in code sections that are data or unreached */
    uint64_t ninsns;         /* instructions in blocks */
    uint32_t nind_jumps;     /* indirect jumps that are not tail calls */
    uint32_t nind_resolved;  /* ... of which resolved (tables or address-taken sets) */
    uint32_t nind_tailcalls; /* indirect jumps through memory or to other procedures */
    uint32_t nunsafe;        /* procedures not safe to relocate */
    uint32_t nprocs_by_src[CFG_NSRC]; /* procedures per source bit */
} cfg_stats_t;

/* An address range [start, end). */
typedef struct cfg_span {
    uint64_t start;
    uint64_t end;
} cfg_span_t;

typedef struct cfg_prog {
    const cfg_image_t *img;  /* the image (not owned) */
    cfg_proc_t *procs;       /* sorted by entry address */
    uint32_t nprocs;
    cfg_block_t *blocks;     /* grouped by procedure */
    uint32_t nblocks;
    cfg_edge_t *edges;       /* grouped by source block */
    uint32_t nedges;
    uint32_t *preds;         /* edge indices grouped by destination block */
    cfg_table_t *tables;     /* sorted by jump address */
    uint32_t ntables;
    cfg_span_t *unreached;   /* bytes of code sections in no block and not padding */
    uint32_t nunreached;
    cfg_stats_t stats;       /* summary figures */
    void *priv;              /* builder state (names, maps) */
    const arch_isa_t *isa;   /* the instruction set of the image's code (cfg_image_isa) */
} cfg_prog_t;

/*
 * Options for cfg_prog_build; zero-initialise for the defaults. The two callbacks are a
 * development aid (tools/ hook them to QP_DEBUG): cfg/ never prints, the caller times
 * and prints what it is told.
 */
typedef struct cfg_opts {
    int no_gap_procs; /* do not turn unreached valid code into procedures */
    /* A phase of cfg_prog_build is over ("start", "discovered", each "round", "built",
     * "noreturn", "gaps" of the fixpoint, "converged", "flattened", "loops", "stats")
     * with NPROCS procedures known. NULL: not told. */
    void (*on_phase)(void *arg, const char *phase, size_t nprocs);
    /* One line about a builder inconsistency, right before the error it causes. NULL:
     * not told. */
    void (*on_note)(void *arg, const char *line);
    /* Progress of the analysis for a user waiting on a terminal: DONE of TOTAL procedures
     * built in the current pass (a pass rebuilds what the previous one changed; there
     * are a few). Called every 1/128 of a pass at most. NULL: not told. */
    void (*on_progress)(void *arg, size_t done, size_t total);
    void *cb_arg; /* ARG of the callbacks */
    /* Threads for the work that splits by procedure (0 or 1: the caller's alone; at
     * most 16). The result is the same for any number. */
    unsigned threads;
    /* Tests: each gap sweep's kept runs of blocks (an incremental cache) checked against
     * a walk of every procedure; a difference fails the build (QP_EINVAL, told to
     * on_note). Slow on big programs. */
    int check_incremental;
} cfg_opts_t;

/*
 * Discover the procedures of IMG and build a CFG for each, with jump tables,
 * dominators and loops. OPTS may be NULL. Never fails on odd code: what cannot be analysed
 * is marked unsafe. Returns QP_ENOMEM or QP_EINVAL on failure. Free with cfg_prog_destroy.
 */
int cfg_prog_build(const cfg_image_t *img, const cfg_opts_t *opts, cfg_prog_t **out /*OUT*/);

void cfg_prog_destroy(cfg_prog_t *prog);

/* The procedure named NAME (first match), or NULL. */
const cfg_proc_t *cfg_proc_by_name(const cfg_prog_t *prog, const char *name);

/* The procedure whose blocks contain ADDR (cold fragments map to the parent), or NULL. */
const cfg_proc_t *cfg_proc_at(const cfg_prog_t *prog, uint64_t addr);

/* The procedure whose entry is ADDR (cfg_proc_at's, when ADDR is its entry), or NULL. */
const cfg_proc_t *cfg_proc_entered_at(const cfg_prog_t *prog, uint64_t addr);

/* The index of the block containing ADDR, or CFG_NONE. */
uint32_t cfg_block_at(const cfg_prog_t *prog, uint64_t addr);

/* Does block A dominate block B (global indices; a chain of over 2^20 immediate
 * dominators counts as no)? */
int cfg_block_dominates(const cfg_prog_t *prog, uint32_t a, uint32_t b);

/*
 * The blocks in address order: *N gets prog->nblocks and the result holds their indices
 * sorted by start address (owned by PROG). NULL for a NULL PROG.
 */
const uint32_t *
cfg_blocks_by_addr(const cfg_prog_t *prog, size_t *n /*OUT*/);

/* The position in cfg_blocks_by_addr's order of the first block that starts at ADDR or
 * above (prog->nblocks: none); the block before it, if any, starts below ADDR. */
size_t cfg_blocks_from(const cfg_prog_t *prog, uint64_t addr);

/* qsort's comparison of two uint64_t, ascending. */
int cfg_u64_cmp(const void *a, const void *b);

/* The index of the first element of the sorted array V (N elements) that is >= X. */
size_t cfg_u64_lower_bound(const uint64_t *v, size_t n, uint64_t x);

/* True when the sorted array V (N elements) holds X. */
int cfg_u64_contains(const uint64_t *v, size_t n, uint64_t x);

/* Make array *V (elements of ELEM bytes, capacity *CAP) hold NEED elements at least,
 * doubling: 0, or QP_ENOMEM (then *V is unchanged). */
int
cfg_vec_grow(void **v, size_t *cap, size_t need, size_t elem);

/* Give back what array *V (capacity *CAP) holds past its first N elements (N + 1 kept,
 * so that it is never empty): the memory of an estimate made for the worst case goes
 * to what is allocated next. Without the memory to move it, *V stays as it is. */
void
cfg_vec_trim(void **v, size_t *cap, size_t n, size_t elem);

/* Where a program holds a code address (cfg_held_t.src). */
enum {
    CFG_HELD_RELOC = 1, /* a dynamic relocation's value (at: the relocated word) */
    CFG_HELD_DYNSYM,    /* a function of the dynamic symbol table (at: 0) */
    CFG_HELD_RIPREL,    /* the rip-relative operand of an instruction that is no branch,
                         * as `lea label(%rip)` (at: the instruction) */
    CFG_HELD_IMM,       /* an immediate, in a program that is not position independent
                         * (at: the instruction) */
    CFG_HELD_DATA,      /* an aligned word of a loaded data section, likewise (at: the
                         * word); a guess: any number may look like an address */
    CFG_HELD_TEXTWORD,  /* ... one right after eight printable bytes: likelier the end
                         * of a string ("ant\0\0\0\0\0" is a word) */
    CFG_HELD_GAP,       /* a block of the procedure reached by no known edge, where its
                         * jump of unknown targets may go (cfg_block_t.gap_entry; at:
                         * the address itself) */
};

typedef struct cfg_held {
    uint64_t addr; /* an address inside a procedure's blocks */
    uint64_t at;   /* where the program holds it (see the sources above) */
    uint32_t src;  /* CFG_HELD_* */
} cfg_held_t;

/*
 * The code addresses PROG holds, through which it may call or jump where no branch
 * names the place (cfg/cfg_held.c), sorted by address: *OUT (free it) gets *N of them,
 * one per (address, source, place). 0, or QP_ENOMEM / QP_EINVAL.
 */
int cfg_held_addrs(const cfg_prog_t *prog, cfg_held_t **out /*OUT*/, size_t *n /*OUT*/);

/* As cfg_held_addrs without the copy: *OUT points into PROG's own (computed on the
 * first call, which must not race another), valid until cfg_prog_destroy; not freed
 * by the caller. QP_EINVAL for a program cfg_prog_build did not make. */
int cfg_held_addrs_view(const cfg_prog_t *prog, const cfg_held_t **out /*OUT*/,
                        size_t *n /*OUT*/);

/* The addresses of cfg_held_addrs that KEEP accepts, sorted and unique: *OUT (free it)
 * gets *N of them. 0, or QP_ENOMEM / QP_EINVAL. */
typedef int (*cfg_held_keep_fn)(const cfg_prog_t *prog, const cfg_held_t *h);
int cfg_held_select(const cfg_prog_t *prog, cfg_held_keep_fn keep, uint64_t **out /*OUT*/,
                    size_t *n /*OUT*/);

/*
 * The addresses where code may enter a procedure other than through its entry's edges:
 * the targets of jumps from other procedures (tail-call edges, entries included), and
 * the blocks whose address the program holds (cfg_held_addrs but for CFG_HELD_TEXTWORD;
 * not an entry and not the target of an indirect jump of its own procedure: a label
 * stored with a `lea` and called later through a pointer). Sorted, unique: *OUT points
 * into PROG's cache, valid until cfg_prog_destroy, not to be freed (computed at the
 * first call, which is not to race another on the same program). 0, QP_ENOMEM, or
 * QP_EINVAL (also for a program cfg_prog_build did not make).
 */
int cfg_interior_entries(const cfg_prog_t *prog, const uint64_t **out /*OUT*/,
                         size_t *n /*OUT*/);

/* Is block BI the target of a jump-table or address-taken edge (its procedure's own)? */
int cfg_block_indirect_target(const cfg_prog_t *prog, uint32_t bi);

/* The procedure that owns procedure I's code: a cold fragment's parent, else I (and
 * CFG_NONE for CFG_NONE). */
uint32_t cfg_proc_owner(const cfg_prog_t *prog, uint32_t i);

/* The first dynamic relocation of IMG at WHERE (img->relocs is sorted by it), or NULL. */
const cfg_reloc_t *cfg_image_reloc_at(const cfg_image_t *img, uint64_t where);

/*
 * The name of what the call (or jump) IN goes to: the procedure at a direct target
 * ("fork@plt" for a PLT stub), or the symbol of the relocated GOT slot an indirect
 * rip-relative call reads (`call *fork@GOTPCREL(%rip)`). NULL when unknown.
 */
const char *cfg_callee_name(const cfg_prog_t *prog, const arch_insn_t *in);

/*
 * The system call number of the syscall instruction SC when the instruction just before
 * it (PREV, or NULL) loads a constant into the number register (`mov $N,%eax`), else -1.
 */
long cfg_syscall_nr(const cfg_image_t *img, const arch_insn_t *prev, const arch_insn_t *sc);

/*****************************************************************************
 * The loop nesting forest of one procedure (cfg_loops.c), for callers that walk loops:
 * the build keeps only each block's idom, depth and header flag, and this recomputes the
 * rest on demand (linear in the procedure's blocks and edges).
 */

typedef struct cfg_loop {
    uint32_t header;  /* header block (global index) */
    uint32_t parent;  /* the enclosing loop (index in the forest), CFG_NONE when outermost */
    uint32_t depth;   /* 1 for an outermost loop, as cfg_block_t.loop_depth */
    uint32_t nblocks; /* member blocks, those of nested loops and the header included */
    uint32_t back;    /* its back edges: forest->back_edges[back .. back + nback) */
    uint32_t nback;   /* (a back edge goes from a member to the header it dominates) */
} cfg_loop_t;

typedef struct cfg_loop_forest {
    uint32_t proc;        /* the procedure */
    uint32_t nblocks;     /* its blocks */
    uint32_t nloops;      /* natural loops */
    cfg_loop_t *loops;    /* by their header's reverse-postorder number: an enclosing
                           * loop before the loops it contains (parent < child) */
    uint32_t *inner;      /* per block of the procedure (local index): innermost loop,
                           * CFG_NONE when in none (or unreachable) */
    uint8_t *reachable;   /* per block (local index): reachable from the entry block */
    uint32_t *back_edges; /* edge indices (prog->edges), grouped by loop */
    uint32_t nback_edges;
    int irreducible;      /* a retreating edge is no back edge: a cycle entered at
                           * several blocks, which is no natural loop and not listed */
} cfg_loop_forest_t;

/* The forest of procedure PROC of PROG into *OUT (cfg_loop_forest_destroy): 0,
 * QP_EINVAL or QP_ENOMEM. Its loops are exactly those the build counted (proc.nloops). */
int cfg_loop_forest(const cfg_prog_t *prog, uint32_t proc, cfg_loop_forest_t **out /*OUT*/);
void cfg_loop_forest_destroy(cfg_loop_forest_t *f);

/* Is the block of local index LOCAL a member of loop LOOP of F (nested loops'
 * members are)? */
int cfg_loop_contains(const cfg_loop_forest_t *f, uint32_t loop, uint32_t local);

/* Outgoing edges of block B: prog->edges[b->succ .. b->succ + b->nsucc). */
static inline const cfg_edge_t *
cfg_block_succ(const cfg_prog_t *prog, const cfg_block_t *b, uint32_t i)
{
    return &prog->edges[b->succ + i];
}

/* The kinds of block B's outgoing edges as bits (1u << CFG_EDGE_*), or 0 when B does
 * not end in a call. */
static inline unsigned
cfg_block_call_edge_kinds(const cfg_prog_t *prog, const cfg_block_t *b)
{
    unsigned kinds = 0;
    if (b->last_kind != ARCH_KIND_CALL && b->last_kind != ARCH_KIND_CALL_IND)
        return 0;
    for (uint32_t e = 0; e < b->nsucc; e++)
        kinds |= 1u << cfg_block_succ(prog, b, e)->kind;
    return kinds;
}

/* Does block B end in a call that never returns: no return site, and the call leaves
 * the procedure (the callee never returns, or the code after the call is another
 * procedure's)? A live timer stops before such a call (it is an exit). */
static inline int
cfg_block_call_never_returns(const cfg_prog_t *prog, const cfg_block_t *b)
{
    unsigned kinds = cfg_block_call_edge_kinds(prog, b);
    return !(kinds & (1u << CFG_EDGE_CALLRET))
        && (kinds & (1u << CFG_EDGE_TAILCALL | 1u << CFG_EDGE_NORETURN));
}

/*
 * Does procedure P start as a compiled function starts (cfg/cfg_fnstart.c): on a 16-byte
 * boundary after padding that follows code which does not fall through, setting up a
 * frame, or after a linker's trap fill decoding as a function's code that no jump
 * enters? Bytes that nothing else vouches for (no symbol, FDE or call) are taken for a
 * function when this is true. 0 when the ISA cannot tell (no frame_entry yet).
 */
int cfg_proc_starts_like_function(const cfg_prog_t *prog, const cfg_proc_t *p);

#endif
