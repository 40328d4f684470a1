/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* An MPI job whose rank 1 computes twice as long as the others each step; every rank
 * then waits for it in MPI_Barrier. Runs for argv[1] seconds. */
#include <mpi.h>
#include <stdlib.h>

volatile double sink;
volatile int done; /* a store after the last call: room for a live exit snippet */

__attribute__((noinline)) void
compute(int units)
{
    double x = 0;
    for (long i = 0; i < 400000L * units; i++)
        x += (double)i * 0.5;
    sink = x;
    done = 1;
}

int
main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double secs = argc > 1 ? atof(argv[1]) : 10, end = MPI_Wtime() + secs;
    int go = 1;
    while (go) {
        compute(rank == 1 ? 2 : 1);
        MPI_Barrier(MPI_COMM_WORLD);
        go = MPI_Wtime() < end;
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
