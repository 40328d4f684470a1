/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/mpi.sh (built there with mpicc): a job with a planted load imbalance. Each
 * rank computes (crunch) and then waits for the others at a barrier, for SECONDS
 * (argv[1]); rank 1 computes four times as much as the others, so they wait for it: dyn
 * search over the ranks must name crunch in rank 1 as the imbalance. (Twice as much was
 * not enough on a loaded machine: the shares came out 52.9% and 69.0%, below dyn
 * search's 1.5x.)
 */
#include <mpi.h>
#include <stdlib.h>

volatile double sink;
void crunch(long n);

__attribute__((noinline)) void
crunch(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)i * 1e-9;
    sink = x;
}

int
main(int argc, char **argv)
{
    int rank, go = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double secs = argc > 1 ? atof(argv[1]) : 10, t0 = MPI_Wtime();
    while (go) {
        crunch(rank == 1 ? 8000000 : 2000000);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            go = MPI_Wtime() - t0 < secs;
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
