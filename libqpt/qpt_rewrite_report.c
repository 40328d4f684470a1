/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * What a rewrite did, as the lines of its summary (qpt_rewrite_on_message; qpt-rewrite
 * prints each after its name): procedures relocated and left, code measured in place and
 * what stayed unmeasured, notes on the output, the driver's figures.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/qpt/qpt_qp.h"
#include "libqpt/qpt_rewrite_priv.h"

/* One line about code that runs its old copy, unmeasured: WHAT (a format taking a count
 * and a plural ending), the first address FIRST. */
static void
note_old_copies(const qpt_rewrite_t *r, const char *output, uint64_t first, const char *what,
                unsigned n, const char *plural)
{
    char part[256];
    snprintf(part, sizeof(part), what, n, plural);
    qpt_rw_say(r, "%s: %s (the first 0x%llx): code entered there runs its old copy, unmeasured",
               output, part, (unsigned long long)first);
}

static int
cmp_ip_why(const void *a, const void *b)
{
    const drv_ip_why_t *x = a, *y = b;
    return x->bytes != y->bytes ? (x->bytes < y->bytes ? 1 : -1)
                                : (x->nprocs < y->nprocs) - (x->nprocs > y->nprocs);
}

/*
 * The summary of in-place measurement: procedures left in place measured where they
 * are, and a table of what stayed unmeasured and why (procedures, then blocks of the
 * measured ones), with the bytes of code that runs unmeasured.
 */
static void
print_in_place(const qpt_rewrite_t *r, const cfg_prog_t *prog, const char *output, drv_result_t *res,
               const ed_stats_t *es)
{
    if (es->nleft == 0)
        return;
    uint64_t total = 0, procs_bytes = 0, blocks_bytes = 0;
    uint32_t nprocs = 0, nblocks = 0;
    for (uint32_t i = 0; i < prog->nblocks; i++)
        total += prog->blocks[i].end - prog->blocks[i].start;
    for (size_t i = 0; i < res->nip_why; i++) {
        procs_bytes += res->ip_why[i].bytes;
        nprocs += res->ip_why[i].nprocs;
    }
    for (int k = 1; k < ED_IP_NREASONS; k++) {
        blocks_bytes += res->ip_block_why_bytes[k];
        nblocks += res->nip_block_why[k];
    }
    uint32_t nsaves = 0;
    for (size_t i = 0; i < res->nprobes; i++)
        nsaves += (res->probes[i].flags & ED_PROBE_INPLACE) && res->probes[i].save_flags;
    qpt_rw_say(r,
            "%s: in place: %u procedures measured where they are (%u blocks, %llu "
            "bytes of code, counted through %u jumps to %llu bytes of trampolines, %u "
            "saving the flags; %u procedures partly); unmeasured: %u procedures and %u "
            "blocks, %llu of %llu bytes of code (%.2f%%)",
            output, res->ninplace, res->nip_points,
            (unsigned long long)res->ip_bytes, es->ninplace,
            (unsigned long long)es->bytes_inplace, nsaves, res->ninplace_partial, nprocs,
            nblocks,
            (unsigned long long)(procs_bytes + blocks_bytes), (unsigned long long)total,
            total ? 100.0 * (double)(procs_bytes + blocks_bytes) / (double)total : 0.0);
    if (res->nip_why > 1)
        qsort(res->ip_why, res->nip_why, sizeof(drv_ip_why_t), cmp_ip_why);
    for (size_t i = 0; i < res->nip_why && i < 12; i++)
        qpt_rw_say(r, "%s:   unmeasured %8u procedures %10llu bytes: %.*s",
                output, res->ip_why[i].nprocs,
                (unsigned long long)res->ip_why[i].bytes, (int)res->ip_why[i].keylen,
                res->ip_why[i].why);
    if (res->nip_why > 12) {
        uint32_t n = 0;
        uint64_t b = 0;
        for (size_t i = 12; i < res->nip_why; i++) {
            n += res->ip_why[i].nprocs;
            b += res->ip_why[i].bytes;
        }
        qpt_rw_say(r, "%s:   unmeasured %8u procedures %10llu bytes: %zu other reasons",
                output, n, (unsigned long long)b, res->nip_why - 12);
    }
    for (int k = 1; k < ED_IP_NREASONS; k++)
        if (res->nip_block_why[k] > 0)
            qpt_rw_say(r, "%s:   unmeasured %8u blocks     %10llu bytes: %s",
                    output, res->nip_block_why[k],
                    (unsigned long long)res->ip_block_why_bytes[k], ed_inplace_why(k));
}

/* One line of what counters add over the profiled run, by kind (--weights -v). */
static void
say_cost_kinds(const qpt_rewrite_t *r, const char *output, const char *placed,
               const drv_cost_t *c)
{
    qpt_rw_say(r, "%s: --weights: %s, the counters add %llu increments, %llu instructions "
            "saving flags, %llu stub jumps back, %llu jumps over stubs", output, placed,
            (unsigned long long)c->incs, (unsigned long long)c->flags,
            (unsigned long long)c->back_jumps, (unsigned long long)c->over_jumps);
}

/* qp --weights -v: the procedures where the static estimate's counters cost most over
 * the profiled run, against the weights' (where a better estimate would gain most). */
static void
gaps_line(const cfg_prog_t *prog, const drv_gap_t *gaps, uint32_t ngaps, char *line,
          size_t cap)
{
    size_t n = 0;
    line[0] = '\0';
    for (uint32_t k = 0; k < ngaps && n < cap; k++) {
        const drv_gap_t *gp = &gaps[k];
        int m = snprintf(line + n, cap - n, "%s%s +%llu (%llu against %llu)",
                         k ? ", " : "", prog->procs[gp->proc].name,
                         (unsigned long long)(gp->static_insns - gp->weighted_insns),
                         (unsigned long long)gp->static_insns,
                         (unsigned long long)gp->weighted_insns);
        if (m < 0)
            return;
        n += (size_t)m;
    }
}

static void
say_gaps(const qpt_rewrite_t *r, const cfg_prog_t *prog, const char *output,
         const drv_result_t *res)
{
    char line[1024];
    gaps_line(prog, res->gaps, res->ngaps, line, sizeof(line));
    if (res->ngaps > 0)
        qpt_rw_say(r, "%s: --weights: where a rewrite without --weights would add most "
                "over this one: %s", output, line);
    /* A projection for a counter not built yet (doc/qp.md). */
    gaps_line(prog, res->iv_gaps, res->niv_gaps, line, sizeof(line));
    qpt_rw_say(r, "%s: --weights: with loops counted from induction variables (every step "
            "priced; --iv-loops counts steps of +-1: doc/qp.md) the counters would add %llu instructions, %llu placed without "
            "--weights: %u of %u candidate blocks so counted%s%s", output,
            (unsigned long long)drv_cost_insns(&res->weighted_iv),
            (unsigned long long)drv_cost_insns(&res->placed_iv), res->niv_used,
            res->niv_found, res->niv_gaps > 0 ? "; most gained in " : "", line);
}

void
qpt_rw_report(qpt_rewrite_t *r, const cfg_prog_t *prog, const char *input, const char *output,
              const qpt_engine_out_t *eout, const measure_ctx_t *c)
{
    const ed_plan_t *plan = eout->plan;
    const elfw_rewrite_stats_t st = eout->st;
    drv_result_t res = c->res; /* a copy: print_in_place sorts its reasons */
    const drv_ops_t *drv = r->drv;
    const int verbose = r->verbose, tracing = c->tracing;
    const drv_inc_t inc = c->inc;
    if (st.setid_dropped)
        qpt_rw_say(r,
                "%s: written without the set-user-ID/set-group-ID bits of %s (an "
                "instrumented program is not the audited one; chmod deliberately)",
                output, input);
    if (st.phdr_far)
        qpt_rw_say(r,
                "%s: note: the program headers moved past a large .bss, where only "
                "Linux 5.18 and later find them: older kernels and valgrind will not run "
                "it correctly",
                output);
    if (verbose) {
        for (uint32_t i = 0; i < prog->nprocs; i++) {
            const char *why = ed_plan_left_reason(plan, i);
            if (why != NULL && !(prog->procs[i].flags & CFG_PROC_FRAGMENT))
                qpt_rw_say(r, "left in place: %s at 0x%llx: %s",
                    prog->procs[i].name, (unsigned long long)prog->procs[i].entry, why);
        }
        for (uint32_t i = 0; drv != NULL && i < res.nprocs; i++)
            if (res.procs[i].reason != 0
                && strncmp(res.strtab + res.procs[i].reason, "not measured", 12) == 0)
                qpt_rw_say(r, "%s: %s", res.strtab + res.procs[i].name,
                    res.strtab + res.procs[i].reason);
    }
    const ed_stats_t *es = ed_plan_stats(plan);
    qpt_rw_say(r,
            "%s: %u procedures relocated, %u left in place; %llu bytes of code relocated "
            "into %llu; %u redirects (%u for indirect-jump targets), %u jump tables "
            "retargeted, %u jumps of unknown targets translated at run time; output %llu "
            "bytes (%.2fx input)",
            output, es->nmoved, es->nleft, (unsigned long long)es->bytes_old,
            (unsigned long long)es->bytes_new, es->npads, es->nind_pads, es->ntables,
            es->nxlate, (unsigned long long)st.output_size,
            st.input_size ? (double)st.output_size / (double)st.input_size : 0.0);
    if (es->nkept_branches > 0)
        qpt_rw_say(r, "%s: %u direct call%s and jumps of AArch64 code left in place go "
                   "straight to the new entries", output, es->nkept_branches,
                   es->nkept_branches == 1 ? "" : "s");
    if (verbose && st.nplt_direct > 0)
        qpt_rw_say(r, "%s: %u JUMP_SLOT word%s of the library's own PLT point at the new "
                   "code once bound (its start rewrites each that holds the old entry: "
                   "not one another definition interposed)", output, st.nplt_direct,
                   st.nplt_direct == 1 ? "" : "s");
    else if (verbose && st.plt_why != NULL)
        qpt_rw_say(r, "%s: the library's calls through its own PLT go through the "
                   "redirects at the old entries: %s", output, st.plt_why);
    if (es->ntables_kept > 0)
        qpt_rw_say(r, "%s: %u AArch64 switch table%s dispatch through the redirects at "
                   "their old cases (entries too short for the new code's offsets, or a "
                   "case left in place; the first: the br at %#llx)", output,
                   es->ntables_kept, es->ntables_kept == 1 ? "" : "s",
                   (unsigned long long)es->table_kept);
    if (drv != NULL)
        print_in_place(r, prog, output, &res, es);
    if (es->nheld_inside > 0)
        note_old_copies(r, output, es->held_inside, "the program holds %u address%s inside "
                        "blocks of moved code, not at a block's start", es->nheld_inside,
                        es->nheld_inside == 1 ? "" : "es");
    if (es->nkept_reached > 0)
        note_old_copies(r, output, es->kept_reached, "code left in place runs into %u moved "
                        "procedure%s other than at a redirect (their old bytes stay)",
                        es->nkept_reached, es->nkept_reached == 1 ? "" : "s");
    if (es->nunreached_into_pad > 0)
        qpt_rw_say(r,
                "%s: note: %u jump%s out of bytes that no known path reaches land inside "
                "a redirect (the first from 0x%llx to 0x%llx): should that code ever run, "
                "it would fail there",
                output, es->nunreached_into_pad,
                es->nunreached_into_pad == 1 ? "" : "s",
                (unsigned long long)es->unreached_into_pad_from,
                (unsigned long long)es->unreached_into_pad_to);
    if (verbose && es->bytes_holes > 0)
        qpt_rw_say(r,
                "%s: old text reused: %llu bytes of new code in %llu free bytes of moved "
                "code (%.0f%%), %llu in new segments",
                output, (unsigned long long)es->bytes_reused,
                (unsigned long long)es->bytes_holes,
                100.0 * (double)es->bytes_reused / (double)es->bytes_holes,
                (unsigned long long)(es->bytes_new - es->bytes_reused));
    if (verbose) {
        const ed_dwarf_out_t *d = &st.dwarf;
        qpt_rw_say(r,
                "%s: debug info: %llu line rows remapped, %llu kept, %u sequences in %u "
                "line programs (%u programs kept as they were%s); %u DIE addresses remapped, "
                "%u left old (range split, too small, or inside one left old), %u unreadable, "
                "%u DW_AT_ranges not read; %u new .debug_addr entries, %u new range lists; "
                "%u CU ranges extended (%u not); %u aranges sets rewritten; %u units not "
                "handled, %u in part; %u compressed sections",
                output, (unsigned long long)d->nline_rows_moved,
                (unsigned long long)d->nline_rows_kept, d->nline_seqs, d->nline_units_moved,
                d->nline_units_kept, d->line_kept ? ", and the whole .debug_line" : "",
                d->ndie_moved, d->ndie_stale, d->ndie_addrx, d->ndie_ranges, d->naddr_added,
                d->nrnglists_added, d->ncu_moved, d->ncu_stale, d->naranges_moved,
                d->nunits_skipped, d->nunits_partial, d->ncompressed);
    }
    if (drv != NULL && res.resume_unnamed)
        qpt_rw_say(r,
                "%s: note: " QPT_GO_NAMES_UNREAD ": runtime.morestack is not known, so a stack growth in a prologue may count "
                "as a call; every procedure's counts are marked approximate (~)", output);
    if (drv != NULL) {
        qpt_rw_say(r,
                "%s: driver %s: %u procedures measured (%u per block, %u counted by their "
                "call sites), %u not; %u "
                "counters for %u edges (%.1f%% with the flags saved), %u taken-edge stubs "
                "(%u falling into their target), %u exit hooks, %u fork hooks",
                output, drv->name, res.nmeasured, res.nblock_counted,
                res.nby_calls, res.nunmeasured, res.ncounters, res.nedges_total,
                es->nprobes ? 100.0 * es->nflag_saves / (double)es->nprobes : 0.0, es->nstubs,
                es->nstubs_fall, res.nexit_hooks, res.nfork_hooks);
        static const char *const mode[] = { "plain increments", "locked increments",
                                            "switchable increments" };
        if (tracing) {
            size_t npoints = 0;
            uint32_t nevents = 0;
            drv_trace_stats(c->tr, &npoints, &nevents);
            qpt_rw_say(r, "%s: trace: %u procedures traced (%u not); %zu record "
                    "points, %u events described in .qpt.trace; each thread writes "
                    "%s.trace.TID (qp trace blocks)", output, c->ntraced,
                    res.nmeasured - c->ntraced, npoints, nevents, output);
            if (r->trace_mem)
                qpt_rw_say(r, "%s: trace-mem: %u data accesses described, %u values "
                        "recorded per run of their instructions (qp trace mem)",
                        output, c->nmrefs, c->nmvals);
        } else {
            qpt_rw_say(r, "%s: counters: %s (%s); %u thread hooks", output,
                    mode[inc.mode], inc.why, res.nthread_hooks);
            if (res.iv_loops)
                qpt_rw_say(r, "%s: --iv-loops: %u blocks counted from an induction variable "
                        "(its register subtracted on the ways into their loop, added on the "
                        "ways out)", output, res.niv_counted);
            if (r->weights != NULL)
                qpt_rw_say(r,
                        "%s: --weights: over the profiled run the counters add %llu "
                        "instructions (%llu increments), the least of any spanning tree "
                        "for its counts%s; placed without --weights they would add %llu "
                        "instructions (%llu increments)",
                        output, (unsigned long long)drv_cost_insns(&res.weighted),
                        (unsigned long long)res.weighted.incs,
                        res.weighted_unknown ? " (some counters on edges it lacks)" : "",
                        (unsigned long long)drv_cost_insns(&res.weighted_static),
                        (unsigned long long)res.weighted_static.incs);
            if (r->weights != NULL && verbose) {
                say_cost_kinds(r, output, "placed by the weights", &res.weighted);
                say_cost_kinds(r, output, "placed without --weights", &res.weighted_static);
                say_gaps(r, prog, output, &res);
            }
        }
        if (res.nfork_unseen > 0 && verbose)
            qpt_rw_say(r, "%s: %u call%s or system call%s that may fork are in code "
                    "left in place: a child forked there counts into its parent's counters",
                    output, res.nfork_unseen, res.nfork_unseen == 1 ? "" : "s",
                    res.nfork_unseen == 1 ? "" : "s");
    }
    r->sum = (qpt_rewrite_summary_t) { es->nmoved, es->nleft, drv ? res.nmeasured : 0,
                                       drv ? res.nunmeasured : 0, drv ? res.ncounters : 0,
                                       eout->retries, st.input_size, st.output_size };
}
