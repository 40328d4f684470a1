// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
//
// C++ exceptions: thrown four frames deep and caught, rethrown from a catch(...),
// a standard exception from the library (std::vector::at), and destructors of locals
// run during unwinding (their order is logged). Unwinding walks .eh_frame and
// .gcc_except_table, so the landing pads must stay where the tables say.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

static std::string log_;

struct Guard {
    char tag;
    explicit Guard(char t)
        : tag(t)
    {
        log_ += '+';
        log_ += tag;
    }
    ~Guard()
    {
        log_ += '-';
        log_ += tag;
    }
};

struct AppError {
    int code;
    std::string where;
};

__attribute__((noinline)) static int
level4(int x)
{
    Guard g('d');
    if (x % 4 == 3)
        throw AppError { x, "level4" };
    if (x % 4 == 2)
        throw std::runtime_error("runtime at level4 x=" + std::to_string(x));
    return x * 10;
}

__attribute__((noinline)) static int
level3(int x)
{
    Guard g('c');
    return level4(x + 1) + 1;
}
__attribute__((noinline)) static int
level2(int x)
{
    Guard g('b');
    return level3(x) + 2;
}

__attribute__((noinline)) static int
level1(int x)
{
    Guard g('a');
    try {
        return level2(x);
    } catch (...) {
        log_ += '!';
        throw; // rethrow to main
    }
}

int
main()
{
    int caught_app = 0, caught_std = 0, sum = 0;
    for (int i = 0; i < 8; i++) {
        log_.clear();
        try {
            sum += level1(i);
        } catch (const AppError& e) {
            caught_app++;
            sum += e.code;
        } catch (const std::exception& e) {
            caught_std++;
            std::printf("std: %s\n", e.what());
        }
        std::printf("i=%d log=%s\n", i, log_.c_str());
    }
    std::vector<int> v(3, 7);
    try {
        sum += v.at(5);
    } catch (const std::out_of_range&) {
        std::printf("out_of_range caught\n");
        caught_std++;
    }
    std::printf("sum=%d app=%d std=%d\n", sum, caught_app, caught_std);
    return caught_app + caught_std;
}
