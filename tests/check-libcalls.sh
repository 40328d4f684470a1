#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The library folders (arch cfg editor driver report dynamic libqpt metrics) never read the environment,
# print or exit (../shared/STYLE.md rule 12, DESIGN.md section 7): they return a QP_E*
# code, a message for the caller, or call a callback the caller gave, and only tools/
# reads environment variables, prints and exits. This greps their code - comments and
# string literals taken out - for calls of getenv and its kin, of the printing functions
# (printf, fprintf, puts, perror, ...), of exit/_exit/abort and the err(3)/error(3)
# families, and for stdout, stderr and environ. Each exception is listed below with its
# reason. Prints each violation; fails if there is one. Checks itself first on a sample.
set -u
top=${top_srcdir:-.}
cd "$top" || exit 99

# Reading the environment, printing, exiting: functions that must not be called. Also
# umask, which reads the mask only by changing it for the whole process: another thread
# of a libqpt user would create files with no mask meanwhile (open(2) applies it itself).
calls="getenv secure_getenv setenv unsetenv putenv clearenv printf vprintf fprintf vfprintf
dprintf vdprintf puts putchar perror psignal psiginfo exit _exit _Exit quick_exit abort
err errx verr verrx warn warnx vwarn vwarnx error error_at_line system popen umask"
# ... and names that must not appear.
names="stdout stderr environ"
# FILE WORD: the exceptions, each with its reason.
#  - dyn_ptrace.c: the child of dyn_proc_spawn between fork and exec ends with _exit
#    when the exec fails (it must not run the parent's atexit handlers or flush its
#    stdio buffers); the caller's process never exits.
#  - cfg_bfd.c: points stderr at /dev/null while BFD checks a file's format, because
#    BFD 2.40 prints warnings there itself; nothing is printed.
#  - qm_many.c: the child qm_live_run_many forks for each measured process (its tracer)
#    ends with _exit once it sent its report (the same reasons as dyn_ptrace.c); the
#    caller's process never exits.
#  - qm_search.c: the child qm_search_run_many forks for each searched process ends with
#    _exit once it sent its search's report (the same reasons); the caller's process
#    never exits.
allowed="dynamic/dyn_ptrace.c:_exit cfg/cfg_bfd.c:stderr metrics/qm_many.c:_exit metrics/qm_search.c:_exit"

# strip FILE...: FILE:LINE:code, without comments and with string and character
# literals emptied ("" and '').
strip() {
    awk '
    FNR == 1 { incomment = 0 }
    {
        out = ""; i = 1; n = length($0)
        while (i <= n) {
            c = substr($0, i, 1); c2 = substr($0, i, 2)
            if (incomment) {
                if (c2 == "*/") { incomment = 0; i += 2; out = out " " } else i++
                continue
            }
            if (c2 == "/*") { incomment = 1; i += 2; continue }
            if (c2 == "//") break
            if (c == "\"" || c == "\047") {
                q = c; i++
                while (i <= n) {
                    c = substr($0, i, 1)
                    if (c == "\\") { i += 2; continue }
                    i++
                    if (c == q) break
                }
                out = out q q
                continue
            }
            out = out c; i++
        }
        print FILENAME ":" FNR ":" out
    }' "$@"
}

# scan FILE...: one line per violation.
scan() {
    stripped=$(strip "$@")
    for w in $calls; do
        echo "$stripped" | grep -E "^[^:]*:[0-9]+:(.*[^[:alnum:]_.>])?$w[[:space:]]*\(" |
            while IFS=: read -r f l _; do
                case " $allowed " in *" $f:$w "*) continue ;; esac
                echo "check-libcalls: $f:$l: calls $w()"
            done
    done
    for w in $names; do
        echo "$stripped" | grep -E "^[^:]*:[0-9]+:(.*[^[:alnum:]_.>])?$w([^[:alnum:]_]|$)" |
            while IFS=: read -r f l _; do
                case " $allowed " in *" $f:$w "*) continue ;; esac
                echo "check-libcalls: $f:$l: uses $w"
            done
    done
}

# The check of the check: a sample with five violations among lookalikes.
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/sample.c" <<'EOF'
/* getenv("A") in a comment, exit(1), fprintf(stderr, ...) */
static const char *s = "printf(\"x\") and abort() in a string";
char c = '"'; const char *home = getenv("HOME"); /* 1 */
static void f(void) { if (!s) exit(2); } /* 2 */
static void g(struct ops *o) { o->exit(0); x.abort(); on_exit(0, 0); snprintf(0, 0, ""); }
// puts("line comment")
static void h(void) { fprintf (stderr, "%s\n", s); } /* 3 and 4 */
static void k(void) { /* a comment
  spanning lines: perror("x") */ abort(); } /* 5 */
EOF
got=$(scan "$tmp/sample.c" | sed 's/.*: //' | sort | tr '\n' ' ')
if [ "$got" != "calls abort() calls exit() calls fprintf() calls getenv() uses stderr " ]; then
    echo "check-libcalls: the check itself is broken: on its sample it found: $got"
    exit 99
fi

files=
for d in arch arch/* cfg editor driver report dynamic libqpt include/qpt metrics; do
    for f in "$d"/*.c "$d"/*.h; do
        [ -f "$f" ] && files="$files $f"
    done
done
# shellcheck disable=SC2086
out=$(scan $files)
if [ -n "$out" ]; then
    echo "$out"
    echo "check-libcalls: library folders never read the environment, print, exit or change the umask:"
    echo "check-libcalls: return a QP_E* code (and a message), or take a callback, and let tools/ do it"
    exit 1
fi
echo "check-libcalls: no library folder reads the environment, prints or exits"
exit 0
