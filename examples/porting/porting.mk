# porting.mk -- porting counter (counter.c + stats.c, plain pthread code) to
# netmutex with a Makefile change only.  Use it as it is:
#
#   make -f porting.mk            builds counter, counter-source, counter-wrap
#
# and run a ported one with the mutex to share selected by its symbol (it
# is static: libnetmutex-wrap finds it in the program's symbol table, so
# do not strip the program):
#
#   NETMUTEX_URL=redis://127.0.0.1:6379 NETMUTEX_MUTEXES=stats_lock \
#       ./counter-wrap /shared/count 4 1000
#
# Every process (and host) running it with the same file and Redis then
# excludes the others; tally_lock, not selected, stays process-local.

CC ?= cc
CFLAGS ?= -O2 -g
PKG_CONFIG ?= pkg-config
OBJS = counter.o stats.o

all: counter counter-source counter-wrap

# Before: the program as it always was.
counter: $(OBJS)
	$(CC) $(CFLAGS) -o $@ $(OBJS) -pthread

# Route 1, the source route: the same sources compiled with the header
# forced in (pthread_mutex_t becomes netmutex's compatible type), linked
# with netmutex-wrap.
counter-source: counter.c stats.c stats.h
	$(CC) $(CFLAGS) $$($(PKG_CONFIG) --variable=source_cflags netmutex-wrap) \
		$$($(PKG_CONFIG) --cflags netmutex-wrap) \
		-o $@ counter.c stats.c $$($(PKG_CONFIG) --libs netmutex-wrap)

# Route 2, the link route: the unchanged objects, relinked.  The --libs
# line carries -Wl,--wrap=pthread_mutex_lock,... (and -Wl,--export-dynamic,
# which only a stripped program's globals need).
counter-wrap: $(OBJS)
	$(CC) $(CFLAGS) -o $@ $(OBJS) $$($(PKG_CONFIG) --libs netmutex-wrap)

counter.o stats.o: stats.h

clean:
	rm -f counter counter-source counter-wrap $(OBJS)

.PHONY: all clean
