/*
 * nm_bench.c -- the netmutex benchmark (docs/design.md has the targets).
 *
 *   nm_bench [-u URL] [--tcp] [-s NAME[,NAME...]] [-d SECONDS] [-p PROCS]
 *            [-t THREADS] [--hold-us US] [--think-us US] [-n LOCKS]
 *            [--lease-ms MS] [--delay-us US]
 *
 * WHERE REDIS IS.  -u URL, else $NETMUTEX_URL, else a private redis-server
 * that nm_bench starts itself (the binary configure found, or
 * $REDIS_SERVER) on a unix socket in a temporary directory, or with --tcp
 * on a free port of 127.0.0.1 (most figures scale with the round-trip time,
 * and TCP's differs from the unix socket's).  The private server is stopped
 * and its directory removed at exit, on error and on SIGINT/TERM/HUP.
 *
 * THE ROUND TRIP.  Before any scenario, nm_bench times 2,000 PINGs on a
 * hiredis connection of its own; their median is "rtt_us".  A lock+unlock
 * cycle needs at least two round trips (acquire script, release script), so
 * one thread alone can do at most 1/(2 x rtt) cycles per second: that is
 * "rtt_bound_per_s" below.
 *
 * OUTPUT.  One JSON line per scenario on stdout; notes and errors go to
 * stderr.  Every line has "scenario", "server" (private-unix, private-tcp or
 * url), "rtt_us", the scenario's parameters and raw counts, then its
 * figures.  A figure with a target is four keys:
 *     "X": value, "X_target": target, "X_vs_target": value / target,
 *     "X_meets_target": true or false
 * ("X_vs_target" is left out when the target is 0), and such a line ends
 * with "meets_all_targets".  Times are in ms unless the key says _us or _s.
 * Wait times ("wait_p50_ms", "wait_p99_ms", "wait_max_ms") are measured from
 * the call of netmutex_lock to its return, over every acquisition of the
 * measured period ("wait_samples" of them: beyond 65,536 per thread, a
 * uniform sample).  "hold_mean_ms" is how long the critical section really
 * lasted (sleeps overshoot) and "unlock_mean_ms" how long netmutex_unlock
 * took: both limit what one name can do.  "per_proc" lists the acquisitions
 * of each process, "thread_min"/"thread_max" those of the least and most
 * successful thread.  A scenario that failed prints "error" instead of
 * figures.
 * The exit status is 0 whether or not targets are met -- the benchmark
 * measures, it does not judge -- 1 when something failed (a lock call
 * returned an unexpected error, a worker hung, Redis did not start), 2 for
 * a usage error.
 *
 * SCENARIOS (-s picks some, default all, always in this order; -d is the
 * measured time of each, default 5 s):
 *   uncontended        1 process x 1 thread, one name, lock+unlock in a loop.
 *                      "cycles_per_s"; target 0.9 x rtt_bound_per_s.  Right
 *                      after, for as long, server_cpu's reference lock (two
 *                      EVALSHA per cycle on a blocking hiredis connection,
 *                      not pinned): "reference_cycles_per_s",
 *                      "reference_ratio_to_rtt_bound" (what any
 *                      script-based lock reaches here) and
 *                      "ratio_to_reference".
 *   tls_uncontended    The uncontended cycle over TLS beside the same over
 *                      plain TCP, on one private server listening on both
 *                      (certificates made for the run by tests/tls-certs.sh,
 *                      no client certificate): "tcp_cycles_per_s",
 *                      "tls_cycles_per_s", "tls_ratio_to_tcp", target
 *                      >= 0.8.  Then a new thread's first lock+unlock,
 *                      which dials, median of 41: "first_cycle_tcp_us",
 *                      "first_cycle_tls_full_us" (a new configuration: a
 *                      full handshake), "first_cycle_tls_resumed_us" (a
 *                      session resumed); "handshake_full_us" and
 *                      "handshake_resumed_us" = each minus the TCP one.
 *   server_cpu         What a cycle costs the server.  One worker process
 *                      locks and unlocks one name; the reference is the
 *                      commands a plain SET-NX lock sends, run by the main
 *                      process on a hiredis connection of its own: EVALSHA
 *                      of a script doing SET key value NX PX lease, EVALSHA
 *                      of one doing GET, compare, DEL, with a fresh
 *                      32-hex-digit value per cycle.  The two take turns in
 *                      200 ms chunks ("chunk_ms"), in the order ABBA ABBA,
 *                      -d seconds each, so both see the same machine load.
 *                      Around every chunk the main process reads INFO cpu
 *                      (used_cpu_user + used_cpu_sys of the server's main
 *                      thread: "cpu_source" "main_thread", or "process" on
 *                      a server that does not report it) and INFO
 *                      commandstats.  With the private server, its main
 *                      thread and the bench's processes are pinned to one
 *                      CPU for this scenario ("pinned_cpu", -1 with -u):
 *                      across cores, wake-ups and idle exits made the
 *                      figure vary up to 4x between chunks.
 *                      "server_cpu_us_per_cycle",
 *                      "reference_cpu_us_per_cycle";
 *                      "cpu_ratio_to_reference" = the first / the second,
 *                      target <= 1.  "redis_calls_per_cycle" = commands
 *                      the server ran per cycle, those run inside scripts
 *                      included (the bench's INFO calls excluded), and
 *                      "calls_per_cycle" the same by command;
 *                      "reference_calls_per_cycle".  (An idle server's
 *                      cron, ~2 ms of CPU per second, is in both and not
 *                      subtracted.)
 *   contended_procs    4 processes x 1 thread, one name, hold 1 ms, think
 *                      1 ms.  Then the reference: the same load (processes,
 *                      sleeps, duration) on a process-shared pthread mutex
 *                      in the board, "pthread_acq_per_s",
 *                      "pthread_wait_p50_ms", "pthread_wait_p99_ms",
 *                      "pthread_fairness".  "acq_per_s" (total acquisitions
 *                      per second), target 0.9 x pthread_acq_per_s;
 *                      "ideal_per_s" is the most the hold and think times
 *                      allow (1,000/s by default: the lock is never idle);
 *                      wait p50/p99/max, target p99 <= 5 ms; "fairness" =
 *                      min/max acquisitions per process, target >= 0.8.
 *   handoff            How long the lock takes to change hands.  2 processes
 *                      pass one name back and forth: the holder waits until
 *                      the other has been inside netmutex_lock for
 *                      "settle_us" (2 ms: its request is queued by then),
 *                      then unlocks.  A sample is the time from the start of
 *                      the holder's netmutex_unlock call to the return of
 *                      the waiter's netmutex_lock, both stamped with
 *                      CLOCK_MONOTONIC on the board.  "handoff_p50_us",
 *                      "handoff_p99_us", "handoff_max_us"; "unlock_p50_us",
 *                      "unlock_p99_us" = the unlock call alone;
 *                      "handoff_p50_rtt" = handoff_p50_us / rtt_us, target
 *                      <= 2.  Before it, the floor under any such hand-off
 *                      on this machine: one process RPUSHes to a list
 *                      another blocks on with BLPOP (plain hiredis, same
 *                      settle time, 400 samples): "blpop_floor_p50_us",
 *                      "blpop_floor_p99_us", "blpop_floor_p50_rtt".  "overtakes" = locks that returned to the
 *                      process that had just unlocked while the other
 *                      still waited (not samples), target 0.
 *   cond_pingpong      2 processes hand a turn to each other through a
 *                      netmutex_cond_t and the netmutex guarding the turn
 *                      (lease caching on): each waits until the turn is
 *                      its own, hands it over, signals.  A third process
 *                      runs uncontended's loop (caching off) on a name of
 *                      its own; the two take turns, 4 slices of -d/4
 *                      seconds each, so both see the same machine load.
 *                      "exchanges_per_s", "exchange_us" and
 *                      "exchange_rtt" (in PING round trips);
 *                      "uncontended_cycles_per_s", "uncontended_cycle_us";
 *                      "ratio_to_uncontended" = exchanges_per_s /
 *                      uncontended_cycles_per_s, target >= 0.5;
 *                      "spurious" = wake-ups that found the turn not
 *                      theirs, "spurious_per_1000" exchanges, target <= 1.
 *   cond_broadcast16   16 waiters, 8 processes x 2 threads, wait on one
 *                      condition (lease caching on); a ninth process
 *                      locks the mutex once all 16 wait, starts a new
 *                      round, broadcasts and unlocks; each waiter, woken
 *                      and holding the mutex, notes the time and waits
 *                      again.  A sample is the time from the broadcast's
 *                      call to the last of the 16 holding the mutex;
 *                      rounds for -d seconds, 20 at least.
 *                      "all_held_p50_ms", "all_held_p99_ms" (target <=
 *                      50), "all_held_max_ms"; "spurious" = wake-ups that
 *                      found no new round.
 *   rwlock_read_mostly 4 processes x 2 threads (-p, -t) each do operations
 *                      back to back on one netmutex_rwlock_t, 95 % reads,
 *                      each holding it --hold-us (2,000) (caching off).
 *                      The same load on one netmutex_t (every operation
 *                      exclusive) takes turns with it, 4 slices of -d/4
 *                      seconds each, ABBA.  "ops_per_s", "mutex_ops_per_s";
 *                      "ratio_to_mutex" = the first / the second, target
 *                      >= 2.5; "max_readers_inside" (counted in the board
 *                      as readers enter), target >= 4; the writers' waits
 *                      from the call to the lock: "writer_wait_p50_ms",
 *                      "writer_wait_p99_ms" (target <= 50),
 *                      "writer_wait_max_ms"; "overlaps" = a writer found
 *                      inside with anyone else on the same lock, target 0.
 *   sem_permits        8 netmutex(1) commands started at once with
 *                      `--permits 3` on one name (the tool's program from
 *                      the build tree), each appending its entry and exit
 *                      times to a shared file from inside its permit and
 *                      staying 200 ms; runs of the 8 for -d seconds, 3 at
 *                      least ("runs").  "max_inside" = the most stays open
 *                      at once in any run, target <= 3;
 *                      "min_run_max_inside" = the same in the run that had
 *                      fewest, target >= 3 (every run had 3 inside);
 *                      "rounds_p50" = the longest chain of stays each begun
 *                      after the one before it ended ("rounds_ideal" 3);
 *                      "first_in_p50_ms" from the start of the commands to
 *                      the first entry (the tool's start);
 *                      "all_through_p50_ms", "all_through_max_ms" until the
 *                      last command exited.  Then one thread alone waits
 *                      for a permit and posts it back for -d / 2 seconds:
 *                      "uncontended_cycles_per_s", "rtt_bound_per_s",
 *                      "ratio_to_rtt_bound".
 *   rwlock_cached_read 1 process x 1 thread rdlocks and unlocks one
 *                      netmutex_rwlock_t whose read shares are cached
 *                      (netmutex_rwlockattr_setcache), no writer: after a
 *                      warm-up until the share stays cached, 5 slices of
 *                      -d/5 seconds, the median.  "ns_per_cycle",
 *                      "script_calls" (during the slices: renewals only);
 *                      "cycles_per_s", target >= 1,000,000.
 *   rwlock_revoke      2 processes in turns: a reader with caching on
 *                      reads until its share stays cached and idle, then
 *                      a writer's netmutex_rwlock_timedwrlock takes the
 *                      lock from it.  A sample is the writer's call to its
 *                      return (its first 5 turns left out); at least 200,
 *                      more if -d allows.  "revoke_p50_us", "revoke_p90_us",
 *                      "revoke_max_us"; "revoke_p99_ms", target <= 2.
 *   deadlock_cycle     How soon a cycle of waits ends.  2 processes, each
 *                      round an AB/BA cycle of ERRORCHECK mutexes (fresh
 *                      names); a sample is the time from the second wait's
 *                      start to the EDEADLK's return.  "cycles" (2 per
 *                      second of -d, 10 to 256), "edeadlk_p50_ms",
 *                      "edeadlk_p99_ms" (target <= 1000), "edeadlk_max_ms",
 *                      "edeadlk_per_cycle" (target 1: never two),
 *                      "other_errors" (target 0).
 *   timedlock_late     How late a timed wait returns.  1 process, one name
 *                      held by a lock key written by hand (a token of
 *                      nobody's, so only the waiter talks to the server),
 *                      netmutex_timedlock with deadlines of 20 to 69 ms in
 *                      a loop, each running out.  A sample is the time from
 *                      the deadline to the return (CLOCK_REALTIME).
 *                      "late_p50_ms", "late_p99_ms" (target <= 10),
 *                      "late_max_ms"; "early" = returns before the
 *                      deadline, target 0; "warnings" = messages the
 *                      library logged meanwhile, target 0; "server_hz", the
 *                      server's hz (a BLPOP's timeout is answered on its
 *                      tick unless something wakes it).
 *   threads            1 process x 8 threads, one name, empty critical
 *                      section.  "acq_per_s", target >= 100,000; well above
 *                      rtt_bound_per_s only if threads hand the lock to
 *                      each other without a round trip.
 *   threads_two_procs  2 processes x 8 threads, one name, empty critical
 *                      section.  "acq_per_s" and "min_proc_share", the
 *                      smallest share of acquisitions a process got; target
 *                      >= 1/3 with two processes (in general 2/3 of an even
 *                      share, 2/(3 x procs)).
 *   residue            What the server keeps of names no longer used.  One
 *                      process locks and unlocks N distinct names one after
 *                      the other (-n, default 20,000) with a short lease
 *                      (--lease-ms, default 500), each with a netmutex_t of
 *                      its own, destroyed after use.  Before the first,
 *                      right after the last and 2 leases after it:
 *                      "used_memory_*" (INFO memory), "dbsize_*" (the whole
 *                      database, other scenarios' keys included) and
 *                      "keys_*" = live keys whose names contain the
 *                      scenario's mutex names (SCAN MATCH).  "keys_after";
 *                      "keys_after_2_leases", target 0;
 *                      "bytes_per_name_after" and
 *                      "bytes_per_name_after_2_leases" = growth of
 *                      used_memory since before the first, per name, target
 *                      <= 16 for the latter.  That growth includes the fence
 *                      floors the names' slots got ("floor_keys_before",
 *                      "floor_keys_after_2_leases": one small key per hash
 *                      slot, at most 16384 in all, src/lua/lib.lua): a
 *                      bounded, one-time cost, not one per name, which the
 *                      per-name figure spreads over -n names.
 *   many_locks         One process locks N distinct names (-n, default
 *                      100,000) with a short lease (--lease-ms, default
 *                      3,000), holds them for 3 lease periods while the
 *                      watchdog renews them, then unlocks them all.
 *                      "lost" = unlocks that returned ENOLCK, target 0;
 *                      "rss_bytes_per_lock" = growth of VmRSS from before
 *                      the first lock to the end of the hold, per lock,
 *                      target <= 1024; "acquire_s", "release_s";
 *                      "renew_evalsha_calls" and "renew_pexpire_calls" =
 *                      script calls and key renewals (PEXPIREs, most of
 *                      them run inside the renew script) the server
 *                      counted (INFO commandstats) during the hold period
 *                      alone; "key_renewals_expected" = N x the renewal
 *                      rounds a hold of that length needs.  Many keys per
 *                      call ("keys_per_renew_call") means the renewals are
 *                      batched.
 *   fair_procs         contended_procs with the mutex in fair mode; prints
 *                      "skipped" while netmutex.h has no fair mode.  Its
 *                      pthread reference is the same plain mutex (pthread
 *                      mutexes have no fair mode).
 *   quorum_uncontended uncontended in quorum mode: server 0 and two more
 *                      private servers started for it (not available with
 *                      -u).  "cycles_per_s"; "cycle_time_ratio" = this
 *                      run's single-server rate / the quorum rate, target
 *                      <= 1.3 (needs the uncontended scenario in the run).
 *   quorum_contended_procs  contended_procs in quorum mode, with its
 *                      "cycle_time_ratio" to contended_procs (no target).
 *   waiters            What waiting costs the server.  For each kind --
 *                      "mutex", "sem" (one permit), "rwlock_writers"
 *                      (writers behind a read share), "cond" (condition
 *                      waiters, a signaller holding nothing) -- and 1, 100,
 *                      1,000 and 10,000 waiters (--waiters N, or -p N: N
 *                      alone), one process holds and the N wait, each at
 *                      the server: up to 1,000 N processes of one thread,
 *                      10,000 as 100 processes x 100 threads ("processes",
 *                      "threads_per_process").  A mutex's threads queue in
 *                      their process (fair mode too), so its 10,000 line
 *                      says "skipped" and why.  A private server's
 *                      maxclients is raised for the run when N needs it.
 *                      Once the server counts them blocked and a second
 *                      more, its CPU and commands over -d seconds:
 *                      "server_cpu_pct" (target <= 3 at 1,000 waiters,
 *                      <= 30 at 10,000), "commands_per_s",
 *                      "server_blocked" (INFO blocked_clients before),
 *                      "server_blocked_after" (and after),
 *                      "server_clients", "warnings" (the library's, in
 *                      every process; "first_warning" its text).  Then
 *                      hand-offs with the queue kept full (each waiter
 *                      queues again once it let go): a sample is one
 *                      release call to the next holder's return (cond:
 *                      signal to wake-up), 255 of them:
 *                      "handoff_p50_us", "handoff_samples" and, above one
 *                      waiter, "handoff_ratio_to_one" (target <= 1.5);
 *                      "handoff_server_cpu_us" and
 *                      "handoff_server_commands", the server's CPU and
 *                      commands per hand-off over those, less the waiting
 *                      alone's rates (its side of a hand-off, which the
 *                      load moves less than the latency);
 *                      cond's "late_signals" woke nobody in 5 s.  A kind
 *                      that fails at some N is not run with more.
 * LEASE CACHING.  The scenarios above run with lease caching off
 * (netmutex_config_t.cache_idle_ms = NETMUTEX_CACHE_OFF): they measure the
 * network path, which a cached lease skips.  These run with it on, as the
 * library's default configuration has it:
 *   cache_uncontended  1 process x 1 thread, one name, no other process:
 *                      lock+unlock from the cache.  In UNC_ROUNDS (10)
 *                      slices each, taking turns (once the lease stays
 *                      cached), the same loop on the cached netmutex and
 *                      on a process-local
 *                      pthread_mutex_t; medians.  "cycles_per_s", target
 *                      >= 1,000,000; "ns_per_cycle", "pthread_cycles_per_s",
 *                      "pthread_ns_per_cycle", "slowdown_vs_pthread";
 *                      "script_calls" the server ran meanwhile (INFO
 *                      commandstats: if the cache works, only renewals and
 *                      the marks a lease gets when it goes idle during a
 *                      pthread slice and busy again, two per round) and
 *                      "same_fence_throughout".  A third side measures
 *                      what caching a robust mutex exactly would cost at
 *                      least: the same cycle plus a marker SET written to
 *                      the server at each lock and each unlock, replies
 *                      read 256 at a time ("marked_cycles_per_s",
 *                      "marked_ns_per_cycle"); the three sides take turns.
 *   cache_revoke       2 processes take one name from each other in turn,
 *                      each time while the other holds the lease cached
 *                      and idle.  A sample is the time from the call of
 *                      netmutex_timedlock to its return; at least 200 of
 *                      them, more if -d allows (each process's first 5
 *                      turns, its warm-up, are left out, and so are turns
 *                      where the lock key was already gone:
 *                      "not_cached_turns").  "revoke_p50_us",
 *                      "revoke_p90_us", "revoke_max_us", "revoke_p50_rtt";
 *                      "revoke_p99_ms", target <= 2.
 *   cache_handoff      handoff with caching on: the lock is taken back at
 *                      the holder's unlock (its figures as handoff's).
 *   cache_contended_procs  contended_procs with caching on (its figures and
 *                      targets as contended_procs').
 *   cache_porting      examples/porting's counter (from this build tree),
 *                      plain and ported by both routes with its stats_lock
 *                      selected: 2 processes one after the other (the
 *                      selected mutex is used by one process at a time),
 *                      3 threads x 20,000 bumps each, 3 rounds taking
 *                      turns, wall-clock time per bump, process start-up
 *                      (libtool's wrapper script included) counted in.
 *                      "plain_us_per_bump", "wrap_us_per_bump",
 *                      "source_us_per_bump", "source_time_ratio";
 *                      "wrap_uncached_us_per_bump" and
 *                      "uncached_time_ratio", the link route with
 *                      NETMUTEX_CACHE=0 (one run of 1/20 of the bumps);
 *                      "time_ratio" = wrap / plain, target <= 2.
 *   cluster_names      Many names on a Redis Cluster of 3 masters that
 *                      nm_bench starts for it (not with -u): 4 processes x 2
 *                      threads (-p, -t) lock and unlock names picked at
 *                      random among 96 (-n).  "acq_per_s" in total,
 *                      "acq_per_s_per_master", "names_per_master" (no
 *                      target; see scenarios_cluster.c).  Caching off, as
 *                      for the scenarios before the cache ones.
 * THE DELAYED LINK.  On loopback a script request costs several PING round
 * trips, so the round-trip targets cannot be judged there.  With --delay-us
 * US (make bench passes 100: BENCH_DELAY_US in bench/Makefile.am), once the
 * selected scenarios have run, uncontended, handoff and quorum_uncontended
 * (those of them selected) run again as "delayed_uncontended",
 * "delayed_handoff" and "delayed_quorum_uncontended", with every connection
 * -- the library's and the bench's own -- through a delaying proxy
 * (bench_proxy.c): a process that listens on a port of 127.0.0.1 for each
 * private server (server 0; in quorum mode all three, each behind its own
 * port) and holds every chunk of bytes back US in each direction.  Right
 * before each of them the bench times 2,000 PINGs through the proxy; their
 * median is the scenario's "rtt_us" (the machine's load drifts).  Their
 * lines add "delay_us", "loopback_rtt_us" (the round trip measured at the
 * start) and "proxy_realtime" (the proxy got SCHED_FIFO; without it, a
 * loaded machine makes its delays late).
 *   delayed_uncontended  uncontended in 4 slices of -d/4 seconds, 500
 *                      PINGs through the proxy before each slice and after
 *                      the last: "rtt_us" is the median of those 2,500
 *                      ("rtt_turn_min_us", "rtt_turn_max_us": the lowest
 *                      and highest median of a batch).  "cycles_per_s",
 *                      target 0.9 x rtt_bound_per_s; "rtt_mean_us" and
 *                      "ratio_to_mean_rtt_bound", the same ratio with the
 *                      PINGs' mean (a rate is a mean: on a loaded machine
 *                      the round trips' long tail counts in it, not in the
 *                      median), no target.
 *   delayed_handoff    handoff; its target is "handoff_p50_us" <= 2 x rtt_us
 *                      + 100 us (the waiter is a sleeping process: waking
 *                      it is not a round trip), and handoff_p50_rtt has no
 *                      target.
 *   delayed_quorum_uncontended  quorum_uncontended and uncontended taking
 *                      turns in slices of -d/4 seconds (ABBA ABBA, -d
 *                      seconds each): "cycles_per_s" (quorum),
 *                      "single_server_per_s", "cycle_time_ratio" = the
 *                      second / the first, target <= 1.3.
 * Then one line, "rtt_targets", sets the three round-trip targets on the
 * delayed link beside this run's loopback figures (a table of the same goes
 * to stderr):
 *     "cycles_per_s" >= 0.9 / (2 x "cycles_rtt_us"),
 *     "loopback_cycles_per_s", "loopback_ratio_to_rtt_bound";
 *     "handoff_p50_us" <= 2 x "handoff_rtt_us" + 100,
 *     "loopback_handoff_p50_us", "loopback_handoff_p50_rtt";
 *     "quorum_cycle_time_ratio" <= 1.3, "loopback_quorum_cycle_time_ratio".
 * With -u the line says "skipped" instead (the proxy fronts the private
 * servers).
 * -p, -t, --hold-us and --think-us replace the defaults of contended_procs,
 * threads, threads_two_procs, fair_procs and cache_contended_procs (and of
 * their pthread references); uncontended, server_cpu, handoff and the other
 * cache scenarios stay as described.
 * -n and --lease-ms apply to residue and many_locks (-n also to
 * cluster_names).
 * Targets other than the fixed ones (p99, fairness, lost, RSS) follow the
 * parameters, as described above.
 *
 * HOW IT RUNS.  The main process never uses netmutex (server_cpu's
 * reference lock runs there, on a plain hiredis connection): each scenario
 * runs in freshly forked worker processes, which configure the library
 * after the fork as an application would, so one scenario's connections,
 * watchdog thread and memory do not colour the next.  Workers write their
 * counts and wait samples to a shared anonymous mapping (the "board") that
 * the main process reads once they have exited.  Each worker thread locks
 * and unlocks once before the start signal, so dialing Redis and loading
 * the scripts are not measured.  Mutex names start with "nm_bench/PID/",
 * so runs against a shared server do not meet each other's keys.
 *
 * FILES.  This one has the options, the scenario table and main;
 * bench_stats.c time and statistics, bench_json.c the JSON lines,
 * bench_redis.c the admin connection and the private servers,
 * bench_workers.c the worker processes and the lock loop.  uncontended,
 * contended_procs, fair_procs, threads, threads_two_procs, many_locks and
 * the quorum scenarios are in scenarios_basic.c; server_cpu, handoff and
 * residue in scenarios_footprint.c, cache_uncontended, cache_revoke and
 * cache_porting in scenarios_cache.c, cluster_names in scenarios_cluster.c,
 * timedlock_late in scenarios_wait.c, deadlock_cycle in
 * scenarios_deadlock.c, cond_pingpong and cond_broadcast16 in
 * scenarios_cond.c, rwlock_read_mostly in scenarios_rwlock.c, sem_permits
 * in scenarios_sem.c, waiters in scenarios_waiters.c;
 * stats_cache_uncontended and stats_contended_procs
 * (statistics off and on side by side, described there) in
 * scenarios_stats.c;
 * the delayed link's proxy in
 * bench_proxy.c, and delayed_uncontended, delayed_quorum_uncontended and the
 * rtt_targets line in scenarios_delay.c; what the files share is declared in
 * nm_bench.h.
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "nm_bench.h"
#include "redis_server.h"

/* ===================================================================== */
/* options and process-wide state                                         */
/* ===================================================================== */

bench_opt_t nmb_opt = { NULL, 0, 5.0, -1, -1, -1, -1, -1, -1, 0, 0 };

static pid_t main_pid;
double nmb_rtt_us;
const char *nmb_server_kind = "url";
char nmb_server_url[640];
char nmb_name_prefix[64];            /* "nm_bench/PID" */

netmutex_config_t nmb_bench_config(int cache)
{
    netmutex_config_t cfg = { .url = nmb_server_url };
    cfg.cache_idle_ms = cache ? 0 : NETMUTEX_CACHE_OFF;
    return cfg;
}

long nmb_opt_or(long v, long d)
{
    return v > 0 ? v : d;
}

void nmb_complain(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("nm_bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* The errno values netmutex documents, by name: "ENOLCK" says more in a
 * JSON line than "No locks available". */
const char *nmb_errname(int err)
{
    const char *name = netmutex_errname(err);
    return name ? name : strerror(err);
}
/* ===================================================================== */
/* main                                                                   */
/* ===================================================================== */

/* The last load field is lease caching: only the cache_* scenarios have it.
 * The three with a delayed name run again on the delayed link. */
static const scenario_t scenarios[] = {
    { "uncontended", nmb_sc_uncontended, { 1, 1, 0, 0, 0, 0, 0 }, "delayed_uncontended",
      nmb_sc_delayed_uncontended },
    { "tls_uncontended", nmb_sc_tls_uncontended, { 1, 1, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "server_cpu", nmb_sc_server_cpu, { 1, 1, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "contended_procs", nmb_sc_contended_procs, { 4, 1, 1000, 1000, 0, 0, 0 }, NULL, NULL },
    { "handoff", nmb_sc_handoff, { 2, 1, 0, 0, 0, 0, 0 }, "delayed_handoff", NULL },
    { "timedlock_late", nmb_sc_timedlock_late, { 1, 1, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "deadlock_cycle", nmb_sc_deadlock_cycle, { 2, 1, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "threads", nmb_sc_threads, { 1, 8, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "threads_two_procs", nmb_sc_threads_two_procs, { 2, 8, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "residue", nmb_sc_residue, { 1, 1, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "many_locks", nmb_sc_many_locks, { 1, 1, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "fair_procs", nmb_sc_fair_procs, { 4, 1, 1000, 1000, 0, 0, 0 }, NULL, NULL },
    { "quorum_uncontended", nmb_sc_quorum_uncontended, { 1, 1, 0, 0, 0, 0, 0 },
      "delayed_quorum_uncontended", nmb_sc_delayed_quorum },
    { "quorum_contended_procs", nmb_sc_quorum_contended_procs, { 4, 1, 1000, 1000, 0, 0, 0 }, NULL, NULL },
    { "cache_uncontended", nmb_sc_cache_uncontended, { 1, 1, 0, 0, 0, 0, 1 }, NULL, NULL },
    { "cache_revoke", nmb_sc_cache_revoke, { 2, 1, 0, 0, 0, 0, 1 }, NULL, NULL },
    { "cache_handoff", nmb_sc_handoff, { 2, 1, 0, 0, 0, 0, 1 }, NULL, NULL },
    { "cache_contended_procs", nmb_sc_contended_procs, { 4, 1, 1000, 1000, 0, 0, 1 }, NULL, NULL },
    { "cache_porting", nmb_sc_cache_porting, { 1, 3, 0, 0, 0, 0, 1 }, NULL, NULL },
    { "cluster_names", nmb_sc_cluster_names, { 4, 2, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "cond_pingpong", nmb_sc_cond_pingpong, { 2, 1, 0, 0, 0, 0, 1 }, NULL, NULL },
    { "cond_broadcast16", nmb_sc_cond_broadcast16, { 8, 2, 0, 0, 0, 0, 1 }, NULL, NULL },
    { "rwlock_read_mostly", nmb_sc_rwlock_read_mostly, { 4, 2, 2000, 0, 0, 0, 0 }, NULL, NULL },
    { "sem_permits", nmb_sc_sem_permits, { 1, 1, 0, 0, 0, 0, 0 }, NULL, NULL },
    { "rwlock_cached_read", nmb_sc_rwlock_cached_read, { 1, 1, 0, 0, 0, 0, 1 }, NULL, NULL },
    { "rwlock_revoke", nmb_sc_rwlock_revoke, { 2, 1, 0, 0, 0, 0, 1 }, NULL, NULL },
    { "stats_cache_uncontended", nmb_sc_stats_cache_uncontended, { 1, 1, 0, 0, 0, 0, 1 }, NULL,
      NULL },
    { "stats_contended_procs", nmb_sc_stats_contended_procs, { 4, 1, 1000, 1000, 0, 0, 0 }, NULL,
      NULL },
    { "waiters", nmb_sc_waiters, { 1, 1, 0, 0, 0, 0, 0 }, NULL, NULL },
};
#define NSCENARIOS (sizeof scenarios / sizeof scenarios[0])

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nm_bench [-u URL] [--tcp] [-s NAME[,NAME...]] [-d SECONDS] [-p PROCS]\n"
            "                [-t THREADS] [--hold-us US] [--think-us US] [-n LOCKS] [--lease-ms MS]\n"
            "                [--delay-us US] [--waiters N]\n"
            "  -u URL         Redis to use (default $NETMUTEX_URL, else a private redis-server)\n"
            "  --tcp          private server on 127.0.0.1 TCP instead of a unix socket\n"
            "  -s NAMES       scenarios, comma-separated (default all):\n"
            "                 ");
    for (size_t i = 0; i < NSCENARIOS; i++)
        fprintf(f, "%s%s", scenarios[i].name, i + 1 < NSCENARIOS ? " " : "\n");
    fprintf(f,
            "  -d SECONDS     measured time per scenario (default 5)\n"
            "  -p, -t         processes, threads per process (override the defaults)\n"
            "  --hold-us, --think-us  time in and between critical sections\n"
            "  -n LOCKS       many_locks, residue, cluster_names: how many names\n"
            "                 (default 100000, 20000, 96)\n"
            "  --lease-ms MS  many_locks, residue: lease (default 3000, 500)\n"
            "  --delay-us US  then run uncontended, handoff and quorum_uncontended again\n"
            "                 through a proxy that delays every byte US each way (default 0:\n"
            "                 not; make bench uses 100)\n"
            "  --waiters N    waiters: N waiters alone (1 to 10000) instead of 1, 100, 1000,\n"
            "                 10000\n"
            "One JSON line per scenario on stdout; see the top of nm_bench.c.\n");
}

static long parse_long(const char *s, long lo, long hi, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        nmb_complain("%s: expected an integer from %ld to %ld, got '%s'", what, lo, hi, s);
        exit(2);
    }
    return v;
}

/* Which scenarios -s names, as a bit mask. */
static unsigned int parse_scenarios(const char *list)
{
    unsigned int mask = 0;
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < NSCENARIOS && strcmp(scenarios[i].name, tok) != 0)
            i++;
        if (i == NSCENARIOS) {
            nmb_complain("unknown scenario '%s'", tok);
            usage(stderr);
            exit(2);
        }
        mask |= 1u << i;
    }
    free(copy);
    return mask;
}

/* The selected scenarios that have a delayed name, again with every
 * connection through the delaying proxy; then the rtt_targets line.
 * Returns the number of failures. */
static int delayed_link(unsigned int selected)
{
    unsigned int mine = 0;
    int failures = 0, quorum = 0;
    for (size_t i = 0; i < NSCENARIOS; i++)
        if ((selected & (1u << i)) && scenarios[i].delayed_name) {
            mine |= 1u << i;
            quorum |= scenarios[i].run == nmb_sc_quorum_uncontended;
        }
    if (!mine)
        return 0;
    if (nmb_opt.url) {
        /* make bench asks for it always: not an error with a URL. */
        jline_t j;
        nmb_j_begin(&j, "rtt_targets");
        nmb_j_str(&j, "skipped", "the delayed link needs the private servers (no -u / NETMUTEX_URL)");
        nmb_j_end(&j);
        return 0;
    }
    if (nmb_delay_begin(nmb_opt.delay_us, quorum) != 0) {
        nmb_report_error("rtt_targets", "the delaying proxy could not be set up");
        return 1;
    }
    fprintf(stderr, "nm_bench: the delayed link: %ld us each way, PING round trip %.1f us "
            "through the proxy (median of %d)\n", nmb_opt.delay_us, nmb_rtt_us, RTT_PINGS);
    for (size_t i = 0; i < NSCENARIOS; i++) {
        if (!(mine & (1u << i)))
            continue;
        scenario_t d = scenarios[i];
        double rtt = nmb_measure_rtt();
        d.name = d.delayed_name;
        d.run = d.delayed_run ? d.delayed_run : d.run;
        /* The machine's load drifts: each is judged on the round trip
         * measured right before it. */
        if (rtt > 0)
            nmb_rtt_us = rtt;
        fprintf(stderr, "nm_bench: %s: PING round trip %.1f us through the proxy\n", d.name,
                nmb_rtt_us);
        if (d.run(&d) != 0)
            failures++;
    }
    nmb_rtt_targets_report();
    nmb_delay_end();
    return failures;
}

enum { OPT_TCP = 256, OPT_HOLD, OPT_THINK, OPT_LEASE, OPT_DELAY, OPT_WAITERS };

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "url", required_argument, NULL, 'u' },
        { "tcp", no_argument, NULL, OPT_TCP },
        { "scenarios", required_argument, NULL, 's' },
        { "duration", required_argument, NULL, 'd' },
        { "procs", required_argument, NULL, 'p' },
        { "threads", required_argument, NULL, 't' },
        { "hold-us", required_argument, NULL, OPT_HOLD },
        { "think-us", required_argument, NULL, OPT_THINK },
        { "locks", required_argument, NULL, 'n' },
        { "lease-ms", required_argument, NULL, OPT_LEASE },
        { "delay-us", required_argument, NULL, OPT_DELAY },
        { "waiters", required_argument, NULL, OPT_WAITERS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned int selected = (1u << NSCENARIOS) - 1;
    int c, failures = 0;

    while ((c = getopt_long(argc, argv, "u:s:d:p:t:n:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'u': nmb_opt.url = optarg; break;
        case OPT_TCP: nmb_opt.tcp = 1; break;
        case 's': selected = parse_scenarios(optarg); break;
        case 'd': {
            char *end;
            nmb_opt.duration_s = strtod(optarg, &end);
            if (end == optarg || *end || !(nmb_opt.duration_s > 0 && nmb_opt.duration_s <= 3600)) {
                nmb_complain("-d: expected seconds in (0, 3600], got '%s'", optarg);
                return 2;
            }
            break;
        }
        case 'p': nmb_opt.procs = parse_long(optarg, 1, MAX_PROCS, "-p"); break;
        case 't': nmb_opt.threads = parse_long(optarg, 1, MAX_THREADS, "-t"); break;
        case OPT_HOLD: nmb_opt.hold_us = parse_long(optarg, 0, 10000000, "--hold-us"); break;
        case OPT_THINK: nmb_opt.think_us = parse_long(optarg, 0, 10000000, "--think-us"); break;
        case 'n': nmb_opt.n_locks = parse_long(optarg, 1, 10000000, "-n"); break;
        case OPT_LEASE:
            nmb_opt.lease_ms = parse_long(optarg, NETMUTEX_LEASE_MIN_MS, 600000, "--lease-ms");
            break;
        case OPT_DELAY: nmb_opt.delay_us = parse_long(optarg, 0, 1000000, "--delay-us"); break;
        case OPT_WAITERS: nmb_opt.waiters = parse_long(optarg, 1, 10000, "--waiters"); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < NSCENARIOS; i++) {
        load_t ld = nmb_with_overrides(scenarios[i].load);
        if ((selected & (1u << i)) && ld.procs * ld.threads > MAX_WORKERS) {
            nmb_complain("%s: %d processes x %d threads is more than %d workers",
                     scenarios[i].name, ld.procs, ld.threads, MAX_WORKERS);
            return 2;
        }
    }

    main_pid = getpid();
    snprintf(nmb_name_prefix, sizeof nmb_name_prefix, "nm_bench/%ld", (long)main_pid);
    /* A server that goes away must surface as an error, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    rs_catch_fatal(NULL, 0, NULL);
    atexit(nmb_stop_redis);

    if (!nmb_opt.url) {
        const char *env = getenv("NETMUTEX_URL");
        nmb_opt.url = env && *env ? env : NULL;
    }
    if (nmb_opt.url) {
        if (nmb_opt.tcp)
            nmb_complain("--tcp is ignored with a URL");
        snprintf(nmb_server_url, sizeof nmb_server_url, "%s", nmb_opt.url);
    } else if (nmb_start_redis() != 0) {
        return 1;
    }
    if ((nmb_rtt_us = nmb_measure_rtt()) < 0)
        return 1;
    fprintf(stderr, "nm_bench: %s server %s, PING round trip %.1f us (median of %d)\n",
            nmb_server_kind, nmb_server_url, nmb_rtt_us, RTT_PINGS);

    for (size_t i = 0; i < NSCENARIOS; i++)
        if ((selected & (1u << i)) && scenarios[i].run(&scenarios[i]) != 0)
            failures++;
    if (nmb_opt.delay_us > 0)
        failures += delayed_link(selected);
    return failures ? 1 : 0;
}
