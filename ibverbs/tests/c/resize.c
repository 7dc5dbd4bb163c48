/* Queues resized as on rxe: ibv_resize_cq keeps the completions waiting,
 * in order, writes the new size into cq->cqe and refuses (EINVAL) a size
 * below what waits; ibv_modify_srq with IBV_SRQ_MAX_WR (the device claims
 * IBV_DEVICE_SRQ_RESIZE) keeps the receives posted, in order, and refuses a
 * size below them or below the limit. Prints "ok". */
#include "check.h"
#include <poll.h>
#include <string.h>

/* Waits (at most ten seconds) for the next completion event of cq, armed
 * before, and acks it. */
static void wait_event(struct ibv_comp_channel *ch, struct ibv_cq *cq)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 10000) == 1);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq);
	ibv_ack_cq_events(cq, 1);
}

static void post_write(struct ibv_qp *qp, uint64_t id, struct ibv_mr *src, struct ibv_mr *dst)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src->addr, .length = 8, .lkey = src->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr = { .rdma = { .remote_addr = (uintptr_t)dst->addr, .rkey = dst->rkey } } };
	struct ibv_send_wr *bad;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
}

static void cq_resize(struct ibv_context *ctx, struct ibv_pd *pd, union ibv_gid gid)
{
	struct ibv_device_attr dev;
	CHECK(ibv_query_device(ctx, &dev) == 0);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2, NULL, ch, 0), *other = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(ch && cq && other && cq->cqe == 2);
	struct ibv_qp_init_attr init = { .send_cq = cq, .recv_cq = other, .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = ibv_create_qp(pd, &init);
	init.send_cq = other;
	struct ibv_qp *b = ibv_create_qp(pd, &init);
	CHECK(a && b);
	connect_rc(a, b->qp_num, gid);
	connect_rc(b, a->qp_num, gid);
	char *src = calloc(1, 64), *dst = calloc(1, 64);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, 64, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dmr = ibv_reg_mr(pd, dst, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(smr && dmr);
	/* Two completions waiting, not polled (each seen by its event). */
	for (uint64_t id = 0; id < 2; id++) {
		CHECK(ibv_req_notify_cq(cq, 0) == 0);
		post_write(a, id, smr, dmr);
		wait_event(ch, cq);
	}
	CHECK(ibv_resize_cq(cq, 1) == EINVAL && cq->cqe == 2); /* one would be lost */
	CHECK(ibv_resize_cq(cq, 0) == EINVAL && ibv_resize_cq(cq, -1) == EINVAL);
	CHECK(ibv_resize_cq(cq, dev.max_cqe + 1) == EINVAL && cq->cqe == 2);
	CHECK(ibv_resize_cq(cq, 6) == 0 && cq->cqe == 6);
	for (uint64_t id = 2; id < 6; id++)
		post_write(a, id, smr, dmr);
	for (uint64_t id = 0; id < 6; id++) {
		struct ibv_wc wc = poll_one(cq);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == id);
	}
	CHECK(ibv_resize_cq(cq, 1) == 0 && cq->cqe == 1); /* nothing waits now */

	/* An extended CQ is resized as a CQ. */
	struct ibv_cq_init_attr_ex cx = { .cqe = 4, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_cq_ex *ex = ibv_create_cq_ex(ctx, &cx);
	CHECK(ex && ibv_resize_cq(ibv_cq_ex_to_cq(ex), 16) == 0 && ex->cqe == 16);
	CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(ex)) == 0);

	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0);
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_cq(other) == 0 && ibv_destroy_comp_channel(ch) == 0);
	CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0);
	free(src);
	free(dst);
}

static void post_srq_recvs(struct ibv_srq *srq, uint64_t from, uint64_t to, struct ibv_mr *mr)
{
	for (uint64_t id = from; id < to; id++) {
		struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = 64, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_srq_recv(srq, &wr, &bad) == 0);
	}
}

static void srq_resize(struct ibv_context *ctx, struct ibv_pd *pd, union ibv_gid gid)
{
	struct ibv_device_attr dev;
	CHECK(ibv_query_device(ctx, &dev) == 0 && (dev.device_cap_flags & IBV_DEVICE_SRQ_RESIZE));
	struct ibv_srq_init_attr sinit = { .attr = { .max_wr = 2, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sinit);
	CHECK(srq && sinit.attr.max_wr == 4);
	char *buf = calloc(1, 64);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	post_srq_recvs(srq, 0, 4, mr);
	struct ibv_srq_attr sa = { .max_wr = 3 };
	/* Under the smallest size (4, as rxe's): grown to it, and 4 fit. */
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == 0);
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr == 4);
	sa.max_wr = 0;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == EINVAL);
	sa.max_wr = dev.max_srq_wr + 1;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == EINVAL);
	sa.max_wr = 8;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == 0);
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr == 8);
	post_srq_recvs(srq, 4, 8, mr);
	sa.max_wr = 6;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == EINVAL); /* 8 are posted */
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr == 8);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr extra = { .wr_id = 99, .sg_list = &sge, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_srq_recv(srq, &extra, &bad_r) == ENOMEM && bad_r == &extra);
	/* Size and limit at once; then a size below the armed limit. */
	sa = (struct ibv_srq_attr){ .max_wr = 16, .srq_limit = 12 };
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) == 0);
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr == 16 && sa.srq_limit == 12);
	sa.max_wr = 10;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == EINVAL);
	sa.srq_limit = 0;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0);

	/* Eight SENDs take the eight receives, the first four posted first. */
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr init = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = ibv_create_qp(pd, &init);
	init.srq = srq;
	struct ibv_qp *b = ibv_create_qp(pd, &init);
	CHECK(a && b);
	connect_rc(a, b->qp_num, gid);
	connect_rc(b, a->qp_num, gid);
	for (uint64_t id = 100; id < 108; id++) {
		struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
		CHECK(ibv_post_send(a, &wr, &bad) == 0);
	}
	for (uint64_t id = 0; id < 8; id++) { /* the sends are unsignaled */
		struct ibv_wc wc = poll_one(cq);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == id);
	}
	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0 && ibv_destroy_cq(cq) == 0);
	CHECK(ibv_destroy_srq(srq) == 0 && ibv_dereg_mr(mr) == 0);
	free(buf);
}

int main(void)
{
	struct ibv_context *ctx = open_first_device();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	union ibv_gid gid;
	CHECK(pd && ibv_query_gid(ctx, 1, 1, &gid) == 0);
	cq_resize(ctx, pd, gid);
	srq_resize(ctx, pd, gid);
	CHECK(ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0);
	printf("ok\n");
	return 0;
}
