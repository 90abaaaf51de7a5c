#ifndef MOSQUITTO_IO_H
#define MOSQUITTO_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * A read buffer under libmosquitto's socket reads.
 *
 * libmosquitto 2.0 reads each packet with one `read` for its first byte, one per byte of its remaining length
 * and one for the rest: three or four system calls for a fix (four for the project's fixes of about 260 bytes,
 * with two length bytes). It also writes one byte to an internal socket pair for every packet it queues, each
 * PUBACK included. Measured on the drain of `make bench-e2e` (151,000 queued QoS 1 fixes, `perf stat` of the
 * worker's system calls over the whole drain): see docs/performance.md. This module points libmosquitto's
 * imports of `read` and `write` (its GOT slots, and only its own) at the two functions below. While a network
 * thread has entered with a buffer, a read of that buffer's socket is served from one large `read`; outside,
 * and for any other file, they call the system's.
 */

/** One connection's buffered bytes; used by one thread at a time (the client's network thread). */
typedef struct mosquitto_io_buffer mosquitto_io_buffer;

/** What a buffer did, for tests and benchmarks. */
typedef struct {
    /** `read` calls libmosquitto made on the buffer's socket. */
    uint64_t requested_reads;
    /** `read` system calls made for them. */
    uint64_t system_reads;
    /** One-byte wake-up writes to libmosquitto's internal socket pair, not made (see `mosquitto_io_write`). */
    uint64_t skipped_wakeups;
} mosquitto_io_counters;

/** Patches libmosquitto's imports of `read` and `write` once per process. Returns 0 when at least one points
 *  at this module, or a positive reason: 1 libmosquitto is not loaded as a shared library, 2 its dynamic
 *  section cannot be read, 3 it imports neither, 4 a slot could not be made writable, 5 the patch is not
 *  built here (not Linux with glibc on x86-64 or arm64, or built with MOSQUITTO_IO_DISABLED). */
int mosquitto_io_install(void);

/** 1 when the patch is built into this module (see `mosquitto_io_install`), else 0. */
int mosquitto_io_available(void);

/** A buffer of `capacity` bytes (at least 4,096), for no socket yet; NULL when out of memory. */
mosquitto_io_buffer *mosquitto_io_buffer_create(size_t capacity);
void mosquitto_io_buffer_destroy(mosquitto_io_buffer *buffer);

/** Forgets every buffered byte and serves reads of `fd` from now on (-1: none). Call it on every new
 *  connection, before libmosquitto reads from it: a closed socket's number is reused by the next one. */
void mosquitto_io_buffer_reset(mosquitto_io_buffer *buffer, int fd);

/** Bytes read from the socket and not yet handed to libmosquitto. */
size_t mosquitto_io_buffer_pending(const mosquitto_io_buffer *buffer);

mosquitto_io_counters mosquitto_io_buffer_counters(const mosquitto_io_buffer *buffer);

/** Routes this thread's reads of the buffer's socket through `buffer` (NULL: through nothing) until the next
 *  call. Returns the buffer that was routed before. */
mosquitto_io_buffer *mosquitto_io_enter(mosquitto_io_buffer *buffer);

/** What libmosquitto's `read` calls: from the entered buffer for its socket, else the system's `read`. */
ssize_t mosquitto_io_read(int fd, void *destination, size_t count);

/** Marks this thread as having libmosquitto queue a packet (1) or not (0), until the next call; returns the
 *  mark before. In threaded mode, queueing a packet (the client marks `mosquitto_publish_v5`) writes nothing
 *  but libmosquitto's wake-up byte, which this client never reads: the caller wakes the network thread its
 *  own way. */
int mosquitto_io_queueing(int on);

/** Wake-up bytes not written on this thread while it was marked as queueing (tests). */
uint64_t mosquitto_io_queueing_skips(void);

/** What libmosquitto's `write` calls. A write of the single byte 0 is libmosquitto's wake-up byte to its
 *  internal socket pair (written for every packet it queues, each PUBACK too); the client never reads that
 *  pair (it runs its own loop), so the byte is not written and 1 is returned when it is written to a file
 *  other than the socket of a buffer entered on this thread (the network thread inside `mosquitto_loop_read`:
 *  each PUBACK, what the callbacks queue), or while this thread is marked as queueing (status publishes from
 *  other threads). Everything else is the system's `write`. */
ssize_t mosquitto_io_write(int fd, const void *source, size_t count);

#endif
