// A Go program whose assembly compares through a memory operand in third place
// (VPCMPEQB (SI), Y1, Y2): a nil pointer faults there, and the panic is recovered.
package main

import "fmt"

// eqmask returns the mask of the bytes of *p equal to those of *q, n times over
// (eq_amd64.s).
func eqmask(p, q *[32]byte, n int) uint32

//go:noinline
func try(p, q *[32]byte) (r uint32) {
	defer func() {
		if e := recover(); e != nil {
			r = 7
		}
	}()
	return eqmask(p, q, 3)
}

func main() {
	var a, b [32]byte
	for i := range a {
		a[i] = byte(i)
		b[i] = byte(i % 3)
	}
	s := uint32(0)
	for i := 0; i < 300; i++ {
		if i%3 == 0 {
			s += try(nil, &b) // 100 nil dereferences, in the assembly
		} else {
			s += try(&a, &b) % 1000
		}
	}
	fmt.Println(s)
}
