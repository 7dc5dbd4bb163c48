/* UD QPs, address handles, shared receive queues and inline sends through
 * the drop-in libibverbs, with rdma-core's answers to bad input: QP A sends
 * inline from the stack (no registered memory, lkey 0) to QP B, which takes
 * its receives from an SRQ; B answers through an AH made from the completion
 * (ibv_create_ah_from_wc). Built with gcc against rdma-core's headers
 * (ibverbs/tests/c_programs.rs); prints "ok" and exits 0, or names the
 * failed check and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "check.h"


#define QKEY 0x11111111
#define GRH 40

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 3,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(qp && qp->srq == srq);
	if (srq)
		CHECK(init.cap.max_recv_wr == 0); /* no receive queue of its own */
	ud_to_rts(qp, QKEY, 7);
	return qp;
}

static void srq_checks(struct ibv_pd *pd)
{
	struct ibv_srq_init_attr bad = { .attr = { .max_wr = 0, .max_sge = 1 } };
	errno = 0;
	CHECK(!ibv_create_srq(pd, &bad) && errno == EINVAL);
	bad.attr.max_wr = 1 << 30;
	errno = 0;
	CHECK(!ibv_create_srq(pd, &bad) && errno == EINVAL);
}

/* A QP asked for no inline data still sends 16 bytes per send SGE inline,
 * as on rxe (and mlx5, whose smallest WQE has room): Debian's rdma_xclient
 * sends 16 bytes inline on such a QP. The room is written back and queried. */
static void inline_room_checks(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 2, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(qp && init.cap.max_inline_data == 32);
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr got;
	CHECK(ibv_query_qp(qp, &attr, IBV_QP_CAP, &got) == 0 && got.cap.max_inline_data == 32);
	CHECK(attr.cap.max_inline_data == 32);
	CHECK(ibv_destroy_qp(qp) == 0);
}

int main(void)
{
	alarm(20); /* a blocking call that never returns fails the test */
	struct ibv_context *ctx = open_first_device();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	CHECK(pd && cq);
	srq_checks(pd);
	inline_room_checks(pd, cq);

	/* An SRQ of 2 receives grows to rxe's smallest, 4, and says so. */
	struct ibv_srq_init_attr sinit = { .srq_context = (void *)0x55, .attr = { .max_wr = 2, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sinit);
	CHECK(srq && srq->srq_context == (void *)0x55 && srq->pd == pd && sinit.attr.max_wr == 4);
	struct ibv_srq_attr sattr = { .srq_limit = 9 };
	CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) == EINVAL); /* past max_wr */
	sattr.max_wr = 64;
	CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_MAX_WR) == 0); /* resize.c for more */
	sattr.srq_limit = 2;
	CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) == 0);
	CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.max_wr == 64 && sattr.srq_limit == 2);

	struct ibv_qp *a = ud_qp(pd, cq, NULL);
	struct ibv_qp *b = ud_qp(pd, cq, srq);
	CHECK(ibv_destroy_srq(srq) == EBUSY); /* B uses it */

	char *buf = calloc(1, 4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(buf && mr);
	/* B's receives through the SRQ; posting to B itself is refused. */
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { (uintptr_t)buf + 1024 * i, 1024, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_srq_recv(srq, &wr, &bad) == 0);
	}
	struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad_rwr = NULL;
	CHECK(ibv_post_recv(b, &rwr, &bad_rwr) != 0 && bad_rwr == &rwr);

	/* Addresses: RoCE needs a GRH and a GID the port has. */
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0);
	struct ibv_ah_attr ah_attr = { .is_global = 0, .port_num = 1 };
	errno = 0;
	CHECK(!ibv_create_ah(pd, &ah_attr) && errno == EINVAL);
	ah_attr.is_global = 1;
	ah_attr.grh.dgid = gid;
	ah_attr.grh.sgid_index = 200;
	errno = 0;
	CHECK(!ibv_create_ah(pd, &ah_attr) && errno == EINVAL);
	ah_attr.grh.sgid_index = 1;
	struct ibv_ah *to_b = ibv_create_ah(pd, &ah_attr);
	CHECK(to_b && to_b->pd == pd);

	/* A UD send with no AH is refused and named. */
	char msg[32] = "inline, from the stack";
	struct ibv_sge in = { (uintptr_t)msg, sizeof msg, 0 };
	struct ibv_send_wr swr = { .wr_id = 9, .sg_list = &in, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE }, *bad_swr = NULL;
	swr.wr.ud.remote_qpn = b->qp_num;
	swr.wr.ud.remote_qkey = QKEY;
	CHECK(ibv_post_send(a, &swr, &bad_swr) == EINVAL && bad_swr == &swr);

	/* Inline: the bytes are read at post time, so the buffer may change at once. */
	swr.wr.ud.ah = to_b;
	CHECK(ibv_post_send(a, &swr, &bad_swr) == 0);
	memset(msg, 'x', sizeof msg);
	struct ibv_wc got[2];
	got[0] = poll_one(cq);
	got[1] = poll_one(cq);
	struct ibv_wc *recv = got[0].opcode == IBV_WC_RECV ? &got[0] : &got[1];
	struct ibv_wc *sent = recv == &got[0] ? &got[1] : &got[0];
	CHECK(sent->status == IBV_WC_SUCCESS && sent->wr_id == 9 && sent->opcode == IBV_WC_SEND);
	CHECK(recv->status == IBV_WC_SUCCESS && recv->wr_id == 100 && recv->qp_num == b->qp_num);
	CHECK(recv->src_qp == a->qp_num && (recv->wc_flags & IBV_WC_GRH) && recv->byte_len == GRH + 32);
	/* sl holds the RoCE L3 header type, as on mlx5 (UCX's UD reads it): IPv4. */
	CHECK(recv->sl == 2 && sent->sl == 0);
	CHECK(strcmp(buf + GRH, "inline, from the stack") == 0);

	/* B answers A through an AH made from what it received. */
	struct ibv_ah *to_a = ibv_create_ah_from_wc(pd, recv, (struct ibv_grh *)buf, 1);
	CHECK(to_a);
	struct ibv_sge asge = { (uintptr_t)buf + 3000, 64, mr->lkey };
	struct ibv_recv_wr arwr = { .wr_id = 200, .sg_list = &asge, .num_sge = 1 };
	CHECK(ibv_post_recv(a, &arwr, &bad_rwr) == 0);
	strcpy(buf + 2048, "an answer");
	struct ibv_sge bsge = { (uintptr_t)buf + 2048, 10, mr->lkey };
	struct ibv_send_wr bwr = { .wr_id = 10, .sg_list = &bsge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
				   .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(0xabcd) };
	bwr.wr.ud.ah = to_a;
	bwr.wr.ud.remote_qpn = a->qp_num;
	bwr.wr.ud.remote_qkey = QKEY;
	CHECK(ibv_post_send(b, &bwr, &bad_swr) == 0);
	got[0] = poll_one(cq);
	got[1] = poll_one(cq);
	recv = got[0].opcode == IBV_WC_RECV ? &got[0] : &got[1];
	CHECK(recv->status == IBV_WC_SUCCESS && recv->wr_id == 200 && recv->src_qp == b->qp_num);
	CHECK((recv->wc_flags & IBV_WC_WITH_IMM) && be32toh(recv->imm_data) == 0xabcd);
	CHECK(strcmp(buf + 3000 + GRH, "an answer") == 0);

	/* One SRQ receive taken of 4, 3 left: above the limit of 2, still armed. */
	CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.srq_limit == 2);

	/* Armed at 3 with 3 left: the next receive taken leaves 2 and raises
	 * the limit event on the context's async_fd, once, then disarms. */
	sattr.srq_limit = 3;
	CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) == 0);
	/* This one inline from three SGEs, one of them empty: the pieces are
	 * read in order at post time. */
	char two[8] = "two ", pieces[8] = "pieces";
	struct ibv_sge parts[3] = { { (uintptr_t)two, 4, 0 }, { (uintptr_t)two, 0, 0 }, { (uintptr_t)pieces, 7, 0 } };
	swr.wr_id = 11;
	swr.sg_list = parts;
	swr.num_sge = 3;
	CHECK(ibv_post_send(a, &swr, &bad_swr) == 0);
	memset(two, 'x', sizeof two);
	memset(pieces, 'x', sizeof pieces);
	got[0] = poll_one(cq);
	got[1] = poll_one(cq);
	CHECK(got[0].status == IBV_WC_SUCCESS && got[1].status == IBV_WC_SUCCESS);
	recv = got[0].opcode == IBV_WC_RECV ? &got[0] : &got[1];
	CHECK(recv->byte_len == GRH + 11 && recv->wr_id >= 100 && recv->wr_id < 104);
	CHECK(strcmp(buf + 1024 * (recv->wr_id - 100) + GRH, "two pieces") == 0);
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(ctx, &ev) == 0); /* blocking: alarm() bounds it */
	CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq);
	ibv_ack_async_event(&ev);
	CHECK(srq->events_completed == 1);
	CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.srq_limit == 0);
	CHECK(fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK) == 0);
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN);

	/* A QP destroyed leaves none of its completions in a CQ it shares, as
	 * on mlx5 (a program frees what their wr_ids point at): D's flushed
	 * receive stays, C's two go. */
	struct ibv_qp *c = ud_qp(pd, cq, NULL), *d = ud_qp(pd, cq, NULL);
	struct ibv_qp *order[3] = { d, c, c };
	for (int i = 0; i < 3; i++) {
		struct ibv_sge s = { (uintptr_t)buf + 1024 * i, 1024, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = 300 + i, .sg_list = &s, .num_sge = 1 };
		CHECK(ibv_post_recv(order[i], &w, &bad_rwr) == 0);
	}
	struct ibv_qp_attr to_err = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(d, &to_err, IBV_QP_STATE) == 0 && ibv_modify_qp(c, &to_err, IBV_QP_STATE) == 0);
	CHECK(ibv_destroy_qp(c) == 0);
	struct ibv_wc left[4];
	CHECK(ibv_poll_cq(cq, 4, left) == 1);
	CHECK(left[0].wr_id == 300 && left[0].status == IBV_WC_WR_FLUSH_ERR && left[0].qp_num == d->qp_num);
	CHECK(ibv_destroy_qp(d) == 0);

	CHECK(ibv_dealloc_pd(pd) == EBUSY);
	CHECK(ibv_destroy_ah(to_a) == 0 && ibv_destroy_ah(to_b) == 0);
	CHECK(ibv_destroy_qp(b) == 0 && ibv_destroy_qp(a) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(buf);
	printf("ok\n");
	return 0;
}
