/* Memory windows between two processes, through the drop-in, connected by
 * librdmacm. The server registers a region with no remote rights of its own
 * (LOCAL_WRITE | MW_BIND), binds a type 2 window on part of it by a BIND_MW
 * work request and a type 1 window by ibv_bind_mw, and sends the client
 * both keys. The client WRITEs through the type 2 window and READs through
 * the type 1 window; then SEND_WITH_INV takes the type 2 window back, and a
 * WRITE with its key is a remote access error that changes nothing.
 *
 * argv: "server" SERVER_IP, or "client" SERVER_IP CLIENT_IP. Each prints
 * "ok" and exits 0, or names the failed check and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include "check.h"

static const char *port = "7475";

enum { REGION = 4096, WIN2 = 1024, WIN2_LEN = 256, WIN1 = 2048, WIN1_LEN = 512 };

/* What the server tells the client. */
struct keys {
	uint64_t win2_addr, win1_addr;
	uint32_t win2_rkey, win1_rkey;
};

static struct ibv_qp_init_attr qp_attr(void)
{
	struct ibv_qp_init_attr a = { .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
				      .qp_type = IBV_QPT_RC };
	return a;
}

static void post_recv(struct ibv_qp *qp, void *buf, uint32_t len, struct ibv_mr *mr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
}

/* One signaled work request of opcode op from len bytes at buf; its completion. */
static struct ibv_wc post_one(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr wr, void *buf, uint32_t len,
			      struct ibv_mr *mr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = mr ? mr->lkey : 0 };
	struct ibv_send_wr *bad;
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.send_flags = IBV_SEND_SIGNALED;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	return poll_one(cq);
}

static int server(const char *server_ip)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP, .ai_flags = RAI_PASSIVE }, *res;
	CHECK(rdma_getaddrinfo(server_ip, port, &hints, &res) == 0);
	struct rdma_cm_id *listener, *id;
	CHECK(rdma_create_ep(&listener, res, NULL, NULL) == 0 && rdma_listen(listener, 1) == 0);
	printf("listening\n");
	fflush(stdout);
	CHECK(rdma_get_request(listener, &id) == 0);
	struct ibv_qp_init_attr qa = qp_attr();
	CHECK(rdma_create_qp(id, NULL, &qa) == 0);
	struct ibv_qp *qp = id->qp;

	struct ibv_device_attr dev;
	CHECK(ibv_query_device(id->verbs, &dev) == 0);
	CHECK((dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW) && (dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B));
	CHECK(dev.max_mw > 0);

	char *region = calloc(1, REGION);
	for (int i = 0; i < REGION; i++)
		region[i] = (char)0x11;
	struct ibv_mr *mr = ibv_reg_mr(id->pd, region, REGION, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(mr);
	char msg[64];
	struct ibv_mr *msg_mr = ibv_reg_mr(id->pd, msg, sizeof(msg), IBV_ACCESS_LOCAL_WRITE);
	CHECK(msg_mr);
	for (int i = 0; i < 3; i++)
		post_recv(qp, msg, sizeof(msg), msg_mr);
	CHECK(rdma_accept(id, NULL) == 0);

	/* Type 2: bound by a work request, with the next key byte. */
	struct ibv_mw *mw2 = ibv_alloc_mw(id->pd, IBV_MW_TYPE_2);
	CHECK(mw2 && mw2->type == IBV_MW_TYPE_2 && mw2->pd == id->pd);
	uint32_t rkey2 = ibv_inc_rkey(mw2->rkey);
	struct ibv_send_wr bind = { .wr_id = 2, .opcode = IBV_WR_BIND_MW };
	bind.bind_mw.mw = mw2;
	bind.bind_mw.rkey = rkey2;
	bind.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)region + WIN2,
							    .length = WIN2_LEN,
							    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_wc wc = post_one(qp, id->send_cq, bind, NULL, 0, NULL);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 2);

	/* Type 1: bound by ibv_bind_mw, which gives the window its new key. */
	struct ibv_mw *mw1 = ibv_alloc_mw(id->pd, IBV_MW_TYPE_1);
	CHECK(mw1);
	uint32_t before = mw1->rkey;
	struct ibv_mw_bind b1 = { .wr_id = 3, .send_flags = IBV_SEND_SIGNALED,
				  .bind_info = { .mr = mr, .addr = (uintptr_t)region + WIN1, .length = WIN1_LEN,
						 .mw_access_flags = IBV_ACCESS_REMOTE_READ } };
	CHECK(ibv_bind_mw(qp, mw1, &b1) == 0 && mw1->rkey == ibv_inc_rkey(before));
	wc = poll_one(id->send_cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 3);
	errno = 0;
	CHECK(ibv_bind_mw(qp, mw2, &b1) == EINVAL); /* a type 2 window: by work request only */
	memcpy(region + WIN1, "read through a type 1 window", 29);

	/* The region cannot go while windows are bound to it (rxe's EINVAL). */
	CHECK(ibv_dereg_mr(mr) == EINVAL);

	struct keys k = { (uintptr_t)region + WIN2, (uintptr_t)region + WIN1, rkey2, mw1->rkey };
	struct ibv_send_wr send = { .wr_id = 4, .opcode = IBV_WR_SEND };
	memcpy(msg, &k, sizeof(k));
	wc = post_one(qp, id->send_cq, send, msg, sizeof(k), msg_mr);
	CHECK(wc.status == IBV_WC_SUCCESS);

	/* The client's "written": its WRITE landed inside the window only. */
	wc = poll_one(id->recv_cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
	CHECK(!memcmp(region + WIN2 + 16, "through a window", 16));
	for (int i = 0; i < REGION; i++)
		CHECK((i >= WIN2 + 16 && i < WIN2 + 32) || (i >= WIN1 && i < WIN1 + 29) || region[i] == 0x11);

	/* Its SEND_WITH_INV: the type 2 window is free, its key invalid. */
	wc = poll_one(id->recv_cq);
	CHECK(wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == rkey2);

	/* Its WRITE with the stale key is refused: the QP goes to ERR and the
	 * last receive is flushed; the region is untouched. */
	wc = poll_one(id->recv_cq);
	CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);
	CHECK(!memcmp(region + WIN2 + 16, "through a window", 16) && region[WIN2 + 48] == 0x11);

	CHECK(ibv_dealloc_mw(mw2) == 0 && ibv_dealloc_mw(mw1) == 0);
	CHECK(ibv_dereg_mr(mr) == 0 && ibv_dereg_mr(msg_mr) == 0);
	rdma_disconnect(id);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listener);
	rdma_freeaddrinfo(res);
	free(region);
	printf("ok\n");
	return 0;
}

static int client(const char *server_ip, const char *client_ip)
{
	struct rdma_addrinfo src_hints = { .ai_port_space = RDMA_PS_TCP, .ai_flags = RAI_PASSIVE }, *src;
	CHECK(rdma_getaddrinfo(client_ip, NULL, &src_hints, &src) == 0);
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP, .ai_src_addr = src->ai_src_addr,
				       .ai_src_len = src->ai_src_len }, *res;
	CHECK(rdma_getaddrinfo(server_ip, port, &hints, &res) == 0);
	struct ibv_qp_init_attr qa = qp_attr();
	struct rdma_cm_id *id;
	CHECK(rdma_create_ep(&id, res, NULL, &qa) == 0);
	char buf[256] = "";
	struct ibv_mr *mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	post_recv(id->qp, buf, 64, mr);
	/* The server may not listen yet: it says "listening" first, but retry a little. */
	int rc = -1;
	for (int tries = 0; tries < 50 && rc != 0; tries++) {
		rc = rdma_connect(id, NULL);
		if (rc != 0) {
			CHECK(errno == ECONNREFUSED);
			rdma_destroy_ep(id);
			usleep(100 * 1000);
			CHECK(rdma_create_ep(&id, res, NULL, &qa) == 0);
			CHECK((mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)));
			post_recv(id->qp, buf, 64, mr);
		}
	}
	CHECK(rc == 0);
	struct ibv_wc wc = poll_one(id->recv_cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == sizeof(struct keys));
	struct keys k;
	memcpy(&k, buf, sizeof(k));

	/* WRITE inside the type 2 window. */
	memcpy(buf + 64, "through a window", 16);
	struct ibv_send_wr w = { .wr_id = 10, .opcode = IBV_WR_RDMA_WRITE };
	w.wr.rdma.remote_addr = k.win2_addr + 16;
	w.wr.rdma.rkey = k.win2_rkey;
	wc = post_one(id->qp, id->send_cq, w, buf + 64, 16, mr);
	CHECK(wc.status == IBV_WC_SUCCESS);

	/* READ through the type 1 window. */
	struct ibv_send_wr r = { .wr_id = 11, .opcode = IBV_WR_RDMA_READ };
	r.wr.rdma.remote_addr = k.win1_addr;
	r.wr.rdma.rkey = k.win1_rkey;
	wc = post_one(id->qp, id->send_cq, r, buf + 128, 29, mr);
	CHECK(wc.status == IBV_WC_SUCCESS && !strcmp(buf + 128, "read through a type 1 window"));

	struct ibv_send_wr s = { .wr_id = 12, .opcode = IBV_WR_SEND };
	strcpy(buf + 192, "written");
	wc = post_one(id->qp, id->send_cq, s, buf + 192, 8, mr);
	CHECK(wc.status == IBV_WC_SUCCESS);

	/* Take the type 2 window back, then try its key. */
	struct ibv_send_wr inv = { .wr_id = 13, .opcode = IBV_WR_SEND_WITH_INV, .invalidate_rkey = k.win2_rkey };
	wc = post_one(id->qp, id->send_cq, inv, buf, 8, mr);
	CHECK(wc.status == IBV_WC_SUCCESS);
	w.wr.rdma.remote_addr = k.win2_addr + 48;
	wc = post_one(id->qp, id->send_cq, w, buf + 64, 16, mr);
	CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);

	ibv_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_freeaddrinfo(res);
	rdma_freeaddrinfo(src);
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	alarm(30);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	CHECK(argc == 4 && !strcmp(argv[1], "client"));
	return client(argv[2], argv[3]);
}
