/* What the project's rdma_cm C tests share beside check.h: an IPv4
 * address from text, the next event of a channel (waited for at most ten
 * seconds), a one-WR RC QP on an ID, and a child process waited for
 * with a bound. */
#ifndef UROCE_TEST_CM_CHECK_H
#define UROCE_TEST_CM_CHECK_H

#include "check.h"
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static inline struct sockaddr_in addr_of(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
	return a;
}

/* The next event on ch, unacknowledged; it must be `want`. */
static inline struct rdma_cm_event *expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	CHECK(poll(&p, 1, 10000) == 1);
	struct rdma_cm_event *e;
	CHECK(rdma_get_cm_event(ch, &e) == 0);
	if (e->event != want)
		fprintf(stderr, "got %s, want %s\n", rdma_event_str(e->event), rdma_event_str(want));
	CHECK(e->event == want);
	return e;
}

/* The type of the next event on ch, which is acknowledged. */
static inline enum rdma_cm_event_type next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	CHECK(poll(&p, 1, 10000) == 1);
	struct rdma_cm_event *e;
	CHECK(rdma_get_cm_event(ch, &e) == 0);
	enum rdma_cm_event_type type = e->event;
	CHECK(rdma_ack_cm_event(e) == 0);
	return type;
}

/* An RC QP of one WR and one SGE each way on id, on the ID's PD. */
static inline void small_rc_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr init = {.qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	CHECK(rdma_create_qp(id, NULL, &init) == 0);
}

/* A child's wait status, waited for at most `seconds`; -1 (the child
 * killed) if it has not exited by then. */
static inline int wait_bounded(pid_t pid, int seconds)
{
	for (int i = 0; i < seconds * 100; i++) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		CHECK(r >= 0);
		if (r == pid)
			return status;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

#endif
