/*
 * G5 and G6: the leases and the grants of ride ownership, checked with Spin (`make model-check`).
 *
 * One ride, two workers, one mosquitto and (in ETCD mode) a linearizable etcd. Time is a counter that a clock
 * process advances by one second at any point: a worker that takes no step while it runs is paused (SIGSTOP, a
 * stall, a VM migration), for as long as Spin likes. Every interleaving up to MAXT seconds is explored.
 *
 * What the code does, as modelled:
 *  - G5, the broker's lease (`BrokerLease`): it counts from the *send* time of the last packet the broker
 *    acknowledged; the broker fires the will WILL seconds after the last packet it *received*; the worker
 *    publishes only while less than WILL - MARGIN has passed (the network thread checks it again before each
 *    write), and pings every PING seconds. At a lapse, or a
 *    connection found lost, the client closes the connection and drops what it held (`mosquitto_reinitialise`),
 *    and confirms before publishing again: if its own will fired, it rejoins holding nothing.
 *  - Broker-only mode: a worker takes a ride over when it sees the owner's will, one epoch higher.
 *  - G6, etcd's lease (`BucketGrants`): counted from the renewal's send time, less ETCD_MARGIN, renewed every
 *    RENEW seconds; etcd deletes the owner key TTL seconds after it *received* the last renewal. A worker
 *    claims the ride's bucket if no key exists, under an epoch from etcd's revision; it stops when its lease
 *    lapses by its clock, and gives its grant back when it loses the broker. GATE=1 is the code: each status
 *    carries its grant's end; the network thread drops a head past it before handing it on (the write is a step
 *    of its own), and at the grant's end the client drops its queue but for a head already handed on.
 *    DROP_ON_GRANT_LAPSE=1 (without GATE) drops the whole queue at the lapse: a rule under study.
 *  - Rules under study (not the code): WAIT_FOR_WILL, WRITE_DEADLINE (checked with the write in one step, which the
 *    code cannot do: a second read showed a split check fails). See docs/model-check.md.
 *
 * The property (C5, G5): every status the broker delivers has a higher sequence than all before it, so neither a
 * keep-highest subscriber nor the retained copy ever goes back. Sequence = epoch * 16 + n.
 */

#ifndef MAXT
#define MAXT 20
#endif
#ifndef WILL
#define WILL 7          /* mosquitto: keepalive 5 x 3 / 2, whole seconds */
#endif
#ifndef MARGIN
#define MARGIN 1        /* broker.leaseMargin */
#endif
#ifndef PING
#define PING 2          /* an acknowledged packet at least every half keepalive */
#endif
#ifndef TTL
#define TTL 10          /* group.etcdLeaseTTL */
#endif
#ifndef ETCD_MARGIN
#define ETCD_MARGIN 1
#endif
#ifndef RENEW
#define RENEW 3         /* TTL / 3 */
#endif
#ifndef MAXN
#define MAXN 2          /* statuses per owner, enough to order them */
#endif
#ifndef CLEAR_ON_LAPSE
#define CLEAR_ON_LAPSE 1
#endif
#ifndef DROP_ON_GRANT_LAPSE
#define DROP_ON_GRANT_LAPSE 1
#endif
#define NONE 255
#ifndef WAIT_FOR_WILL
#define WAIT_FOR_WILL 0
#endif
#ifndef WRITE_DEADLINE
#define WRITE_DEADLINE 0
#endif
#ifndef GATE
#define GATE 0
#endif
#ifdef ETCD
#define CHECK_DEADLINE WRITE_DEADLINE
#define GRANT_LIVE(w) (now < granted[w] && (!WAIT_FOR_WILL || !stale[1 - w] || now >= claimedAt[w] + WILL))
#else
#define GRANT_LIVE(w) (1)
#define CHECK_DEADLINE 0
#endif

byte now = 0;

/* The broker. */
bool alive[2];          /* the connection is open at the broker */
byte lastRecv[2];       /* when the broker last received a packet of the connection */
bool willPending[2];    /* the worker's will was published and the other worker has not read it yet */
bool willSeen[2];       /* the worker's will was published and the worker has not confirmed since */
byte highest = 0;       /* the highest sequence delivered so far (the subscriber; the retained copy) */

/* etcd. */
byte etcdExp[2];        /* when etcd ends the worker's lease; 0: none */
byte owner = NONE;      /* whose lease the bucket's key is bound to */
byte revision = 0;
bool stale[2];          /* the worker's grant ended with its etcd lease, and its connection is still open */
byte claimedAt[2];

/* The workers. */
byte base[2];           /* G5: the send time of the last acknowledged packet */
bool connected[2];      /* the worker's view of its connection */
bool confirming[2];     /* G5: lapsed; publishes nothing until confirmed */
byte epoch[2];          /* 0: holds nothing */
byte n[2];
byte granted[2];        /* G6: until when the grant is live by the worker's clock */
byte renewSent[2];
bool renewing[2];
bool holder0 = 1;       /* broker-only: who the group takes for the ride's owner (1: worker 0) */
byte rideEpoch = 1;     /* broker-only: the epoch of the ride's retained state */
chan out[2] = [3] of { byte, byte };   /* the client's queue, in order: sequence (0: a ping), deadline */
bool pinging[2];        /* a ping is in the queue */
bool handed[2];         /* GATE: the queue's head passed the gate and was handed on (libmosquitto, the kernels) */

/* A packet written and acknowledged: the broker heard the connection, and the lease counts from the write. */
inline deliver(w, x) {
    lastRecv[w] = now;
    base[w] = now;
    if
    :: x == 0 -> pinging[w] = 0
    :: else ->
        assert(x > highest);   /* C5, G5: never back */
        highest = x
    fi
}

inline clear(w) {
    do
    :: out[w]?_, _
    :: empty(out[w]) -> break
    od;
    pinging[w] = 0;
    handed[w] = 0
}

/* GATE (the code): the grant's gate closes at its end by the worker's clock. The client drops what it holds, and
   resets the connection if a publish is unacknowledged; but a head already handed on may sit in the broker's
   kernel, which no reset recalls, so it stays and may still be written (the reset itself is not modelled: the
   connection staying up only lets the broker take that head later). */
inline gateClose(w) {
    if
    :: handed[w] -> out[w]?x, d; clear(w); out[w]!x, d; handed[w] = 1; pinging[w] = (x == 0)
    :: else -> clear(w)
    fi
}

/* The worker loses the connection or its lease: the client closes the connection and drops what it held. */
inline fireWill(w) {
    alive[w] = 0; willPending[w] = 1; willSeen[w] = 1; stale[w] = 0
}

inline lapse(w) {
    connected[w] = 0;
    if   /* closed without DISCONNECT: the broker publishes the will at once */
    :: alive[w] -> fireWill(w)
    :: else -> skip
    fi;
    if
    :: CLEAR_ON_LAPSE -> clear(w)
    :: else -> skip
    fi;
    confirming[w] = 1;
#ifdef ETCD
    /* The tie: a worker that lost the broker gives its grant back. */
    if
    :: owner == w && now < etcdExp[w] -> owner = NONE
    :: else -> skip
    fi;
    epoch[w] = 0;
    confirming[w] = 0;
#endif
}

proctype clock() {
    byte w;
    do
    :: now < MAXT ->
        atomic {
            now++;
            for (w : 0 .. 1) {
                if
                :: alive[w] && now - lastRecv[w] >= WILL -> fireWill(w)
                :: else -> skip
                fi;
                if
                :: etcdExp[w] != 0 && now >= etcdExp[w] ->
                    etcdExp[w] = 0;
                    if
                    :: owner == w -> owner = NONE; stale[w] = alive[w]
                    :: else -> skip
                    fi
                :: else -> skip
                fi
            }
        }
    :: now >= MAXT -> break
    od
}

proctype worker(byte w) {
    byte x, d;
    do
    :: now >= MAXT -> break
    /* G5: an acknowledged packet at least every PING seconds, queued behind what is queued. */
    :: atomic { connected[w] && !pinging[w] && len(out[w]) < 3 && now - base[w] >= PING -> out[w]!0, MAXT; pinging[w] = 1 }
    /* G5: the lease ran out by the worker's clock. */
    :: atomic { connected[w] && now >= base[w] + WILL - MARGIN -> lapse(w) }
    /* Publish a status (into the client's queue) while every lease holds. */
    :: atomic { connected[w] && !confirming[w] && epoch[w] > 0 && n[w] < MAXN && len(out[w]) < 2 &&
                now < base[w] + WILL - MARGIN && GRANT_LIVE(w) -> out[w]!(epoch[w] * 16 + n[w]), granted[w]; n[w]++ }
    /* (A worker that publishes nothing more still pings: a status is written before the ping behind it.) */
    /* GATE: the network thread checks the head against its grant's end before handing it on, and drops it if the
       grant has ended; the write that follows is a step of its own (a pause may come between). */
    :: atomic { GATE && len(out[w]) > 0 && connected[w] && !handed[w] ->
        out[w]?<x, d>;
        if
        :: x != 0 && now >= d -> out[w]?x, d
        :: else -> handed[w] = 1
        fi }
    /* The network thread writes the queue's head. It checks G5's lease first (a lapse drops the queue); on a
       connection the broker closed, the write fails. */
    :: atomic {
        len(out[w]) > 0 && connected[w] && (!GATE || handed[w]) ->
        if
        :: now >= base[w] + WILL - MARGIN -> lapse(w)
        :: now < base[w] + WILL - MARGIN && alive[w] -> out[w]?x, d;
            if
            :: CHECK_DEADLINE && x != 0 && now >= d -> skip   /* the client drops a publish past its grant */
            :: else -> deliver(w, x)
            fi;
            handed[w] = 0
        :: now < base[w] + WILL - MARGIN && !alive[w] -> lapse(w)
        fi }
    /* Reconnect: a new connection (its CONNECT acknowledged); what was held before the lapse is gone. */
    :: atomic { !connected[w] && !alive[w] -> connected[w] = 1; alive[w] = 1; lastRecv[w] = now; base[w] = now }
    /* G5: confirm, reading its own presence back (a marker that returns over a live connection only): its will
       fired means it was taken for dead. Reading anything needs a live connection too. */
    :: atomic { connected[w] && alive[w] && confirming[w] ->
        if
        :: willSeen[w] -> epoch[w] = 0
        :: else -> skip
        fi;
        /* The confirmation reads what the session queued: a will of the other worker followed by its new
           presence leaves it alive (or, after a rejoin, the view is formed again from the retained presences). */
        willPending[1 - w] = willPending[1 - w] && !alive[1 - w];
        willSeen[w] = 0; confirming[w] = 0 }
#ifndef ETCD
    /* Broker-only: the owner's will, read by the other worker, makes it the owner, one epoch above the ride's
       state (the owner's epoch: it wrote its state before its first status under it). */
    :: atomic { connected[w] && alive[w] && !confirming[w] && willPending[1 - w] ->
        willPending[1 - w] = 0;
        if
        :: holder0 == (w == 1) && epoch[w] == 0 -> epoch[w] = rideEpoch + 1; rideEpoch = epoch[w]; n[w] = 0;
                                                  holder0 = (w == 0)
        :: else -> skip
        fi }
#else
    /* G6: ask for or renew the lease (send time kept). */
    :: atomic { !renewing[w] && (etcdExp[w] == 0 || now - renewSent[w] >= RENEW) -> renewSent[w] = now; renewing[w] = 1 }
    /* etcd answers: a live lease runs TTL from now; one that ended is gone with its grant. */
    :: atomic { renewing[w] ->
        if
        :: etcdExp[w] == 0 && epoch[w] > 0 -> epoch[w] = 0;
            if :: GATE -> gateClose(w) :: !GATE && DROP_ON_GRANT_LAPSE -> clear(w) :: else -> skip fi
        :: else -> skip
        fi;
        etcdExp[w] = now + TTL; granted[w] = renewSent[w] + TTL - ETCD_MARGIN; renewing[w] = 0 }
    /* G6: the grant ran out by the worker's clock: stop at once, writing nothing. */
    :: atomic { epoch[w] > 0 && now >= granted[w] -> epoch[w] = 0;
        if :: GATE -> gateClose(w) :: !GATE && DROP_ON_GRANT_LAPSE -> clear(w) :: else -> skip fi }
    /* G6: claim the bucket (a transaction: only if no key), under the next revision. */
    :: atomic { connected[w] && epoch[w] == 0 && owner == NONE && etcdExp[w] != 0 && now < granted[w] ->
        owner = w; revision++; epoch[w] = revision; n[w] = 0; claimedAt[w] = now }
#endif
    od
}

init {
    atomic {
        connected[0] = 1; alive[0] = 1; connected[1] = 1; alive[1] = 1;
#ifndef ETCD
        epoch[0] = 1;
#endif
        run clock(); run worker(0); run worker(1)
    }
}
