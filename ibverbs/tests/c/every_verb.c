/* Every application verb of libibverbs and librdmacm that the project's
 * other C programs do not call, called here through the drop-in with
 * rdma-core's answers asserted: results, strings, errno, and EOPNOTSUPP
 * (ENOSYS for rsocket) where uroce lacks the feature, as rdma-core answers
 * for a device without it. With the other programs of tests/c/, every
 * exported verb is called (ibverbs/tests/c_programs.rs checks that against
 * the library's symbol table). Built with gcc against rdma-core's headers;
 * prints "ok" and exits 0, or names the failed check and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include "check.h"

/* Exported for providers and declared in rdma-core's driver.h, which Debian
 * does not install: the prototypes as driver.h has them. */
enum ibv_gid_type_sysfs { IBV_GID_TYPE_SYSFS_IB_ROCE_V1, IBV_GID_TYPE_SYSFS_ROCE_V2 };
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum ibv_gid_type_sysfs *type);

/* The strings, as rdma-core's enum_strs.c has them. */
static void strings(void)
{
	CHECK(!strcmp(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter"));
	CHECK(!strcmp(ibv_node_type_str(99), "unknown"));
	CHECK(!strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active"));
	CHECK(!strcmp(ibv_event_type_str(IBV_EVENT_QP_FATAL), "local work queue catastrophic error"));
	CHECK(!strcmp(ibv_event_type_str(IBV_EVENT_COMM_EST), "communication established"));
	CHECK(!strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success"));
	CHECK(!strcmp(ibv_wc_status_str(IBV_WC_RNR_RETRY_EXC_ERR), "RNR retry counter exceeded"));
	CHECK(!strcmp(ibv_wc_status_str(999), "unknown"));
	CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4 && mult_to_ibv_rate(4) == IBV_RATE_10_GBPS);
	CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125 && mbps_to_ibv_rate(103125) == IBV_RATE_100_GBPS);
	CHECK(mbps_to_ibv_rate(1234) == IBV_RATE_MAX && mult_to_ibv_rate(3) == IBV_RATE_MAX);
}

/* The device list's names, index, GUID; sysfs; fork. */
static struct ibv_context *devices(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1 && list[n] == NULL);
	const char *name = ibv_get_device_name(list[0]);
	CHECK(name && strlen(name) > 0);
	CHECK(ibv_get_device_guid(list[0]) != 0);
	CHECK(ibv_get_device_index(list[0]) >= 0);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx && ctx->device == list[0]);
	ibv_free_device_list(list);
	/* No sysfs of its own: /sys, or $SYSFS_PATH without its trailing
	 * slashes, as rdma-core answers (EXPECT_SYSFS_PATH: the test's). */
	const char *want_sysfs = getenv("EXPECT_SYSFS_PATH");
	CHECK(strcmp(ibv_get_sysfs_path(), want_sysfs ? want_sysfs : "/sys") == 0);
	char buf[64];
	CHECK(ibv_read_sysfs_file("/nonexistent-dir", "nothing", buf, sizeof(buf)) == -1);
	/* Fork needs no preparation: the kernel copies registered pages on fork. */
	CHECK(ibv_fork_init() == 0);
	CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);
	int x = 0;
	CHECK(ibv_dontfork_range(&x, sizeof(x)) == 0 && ibv_dofork_range(&x, sizeof(x)) == 0);
	return ctx;
}

/* Device, port, P_Key and GID queries. */
static void queries(struct ibv_context *ctx)
{
	struct ibv_device_attr d;
	CHECK(ibv_query_device(ctx, &d) == 0 && d.phys_port_cnt == 1 && d.max_qp > 0 && d.max_cqe > 0);
	__be16 pkey = 0;
	CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0 && pkey == htons(0xffff));
	errno = 0;
	CHECK(ibv_query_pkey(ctx, 1, 4096, &pkey) != 0);
	CHECK(ibv_get_pkey_index(ctx, 1, htons(0xffff)) == 0);
	CHECK(ibv_get_pkey_index(ctx, 1, htons(0x1234)) < 0);
	enum ibv_gid_type_sysfs type;
	CHECK(ibv_query_gid_type(ctx, 1, 1, &type) == 0 && type == IBV_GID_TYPE_SYSFS_ROCE_V2);
	CHECK(ibv_query_gid_type(ctx, 1, 999, &type) != 0);
	struct ibv_gid_entry entry;
	CHECK(ibv_query_gid_ex(ctx, 1, 1, &entry, 0) == 0 && entry.gid_type == IBV_GID_TYPE_ROCE_V2 && entry.port_num == 1);
	struct ibv_gid_entry table[16];
	ssize_t rows = ibv_query_gid_table(ctx, table, 16, 0);
	CHECK(rows >= 2 && table[1].gid_index == 1);
	CHECK(ibv_attach_mcast(NULL, NULL, 0) == EINVAL && ibv_detach_mcast(NULL, NULL, 0) == EINVAL); /* no QP */
	/* What uroce lacks, as rdma-core answers for a device without it. */
	CHECK(ibv_resolve_eth_l2_from_gid(ctx, NULL, NULL, NULL) == EOPNOTSUPP);
	errno = 0;
	CHECK(ibv_import_device(3) == NULL && errno == EOPNOTSUPP);
	CHECK(ibv_import_pd(ctx, 1) == NULL && ibv_import_mr(NULL, 1) == NULL && ibv_import_dm(ctx, 1) == NULL);
	ibv_unimport_pd(NULL);
	ibv_unimport_mr(NULL);
	ibv_unimport_dm(NULL);
	errno = 0;
	CHECK(ibv_reg_dmabuf_mr(NULL, 0, 0, 0, -1, 0) == NULL && errno == EOPNOTSUPP);
}

/* A completion channel woken by a WRITE with immediate; ibv_query_qp;
 * ibv_rereg_mr and ibv_reg_mr_iova2; ibv_resize_cq; ECE. */
static void channel_and_memory(struct ibv_context *ctx)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch && ch->fd >= 0 && ch->context == ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *send_cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_cq *recv_cq = ibv_create_cq(ctx, 8, (void *)0x77, ch, 0);
	CHECK(pd && send_cq && recv_cq);
	CHECK(ibv_resize_cq(recv_cq, 64) == 0 && recv_cq->cqe == 64); /* resize.c for more */
	struct ibv_qp_init_attr init = { .send_cq = send_cq, .recv_cq = recv_cq, .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = ibv_create_qp(pd, &init), *b = ibv_create_qp(pd, &init);
	CHECK(a && b);
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0);
	connect_rc(a, b->qp_num, gid);
	connect_rc(b, a->qp_num, gid);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(b, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU, &qi) == 0);
	CHECK(qa.qp_state == IBV_QPS_RTS && qa.dest_qp_num == a->qp_num && qa.rq_psn == 100 && qa.path_mtu == IBV_MTU_1024);
	CHECK(qi.qp_type == IBV_QPT_RC && qi.send_cq == send_cq && qi.cap.max_send_wr >= 4);
	CHECK(ibv_query_qp_data_in_order(a, IBV_WR_RDMA_WRITE, 0) == 0);
	CHECK(ibv_query_ece(a, NULL) == EOPNOTSUPP && ibv_set_ece(a, NULL) == EOPNOTSUPP);

	char *src = calloc(1, 4096), *dst = calloc(1, 8192);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
	/* The peer names the target by an iova of the application's choosing. */
	struct ibv_mr *dmr = ibv_reg_mr_iova2(pd, dst, 4096, 0x10000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(smr && dmr && dmr->addr == dst && dmr->length == 4096);
	/* Rereg: new access rights, kept keys; a new translation is not served
	 * (register the new memory instead, as on rxe); an unknown flag is bad
	 * input. */
	CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) == 0);
	errno = 0;
	CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, dst + 4096, 4096, 0) == IBV_REREG_MR_ERR_CMD);
	CHECK(errno == EOPNOTSUPP && dmr->addr == dst);
	errno = 0;
	CHECK(ibv_rereg_mr(dmr, 1 << 20, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL);

	struct ibv_recv_wr rwr = { .wr_id = 5 }, *bad_r;
	CHECK(ibv_post_recv(b, &rwr, &bad_r) == 0);
	CHECK(ibv_req_notify_cq(recv_cq, 0) == 0);
	strcpy(src, "through a completion channel");
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 29, .lkey = smr->lkey };
	struct ibv_send_wr swr = { .wr_id = 6, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				   .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0xfeed),
				   .wr = { .rdma = { .remote_addr = 0x10000 + 64, .rkey = dmr->rkey } } };
	struct ibv_send_wr *bad_s;
	CHECK(ibv_post_send(a, &swr, &bad_s) == 0);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == recv_cq && ev_ctx == (void *)0x77);
	struct ibv_wc wc = poll_one(recv_cq);
	CHECK(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && ntohl(wc.imm_data) == 0xfeed && wc.wr_id == 5);
	CHECK(!strcmp(dst + 64, "through a completion channel")); /* iova 0x10000 is dst */
	CHECK(poll_one(send_cq).wr_id == 6);
	ibv_ack_cq_events(recv_cq, 1);
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY); /* a CQ still uses it */
	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0);
	CHECK(ibv_destroy_cq(recv_cq) == 0 && ibv_destroy_cq(send_cq) == 0);
	CHECK(ibv_destroy_comp_channel(ch) == 0);
	CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0 && ibv_dealloc_pd(pd) == 0);
	free(src);
	free(dst);
}

/* An AH's attributes from a UD completion and its GRH. */
static void ah_from_wc(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr init = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					 .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(pd && cq && qp);
	ud_to_rts(qp, 0x11111111, 0);
	char *buf = calloc(1, 256);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 256, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge rs = { .addr = (uintptr_t)buf, .length = 104, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_recv(qp, &rwr, &bad_r) == 0);
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0);
	struct ibv_ah_attr to_self = { .is_global = 1, .port_num = 1, .grh = { .dgid = gid, .sgid_index = 1, .hop_limit = 64 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &to_self);
	CHECK(ah);
	strcpy(buf + 128, "to myself");
	struct ibv_sge ss = { .addr = (uintptr_t)buf + 128, .length = 10, .lkey = mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
				   .wr = { .ud = { .ah = ah, .remote_qpn = qp->qp_num, .remote_qkey = 0x11111111 } } };
	struct ibv_send_wr *bad_s;
	CHECK(ibv_post_send(qp, &swr, &bad_s) == 0);
	struct ibv_wc got = { 0 };
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc = poll_one(cq);
		CHECK(wc.status == IBV_WC_SUCCESS);
		if (wc.wr_id == 1)
			got = wc;
	}
	CHECK(got.wr_id == 1 && (got.wc_flags & IBV_WC_GRH) && got.src_qp == qp->qp_num && !strcmp(buf + 40, "to myself"));
	struct ibv_ah_attr back;
	CHECK(ibv_init_ah_from_wc(ctx, 1, &got, (struct ibv_grh *)buf, &back) == 0);
	CHECK(back.is_global && back.port_num == 1 && !memcmp(&back.grh.dgid, &gid, sizeof(gid)) && back.grh.sgid_index == 1);
	CHECK(ibv_destroy_ah(ah) == 0 && ibv_destroy_qp(qp) == 0 && ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dereg_mr(mr) == 0 && ibv_dealloc_pd(pd) == 0);
	free(buf);
}

int main(void)
{
	alarm(30); /* a blocking call that never returns fails the test */
	strings();
	struct ibv_context *ctx = devices();
	queries(ctx);
	channel_and_memory(ctx);
	ah_from_wc(ctx);
	CHECK(ibv_close_device(ctx) == 0);
	printf("ok\n");
	return 0;
}
