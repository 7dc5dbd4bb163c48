/* Two contexts opened on one device in one process, as rdma-core's tests,
 * UCX and libfabric open them: their QPs connect to each other, and each
 * context's async_fd carries the events of its own objects only, as the
 * kernel keeps one per ibv_context. Prints "ok". */
#include "check.h"
#include <fcntl.h>
#include <poll.h>

int main(void)
{
	struct ibv_context *one = open_first_device(), *two = open_first_device();
	CHECK(one->async_fd >= 0 && two->async_fd >= 0 && one->async_fd != two->async_fd);
	struct ibv_pd *pd1 = ibv_alloc_pd(one), *pd2 = ibv_alloc_pd(two);
	struct ibv_cq *cq1 = ibv_create_cq(one, 8, NULL, NULL, 0), *cq2 = ibv_create_cq(two, 8, NULL, NULL, 0);
	CHECK(pd1 && pd2 && cq1 && cq2);
	struct ibv_qp_init_attr init = { .send_cq = cq1, .recv_cq = cq1, .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = ibv_create_qp(pd1, &init);
	init.send_cq = init.recv_cq = cq2;
	struct ibv_qp *b = ibv_create_qp(pd2, &init);
	CHECK(a && b && a->qp_num != b->qp_num);
	union ibv_gid gid;
	CHECK(ibv_query_gid(one, 1, 1, &gid) == 0);
	connect_rc(a, b->qp_num, gid);
	connect_rc(b, a->qp_num, gid);

	/* A WRITE past the end of b's region: b's responder raises
	 * IBV_EVENT_QP_ACCESS_ERR, an event of context two's. */
	char src[16] = "sixteen bytes..", dst[16] = { 0 };
	struct ibv_mr *smr = ibv_reg_mr(pd1, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dmr = ibv_reg_mr(pd2, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(smr && dmr);
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 8, .lkey = smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr = { .rdma = { .remote_addr = (uintptr_t)dst + 12, .rkey = dmr->rkey } } }, *bad;
	CHECK(ibv_post_send(a, &wr, &bad) == 0);
	CHECK(poll_one(cq1).status == IBV_WC_REM_ACCESS_ERR);

	struct pollfd p = { .fd = two->async_fd, .events = POLLIN };
	CHECK(poll(&p, 1, 10000) == 1);
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(two, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_QP_ACCESS_ERR && ev.element.qp == b);
	ibv_ack_async_event(&ev);
	CHECK(b->events_completed == 1);
	/* Context one has nothing: its descriptor is not readable, and a read
	 * that does not block finds no event. */
	p.fd = one->async_fd;
	CHECK(poll(&p, 1, 200) == 0);
	CHECK(fcntl(one->async_fd, F_SETFL, fcntl(one->async_fd, F_GETFL) | O_NONBLOCK) == 0);
	errno = 0;
	CHECK(ibv_get_async_event(one, &ev) == -1 && errno == EAGAIN);

	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0);
	CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0);
	CHECK(ibv_destroy_cq(cq1) == 0 && ibv_destroy_cq(cq2) == 0);
	CHECK(ibv_dealloc_pd(pd1) == 0 && ibv_dealloc_pd(pd2) == 0);
	CHECK(ibv_close_device(one) == 0 && ibv_close_device(two) == 0);
	printf("ok\n");
	return 0;
}
