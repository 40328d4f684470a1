/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/mpi.sh (built there with mpicc): rank r calls work() 100 (r + 1) times, so a
 * job of 4 ranks makes 1,000 calls. With a directory argument D, each rank first waits
 * for the file D/go (a tool attaches meanwhile), works, creates D/done.RANK, then waits
 * for D/stop.
 */
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

volatile long sink;
void work(long k);

__attribute__((noinline)) void
work(long k)
{
    sink += k;
}

static void
wait_for(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    for (int i = 0; i < 6000 && stat(path, &st) != 0; i++) /* a minute at most */
        usleep(10000);
}

int
main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        wait_for(argv[1], "go");
    for (long i = 0; i < 100L * (rank + 1); i++)
        work(i);
    if (argc > 1) {
        char done[4096];
        snprintf(done, sizeof(done), "%s/done.%d", argv[1], rank);
        FILE *f = fopen(done, "w");
        if (f != NULL)
            fclose(f);
        wait_for(argv[1], "stop");
    }
    long mine = sink, total = 0;
    MPI_Reduce(&mine, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%d ranks, %ld\n", size, total);
    MPI_Finalize();
    return 0;
}
