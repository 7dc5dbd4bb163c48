/* Threads cancelled while they use the drop-in, as programs cancel them
 * (rping cancels its CQ and CM threads): a thread that polls a CQ in a loop
 * is cancelled at its own cancellation point, as with rdma-core, whose
 * ibv_poll_cq has none (uroce's poll may run a round, whose system calls
 * are cancellation points: the process aborted there); threads blocked in
 * ibv_get_cq_event, ibv_get_async_event and rdma_get_cm_event are
 * cancelled in them (the process aborted there too). Prints "ok" and
 * exits 0, or names the failed check and exits 1. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include "check.h"

static struct ibv_context *ctx;
static struct ibv_cq *cq;
static struct ibv_comp_channel *channel;
static struct rdma_event_channel *cm_channel;

static void *poll_in_a_loop(void *arg)
{
	(void)arg;
	struct ibv_wc wc;
	for (unsigned long polls = 1;; polls++) {
		CHECK(ibv_poll_cq(cq, 1, &wc) == 0);
		if (polls % 1024 == 0)
			pthread_testcancel();
	}
	return NULL;
}

static void *wait_for_an_event(void *arg)
{
	(void)arg;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	ibv_get_cq_event(channel, &ev_cq, &ev_ctx);
	fprintf(stderr, "ibv_get_cq_event returned with no event\n");
	exit(1);
	return NULL;
}

static void *wait_for_an_async_event(void *arg)
{
	(void)arg;
	struct ibv_async_event event;
	ibv_get_async_event(ctx, &event);
	fprintf(stderr, "ibv_get_async_event returned with no event\n");
	exit(1);
	return NULL;
}

static void *wait_for_a_cm_event(void *arg)
{
	(void)arg;
	struct rdma_cm_event *event;
	rdma_get_cm_event(cm_channel, &event);
	fprintf(stderr, "rdma_get_cm_event returned with no event\n");
	exit(1);
	return NULL;
}

/* Starts `body` in a thread, lets it run `us` microseconds, cancels it and
 * checks that it ended cancelled. */
static void cancel_after(void *(*body)(void *), unsigned us)
{
	pthread_t t;
	void *ret = NULL;
	CHECK(pthread_create(&t, NULL, body, NULL) == 0);
	usleep(us);
	CHECK(pthread_cancel(t) == 0);
	CHECK(pthread_join(t, &ret) == 0 && ret == PTHREAD_CANCELED);
}

int main(void)
{
	ctx = open_first_device();
	channel = ibv_create_comp_channel(ctx);
	CHECK(channel);
	cq = ibv_create_cq(ctx, 16, NULL, channel, 0);
	CHECK(cq);
	CHECK(ibv_req_notify_cq(cq, 0) == 0);
	/* Cancelled at different moments of its loop. */
	for (unsigned i = 0; i < 40; i++)
		cancel_after(poll_in_a_loop, 200 + 100 * i);
	cancel_after(wait_for_an_event, 20000);
	cancel_after(wait_for_an_async_event, 20000);
	cm_channel = rdma_create_event_channel();
	CHECK(cm_channel);
	cancel_after(wait_for_a_cm_event, 20000);
	/* The device still answers after its users were cancelled. */
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0 && ibv_req_notify_cq(cq, 0) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_destroy_comp_channel(channel) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	printf("ok\n");
	return 0;
}
