#!/bin/sh
# Two netmutex runs of one NAME never overlap: each critical section makes
# a directory (mkdir fails if the other holds it) and increments a counter
# file with a pause between read and write, so an overlap shows up either as
# a failed mkdir or as a lost increment.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL
ROUNDS=6

. "${srcdir:-.}/cli/exclusion.inc"
exclusion_test "one server"

done_testing
