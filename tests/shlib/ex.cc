// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
// C++ exceptions thrown and caught through libstdc++ and libgcc_s (tests/shlib.sh).
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>
#include <algorithm>
static int thrower(int i) { if (i % 7 == 3) throw std::runtime_error("bad " + std::to_string(i)); return i; }
int main() {
    std::map<std::string, int> m; std::vector<int> v; int caught = 0;
    for (int i = 0; i < 2000; i++) {
        try { v.push_back(thrower(i)); m[std::to_string(i % 97)] += i; }
        catch (const std::exception &e) { caught++; if (i < 20) std::cout << e.what() << "\n"; }
    }
    std::sort(v.begin(), v.end(), [](int a, int b){ return a % 13 < b % 13 || (a % 13 == b % 13 && a < b); });
    std::cout << caught << " " << m.size() << " " << v[5] << " " << m["42"] << std::endl;
}
