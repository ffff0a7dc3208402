#!/bin/sh
# check-pages.sh -- `make check` for the manual pages (run by man/Makefile.am).
#
#   check-pages.sh SRCDIR HEADER... -- PAGE...
#
# PAGE... are the pages the build installs (dist_man3_MANS), relative to
# SRCDIR.  Fails (exit 1) when:
#   - a listed page is missing, or contains an empty line or trailing blanks;
#   - a page is a stub (a single ".so man3/X.3" line) whose target is not a
#     listed full page, or whose name is missing from its target's NAME
#     section (whatis(1) and apropos(1) read it from there);
#   - groff (man macros, all warnings on) complains about a full page;
#   - lexgrog(1) cannot read a full page's NAME section;
#   - a full page's .TH line names a version instead of the placeholder
#     "netmutex @PACKAGE_VERSION@" that `make install` fills in
#     (stamp-version.sh), so that no page is left behind at a release;
#   - a function declared NETMUTEX_API in a HEADER has no listed page of its
#     own name, or the page it leads to does not show it in a prototype.
# groff and lexgrog are only skipped, with a message, when absent (Debian
# packages groff-base and man-db).
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 SRCDIR HEADER... -- PAGE..." >&2
    exit 2
fi
srcdir=$1
shift
headers=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    headers="$headers $1"
    shift
done
[ $# -gt 0 ] && shift
pages="$*"

fail=0
problems=
bad() {
    echo "man: $*" >&2
    problems="$problems
man:   $*"
    fail=1
}

# Prints X.3 when page $1 is a stub ".so man3/X.3", nothing otherwise.
stub_target() {
    awk 'NR == 1 && $1 == ".so" && NF == 2 { t = $2 } NR > 1 { t = "" }
         END { if (t != "") { sub(/^man3\//, "", t); print t } }' "$1"
}

# The names page $1's NAME section gives, before its "\-", one per line.
names_of() {
    awk '/^\.SH/ { on = ($2 == "NAME"); next }
         on { s = s " " $0 }
         END { sub(/\\-.*/, "", s); gsub(/\\f[BIRP]/, "", s); gsub(/[ ,]+/, "\n", s); print s }' "$1"
}

# The functions header $1 declares NETMUTEX_API, one per line: preprocessor
# lines and comments dropped, declarations split at ';' '{' '}', so that a
# prototype may span lines.
api_calls() {
    grep -v '^[[:space:]]*#' "$1" |
        awk '{ s = s $0 " " }
             END {
                 while ((i = index(s, "/*")) > 0) {
                     j = index(substr(s, i + 2), "*/")
                     if (j == 0) break
                     s = substr(s, 1, i - 1) " " substr(s, i + j + 3)
                 }
                 print s
             }' | tr ';{}' '\n\n\n' |
        sed -n 's/^[[:space:]]*NETMUTEX_API[^(]*[^[:alnum:]_]\([[:alnum:]_][[:alnum:]_]*\)[[:space:]]*(.*/\1/p'
}

listed() {
    case " $pages " in *" $1 "*) return 0 ;; esac
    return 1
}

have_groff=0
command -v groff >/dev/null 2>&1 && have_groff=1
have_lexgrog=0
command -v lexgrog >/dev/null 2>&1 && have_lexgrog=1
[ $have_groff = 1 ] ||
    echo "man: groff not found (Debian: apt-get install groff-base): page syntax not checked"
[ $have_lexgrog = 1 ] ||
    echo "man: lexgrog not found (Debian: apt-get install man-db): NAME sections not checked"

npages=0
nstubs=0
for p in $pages; do
    f=$srcdir/$p
    if [ ! -f "$f" ]; then
        bad "$p: listed but missing"
        continue
    fi
    npages=$((npages + 1))
    if grep -n '^$' "$f" >/dev/null; then
        bad "$p: empty line (use .PP): line $(grep -n '^$' "$f" | head -n 1 | cut -d: -f1)"
    fi
    if grep -n '[[:blank:]]$' "$f" >/dev/null; then
        bad "$p: trailing blanks: line $(grep -n '[[:blank:]]$' "$f" | head -n 1 | cut -d: -f1)"
    fi
    target=$(stub_target "$f")
    if [ -n "$target" ]; then
        nstubs=$((nstubs + 1))
        if ! listed "$target" || [ ! -f "$srcdir/$target" ]; then
            bad "$p: .so target $target is not a listed page"
        elif [ -n "$(stub_target "$srcdir/$target")" ]; then
            bad "$p: .so target $target is itself a stub"
        elif ! names_of "$srcdir/$target" | grep -qx "${p%.3}"; then
            bad "$p: ${p%.3} is not named in the NAME section of $target"
        fi
        continue
    fi
    if ! grep -q '^\.TH ' "$f"; then
        bad "$p: neither a page (.TH) nor a one-line .so stub"
        continue
    fi
    if ! grep -q '^\.TH .*"netmutex @PACKAGE_VERSION@"' "$f"; then
        bad "$p: its .TH line must name the version as \"netmutex @PACKAGE_VERSION@\""
    fi
    if [ $have_groff = 1 ]; then
        out=$(groff -man -Tutf8 -ww -z "$f" 2>&1)
        if [ -n "$out" ]; then
            bad "$p: groff $(groff --version 2>/dev/null | sed -n '1s/.* //p') warns: $(printf '%s\n' "$out" | head -n 1)"
            printf '%s\n' "$out" | sed 1d >&2
        fi
    fi
    if [ $have_lexgrog = 1 ] && ! lexgrog "$f" >/dev/null 2>&1; then
        bad "$p: lexgrog cannot parse its NAME section"
    fi
done

# Every NETMUTEX_API function of the headers: a page of its own name, and a
# prototype of it in the page that name leads to.
ncalls=0
for h in $headers; do
    if [ ! -f "$h" ]; then
        bad "header $h not found"
        continue
    fi
    calls=$(api_calls "$h")
    for fn in $calls; do
        ncalls=$((ncalls + 1))
        if ! listed "$fn.3" || [ ! -f "$srcdir/$fn.3" ]; then
            bad "$fn (declared in $(basename "$h")) has no page $fn.3 in man/api.am"
            continue
        fi
        page=$fn.3
        target=$(stub_target "$srcdir/$page")
        [ -n "$target" ] && page=$target
        [ -f "$srcdir/$page" ] || continue
        if ! grep -q "$fn(" "$srcdir/$page"; then
            bad "$fn: $page shows no prototype of it"
        fi
    done
done

if [ "$ncalls" -eq 0 ] && [ -n "$headers" ]; then
    bad "no NETMUTEX_API function found in$headers: is the pattern out of date?"
fi
# The problems once more, last: the lines a build log's reader sees first.
if [ $fail -ne 0 ]; then
    echo "man: FAILED, every problem:$problems" >&2
    exit 1
fi
echo "man: $npages pages ($nstubs stubs) checked, $ncalls calls of$headers documented"
exit 0
