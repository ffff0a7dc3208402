#!/bin/sh
# A lock's name may hold any byte but NUL.  --json output stays valid JSON
# (and valid UTF-8) whatever the bytes, and decodes to the name: UTF-8 as
# itself, a byte that is not UTF-8 as the Latin-1 character of its value.
# Text output and messages escape control characters and bytes that are
# not UTF-8 as \xNN (a backslash as \\), so a name can neither forge a line
# nor send the terminal an escape sequence.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

# Quote, backslash, newline, tab, 0x01, DEL, 0xff, UTF-8 e-acute, the C1
# control CSI in UTF-8, and ESC [2J (clear the screen).
weird=$(printf 'a"b\\c\nd\te\001f\177g\377h\303\251i\302\233j\033[2Jk')
eacute=$(printf '\303\251')
text='a"b\\c\x0ad\x09e\x01f\x7fg\xffh'"$eacute"'i\xc2\x9bj\x1b[2Jk'

# json_check NAME-BYTES [ARRAY]: ok when stdin is one JSON document in
# strict UTF-8 whose "name" (of its only element, with ARRAY) decodes to
# NAME-BYTES as described above.  (python3 -m json.tool takes invalid
# UTF-8 without a word, so the bytes are decoded here first.)
cat >"$tmp/json_check.py" <<'EOF'
import codecs, json, os, sys
codecs.register_error("latin1", lambda e: (e.object[e.start:e.end].decode("latin-1"), e.end))
doc = json.loads(sys.stdin.buffer.read().decode("utf-8"))
if len(sys.argv) > 2:
    assert isinstance(doc, list) and len(doc) == 1, doc
    doc = doc[0]
want = os.fsencode(sys.argv[1]).decode("utf-8", "latin1")
assert doc["name"] == want, (doc["name"], want)
EOF
json_check() { python3 "$tmp/json_check.py" "$@"; }

# no_raw FILE: no control character but the newlines, no byte 0xff.
no_raw() {
    [ "$(LC_ALL=C tr -d '\n' <"$1" | LC_ALL=C grep -c '[[:cntrl:]]')" = 0 ] &&
        ! LC_ALL=C grep -q "$(printf '\377')" "$1"
}

hold "$weird"
"$NM" status --json "$weird" >"$tmp/status.json"
rc=$?
check "status --json of the odd name while held (exit $rc)" test "$rc" = 0
check "... is valid JSON for python3 -m json.tool" quiet python3 -m json.tool "$tmp/status.json"
check "... strict UTF-8, and its name decodes to the name" json_check "$weird" <"$tmp/status.json"

"$NM" list --json >"$tmp/list.json"
check "list --json is valid JSON for python3 -m json.tool" quiet python3 -m json.tool "$tmp/list.json"
check "... strict UTF-8, with the one name decoded" json_check "$weird" array <"$tmp/list.json"

"$NM" status "$weird" >"$tmp/status.txt"
check "status: the name is escaped" test "$(sed -n 's/^name: *//p' "$tmp/status.txt")" = "$text"
check "... in one line of 9" test "$(wc -l <"$tmp/status.txt")" = 9
check "... with no raw control character or non-UTF-8 byte" no_raw "$tmp/status.txt"

"$NM" list >"$tmp/list.txt"
check "list: one line for the lock, under the header" test "$(wc -l <"$tmp/list.txt")" = 2
check "... which starts with the escaped name" \
    test "$(sed -n '2s/  .*//p' "$tmp/list.txt")" = "$text"
check "... with no raw control character or non-UTF-8 byte" no_raw "$tmp/list.txt"
release_hold

"$NM" -v "$weird" true 2>"$tmp/err"
check "messages name it escaped" \
    test "$(sed -n 's/^netmutex: acquired \(.*\) (fence [0-9]*)$/\1/p' "$tmp/err")" = "$text"
check "... one line each (acquired, released)" test "$(wc -l <"$tmp/err")" = 2
check "... with no raw control character or non-UTF-8 byte" no_raw "$tmp/err"

# Every byte from 0x01 to 0xff, in the name x<byte>y, through the JSON of
# status; one python3 checks them all.
cat >"$tmp/bytes_check.py" <<'END'
import codecs, json, sys
codecs.register_error("latin1", lambda e: (e.object[e.start:e.end].decode("latin-1"), e.end))
bad = []
for i in range(1, 256):
    with open("%s/byte.%d.json" % (sys.argv[1], i), "rb") as f:
        try:
            doc = json.loads(f.read().decode("utf-8"))
            ok = doc["name"] == bytes([0x78, i, 0x79]).decode("utf-8", "latin1")
        except ValueError:
            ok = False
    if not ok:
        bad.append(i)
print(" ".join(map(str, bad)))
END
failed=
for i in $(seq 1 255); do
    "$NM" status --json "$(printf "x\\$(printf %03o "$i")y")" >"$tmp/byte.$i.json"
    [ $? = 1 ] || failed="$failed $i"
done
check "status --json of x<byte>y for each byte 0x01 to 0xff: free (failed:$failed)" \
    test -z "$failed"
bad=$(python3 "$tmp/bytes_check.py" "$tmp") || bad="the check itself failed"
check "... valid JSON in strict UTF-8, each name decoded right (bad: $bad)" test -z "$bad"

done_testing
