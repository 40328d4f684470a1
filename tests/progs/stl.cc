// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
//
// The standard library: std::vector with std::sort and a lambda comparator, std::map
// word counts, std::string building and searching, std::function callbacks and an
// algorithm pipeline. Heavy inlining of templates at -O2/-O3, and many small functions.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

int
main()
{
    const std::string text
        = "the quick brown fox jumps over the lazy dog the dog sleeps and the fox runs "
          "over the hill and the brown dog follows the quick fox";
    std::map<std::string, int> counts;
    std::istringstream in(text);
    std::string word;
    while (in >> word)
        counts[word]++;

    std::vector<std::pair<std::string, int>> byfreq(counts.begin(), counts.end());
    std::sort(byfreq.begin(), byfreq.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    for (size_t i = 0; i < 5 && i < byfreq.size(); i++)
        std::printf("%s %d\n", byfreq[i].first.c_str(), byfreq[i].second);

    std::vector<long> v(1000);
    std::iota(v.begin(), v.end(), 1);
    std::vector<std::function<long(long)>> stages = {
        [](long x) { return x * x % 1009; },
        [](long x) { return x + 17; },
        [](long x) { return x ^ 0x5a; },
    };
    for (auto& x : v)
        for (auto& f : stages)
            x = f(x);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    long sum = std::accumulate(v.begin(), v.end(), 0L);

    std::string s;
    for (const auto& kv : counts)
        s += kv.first.substr(0, 2);
    std::reverse(s.begin(), s.end());
    size_t pos = s.find("fo");

    std::printf("distinct=%zu unique=%zu sum=%ld\n", counts.size(), v.size(), sum);
    std::printf("s=%s pos=%zu\n", s.c_str(), pos);
    return (int)(counts.size() % 7);
}
