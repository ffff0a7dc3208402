#!/bin/sh
# sel.sh -- runs a selection of one GLib test program's cases as a test of
# its own: the harness (tests/Makefile.am, SEL_LOG_COMPILER) calls it as
#   sel.sh [WRAPPER...] sel/NAME.sel
# where NAME.sel holds one line, the program and its GLib options, e.g.
#   test_sentinel -p /sentinel/failover
# and WRAPPER is what to run the program under (valgrind, for
# check-valgrind-set), if anything.  One -p at most: GLib prints a TAP plan
# per -p path.
n=$#
[ "$n" -ge 1 ] || { echo "Bail out! sel.sh: no selection file"; exit 99; }
i=0
for a; do
    i=$((i + 1))
    if [ $i -eq 1 ]; then set --; fi
    if [ $i -lt $n ]; then set -- "$@" "$a"; else sel=$a; fi
done
read -r prog opts <"$sel" || { echo "Bail out! sel.sh: cannot read $sel"; exit 99; }
# shellcheck disable=SC2086  # opts: the GLib options, split on purpose
exec "$@" "./$prog" $opts
