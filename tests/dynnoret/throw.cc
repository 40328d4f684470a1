// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
//
// C++ throws as exits (tests/dyn-noret.sh): leaver(x) throws for odd x and the
// exception leaves it (its call of __cxa_throw never returns: the timer stops there);
// thrower(x) throws for odd x and catches it itself (the throw is no exit: its timer is
// refused). main sleeps MS ms after each call, outside them; `prog N MS` prints "ok S".
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>

static void
sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, nullptr);
}

// (extern "C": plain names for dyn's patterns)
extern "C" __attribute__((noinline)) int
leaver(int x)
{
    if (x & 1)
        throw std::runtime_error("odd");
    return x;
}

extern "C" __attribute__((noinline)) int
thrower(int x)
{
    try {
        if (x & 1)
            throw std::runtime_error("odd");
        return x;
    } catch (const std::runtime_error &) {
        return -x;
    }
}

int
main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = std::atoi(argv[1]);
    long ms = std::atol(argv[2]), s = 0;
    for (int i = 0; i < n; i++) {
        s += thrower(i);
        try {
            s += leaver(i);
        } catch (const std::exception &) {
            s += 1000;
        }
        sleep_ms(ms);
    }
    std::printf("ok %ld\n", s);
    return 0;
}
