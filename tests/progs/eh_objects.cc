// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
// qpt-build-flags: -pthread
//
// C++ exceptions around objects and threads: constructors that throw half way (members
// and bases already built are destroyed, a function-try-block translates the error),
// destructors that run during unwinding and use exceptions themselves (caught inside,
// std::uncaught_exceptions tells them why they run), exceptions stored in
// std::exception_ptr and rethrown elsewhere, worker threads (std::thread) that throw and
// catch on their own stacks and hand one exception to main, a visitor through virtual
// calls and std::function callbacks, and noexcept functions (never thrown through: that
// would terminate). Results are printed by main only, in a fixed order.
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static std::string events; // constructions (+) and destructions (-), in order

struct Part {
    std::string name;
    explicit Part(const std::string& n)
        : name(n)
    {
        if (n == "bad")
            throw std::invalid_argument("part '" + n + "' rejected");
        events += "+" + n;
    }
    ~Part() { events += "-" + name; }
};

struct Base {
    Part core;
    explicit Base(const std::string& n)
        : core(n + ".core")
    {
    }
    virtual ~Base() = default;
};

// Members built in order; one may throw: the built ones and the base are destroyed.
struct Machine : Base {
    Part a, b, c;
    Machine(const std::string& x, const std::string& y, const std::string& z) try
        : Base("m"), a(x), b(y), c(z) {
        events += "!";
    } catch (const std::invalid_argument& e) {
        // A function-try-block translates the error; it is rethrown as this one.
        throw std::runtime_error(std::string("machine not built: ") + e.what());
    }
};

// A destructor that uses exceptions itself while the stack unwinds.
struct Auditor {
    int id;
    std::vector<std::string>* log;
    Auditor(int i, std::vector<std::string>* l)
        : id(i)
        , log(l)
    {
    }
    ~Auditor()
    {
        int unwinding = std::uncaught_exceptions();
        try {
            if (id % 2 == 0)
                throw std::logic_error("audit " + std::to_string(id));
            log->push_back("auditor " + std::to_string(id) + " clean"
                           + (unwinding ? " (unwinding)" : ""));
        } catch (const std::logic_error& e) {
            log->push_back(std::string(e.what()) + " handled in destructor"
                           + (unwinding ? " (unwinding)" : ""));
        }
    }
};

__attribute__((noinline)) static int
audited_work(int depth, std::vector<std::string>* log)
{
    Auditor a(depth, log);
    if (depth == 0)
        throw std::out_of_range("work ran out at depth 0");
    return audited_work(depth - 1, log) + depth;
}

// Visitors through virtual calls; one throws for some nodes.
struct Node;
struct Visitor {
    virtual ~Visitor() = default;
    virtual void
    visit(const Node& n)
        = 0;
};
struct Node {
    int value;
    std::vector<Node> kids;
    void
    accept(Visitor& v) const
    {
        v.visit(*this);
        for (const Node& k : kids)
            k.accept(v);
    }
};
struct Summer : Visitor {
    long sum = 0;
    void
    visit(const Node& n) override
    {
        sum += n.value;
    }
};
struct Checker : Visitor {
    int limit;
    explicit Checker(int l)
        : limit(l)
    {
    }
    void
    visit(const Node& n) override
    {
        if (n.value > limit)
            throw std::range_error("node " + std::to_string(n.value) + " over "
                                   + std::to_string(limit));
    }
};

static Node
make_tree(int depth, int base)
{
    Node n { base, {} };
    for (int i = 0; depth > 0 && i < 3; i++)
        n.kids.push_back(make_tree(depth - 1, base * 3 + i));
    return n;
}

// Never throws: must stay off every exception path.
static int
checksum(const std::string& s) noexcept
{
    int h = 7;
    for (char ch : s)
        h = h * 31 + static_cast<unsigned char>(ch);
    return h & 0xffff;
}

// One worker: runs tasks, each may throw; all are caught on the worker's own stack,
// except that a "fatal" task's exception is handed back through an exception_ptr.
struct Worker {
    int id;
    std::vector<std::string> log;
    std::exception_ptr fatal;
    void
    run()
    {
        std::map<std::string, std::function<int(int)>> tasks;
        tasks["square"] = [](int x) { return x * x; };
        tasks["half"] = [](int x) {
            if (x % 2)
                throw std::domain_error("odd " + std::to_string(x));
            return x / 2;
        };
        tasks["deep"] = [this](int x) {
            std::vector<std::string> sub;
            try {
                return audited_work(x % 4, &sub);
            } catch (const std::out_of_range& e) {
                log.push_back(std::string("deep: ") + e.what() + " after "
                              + std::to_string(sub.size()) + " audits");
                throw;
            }
        };
        for (int x = id; x < id + 4; x++)
            for (const auto& t : tasks) {
                try {
                    log.push_back(t.first + "(" + std::to_string(x)
                                  + ") = " + std::to_string(t.second(x)));
                } catch (const std::exception& e) {
                    log.push_back(t.first + "(" + std::to_string(x) + ") threw "
                                  + e.what());
                }
            }
        try {
            if (id == 2)
                throw std::runtime_error("worker " + std::to_string(id) + " gives up");
        } catch (...) {
            fatal = std::current_exception();
        }
    }
};

int
main()
{
    int caught = 0;

    // Constructors that throw half way.
    const char* specs[][3] = { { "x", "y", "z" }, { "x", "bad", "z" }, { "p", "q", "bad" } };
    for (auto& s : specs) {
        events.clear();
        try {
            Machine m(s[0], s[1], s[2]);
            events += "|";
        } catch (const std::runtime_error& e) {
            std::printf("%s\n", e.what());
            caught++;
        }
        std::printf("  events %s\n", events.c_str());
    }

    // Destructors that use exceptions while the stack unwinds.
    std::vector<std::string> audit;
    try {
        audited_work(5, &audit);
    } catch (const std::exception& e) {
        std::printf("audited work: %s\n", e.what());
        caught++;
    }
    for (const std::string& s : audit)
        std::printf("  %s\n", s.c_str());

    // Visitors through virtual calls.
    Node tree = make_tree(3, 1);
    Summer sum;
    tree.accept(sum);
    std::printf("tree sum %ld\n", sum.sum);
    for (int limit : { 10, 100 }) {
        Checker ch(limit);
        try {
            tree.accept(ch);
            std::printf("tree under %d\n", limit);
        } catch (const std::range_error& e) {
            std::printf("checker: %s\n", e.what());
            caught++;
        }
    }

    // Exceptions kept in exception_ptrs and rethrown later, in another order.
    std::vector<std::exception_ptr> saved;
    for (int i = 0; i < 4; i++) {
        try {
            switch (i) {
            case 0: throw std::length_error("saved length_error");
            case 1: throw i;
            case 2: throw std::string("saved string");
            default: throw Part("bad");
            }
        } catch (...) {
            saved.push_back(std::current_exception());
        }
    }
    for (size_t i = saved.size(); i-- > 0;) {
        try {
            std::rethrow_exception(saved[i]);
        } catch (const std::exception& e) {
            std::printf("rethrown exception: %s\n", e.what());
        } catch (int v) {
            std::printf("rethrown int %d\n", v);
        } catch (const std::string& s) {
            std::printf("rethrown string %s\n", s.c_str());
        }
        caught++;
    }

    // Threads that throw and catch on their own stacks.
    std::vector<Worker> workers(4);
    for (int i = 0; i < 4; i++)
        workers[static_cast<size_t>(i)].id = i;
    std::vector<std::thread> threads;
    for (Worker& w : workers)
        threads.emplace_back(&Worker::run, &w);
    for (std::thread& t : threads)
        t.join();
    for (const Worker& w : workers) {
        int h = 0;
        for (const std::string& s : w.log)
            h ^= checksum(s);
        std::printf("worker %d: %zu entries, checksum %04x, first \"%s\", last \"%s\"\n",
                    w.id, w.log.size(), h, w.log.front().c_str(), w.log.back().c_str());
        if (w.fatal) {
            try {
                std::rethrow_exception(w.fatal);
            } catch (const std::runtime_error& e) {
                std::printf("  handed over: %s\n", e.what());
                caught++;
            }
        }
    }
    std::printf("caught %d\n", caught);
    return 0;
}
