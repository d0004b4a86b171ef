// The Linux headers Glibc's Swift module does not bring in, and small static-inline
// wrappers (prefixed `csy_`) for what Swift cannot call directly.
#ifndef C_SWITCHYARD_POSIX_H
#define C_SWITCHYARD_POSIX_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <errno.h>
#include <stdint.h>

/// accept4(2), which glibc declares only under _GNU_SOURCE.
int csy_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

/// Grows the process's descriptor table to hold at least `count` descriptors (clamped to
/// the soft RLIMIT_NOFILE) by duplicating a descriptor to slot `count - 1` and closing it.
/// The table never shrinks, so later accepts up to that many descriptors do not grow it:
/// in a process with more than one thread, each growth waits for an RCU grace period
/// (Linux's expand_fdtable calls synchronize_rcu), which stalls the accepting thread for
/// milliseconds. Returns the count reserved (0 for `count <= 0`), or -1 with errno set.
int csy_reserve_descriptors(int count);

/// Names the calling thread (at most 15 characters are kept).
int csy_pthread_setname(const char *name);

/// The kernel's `struct tcp_info` (linux/tcp.h) up to `tcpi_snd_wnd`, for
/// getsockopt(TCP_INFO). glibc's <netinet/tcp.h> stops before `tcpi_notsent_bytes`, and
/// <linux/tcp.h> cannot be included beside it. The kernel only appends to this struct and
/// copies min(its size, ours), so the prefix is stable. No bit fields, so Swift can copy
/// it as plain bytes.
struct csy_tcp_info {
    uint8_t tcpi_state;
    uint8_t tcpi_ca_state;
    uint8_t tcpi_retransmits;
    uint8_t tcpi_probes;
    uint8_t tcpi_backoff;
    uint8_t tcpi_options;
    uint8_t tcpi_wscales;  /* the kernel's bit fields snd_wscale:4, rcv_wscale:4 */
    uint8_t tcpi_flags;    /* delivery_rate_app_limited:1, fastopen_client_fail:2 */

    uint32_t tcpi_rto;
    uint32_t tcpi_ato;
    uint32_t tcpi_snd_mss;
    uint32_t tcpi_rcv_mss;

    uint32_t tcpi_unacked;
    uint32_t tcpi_sacked;
    uint32_t tcpi_lost;
    uint32_t tcpi_retrans;
    uint32_t tcpi_fackets;

    uint32_t tcpi_last_data_sent;
    uint32_t tcpi_last_ack_sent;
    uint32_t tcpi_last_data_recv;
    uint32_t tcpi_last_ack_recv;

    uint32_t tcpi_pmtu;
    uint32_t tcpi_rcv_ssthresh;
    uint32_t tcpi_rtt;
    uint32_t tcpi_rttvar;
    uint32_t tcpi_snd_ssthresh;
    uint32_t tcpi_snd_cwnd;
    uint32_t tcpi_advmss;
    uint32_t tcpi_reordering;

    uint32_t tcpi_rcv_rtt;
    uint32_t tcpi_rcv_space;

    uint32_t tcpi_total_retrans;

    uint64_t tcpi_pacing_rate;
    uint64_t tcpi_max_pacing_rate;
    uint64_t tcpi_bytes_acked;
    uint64_t tcpi_bytes_received;
    uint32_t tcpi_segs_out;
    uint32_t tcpi_segs_in;

    uint32_t tcpi_notsent_bytes;
    uint32_t tcpi_min_rtt;
    uint32_t tcpi_data_segs_in;
    uint32_t tcpi_data_segs_out;

    uint64_t tcpi_delivery_rate;

    uint64_t tcpi_busy_time;
    uint64_t tcpi_rwnd_limited;
    uint64_t tcpi_sndbuf_limited;

    uint32_t tcpi_delivered;
    uint32_t tcpi_delivered_ce;

    uint64_t tcpi_bytes_sent;
    uint64_t tcpi_bytes_retrans;
    uint32_t tcpi_dsack_dups;
    uint32_t tcpi_reord_seen;

    uint32_t tcpi_rcv_ooopack;

    uint32_t tcpi_snd_wnd;  /* Linux 5.4 and later: the peer's window, scaled, bytes */
};

#endif
