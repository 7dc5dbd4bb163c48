/* Two processes on one address bind no port twice, as two processes under
 * the kernel's rdma_cm never do: the parent binds BOUND ephemeral ports and
 * one more; a child (this program run again: a forked child keeps a copy
 * of the parent's table of ports) on the same device address, which it
 * shares with the parent, is refused that port (EADDRINUSE, at
 * rdma_bind_addr, on the address and on the wildcard), and BOUND ephemeral
 * binds of its own get none of the parent's ports (each process kept its
 * own table before: about 35 of them collided, and a listen on one failed).
 *
 * `unlistened IP`: a connection request to a port a process bound on the
 * wildcard, its only rdma_cm call, and does not listen on is refused
 * (REJECTED, as the kernel's CM answers it), not dropped unanswered by a
 * process whose CM had not started (qperf's server binds so, and sends
 * its port before it listens).
 *
 * Arguments: the device's IP, or `unlistened IP` (the children: `child
 * IP`, the parent's ports on its standard input; `connect IP PORT`). */
#include "cm_check.h"
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BOUND 1000

/* An ID bound to ip:port on ch (port 0: an ephemeral one); NULL with
 * errno set if the bind is refused. */
static struct rdma_cm_id *bound(struct rdma_event_channel *ch, const char *ip, int port)
{
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in a = addr_of(ip, port);
	if (rdma_bind_addr(id, (struct sockaddr *)&a) == 0)
		return id;
	int err = errno;
	CHECK(rdma_destroy_id(id) == 0);
	errno = err;
	return NULL;
}

/* The parent's ephemeral ports and its port bound by number. */
static int parents_ports[BOUND + 1];

static int the_parents(int port)
{
	for (int i = 0; i < BOUND + 1; i++)
		if (parents_ports[i] == port)
			return 1;
	return 0;
}

/* Connects from the child to ip:port; the event that answers. */
static enum rdma_cm_event_type connect_to(struct rdma_event_channel *ch, const char *ip, int port)
{
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in dst = addr_of(ip, port);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	CHECK(next_event(ch) == RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	CHECK(next_event(ch) == RDMA_CM_EVENT_ROUTE_RESOLVED);
	small_rc_qp(id);
	struct rdma_conn_param param = {.retry_count = 7};
	CHECK(rdma_connect(id, &param) == 0);
	return next_event(ch);
}

static int child(const char *ip)
{
	for (int i = 0; i < BOUND + 1; i++)
		CHECK(scanf("%d", &parents_ports[i]) == 1);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch);
	int taken = parents_ports[BOUND];
	CHECK(bound(ch, ip, taken) == NULL && errno == EADDRINUSE);
	CHECK(bound(ch, "0.0.0.0", taken) == NULL && errno == EADDRINUSE);
	for (int i = 0; i < BOUND; i++) {
		struct rdma_cm_id *id = bound(ch, ip, 0);
		CHECK(id);
		int port = ntohs(rdma_get_src_port(id));
		if (the_parents(port))
			fprintf(stderr, "the child's bind %d got port %d, which the parent holds\n", i, port);
		CHECK(!the_parents(port));
	}
	return 0;
}

/* This program run again as `self mode ip [port]` (a process of its own:
 * a forked child would keep a copy of this one's tables), with `n`
 * numbers on its standard input. */
static pid_t run_again(const char *self, const char *mode, const char *ip, const char *port, const int *numbers, int n)
{
	int in[2];
	CHECK(pipe(in) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(dup2(in[0], 0) == 0);
		close(in[1]);
		execl("/proc/self/exe", self, mode, ip, port, (char *)NULL);
		exit(127);
	}
	close(in[0]);
	FILE *to_child = fdopen(in[1], "w");
	CHECK(to_child);
	for (int i = 0; i < n; i++)
		fprintf(to_child, "%d\n", numbers[i]);
	fclose(to_child);
	return pid;
}

/* A port bound on the wildcard by a process that made no other rdma_cm
 * call: a REQ to it from another process is refused. */
static int unlistened(const char *self, const char *ip)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch);
	struct rdma_cm_id *id = bound(ch, "0.0.0.0", 0);
	CHECK(id);
	char port[8];
	snprintf(port, sizeof(port), "%d", ntohs(rdma_get_src_port(id)));
	CHECK(wait_bounded(run_again(self, "connect", ip, port, NULL, 0), 30) == 0);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child(argv[2]);
	if (argc == 4 && strcmp(argv[1], "connect") == 0) {
		struct rdma_event_channel *ch = rdma_create_event_channel();
		CHECK(ch);
		CHECK(connect_to(ch, argv[2], atoi(argv[3])) == RDMA_CM_EVENT_REJECTED);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "unlistened") == 0) {
		CHECK(unlistened(argv[0], argv[2]) == 0);
		printf("ok\n");
		return 0;
	}
	CHECK(argc == 2);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch);
	struct rdma_cm_id *ids[BOUND + 1];
	for (int i = 0; i < BOUND; i++) {
		ids[i] = bound(ch, argv[1], 0);
		CHECK(ids[i]);
		parents_ports[i] = ntohs(rdma_get_src_port(ids[i]));
	}
	/* One bound by number, and listened on. */
	int port = parents_ports[0] == 40000 ? 40001 : 40000;
	for (int i = 0; i < BOUND && the_parents(port); i++)
		port++;
	ids[BOUND] = bound(ch, argv[1], port);
	CHECK(ids[BOUND]);
	CHECK(rdma_listen(ids[BOUND], 1) == 0);
	parents_ports[BOUND] = port;
	pid_t pid = run_again(argv[0], "child", argv[1], NULL, parents_ports, BOUND + 1);
	CHECK(wait_bounded(pid, 30) == 0);
	for (int i = 0; i < BOUND + 1; i++)
		CHECK(rdma_destroy_id(ids[i]) == 0);
	rdma_destroy_event_channel(ch);
	printf("ok\n");
	return 0;
}
