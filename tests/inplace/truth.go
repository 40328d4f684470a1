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
		go worker(5000, &wg, &total) // leaf: 40000 calls
	}
	wg.Wait()
	s := 0
	for i := 0; i < 700; i++ {
		s += mayPanic(i) // 700 calls; 100 panics; leaf: 600 more calls
	}
	k := churn(20000) // the GC runs
	runtime.GC()
	fmt.Println(total, s, k)
	os.Exit(0)
}
