/* librdmacm through the drop-in, as an rdma_cm tutorial program does it, in
 * one process with two devices (UROCE_DEVICES: the server's address, then
 * the client's): a listener, a client that resolves, connects with private
 * data and a QP, the server accepting it; a SEND and an RDMA WRITE over the
 * connection; a disconnect both sides hear; and rdma-core's answers to bad
 * input. Built with gcc against rdma-core's headers (c_programs.rs); prints
 * "ok" and exits 0, or names the failed check and exits 1. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "check.h"

static struct rdma_event_channel *ch;

/* The next event, which must be `want`; acked unless kept. */
static struct rdma_cm_event *expect(enum rdma_cm_event_type want, int keep)
{
	struct rdma_cm_event *ev;
	CHECK(rdma_get_cm_event(ch, &ev) == 0); /* blocking: alarm() bounds it */
	if (ev->event != want)
		fprintf(stderr, "got %s (status %d), want %s\n", rdma_event_str(ev->event), ev->status,
			rdma_event_str(want));
	CHECK(ev->event == want && ev->status == 0);
	if (!keep) {
		CHECK(rdma_ack_cm_event(ev) == 0);
		return NULL;
	}
	return ev;
}

struct end {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[256];
};

/* A PD, CQ, MR and RC QP on the ID's device. */
static void make_qp(struct rdma_cm_id *id, struct end *e)
{
	CHECK(id->verbs);
	e->pd = ibv_alloc_pd(id->verbs);
	e->cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	CHECK(e->pd && e->cq);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	e->mr = ibv_reg_mr(e->pd, e->buf, sizeof e->buf, access);
	CHECK(e->mr);
	struct ibv_qp_init_attr a = { .send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK(rdma_create_qp(id, e->pd, &a) == 0);
	CHECK(id->qp && id->qp->state == IBV_QPS_INIT && id->pd == e->pd);
}

/* The next completion of cq, which must be a success. */
static struct ibv_wc one_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS);
	return wc;
}

static void free_end(struct rdma_cm_id *id, struct end *e)
{
	rdma_destroy_qp(id);
	CHECK(id->qp == NULL);
	CHECK(ibv_dereg_mr(e->mr) == 0 && ibv_destroy_cq(e->cq) == 0 && ibv_dealloc_pd(e->pd) == 0);
}

int main(int argc, char **argv)
{
	alarm(30); /* a blocking call that never returns fails the test */
	CHECK(argc == 3); /* the server's IP, the client's IP */
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE | RAI_NUMERICHOST, .ai_port_space = RDMA_PS_TCP };
	struct rdma_addrinfo *srv_ai, *dst_ai;
	CHECK(rdma_getaddrinfo(argv[1], "7471", &hints, &srv_ai) == 0);
	CHECK(srv_ai->ai_src_addr && srv_ai->ai_src_len == sizeof(struct sockaddr_in) && !srv_ai->ai_dst_addr);
	CHECK(srv_ai->ai_qp_type == IBV_QPT_RC && (srv_ai->ai_flags & RAI_PASSIVE));
	hints.ai_flags = RAI_NUMERICHOST;
	CHECK(rdma_getaddrinfo(argv[1], "7471", &hints, &dst_ai) == 0 && dst_ai->ai_dst_addr);

	ch = rdma_create_event_channel();
	CHECK(ch && ch->fd >= 0);
	struct rdma_cm_id *listener, *client;
	CHECK(rdma_create_id(ch, &listener, (void *)0x11, RDMA_PS_TCP) == 0);
	CHECK(rdma_create_id(ch, &client, (void *)0x22, RDMA_PS_TCP) == 0);
	CHECK(client->context == (void *)0x22 && client->channel == ch && client->verbs == NULL);

	/* Bad input: an address no device has, a route before an address. */
	struct sockaddr_in nowhere = { .sin_family = AF_INET };
	inet_pton(AF_INET, "192.0.2.1", &nowhere.sin_addr);
	errno = 0;
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&nowhere) == -1 && errno == EADDRNOTAVAIL);
	errno = 0;
	CHECK(rdma_resolve_route(client, 1000) == -1 && errno == EINVAL);
	struct rdma_conn_param none = { 0 };
	errno = 0;
	CHECK(rdma_connect(client, &none) == -1 && errno == EINVAL);

	/* The server listens; nothing waits yet: a non-blocking read says so. */
	CHECK(rdma_bind_addr(listener, srv_ai->ai_src_addr) == 0);
	CHECK(listener->verbs && rdma_get_src_port(listener) == htons(7471));
	CHECK(rdma_listen(listener, 4) == 0);
	int flags = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == 0);
	struct rdma_cm_event *ev;
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN);
	CHECK(fcntl(ch->fd, F_SETFL, flags) == 0);

	/* The client resolves from its own address, makes its QP, connects. */
	struct sockaddr_in src = { .sin_family = AF_INET };
	inet_pton(AF_INET, argv[2], &src.sin_addr);
	CHECK(rdma_resolve_addr(client, (struct sockaddr *)&src, dst_ai->ai_dst_addr, 2000) == 0);
	expect(RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	CHECK(client->verbs && client->verbs != listener->verbs);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	expect(RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	CHECK(rdma_get_dst_port(client) == htons(7471));
	struct end c_end, s_end;
	make_qp(client, &c_end);
	struct rdma_conn_param cp = { .private_data = "hello", .private_data_len = 6, .responder_resources = 1,
				      .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	CHECK(rdma_connect(client, &cp) == 0);

	/* The server hears the request on a new ID with the private data. */
	ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST, 1);
	struct rdma_cm_id *conn = ev->id;
	CHECK(ev->listen_id == listener && conn != listener && conn->context == (void *)0x11);
	CHECK(ev->param.conn.private_data_len >= 6 && memcmp(ev->param.conn.private_data, "hello", 6) == 0);
	CHECK(conn->verbs == listener->verbs);
	CHECK(rdma_ack_cm_event(ev) == 0);
	make_qp(conn, &s_end);
	struct ibv_sge rs = { (uintptr_t)s_end.buf, 64, s_end.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *bad_rwr;
	CHECK(ibv_post_recv(conn->qp, &rwr, &bad_rwr) == 0);
	struct rdma_conn_param ap = { .responder_resources = 1, .initiator_depth = 1 };
	CHECK(rdma_accept(conn, &ap) == 0);
	expect(RDMA_CM_EVENT_ESTABLISHED, 0);
	expect(RDMA_CM_EVENT_ESTABLISHED, 0);
	CHECK(client->qp->state == IBV_QPS_RTS && conn->qp->state == IBV_QPS_RTS);

	/* A SEND the server receives, then an RDMA WRITE into its buffer. */
	strcpy(c_end.buf, "sent over rdma_cm");
	struct ibv_sge ss = { (uintptr_t)c_end.buf, 32, c_end.mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *bad_swr;
	CHECK(ibv_post_send(client->qp, &swr, &bad_swr) == 0);
	CHECK(one_wc(c_end.cq).wr_id == 2);
	CHECK(one_wc(s_end.cq).wr_id == 1 && strcmp(s_end.buf, "sent over rdma_cm") == 0);
	strcpy(c_end.buf, "written");
	swr.opcode = IBV_WR_RDMA_WRITE;
	swr.wr_id = 3;
	swr.wr.rdma.remote_addr = (uintptr_t)(s_end.buf + 128);
	swr.wr.rdma.rkey = s_end.mr->rkey;
	CHECK(ibv_post_send(client->qp, &swr, &bad_swr) == 0);
	CHECK(one_wc(c_end.cq).wr_id == 3 && strcmp(s_end.buf + 128, "written") == 0);

	/* The client disconnects; both sides hear DISCONNECTED. */
	CHECK(rdma_disconnect(client) == 0);
	expect(RDMA_CM_EVENT_DISCONNECTED, 0);
	CHECK(rdma_disconnect(conn) == 0);
	expect(RDMA_CM_EVENT_DISCONNECTED, 0);

	free_end(client, &c_end);
	free_end(conn, &s_end);
	CHECK(rdma_destroy_id(conn) == 0 && rdma_destroy_id(client) == 0 && rdma_destroy_id(listener) == 0);
	errno = 0;
	CHECK(rdma_destroy_id(client) == -1 && errno == EINVAL); /* twice */
	rdma_destroy_event_channel(ch);
	/* A thread reading the channel after another destroyed it (rping's
	 * CM thread as main tears down) fails as on librdmacm's closed
	 * descriptor, EBADF, after a few seconds' grace; a pointer that never was
	 * a channel is EINVAL. */
	struct rdma_cm_event *late;
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &late) == -1 && errno == EBADF);
	struct rdma_event_channel bogus = { .fd = -1 };
	errno = 0;
	CHECK(rdma_get_cm_event(&bogus, &late) == -1 && errno == EINVAL);
	rdma_freeaddrinfo(srv_ai);
	rdma_freeaddrinfo(dst_ai);
	printf("ok\n");
	return 0;
}
