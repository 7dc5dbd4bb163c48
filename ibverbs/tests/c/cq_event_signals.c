/* ibv_get_cq_event answers a signal as a read() of the channel's
 * descriptor would (uroce's waits beside the link when the progress thread
 * sleeps, to take the completing packet in itself, and emulates it): a
 * handler installed with SA_RESTART lets the wait go on to its event; one
 * without makes it return -1 with EINTR. The event itself comes from a
 * SEND between two QPs of the context, posted by another thread. Prints
 * "ok" and exits 0, or names the failed check and exits 1. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include "check.h"

static struct ibv_qp *a;
static struct ibv_mr *mr;
static char buf[64];
static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* SIGALRM to the process in `ms` milliseconds, handled with `flags`. */
static void alarm_in(unsigned ms, int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = flags;
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	struct itimerval t = { .it_value = { .tv_sec = 0, .tv_usec = ms * 1000 } };
	CHECK(setitimer(ITIMER_REAL, &t, NULL) == 0);
}

/* After 300 ms (the alarm comes at 50), a SEND from a to b. The signal is
 * blocked here, so it reaches the waiting thread. */
static void *send_later(void *arg)
{
	(void)arg;
	usleep(300000);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	CHECK(ibv_post_send(a, &wr, &bad) == 0);
	return NULL;
}

int main(void)
{
	struct ibv_context *ctx = open_first_device();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
	CHECK(pd && channel);
	struct ibv_cq *send_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_cq *recv_cq = ibv_create_cq(ctx, 16, NULL, channel, 0);
	CHECK(send_cq && recv_cq);
	struct ibv_qp_init_attr init = { .send_cq = send_cq, .recv_cq = recv_cq, .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	a = ibv_create_qp(pd, &init);
	struct ibv_qp *b = ibv_create_qp(pd, &init);
	mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(a && b && mr);
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0);
	connect_rc(a, b->qp_num, gid);
	connect_rc(b, a->qp_num, gid);
	struct ibv_sge sge = { .addr = (uintptr_t)(buf + 32), .length = 32, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad_rwr;
	CHECK(ibv_post_recv(b, &rwr, &bad_rwr) == 0);
	CHECK(ibv_req_notify_cq(recv_cq, 0) == 0);

	/* Without SA_RESTART: the wait ends with EINTR. */
	alarm_in(50, 0);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	errno = 0;
	CHECK(ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == -1 && errno == EINTR && alarms == 1);

	/* With SA_RESTART: it goes on to the event. */
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	CHECK(pthread_sigmask(SIG_BLOCK, &alrm, NULL) == 0);
	pthread_t sender;
	CHECK(pthread_create(&sender, NULL, send_later, NULL) == 0);
	CHECK(pthread_sigmask(SIG_UNBLOCK, &alrm, NULL) == 0);
	alarm_in(50, SA_RESTART);
	CHECK(ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0 && ev_cq == recv_cq && alarms == 2);
	CHECK(pthread_join(sender, NULL) == 0);
	ibv_ack_cq_events(recv_cq, 1);
	struct ibv_wc wc = poll_one(recv_cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);

	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0);
	CHECK(ibv_destroy_cq(send_cq) == 0 && ibv_destroy_cq(recv_cq) == 0);
	CHECK(ibv_dereg_mr(mr) == 0 && ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_destroy_comp_channel(channel) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	printf("ok\n");
	return 0;
}
