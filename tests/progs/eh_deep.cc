// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
//
// C++ exceptions at -O3: a std::runtime_error thrown through up to 13 recursive frames
// holding std::vector, std::string and destructor cleanups, seen and rethrown on the way
// (throw;) and wrapped in a nested exception; main has many try blocks: virtual calls
// that throw, a recursive std::function, lambdas throwing a class hierarchy caught by
// base class, exceptions from the library (std::stoi, std::vector::at), exceptions whose
// construction has cleanups, nested handlers, and `throw 42`. g++ -O3 splits functions
// into hot and cold parts; when a landing pad would begin a cold fragment (descend's
// here), g++ puts a one-byte nop before it, since offset 0 means "no landing pad".
// Unwinding reads .eh_frame and .gcc_except_table for every frame: every frame's code,
// moved or not, must keep an FDE whose rows and landing pads say what the old one said.
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

static std::string trail; // what the cleanups did, in order

struct Guard {
    char tag;
    explicit Guard(char t)
        : tag(t)
    {
        trail += '+';
        trail += tag;
    }
    ~Guard()
    {
        trail += '-';
        trail += tag;
    }
};

struct AppError : std::runtime_error {
    int code;
    AppError(const std::string& what, int c)
        : std::runtime_error(what)
        , code(c)
    {
    }
};
struct IoError : AppError {
    using AppError::AppError;
};
struct ParseError : AppError {
    using AppError::AppError;
};

static long sink;

// Up to 12 frames, each with a vector, a string and a Guard: the bottom one throws
// (returns when the limit is negative).
__attribute__((noinline)) static int
descend(int depth, int limit)
{
    std::vector<int> v(static_cast<size_t>(depth) + 3, depth);
    std::string name = "frame" + std::to_string(depth);
    Guard g(static_cast<char>('a' + depth));
    if (depth >= limit) {
        if (limit < 0)
            return static_cast<int>(name.size()); // a normal return
        throw std::runtime_error("bottom at depth " + std::to_string(limit));
    }
    if (depth == 6) {
        try {
            return descend(depth + 1, limit) + static_cast<int>(v.size());
        } catch (const std::exception& e) {
            trail += '!'; // seen on the way up, then passed on as it is
            throw;
        }
    }
    if (depth == 3) {
        try {
            return descend(depth + 1, limit) + v[1];
        } catch (const std::runtime_error& e) {
            trail += '^';
            std::throw_with_nested(IoError(name + ": " + e.what(), depth));
        }
    }
    int r = descend(depth + 1, limit);
    sink += v.back() + static_cast<long>(name.size());
    return r + v[0];
}

struct Shape {
    virtual ~Shape() = default;
    virtual double
    area(double scale) const = 0;
};
struct Square : Shape {
    double side;
    explicit Square(double s)
        : side(s)
    {
    }
    double
    area(double scale) const override
    {
        if (scale < 0)
            throw std::domain_error("negative scale for a square");
        return side * side * scale;
    }
};
struct Disc : Shape {
    double r;
    explicit Disc(double x)
        : r(x)
    {
    }
    double
    area(double scale) const override
    {
        if (scale == 0)
            throw std::domain_error("zero scale for a disc");
        return 3.0 * r * r * scale;
    }
};

// Parses "key=value" pairs; throws ParseError for anything else.
__attribute__((noinline)) static int
parse_pairs(const std::vector<std::string>& items)
{
    int sum = 0;
    for (const std::string& s : items) {
        std::string::size_type eq = s.find('=');
        if (eq == std::string::npos)
            throw ParseError("no '=' in \"" + s + "\"", static_cast<int>(s.size()));
        sum += std::stoi(s.substr(eq + 1)); // std::invalid_argument for "k=x"
    }
    return sum;
}

static void
print_nested(const std::exception& e, int level)
{
    std::printf("  %*s%s\n", 2 * level, "", e.what());
    try {
        std::rethrow_if_nested(e);
    } catch (const std::exception& inner) {
        print_nested(inner, level + 1);
    }
}

int
main(int argc, char**)
{
    int caught = 0;
    std::vector<int> keep(3, argc);

    // Through 12 frames, rethrown at 6, wrapped in an IoError at 3.
    for (int limit : { 10, 11, 12, -1 }) {
        trail.clear();
        try {
            std::printf("descend returned %d\n", descend(0, limit));
        } catch (const AppError& e) {
            std::printf("main caught AppError code %d from depth %d:\n", e.code, limit);
            print_nested(e, 0);
            caught++;
        }
        std::printf("  cleanups %s\n", trail.c_str());
    }

    // Virtual calls that throw, caught by base class (domain_error is a logic_error).
    std::vector<std::unique_ptr<Shape>> shapes;
    shapes.emplace_back(new Square(2));
    shapes.emplace_back(new Disc(1));
    const double scales[] = { 1.5, -1, 0, 2 };
    for (const auto& sh : shapes)
        for (double s : scales) {
            try {
                std::printf("area %g\n", sh->area(s));
            } catch (const std::logic_error& e) {
                std::printf("logic_error: %s\n", e.what());
                caught++;
            }
        }

    // A recursive std::function that throws from deep inside.
    std::function<long(int)> fact = [&fact](int n) -> long {
        if (n > 15)
            throw std::overflow_error("factorial of " + std::to_string(n) + " too big");
        return n <= 1 ? 1 : n * fact(n - 1);
    };
    for (int n = 10; n <= 20; n += 5) {
        try {
            std::printf("fact(%d) = %ld\n", n, fact(n));
        } catch (const std::overflow_error& e) {
            std::printf("overflow: %s\n", e.what());
            caught++;
        }
    }

    // Lambdas throwing a class hierarchy, caught by the base class.
    auto check = [argc](int v) {
        if (v % 3 == 0)
            throw IoError("io at " + std::to_string(v), v + argc);
        if (v % 5 == 0)
            throw ParseError("parse at " + std::to_string(v), v);
        return v * 2;
    };
    for (int v = 1; v <= 10; v++) {
        try {
            sink += check(v);
        } catch (const AppError& e) {
            std::printf("%s (code %d, %s)\n", e.what(), e.code,
                        dynamic_cast<const IoError*>(&e) ? "io" : "parse");
            caught++;
        }
    }

    // Exceptions from the library and from the program's own parser.
    const std::vector<std::vector<std::string>> inputs
        = { { "a=1", "b=2" }, { "a=1", "oops" }, { "k=x" }, { "z=40", "y=2" } };
    for (const auto& in : inputs) {
        try {
            std::printf("pairs sum %d\n", parse_pairs(in));
        } catch (const ParseError& e) {
            std::printf("parse error: %s\n", e.what());
            caught++;
        } catch (const std::invalid_argument& e) {
            std::printf("invalid argument from stoi\n");
            caught++;
        }
    }
    try {
        std::vector<int> v(3);
        v.at(static_cast<size_t>(argc) + 5) = 1;
    } catch (const std::out_of_range&) {
        std::printf("out of range\n");
        caught++;
    }

    // An exception whose construction has cleanups (a string copied into it).
    try {
        auto p = std::make_unique<std::string>("from a unique_ptr");
        if (argc > 0)
            throw std::invalid_argument(*p);
    } catch (const std::invalid_argument& e) {
        std::printf("invalid_argument: %s\n", e.what());
        caught++;
    } catch (...) {
        caught += 100;
    }

    // A throw whose operand is built from a local string: the cleanups of a failed
    // construction (free the exception, destroy the string) begin main.cold at -O3,
    // after the nop gcc puts there so that the landing pad is not at offset 0.
    try {
        std::string s = "label";
        s += std::to_string(argc);
        if (s.size() > 2)
            throw std::logic_error(s);
    } catch (const std::exception& e) {
        std::string w = e.what();
        w += "!";
        std::printf("logic_error: %s\n", w.c_str());
        caught++;
    }

    // Nested try blocks: the inner handler rethrows.
    try {
        try {
            Guard g('n');
            throw std::runtime_error("inner");
        } catch (const std::exception& e) {
            std::printf("inner handler: %s\n", e.what());
            throw;
        }
    } catch (const std::runtime_error& e) {
        std::printf("outer handler: %s\n", e.what());
        caught++;
    }

    try {
        throw 42;
    } catch (int i) {
        std::printf("int %d\n", i);
        caught++;
    }
    std::printf("caught %d, sink %ld, keep %zu\n", caught, sink, keep.size());
    return 0;
}
