// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
//
// Virtual calls: a class hierarchy called through base pointers (call *off(%reg)),
// a pure virtual interface, virtual destructors, and multiple inheritance, whose
// second-base calls go through this-adjusting thunks (a thunk ends in a jump into the
// real method). Objects are created through a factory switch.
#include <cstdio>
#include <memory>
#include <vector>

struct Shape {
    virtual ~Shape() { destroyed++; }
    virtual long
    area() const = 0;
    virtual const char*
    name() const
    {
        return "shape";
    }
    static int destroyed;
};
int Shape::destroyed = 0;

struct Printable {
    virtual ~Printable() = default;
    virtual void
    print() const = 0;
};

struct Rect : Shape, Printable {
    long w, h;
    Rect(long w_, long h_)
        : w(w_)
        , h(h_)
    {
    }
    long
    area() const override
    {
        return w * h;
    }
    const char*
    name() const override
    {
        return "rect";
    }
    void
    print() const override
    {
        std::printf("rect %ldx%ld\n", w, h);
    }
};

struct Square final : Rect {
    explicit Square(long s)
        : Rect(s, s)
    {
    }
    const char*
    name() const override
    {
        return "square";
    }
    void
    print() const override
    {
        std::printf("square %ld\n", w);
    }
};

struct Circle : Shape, Printable {
    long r;
    explicit Circle(long r_)
        : r(r_)
    {
    }
    long
    area() const override
    {
        return 314 * r * r / 100;
    }
    void
    print() const override
    {
        std::printf("circle r=%ld\n", r);
    }
};

__attribute__((noinline)) static std::unique_ptr<Shape>
make(int k)
{
    switch (k % 3) {
    case 0: return std::make_unique<Rect>(k + 1, k + 2);
    case 1: return std::make_unique<Square>(k);
    default: return std::make_unique<Circle>(k);
    }
}

__attribute__((noinline)) static void
show(const Printable& p)
{
    p.print();
}

int
main()
{
    std::vector<std::unique_ptr<Shape>> shapes;
    long total = 0;
    for (int k = 0; k < 9; k++)
        shapes.push_back(make(k));
    for (const auto& s : shapes) {
        total += s->area();
        std::printf("%s area=%ld\n", s->name(), s->area());
        if (auto* p = dynamic_cast<const Printable*>(s.get()))
            show(*p);
    }
    shapes.clear();
    std::printf("total=%ld destroyed=%d\n", total, Shape::destroyed);
    return (int)(total % 13);
}
