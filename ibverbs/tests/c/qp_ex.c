/* Extended QPs and CQs through the drop-in libibverbs: ibv_query_device_ex,
 * ibv_create_cq_ex and its polling calls, ibv_create_qp_ex with
 * send_ops_flags, ibv_qp_to_qp_ex, and a batch of ibv_wr_* requests (RDMA
 * WRITE, SEND with immediate from inline data, FETCH_AND_ADD, READ; BIND_MW
 * and LOCAL_INV of a memory window) between
 * two RC QPs of one context, posted by ibv_wr_complete all or none; with
 * rdma-core's answers to bad input. Built with gcc against rdma-core's
 * headers (ibverbs/tests/c_programs.rs); prints "ok" and exits 0, or names
 * the failed check and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "check.h"


static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

/* n completions from cq within five seconds, all successful. */
static void wait_for(int n, struct ibv_wc *wc)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int got = 0; got < n;) {
		int k = ibv_poll_cq(cq, n - got, wc + got);
		CHECK(k >= 0);
		for (int i = got; i < got + k; i++)
			CHECK(wc[i].status == IBV_WC_SUCCESS);
		got += k;
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 5);
	}
}

static struct ibv_qp *qp_ex(uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd, .send_ops_flags = ops,
	};
	return ibv_create_qp_ex(ctx, &a);
}

/* ibv_query_device_ex and ibv_create_cq_ex; the CQ made is `cq`. */
static void cq_ex_checks(void)
{
	struct ibv_device_attr_ex dev;
	CHECK(ibv_query_device_ex(ctx, NULL, &dev) == 0);
	CHECK(dev.orig_attr.max_qp > 0 && dev.phys_port_cnt_ex == 1 && dev.completion_timestamp_mask == 0);
	CHECK(dev.device_cap_flags_ex == dev.orig_attr.device_cap_flags && (dev.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW));
	struct ibv_cq_init_attr_ex ca = { .cqe = 64, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca) && errno == EOPNOTSUPP); /* no clock to stamp with */
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
	CHECK(cqx && cqx->cqe >= 64);
	struct ibv_poll_cq_attr pa = { 0 };
	CHECK(ibv_start_poll(cqx, &pa) == ENOENT); /* empty */
	cq = ibv_cq_ex_to_cq(cqx);
}

/* A SEND with immediate from a to b, read with the extended CQ's calls. */
static void poll_ex(struct ibv_qp *a, struct ibv_qp *b, struct ibv_mr *mr, char *buf)
{
	struct ibv_sge rs = { (uintptr_t)buf, 64, mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 30, .sg_list = &rs, .num_sge = 1 }, *bad_rwr;
	CHECK(ibv_post_recv(b, &rwr, &bad_rwr) == 0);
	struct ibv_sge ss = { (uintptr_t)buf + 64, 24, mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 31, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
				   .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(77) }, *bad_swr;
	CHECK(ibv_post_send(a, &swr, &bad_swr) == 0);
	struct ibv_cq_ex *cqx = (struct ibv_cq_ex *)cq;
	struct ibv_poll_cq_attr pa = { 0 };
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int seen = 0;
	while (seen != 3) {
		int r = ibv_start_poll(cqx, &pa);
		for (; r == 0; r = ibv_next_poll(cqx)) {
			CHECK(cqx->status == IBV_WC_SUCCESS);
			if (cqx->wr_id == 30) {
				CHECK(ibv_wc_read_opcode(cqx) == IBV_WC_RECV && ibv_wc_read_byte_len(cqx) == 24);
				CHECK((ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM) && be32toh(ibv_wc_read_imm_data(cqx)) == 77);
				CHECK(ibv_wc_read_qp_num(cqx) == b->qp_num); /* src_qp: UD only */
				seen |= 1;
			} else {
				CHECK(cqx->wr_id == 31 && ibv_wc_read_opcode(cqx) == IBV_WC_SEND);
				seen |= 2;
			}
		}
		CHECK(r == ENOENT);
		if (seen != 3) {
			ibv_end_poll(cqx);
			clock_gettime(CLOCK_MONOTONIC, &t);
			CHECK(t.tv_sec - t0.tv_sec < 5);
			continue;
		}
		ibv_end_poll(cqx);
	}
}

static void bad_creations(void)
{
	struct ibv_qp_init_attr_ex a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .send_ops_flags = IBV_QP_EX_WITH_SEND };
	errno = 0;
	CHECK(!ibv_create_qp_ex(ctx, &a) && errno == EINVAL); /* no PD */
	errno = 0;
	CHECK(!qp_ex(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO) && errno == EOPNOTSUPP);
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD;
	a.pd = pd;
	errno = 0;
	CHECK(!ibv_create_qp_ex(ctx, &a) && errno == EOPNOTSUPP);
	/* With only a PD it is ibv_create_qp, which has no builders. */
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	struct ibv_qp *plain = ibv_create_qp_ex(ctx, &a);
	CHECK(plain && ibv_qp_to_qp_ex(plain) == NULL);
	CHECK(ibv_destroy_qp(plain) == 0);
}

/* ibv_wr_bind_mw and ibv_wr_local_inv: A binds a type 2 window on 64 bytes
 * at `at`, B writes through it (into A's memory), A takes it back. */
static void window(struct ibv_qp_ex *ax, struct ibv_qp *b, struct ibv_mr *mr, char *from, char *at)
{
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw);
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_mw_bind_info info = { .mr = mr, .addr = (uintptr_t)at, .length = 64,
					 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	ibv_wr_start(ax);
	ax->wr_id = 30;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(ax, mw, rkey, &info);
	CHECK(ibv_wr_complete(ax) == 0);
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.wr_id == 30 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW);

	strcpy(from, "via a window");
	struct ibv_sge sge = { (uintptr_t)from, 13, mr->lkey };
	struct ibv_send_wr w = { .wr_id = 31, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.rdma.remote_addr = (uintptr_t)at;
	w.wr.rdma.rkey = rkey;
	CHECK(ibv_post_send(b, &w, &bad) == 0);
	wc = poll_one(cq);
	CHECK(wc.wr_id == 31 && wc.status == IBV_WC_SUCCESS && strcmp(at, "via a window") == 0);

	ibv_wr_start(ax);
	ax->wr_id = 32;
	ibv_wr_local_inv(ax, rkey);
	CHECK(ibv_wr_complete(ax) == 0);
	wc = poll_one(cq);
	CHECK(wc.wr_id == 32 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV);
	CHECK(ibv_dealloc_mw(mw) == 0);
}

int main(void)
{
	alarm(20); /* a blocking call that never returns fails the test */
	ctx = open_first_device();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	cq_ex_checks();
	bad_creations();

	uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
		       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW |
		       IBV_QP_EX_WITH_LOCAL_INV;
	struct ibv_qp *a = qp_ex(ops), *b = qp_ex(ops);
	CHECK(a && b);
	struct ibv_qp_ex *ax = ibv_qp_to_qp_ex(a);
	CHECK(ax && &ax->qp_base == a);
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0);
	connect_rc(a, b->qp_num, gid);
	connect_rc(b, a->qp_num, gid);

	char *mem = aligned_alloc(4096, 8192);
	CHECK(mem);
	memset(mem, 0, 8192);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
		     IBV_ACCESS_MW_BIND;
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, 8192, access);
	CHECK(mr);
	char *src = mem, *dst = mem + 4096; /* A's side, B's side */
	uint64_t *counter = (uint64_t *)(dst + 2048), *old = (uint64_t *)(src + 2048);
	*counter = 40;
	strcpy(src, "written by ibv_wr_rdma_write");
	strcpy(dst + 1024, "read back by ibv_wr_rdma_read");
	struct ibv_sge rsge = { (uintptr_t)(dst + 3072), 64, mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 50, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr;
	CHECK(ibv_post_recv(b, &rwr, &bad_rwr) == 0);

	/* A batch the builders cannot make fails whole at completion. */
	ibv_wr_start(ax);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)src, 8); /* no operation yet */
	CHECK(ibv_wr_complete(ax) == EINVAL);
	ibv_wr_start(ax);
	ax->wr_id = 1;
	ibv_wr_send(ax);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)src, 8);
	ibv_wr_send_tso(ax, src, 8, 1024);
	CHECK(ibv_wr_complete(ax) == EOPNOTSUPP);
	/* Refused by the QP (3 SGEs, max 2): none of the batch is posted. */
	struct ibv_sge three[3] = { { (uintptr_t)src, 1, mr->lkey }, { (uintptr_t)src, 1, mr->lkey },
				    { (uintptr_t)src, 1, mr->lkey } };
	ibv_wr_start(ax);
	ax->wr_id = 2;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(ax, mr->rkey, (uintptr_t)dst);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)src, 8);
	ibv_wr_send(ax);
	ibv_wr_set_sge_list(ax, 3, three);
	CHECK(ibv_wr_complete(ax) == EINVAL);
	/* Aborted: nothing posted either. */
	ibv_wr_start(ax);
	ibv_wr_send(ax);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)src, 8);
	ibv_wr_abort(ax);

	/* The batch: WRITE, SEND_WITH_IMM of inline data, FETCH_AND_ADD, READ. */
	char note[16] = "inline note";
	ibv_wr_start(ax);
	ax->wr_id = 10;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(ax, mr->rkey, (uintptr_t)dst);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)src, 64);
	ax->wr_id = 11;
	ibv_wr_send_imm(ax, htobe32(0x1234));
	ibv_wr_set_inline_data(ax, note, sizeof note);
	ax->wr_id = 12;
	ibv_wr_atomic_fetch_add(ax, mr->rkey, (uintptr_t)counter, 2);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)old, 8);
	ax->wr_id = 13;
	ibv_wr_rdma_read(ax, mr->rkey, (uintptr_t)(dst + 1024));
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)(src + 1024), 64);
	CHECK(ibv_wr_complete(ax) == 0);
	memset(note, 0, sizeof note); /* inline: read at completion, not later */

	struct ibv_wc wc[5];
	wait_for(5, wc);
	uint64_t seen = 0;
	for (int i = 0; i < 5; i++) {
		if (wc[i].opcode == IBV_WC_RECV) {
			CHECK(wc[i].wr_id == 50 && wc[i].byte_len == 16 && (wc[i].wc_flags & IBV_WC_WITH_IMM));
			CHECK(be32toh(wc[i].imm_data) == 0x1234);
		} else {
			CHECK(wc[i].wr_id >= 10 && wc[i].wr_id <= 13);
		}
		seen |= 1ull << wc[i].wr_id;
	}
	CHECK(seen == ((1ull << 50) | (0xfull << 10))); /* nothing of the refused batches */
	CHECK(strcmp(dst, "written by ibv_wr_rdma_write") == 0);
	CHECK(strcmp(dst + 3072, "inline note") == 0);
	CHECK(*old == 40 && *counter == 42);
	CHECK(strcmp(src + 1024, "read back by ibv_wr_rdma_read") == 0);

	poll_ex(a, b, mr, src + 512);
	window(ax, b, mr, src + 2560, dst + 2560);

	/* A WRITE with an rkey B never gave: A's request completes with a
	 * remote access error, and B, the responder, raises QP_ACCESS_ERR. */
	ibv_wr_start(ax);
	ax->wr_id = 20;
	ibv_wr_rdma_write(ax, mr->rkey ^ 0x5a5a00, (uintptr_t)dst);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)src, 8);
	CHECK(ibv_wr_complete(ax) == 0);
	wc[0] = poll_one(cq);
	CHECK(wc[0].wr_id == 20 && wc[0].status == IBV_WC_REM_ACCESS_ERR);
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_QP_ACCESS_ERR && ev.element.qp == b);
	ibv_ack_async_event(&ev);
	CHECK(b->events_completed == 1);

	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(mem);
	printf("ok\n");
	return 0;
}
