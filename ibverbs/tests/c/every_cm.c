/* The librdmacm calls no other C program of tests/c/ makes, through the
 * drop-in, with librdmacm's answers asserted: rdma_get_devices and
 * rdma_free_devices; synchronous endpoints (rdma_create_ep with a QP and an
 * SRQ made by rdma_create_srq, rdma_get_request, a reject with private data,
 * and one by rdma_create_srq_ex (XRC refused, as rxe refuses it),
 * then an accept) with the client in a thread of its own, its second QP
 * made by rdma_create_qp_ex and sent on with ibv_wr_*; rdma_init_qp_attr,
 * rdma_set_option, rdma_migrate_id (of a synchronous ID onto a channel,
 * as libfabric does, and back), rdma_establish; an ID destroyed with an
 * event unread takes the event with it, as the kernel does; what uroce lacks
 * (EOPNOTSUPP) and rsocket (ENOSYS; rpoll is poll). argv: the server's IP,
 * the client's. Prints "ok" and exits 0, or names the failed check and
 * exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include "check.h"

static const char *server_ip, *client_ip;
static const char *port = "7473";

static struct rdma_addrinfo *info(const char *node, int passive)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP, .ai_flags = passive ? RAI_PASSIVE : 0 }, *res;
	CHECK(rdma_getaddrinfo(node, passive == 2 ? NULL : port, &hints, &res) == 0);
	return res;
}

/* rdma_create_qp_ex, as perftest makes its QP with -R where it uses the
 * ibv_wr_* API: the ID's PD and CQs made for it where the attributes name
 * none, written into them as librdmacm writes them; one QP an ID. */
static void extended_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr_ex ax = { .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
					  .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
					  .comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					  .send_ops_flags = IBV_QP_EX_WITH_SEND };
	struct ibv_qp_init_attr_ex xrc = ax;
	xrc.comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	errno = 0;
	CHECK(rdma_create_qp_ex(id, &xrc) == -1 && errno == EOPNOTSUPP && !id->qp);
	CHECK(rdma_create_qp_ex(id, &ax) == 0 && id->qp && id->qp->qp_type == IBV_QPT_RC);
	CHECK(ax.pd == id->pd && ax.pd && (ax.comp_mask & IBV_QP_INIT_ATTR_PD));
	CHECK(ax.send_cq == id->send_cq && ax.recv_cq == id->recv_cq && ax.send_cq);
	errno = 0;
	CHECK(rdma_create_qp_ex(id, &ax) == -1 && errno == EINVAL); /* it has one */
}

/* The client: refused once (with the server's private data), then
 * connected; a SEND to the server over the connection. */
static void *client(void *unused)
{
	(void)unused;
	/* From the client's own address (its device). */
	struct rdma_addrinfo *src = info(client_ip, 2); /* any port */
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP, .ai_src_addr = src->ai_src_addr,
				       .ai_src_len = src->ai_src_len }, *res;
	CHECK(rdma_getaddrinfo(server_ip, port, &hints, &res) == 0);
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
					 .qp_type = IBV_QPT_RC, .sq_sig_all = 1 };
	for (int round = 0; round < 2; round++) {
		struct rdma_cm_id *id;
		if (round == 0) {
			CHECK(rdma_create_ep(&id, res, NULL, &attr) == 0 && id->qp && id->verbs);
			/* The attributes stay the caller's: the CQs made for the ID are not left in them. */
			CHECK(attr.send_cq == NULL && attr.recv_cq == NULL && attr.srq == NULL);
		} else {
			CHECK(rdma_create_ep(&id, res, NULL, NULL) == 0 && !id->qp && id->verbs);
			extended_qp(id);
		}
		int rc = rdma_connect(id, NULL);
		if (round == 0) {
			CHECK(rc == -1 && errno == ECONNREFUSED);
			rdma_destroy_ep(id);
			continue;
		}
		CHECK(rc == 0);
		/* Established already: a QP of the ID's own needs no RTU by hand. */
		CHECK(rdma_establish(id) == -1 && errno == EINVAL);
		char msg[16] = "hello, server";
		struct ibv_mr *mr = rdma_reg_msgs(id, msg, sizeof(msg));
		CHECK(mr);
		/* Sent with the builders rdma_create_qp_ex asked for. */
		struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(id->qp);
		CHECK(qpx);
		ibv_wr_start(qpx);
		qpx->wr_id = 1;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qpx);
		ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)msg, sizeof(msg));
		CHECK(ibv_wr_complete(qpx) == 0);
		struct ibv_wc wc;
		CHECK(rdma_get_send_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
		CHECK(rdma_disconnect(id) == 0);
		CHECK(rdma_dereg_mr(mr) == 0);
		rdma_destroy_ep(id);
	}
	rdma_freeaddrinfo(res);
	rdma_freeaddrinfo(src);
	return NULL;
}

/* libfabric's verbs provider: an ID resolves its address synchronously,
 * then moves onto the program's channel, where its route's event comes
 * (the ID is asynchronous from the move on). */
static void sync_then_migrated(void)
{
	struct rdma_addrinfo *src = info(client_ip, 2), *dst = info(server_ip, 0);
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, src->ai_src_addr, dst->ai_dst_addr, 2000) == 0 && id->verbs);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch && rdma_migrate_id(id, ch) == 0 && id->channel == ch);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	struct rdma_cm_event *ev;
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED && ev->id == id);
	CHECK(rdma_ack_cm_event(ev) == 0);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
	rdma_freeaddrinfo(dst);
	rdma_freeaddrinfo(src);
}

/* Whether the channel's descriptor is readable now. */
static int readable(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

/* An ID resolving the server's address on ch; its event waits unread. */
static struct rdma_cm_id *resolving(struct rdma_event_channel *ch, struct rdma_addrinfo *dst)
{
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, dst->ai_dst_addr, 2000) == 0);
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 10000) == 1);
	return id;
}

/* rdma_destroy_id drops the ID's unread events, as the kernel does: the
 * channel no longer wakes a thread that polls it (rping's CM thread polls
 * it and would then block in rdma_get_cm_event for good), and the other
 * IDs' events stay, in order. */
static void destroyed_ids_take_their_events(void)
{
	struct rdma_addrinfo *dst = info(server_ip, 0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch);
	struct rdma_cm_id *gone = resolving(ch, dst);
	CHECK(rdma_destroy_id(gone) == 0);
	CHECK(!readable(ch));
	struct rdma_cm_id *first = resolving(ch, dst);
	gone = resolving(ch, dst);
	struct rdma_cm_id *last = resolving(ch, dst);
	CHECK(rdma_destroy_id(gone) == 0);
	struct rdma_cm_event *ev;
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->id == first && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(rdma_ack_cm_event(ev) == 0);
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->id == last && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(rdma_ack_cm_event(ev) == 0);
	CHECK(!readable(ch));
	CHECK(rdma_destroy_id(first) == 0 && rdma_destroy_id(last) == 0);
	rdma_destroy_event_channel(ch);
	rdma_freeaddrinfo(dst);
}

static void devices(void)
{
	int n = -1;
	struct ibv_context **list = rdma_get_devices(&n);
	CHECK(list && n == 2 && list[0] && list[1] && list[2] == NULL);
	struct ibv_device_attr d;
	CHECK(ibv_query_device(list[0], &d) == 0 && d.phys_port_cnt == 1);
	rdma_free_devices(list);
	CHECK(rdma_get_devices(NULL) != NULL); /* the count is optional */
}

/* A BASIC SRQ through rdma_create_srq_ex: on the ID's PD, written back. */
static void srq_ex(struct rdma_cm_id *id)
{
	struct ibv_srq_init_attr_ex xattr = {
		.attr = { .max_wr = 2, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE,
		.srq_type = IBV_SRQT_BASIC,
	};
	CHECK(rdma_create_srq_ex(id, &xattr) == 0 && id->srq && id->pd);
	CHECK((xattr.comp_mask & IBV_SRQ_INIT_ATTR_PD) && xattr.pd == id->pd);
	CHECK(xattr.attr.max_wr >= 2 && id->srq->pd == id->pd); /* rounded up as rxe */
	struct ibv_srq_attr got;
	CHECK(ibv_query_srq(id->srq, &got) == 0 && got.max_wr == xattr.attr.max_wr);
	rdma_destroy_srq(id);
	CHECK(id->srq == NULL);
}

static void lacking(struct rdma_cm_id *id)
{
	errno = 0;
	struct rdma_cm_id *other;
	CHECK(rdma_create_id(NULL, &other, NULL, RDMA_PS_IB) == -1 && errno == EOPNOTSUPP);
	CHECK(rdma_create_id(NULL, &other, NULL, 7483) == -1 && errno == EINVAL); /* no such port space */
	CHECK(rdma_create_qp_ex(id, NULL) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(rdma_create_srq_ex(id, NULL) == -1 && errno == EINVAL);
	struct ibv_srq_init_attr_ex xattr = { .attr = { .max_wr = 4, .max_sge = 1 } };
	errno = 0;
	CHECK(rdma_create_srq_ex(id, &xattr) == -1 && errno == EINVAL); /* no type given */
	xattr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
	xattr.srq_type = IBV_SRQT_XRC;
	errno = 0;
	CHECK(rdma_create_srq_ex(id, &xattr) == -1 && errno == EOPNOTSUPP && !id->srq); /* as rxe */
	/* Multicast is served (mckey, debian_tools.rs); a join with no group is EINVAL. */
	errno = 0;
	CHECK(rdma_join_multicast(id, NULL, NULL) == -1 && errno == EINVAL);
	CHECK(rdma_join_multicast_ex(id, NULL, NULL) == -1 && errno == EINVAL);
	CHECK(rdma_leave_multicast(id, NULL) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(rdma_notify(id, IBV_EVENT_COMM_EST) == -1 && errno == EOPNOTSUPP);
	CHECK(rdma_set_local_ece(id, NULL) == -1 && rdma_get_remote_ece(id, NULL) == -1);
	CHECK(rdma_reject_ece(id, NULL, 0) == -1 && errno == EOPNOTSUPP);
	int opt = 1;
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &opt, sizeof(opt)) == -1 && errno == ENOSYS);
	uint8_t tos = 32;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)) == 0);
}

static void rsockets(void)
{
	errno = 0;
	CHECK(rsocket(AF_INET, SOCK_STREAM, 0) == -1 && errno == ENOSYS);
	CHECK(rbind(3, NULL, 0) == -1 && rlisten(3, 1) == -1 && raccept(3, NULL, NULL) == -1);
	CHECK(rconnect(3, NULL, 0) == -1 && rshutdown(3, 0) == -1 && rclose(3) == -1);
	char b[4];
	struct iovec iov = { b, 4 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	CHECK(rrecv(3, b, 4, 0) == -1 && rrecvfrom(3, b, 4, 0, NULL, NULL) == -1 && rrecvmsg(3, &mh, 0) == -1);
	CHECK(rsend(3, b, 4, 0) == -1 && rsendto(3, b, 4, 0, NULL, 0) == -1 && rsendmsg(3, &mh, 0) == -1);
	CHECK(rread(3, b, 4) == -1 && rreadv(3, &iov, 1) == -1 && rwrite(3, b, 4) == -1 && rwritev(3, &iov, 1) == -1);
	socklen_t len = 0;
	CHECK(rgetpeername(3, NULL, &len) == -1 && rgetsockname(3, NULL, &len) == -1);
	CHECK(rsetsockopt(3, 0, 0, NULL, 0) == -1 && rgetsockopt(3, 0, 0, NULL, &len) == -1);
	CHECK(rfcntl(3, F_GETFL) == -1 && riomap(3, NULL, 0, 0, 0, 0) == -1 && riounmap(3, NULL, 0) == -1);
	CHECK(riowrite(3, b, 4, 0, 0) == -1 && rselect(0, NULL, NULL, NULL, NULL) == -1 && errno == ENOSYS);
	/* rpoll on ordinary descriptors is poll(2). */
	int fds[2];
	CHECK(pipe(fds) == 0 && write(fds[1], "x", 1) == 1);
	struct pollfd p = { .fd = fds[0], .events = POLLIN };
	CHECK(rpoll(&p, 1, 1000) == 1 && (p.revents & POLLIN));
	close(fds[0]);
	close(fds[1]);
}

int main(int argc, char **argv)
{
	alarm(30);
	CHECK(argc == 3);
	server_ip = argv[1];
	client_ip = argv[2];
	devices();
	rsockets();
	sync_then_migrated();
	destroyed_ids_take_their_events();

	/* A synchronous listener (no channel), an SRQ for the QPs it accepts. */
	struct rdma_addrinfo *res = info(server_ip, 1);
	struct rdma_cm_id *listener;
	CHECK(rdma_create_ep(&listener, res, NULL, NULL) == 0 && listener->verbs && !listener->qp);
	lacking(listener);
	srq_ex(listener);
	struct ibv_qp_attr qattr = { .qp_state = IBV_QPS_INIT };
	int mask = 0;
	CHECK(rdma_init_qp_attr(listener, &qattr, &mask) == 0 && (mask & IBV_QP_STATE) && qattr.port_num == 1);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch && rdma_migrate_id(listener, ch) == 0 && listener->channel == ch);
	CHECK(rdma_migrate_id(listener, NULL) == 0); /* synchronous again */
	CHECK(rdma_listen(listener, 2) == 0);
	rdma_destroy_event_channel(ch);

	pthread_t t;
	CHECK(pthread_create(&t, NULL, client, NULL) == 0);
	struct rdma_cm_id *req;
	CHECK(rdma_get_request(listener, &req) == 0 && req->verbs);
	CHECK(rdma_reject(req, "busy", 5) == 0);
	rdma_destroy_id(req);

	CHECK(rdma_get_request(listener, &req) == 0);
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 4, .max_sge = 1 } };
	CHECK(rdma_create_srq(req, NULL, &sattr) == 0 && req->srq && req->pd);
	struct ibv_qp_init_attr qinit = { .cap = { .max_send_wr = 2, .max_send_sge = 1 }, .qp_type = IBV_QPT_RC };
	CHECK(rdma_create_qp(req, req->pd, &qinit) == 0 && req->qp && req->qp->srq == req->srq);
	char buf[16] = "";
	struct ibv_mr *mr = rdma_reg_msgs(req, buf, sizeof(buf));
	CHECK(mr && rdma_post_recv(req, NULL, buf, sizeof(buf), mr) == 0); /* through the SRQ */
	CHECK(rdma_accept(req, NULL) == 0);
	struct ibv_wc wc;
	CHECK(rdma_get_recv_comp(req, &wc) == 1 && wc.status == IBV_WC_SUCCESS && !strcmp(buf, "hello, server"));
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(rdma_dereg_mr(mr) == 0);
	rdma_destroy_qp(req);
	rdma_destroy_srq(req);
	CHECK(req->srq == NULL);
	rdma_destroy_ep(req);
	rdma_destroy_ep(listener);
	rdma_freeaddrinfo(res);
	printf("ok\n");
	return 0;
}
