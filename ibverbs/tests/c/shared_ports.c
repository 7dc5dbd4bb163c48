/* Two processes on one address bind no port twice, as two processes under
 * the kernel's rdma_cm never do: the parent binds BOUND ephemeral ports and
 * one more; a child (this program run again: a forked child keeps a copy
 * of the parent's table of ports) on the same device address, which it
 * shares with the parent, is refused that port (EADDRINUSE, at
 * rdma_bind_addr, on the address and on the wildcard), and BOUND ephemeral
 * binds of its own get none of the parent's ports (each process kept its
 * own table before: about 35 of them collided, and a listen on one failed).
 *
 * Arguments: the device's IP (the child: `child IP`, the parent's ports
 * on its standard input). */
#include "check.h"
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BOUND 1000

static struct sockaddr_in addr_of(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
	return a;
}

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

static int parents_ports[BOUND + 1];

static int the_parents(int port)
{
	for (int i = 0; i <= BOUND; i++)
		if (parents_ports[i] == port)
			return 1;
	return 0;
}

static int child(const char *ip)
{
	for (int i = 0; i <= BOUND; i++)
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

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child(argv[2]);
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
	int ports[2];
	CHECK(pipe(ports) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(dup2(ports[0], 0) == 0);
		close(ports[1]);
		execl("/proc/self/exe", argv[0], "child", argv[1], (char *)NULL);
		exit(127);
	}
	close(ports[0]);
	FILE *to_child = fdopen(ports[1], "w");
	CHECK(to_child);
	for (int i = 0; i <= BOUND; i++)
		fprintf(to_child, "%d\n", parents_ports[i]);
	fclose(to_child);
	int status = -1;
	for (int i = 0; i < 3000 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(10000);
	if (!WIFEXITED(status)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i <= BOUND; i++)
		CHECK(rdma_destroy_id(ids[i]) == 0);
	rdma_destroy_event_channel(ch);
	printf("ok\n");
	return 0;
}
