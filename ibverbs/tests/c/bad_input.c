/* Mistakes a program makes, and the answers rdma-core and rxe give them,
 * through the drop-in: a GID index past the table, a destroyed handle given
 * again, a QP's sizes past the device's, posting to a QP in RESET, a send queue overrun, an lkey never
 * registered, a WRITE to an rkey the peer never registered, a SEND to a peer
 * with no receive posted. Built with gcc against rdma-core's headers
 * (c_programs.rs); prints "ok" and exits 0, or names the failed check. */
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "check.h"

static struct ibv_cq *cq;

static struct ibv_qp *rc_qp(struct ibv_pd *pd, uint32_t max_send_wr)
{
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = max_send_wr, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	CHECK(qp);
	return qp;
}

/* RESET -> RTS towards QP dest on this port; rnr_retry 0: an RNR NAK fails at once. */
static void connect_to(struct ibv_qp *qp, uint32_t dest, union ibv_gid gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 10;
	a.retry_cnt = 2;
	a.rnr_retry = 0;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

int main(void)
{
	alarm(30);
	struct ibv_context *ctx = open_first_device();
	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx, 1, &port) == 0);
	union ibv_gid gid;
	errno = 0;
	CHECK(ibv_query_gid(ctx, 1, port.gid_tbl_len, &gid) != 0); /* past the table */
	CHECK(ibv_query_gid(ctx, 2, 0, &gid) != 0);                /* no port 2 */
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0);

	/* A handle destroyed, then given again: refused, nothing freed twice. */
	struct ibv_pd *gone = ibv_alloc_pd(ctx);
	CHECK(gone && ibv_dealloc_pd(gone) == 0);
	CHECK(ibv_dealloc_pd(gone) == EINVAL);
	errno = 0;
	CHECK(!ibv_alloc_pd(NULL) && errno == EINVAL);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	char *buf = calloc(1, 4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(pd && cq && buf && mr);
	struct ibv_qp *a = rc_qp(pd, 2), *b = rc_qp(pd, 2);

	/* Sizes past the device's (max_qp_wr, max_sge; 512 bytes inline, as
	 * rxe's): refused with EINVAL, as rxe refuses them. */
	struct ibv_device_attr dev;
	CHECK(ibv_query_device(ctx, &dev) == 0);
	struct ibv_qp_init_attr big = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 513 } };
	errno = 0;
	CHECK(!ibv_create_qp(pd, &big) && errno == EINVAL);
	big.cap.max_inline_data = 512;
	struct ibv_qp *most_inline = ibv_create_qp(pd, &big);
	CHECK(most_inline && big.cap.max_inline_data == 512 && ibv_destroy_qp(most_inline) == 0);
	big.cap = (struct ibv_qp_cap){ .max_send_wr = dev.max_qp_wr + 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 };
	errno = 0;
	CHECK(!ibv_create_qp(pd, &big) && errno == EINVAL);
	big.cap = (struct ibv_qp_cap){ .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = dev.max_sge + 1 };
	errno = 0;
	CHECK(!ibv_create_qp(pd, &big) && errno == EINVAL);
	struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;

	/* A QP in RESET takes no work (rxe: EINVAL), and names the request. */
	CHECK(ibv_post_send(a, &wr, &bad) == EINVAL && bad == &wr);
	connect_to(a, b->qp_num, gid);
	connect_to(b, a->qp_num, gid);

	/* No receive posted at b, rnr_retry 0: the SEND fails with RNR_RETRY_EXC. */
	CHECK(ibv_post_send(a, &wr, &bad) == 0);
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.wr_id == 1 && wc.status == IBV_WC_RNR_RETRY_EXC_ERR);
	/* a is in ERR now: its next work is flushed, not refused. */
	CHECK(ibv_post_send(a, &wr, &bad) == 0);
	wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);

	/* Fresh QPs: an lkey never registered fails locally (LOC_PROT_ERR). */
	struct ibv_qp *c = rc_qp(pd, 2), *d = rc_qp(pd, 2);
	connect_to(c, d->qp_num, gid);
	connect_to(d, c->qp_num, gid);
	struct ibv_sge bad_sge = { (uintptr_t)buf, 8, mr->lkey ^ 0x7700 };
	struct ibv_send_wr w2 = { .wr_id = 2, .sg_list = &bad_sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	w2.wr.rdma.remote_addr = (uintptr_t)buf;
	w2.wr.rdma.rkey = mr->rkey;
	CHECK(ibv_post_send(c, &w2, &bad) == 0);
	wc = poll_one(cq);
	CHECK(wc.wr_id == 2 && wc.status == IBV_WC_LOC_PROT_ERR);

	/* A WRITE to an rkey the peer never registered: REM_ACCESS_ERR. */
	struct ibv_qp *e = rc_qp(pd, 2), *f = rc_qp(pd, 2);
	connect_to(e, f->qp_num, gid);
	connect_to(f, e->qp_num, gid);
	w2.sg_list = &sge;
	w2.wr_id = 3;
	w2.wr.rdma.rkey = mr->rkey ^ 0x5500;
	CHECK(ibv_post_send(e, &w2, &bad) == 0);
	wc = poll_one(cq);
	CHECK(wc.wr_id == 3 && wc.status == IBV_WC_REM_ACCESS_ERR);

	/* A send queue of 2, a chain of 3 unsignaled WRITEs: the third is
	 * refused (rxe: ENOMEM) and named. The peer QP stays in RESET, so no
	 * ACK can free a slot while the chain is posted. */
	struct ibv_qp *g = rc_qp(pd, 2), *h = rc_qp(pd, 2);
	connect_to(g, h->qp_num, gid);
	struct ibv_send_wr chain[3];
	for (int i = 0; i < 3; i++) {
		chain[i] = (struct ibv_send_wr){ .wr_id = 10 + i, .sg_list = &sge, .num_sge = 1,
						 .opcode = IBV_WR_RDMA_WRITE, .next = i < 2 ? &chain[i + 1] : NULL };
		chain[i].wr.rdma.remote_addr = (uintptr_t)buf + 1024;
		chain[i].wr.rdma.rkey = mr->rkey;
	}
	CHECK(ibv_post_send(g, chain, &bad) == ENOMEM && bad == &chain[2]);

	for (struct ibv_qp **q = (struct ibv_qp *[]){ a, b, c, d, e, f, g, h, NULL }; *q; q++)
		CHECK(ibv_destroy_qp(*q) == 0);
	CHECK(ibv_dereg_mr(mr) == 0 && ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(buf);
	printf("ok\n");
	return 0;
}
