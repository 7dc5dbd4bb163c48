/* How a process's rdma_cm connections end when it exits (the library's
 * exit handler sends a DREQ for each connected ID, as the kernel does when
 * a process exits without destroying its IDs):
 *
 * 1. A child connected to this process exits without destroying its ID:
 *    this process hears DISCONNECTED (without the handler it would hear
 *    nothing: no traffic flows to time out).
 * 2. exit() called from a signal handler while the main thread is inside
 *    librdmacm (qperf's server dies so on SIGURG when its client fails):
 *    the handler must not wait for a lock, or malloc's arena, that the
 *    interrupted thread holds. Children interrupted by a timer at points
 *    spread over a loop of rdma_cm calls must each exit, with the status
 *    their signal handler gave, within 20 s (some hung when the handler
 *    took the ID's lock, or allocated, on the exiting thread). This process
 *    makes no rdma_cm call of its own here: a child of a process with its
 *    devices open shares their addresses, and spends its loop waiting for
 *    the owner (none of 24 such children hung).
 *
 * Arguments: `connected IP CHILD_IP` (two devices) or `interrupted IP`. */
#include "cm_check.h"
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* Each of 5 runs of 96 children had one hang or more before the fix; one
 * at a time (four at once hung less: 3 runs in 5). */
#define INTERRUPTED_CHILDREN 96
#define STATUS_FROM_HANDLER 3

/* The child of part 1: connects from `ip` to `server`, then exits with
 * its ID and QP still up. */
static void connect_and_exit(const char *ip, const char *server, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch);
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in src = addr_of(ip, 0), dst = addr_of(server, port);
	CHECK(rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000) == 0);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(id, 2000) == 0);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	small_rc_qp(id);
	struct rdma_conn_param param = {.retry_count = 7, .rnr_retry_count = 7};
	CHECK(rdma_connect(id, &param) == 0);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ESTABLISHED));
	exit(0);
}

static void a_peer_that_exits_connected_is_heard(const char *ip, const char *child_ip)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch);
	struct rdma_cm_id *listener;
	CHECK(rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in a = addr_of(ip, 0);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&a) == 0);
	CHECK(rdma_listen(listener, 1) == 0);
	int port = ntohs(rdma_get_src_port(listener));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		connect_and_exit(child_ip, ip, port);
	struct rdma_cm_event *req = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *conn = req->id;
	rdma_ack_cm_event(req);
	small_rc_qp(conn);
	struct rdma_conn_param param = {.retry_count = 7, .rnr_retry_count = 7};
	CHECK(rdma_accept(conn, &param) == 0);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(wait_bounded(pid, 20) == 0);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_destroy_qp(conn);
	CHECK(rdma_destroy_id(conn) == 0);
	CHECK(rdma_destroy_id(listener) == 0);
	rdma_destroy_event_channel(ch);
}

/* When child n's timer fires: every 50 us from 0.2 ms to 5 ms, while the
 * child opens its devices (where most hangs were) and runs its first
 * rounds of the loop. */
static int delay_us_of(int n)
{
	return 200 + n * 50;
}

static void exit_from_handler(int sig)
{
	(void)sig;
	exit(STATUS_FROM_HANDLER);
}

/* The child of part 2: rdma_cm calls in a loop (bind to its address or
 * the wildcard, listen, destroy) until its timer's handler exits. */
static void loop_until_interrupted(const char *ip, int delay_us)
{
	struct sigaction sa = {.sa_handler = exit_from_handler};
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch);
	struct itimerval at = {.it_value = {.tv_sec = delay_us / 1000000, .tv_usec = delay_us % 1000000}};
	CHECK(setitimer(ITIMER_REAL, &at, NULL) == 0);
	for (int round = 0; round < 10000000; round++) {
		struct rdma_cm_id *id;
		CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
		struct sockaddr_in a = addr_of(round % 2 ? ip : "0.0.0.0", 0);
		CHECK(rdma_bind_addr(id, (struct sockaddr *)&a) == 0);
		CHECK(rdma_listen(id, 0) == 0);
		CHECK(rdma_destroy_id(id) == 0);
	}
	exit(4); /* the timer never fired */
}

static void exit_in_a_signal_handler_ends_the_process(const char *ip)
{
	for (int n = 0; n < INTERRUPTED_CHILDREN; n++) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			loop_until_interrupted(ip, delay_us_of(n));
		int status = wait_bounded(pid, 20);
		if (status == -1)
			fprintf(stderr, "the child interrupted after %d us did not exit: killed\n", delay_us_of(n));
		CHECK(status != -1);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == STATUS_FROM_HANDLER);
	}
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "connected") == 0)
		a_peer_that_exits_connected_is_heard(argv[2], argv[3]);
	else if (argc == 3 && strcmp(argv[1], "interrupted") == 0)
		exit_in_a_signal_handler_ends_the_process(argv[2]);
	else
		CHECK(!"arguments: connected IP CHILD_IP, or interrupted IP");
	printf("ok\n");
	return 0;
}
