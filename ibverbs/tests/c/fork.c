/* A forked child and its parent's device: the child lets go of its copies
 * of the parent's descriptors at the fork, so that when the parent closes
 * its device the address is free to open again (on the udp link: its port
 * is not held by a child that runs nothing), and the child opens its own
 * (sharing the address with the parent's new open). Two children in turn,
 * as rdma-core's rdmacm tests fork both ends from a parent that opened the
 * device. */
#include "check.h"
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The child: waits for the parent to open its device again, then opens
 * its own, queries it and makes a QP on it. */
static int child(int ready)
{
	char c;
	if (read(ready, &c, 1) != 1)
		return 2;
	struct ibv_context *ctx = open_first_device();
	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx, 1, &port) == 0);
	CHECK(port.state == IBV_PORT_ACTIVE);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(cq);
	struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(qp);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return 0;
}

int main(void)
{
	for (int round = 0; round < 2; round++) {
		struct ibv_context *ctx = open_first_device();
		int fds[2];
		CHECK(pipe(fds) == 0);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			close(fds[1]);
			_exit(child(fds[0]));
		}
		close(fds[0]);
		/* Closed and opened again while the child lives: the child's
		 * copies of the first open's socket would keep its port bound. */
		CHECK(ibv_close_device(ctx) == 0);
		ctx = open_first_device();
		CHECK(write(fds[1], "x", 1) == 1);
		int status = 0;
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		close(fds[1]);
		CHECK(ibv_close_device(ctx) == 0);
	}
	printf("ok\n");
	return 0;
}
