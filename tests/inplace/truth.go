// A Go program whose calls are fixed by construction (tests/inplace-go.sh).
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

//go:noinline
func leaf(x int) int { return x*3 + 1 }

//go:noinline
func mayPanic(i int) (r int) {
	defer func() {
		if e := recover(); e != nil {
			r = -1
		}
	}()
	if i%7 == 0 {
		panic(fmt.Sprintf("seven %d", i))
	}
	return leaf(i)
}

// thrower panics on every 5th call; middle's frame is abandoned then, and catcher,
// further up, recovers: the runtime resumes it at its deferreturn call, which no jump
// reaches.
//
//go:noinline
func thrower(i int) int {
	if i%5 == 0 {
		panic(i)
	}
	return i*2 + 1
}

// deref dereferences nil on one call in four: the runtime turns the fault into a panic
// by the faulting instruction's address, which must still be in deref (not in a
// trampoline that a counter's jump displaced it into).
//
//go:noinline
func deref(i int) int {
	if i%5 == 1 {
		var p *int
		return *p
	}
	return twice(i)
}

//go:noinline
func twice(x int) int { return x * 2 }

//go:noinline
func middle(i int) int {
	r := thrower(i)
	if r%3 == 0 {
		r += i
	}
	return r + deref(i) + 1 // 100 nil dereferences, recovered in catcher too
}

//go:noinline
func catcher(i int) (r int) {
	defer func() {
		if e := recover(); e != nil {
			r = -1
		}
	}()
	return middle(i)
}

//go:noinline
func worker(n int, wg *sync.WaitGroup, out *int64) {
	defer wg.Done()
	s := 0
	for i := 0; i < n; i++ {
		s += leaf(i)
		if i%100 == 0 {
			runtime.Gosched()
		}
	}
	atomic.AddInt64(out, int64(s))
}

// deep recurses n times below its first call on a new goroutine's small stack: the
// stack grows several times, each time in deep's prologue (runtime.morestack), which
// the runtime resumes at its return address, to jump back to deep's entry.
//
//go:noinline
func deep(n int) int {
	var pad [64]int
	pad[n%64] = n
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[n%64]
}

//go:noinline
func churn(n int) int {
	keep := make([][]byte, 0, 16)
	for i := 0; i < n; i++ {
		b := make([]byte, 4096+i%512)
		b[0] = byte(i)
		if i%64 == 0 {
			keep = append(keep, b)
		}
	}
	return len(keep)
}

func main() {
	var wg sync.WaitGroup
	var total int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go worker(5000, &wg, &total) // leaf: 40000 calls; Gosched (mcall): 400
	}
	wg.Wait()
	s := 0
	for i := 0; i < 700; i++ {
		s += mayPanic(i) // 700 calls; 100 panics; leaf: 600 more calls
	}
	c := 0
	for i := 0; i < 500; i++ {
		c += catcher(i) // 500 calls, thrower 500, middle 500; 200 panics up two frames
	}
	d := make(chan int)
	go func() { d <- deep(999) }() // deep: 1000 calls, the stack grown in its prologue
	dd := <-d
	k := churn(20000) // the GC runs
	runtime.GC()
	fmt.Println(total, s, c, dd, k)
	os.Exit(0)
}
