/* An MPI program of two ranks that checks every byte it moves: blocking
 * ping-pong from 1 byte to 4 MiB (eager and rendezvous protocols), a window
 * of 64 nonblocking 64 KiB messages in flight, an allreduce, and one-sided
 * put, get and accumulate in a window (fence synchronisation). Rank 0
 * prints "mpi_check: ok"; any mismatch aborts the job with a message. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (4 << 20)
#define WINDOW 64
#define CHUNK (64 << 10)
#define WORDS 1024

static void fail(const char *what)
{
	fprintf(stderr, "mpi_check: %s\n", what);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static char pattern(long i, int round) { return (char)(i * 7 + round); }

static void ping_pong(int rank, int peer, char *buf)
{
	for (int len = 1, round = 0; len <= BIG; len *= 4) {
		for (int it = 0; it < 10; it++, round++) {
			if (rank == 0) {
				for (int i = 0; i < len; i++)
					buf[i] = pattern(i, round);
				MPI_Send(buf, len, MPI_CHAR, peer, it, MPI_COMM_WORLD);
				memset(buf, 0, len);
				MPI_Recv(buf, len, MPI_CHAR, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (int i = 0; i < len; i++)
					if (buf[i] != (char)(pattern(i, round) + 1))
						fail("ping-pong: the reply differs");
			} else {
				MPI_Recv(buf, len, MPI_CHAR, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (int i = 0; i < len; i++) {
					if (buf[i] != pattern(i, round))
						fail("ping-pong: the message differs");
					buf[i]++;
				}
				MPI_Send(buf, len, MPI_CHAR, peer, it, MPI_COMM_WORLD);
			}
		}
	}
}

static void window_of_messages(int rank, int peer, char *buf)
{
	MPI_Request req[WINDOW];
	for (int k = 0; k < WINDOW; k++) {
		char *chunk = buf + (long)k * CHUNK;
		if (rank == 0) {
			for (int i = 0; i < CHUNK; i++)
				chunk[i] = pattern(i, k);
			MPI_Isend(chunk, CHUNK, MPI_CHAR, peer, 100 + k, MPI_COMM_WORLD, &req[k]);
		} else {
			MPI_Irecv(chunk, CHUNK, MPI_CHAR, peer, 100 + k, MPI_COMM_WORLD, &req[k]);
		}
	}
	MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
	if (rank == 1)
		for (int k = 0; k < WINDOW; k++)
			for (int i = 0; i < CHUNK; i++)
				if (buf[(long)k * CHUNK + i] != pattern(i, k))
					fail("window: a message differs");
}

static void one_sided(int rank, int peer)
{
	long *mem, src[WORDS], back[WORDS], one = 1;
	MPI_Win win;
	MPI_Win_allocate(WORDS * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
	for (int i = 0; i < WORDS; i++) {
		mem[i] = 0;
		src[i] = rank * 100000L + i;
	}
	MPI_Win_fence(0, win);
	MPI_Put(src, WORDS, MPI_LONG, peer, 0, WORDS, MPI_LONG, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < WORDS; i++)
		if (mem[i] != peer * 100000L + i)
			fail("put: the window differs");
	MPI_Get(back, WORDS, MPI_LONG, peer, 0, WORDS, MPI_LONG, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < WORDS; i++)
		if (back[i] != rank * 100000L + i)
			fail("get: what came back differs");
	for (int i = 0; i < 50; i++)
		MPI_Accumulate(&one, 1, MPI_LONG, peer, 0, 1, MPI_LONG, MPI_SUM, win);
	MPI_Win_fence(0, win);
	if (mem[0] != peer * 100000L + 50)
		fail("accumulate: the sum differs");
	MPI_Win_free(&win);
}

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2)
		fail("run it with two ranks");
	int peer = 1 - rank;
	char *buf = malloc((long)WINDOW * CHUNK > BIG ? (long)WINDOW * CHUNK : BIG);
	if (!buf)
		fail("out of memory");
	ping_pong(rank, peer, buf);
	window_of_messages(rank, peer, buf);
	long mine = rank + 1, sum = 0;
	for (int i = 0; i < 100; i++) {
		MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		if (sum != 3)
			fail("allreduce: the sum differs");
	}
	one_sided(rank, peer);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_check: ok\n");
	free(buf);
	MPI_Finalize();
	return 0;
}
